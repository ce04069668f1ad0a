"""Lesson 7: does the Transformer's encoder–decoder attention align words? Per layer and head.

``teacher_forced_cross_attention`` reads a reference translation with teacher forcing, as in
training, and returns the encoder–decoder ("cross") attention of every layer and head, cut to
the maps ``utils.alignment.score_maps`` scores: one row per French token plus the step that
predicts ``<eos>``, one column per English token plus the source ``<eos>`` (the padding columns,
which get exactly zero weight, are left out). Its interface is that of
``utils.transformer.teacher_forced_attention``, which returns the decoder's *self*-attention.

``score_heads`` scores every (layer, head) and the mean of each layer's heads on a gold set
(``utils.gold_alignment.load_gold``): top-1 and AER, as ``utils.alignment`` defines them.
"""

import dataclasses

import torch

from utils.alignment import AlignmentScore, score_maps
from utils.data import BOS
from utils.i18n import _, ljust_columns, rjust_columns
from utils.training import encode_source, model_device

MEAN = "mean"          # the "head" of a layer's row that averages its heads' maps


def _words(name: str, text) -> list:
    """A sentence given as a str (split on spaces) or as a list/tuple of tokens -> tokens."""
    if isinstance(text, str):
        return text.split()
    if isinstance(text, (list, tuple)) and all(isinstance(token, str) for token in text):
        return list(text)
    raise ValueError(_("{name} must be a str or a list of str tokens, got {text_type}").format(
        name=name, text_type=type(text).__name__))


@torch.no_grad()
def teacher_forced_cross_attention(model, source, target, src_vocab, tgt_vocab,
                                   num_steps: int) -> torch.Tensor:
    """Encoder–decoder attention while the decoder reads the reference ``target``.

    ``source``: the English sentence (a str or its tokens); ``target``: the French reference
    (a str, split on spaces, or its tokens). The encoder reads the source padded to
    ``num_steps`` exactly as in training, the decoder ``<bos>`` + the target words in one call.
    Returns a CPU tensor (layers, heads, len(target) + 1, len(source) + 1): row i is the step
    that predicts French word i (the last row predicts ``<eos>``), the last column is the source
    ``<eos>``; every row sums to 1. The model runs in eval mode and gets its mode back.
    """
    english = _words("source", source)
    words = _words("target", target)
    if not words or len(words) + 1 > num_steps:
        raise ValueError(_("the target must have 1 to {num_steps} words, got {num_words}; pass a "
                           'reference translation such as "il est calme ."').format(
            num_steps=num_steps - 1, num_words=len(words)))
    X, valid_len, source_tokens, *_rest = encode_source(" ".join(english), src_vocab, num_steps)
    if len(source_tokens) != len(english) + 1:
        raise ValueError(_("the source {english} was tokenized as {source_tokens}; pass it "
                           "preprocessed (utils.data.preprocess), one token per word").format(
            english=english, source_tokens=source_tokens[:-1]))
    device = model_device(model)
    X, valid_len = X.to(device), valid_len.to(device)                           # (1, s), (1,)
    was_training = model.training
    model.eval()
    try:
        state = model.decoder.init_state(model.encoder(X, valid_len), valid_len)
        inputs = torch.tensor([tgt_vocab[[BOS] + words]], device=device)      # (1, T)
        model.decoder(inputs, state)                                          # (1, T, vocab)
        cross = model.decoder.attention_weights[1]                            # L x (1, H, T, s)
    finally:
        model.train(was_training)
    weights = torch.stack([w[0] for w in cross])                               # (L, H, T, s)
    return weights[..., :int(valid_len)].float().cpu()                         # (L, H, T, e + 1)


@dataclasses.dataclass(frozen=True)
class HeadScores:
    """Gold-set scores of every (layer, head) and of each layer's mean map (layers count from 1)."""

    scores: dict                 # (layer, head or MEAN) -> AlignmentScore
    layers: int
    heads: int

    def best(self) -> tuple:
        """(layer, head) of the single head with the highest top-1 (then the lowest AER)."""
        return max(((layer, head) for layer in range(1, self.layers + 1)
                    for head in range(1, self.heads + 1)),
                   key=lambda key: (self.scores[key].top1, -self.scores[key].aer))

    def table(self) -> str:
        """One line per layer: top-1 (AER) of each head and of the mean of the heads."""
        names = [_("head {head}").format(head=h) for h in range(1, self.heads + 1)]
        names.append(_("mean of heads"))
        lines = [ljust_columns(_("top-1 (AER)"), 13) + "".join(rjust_columns(name, 15)
                                                             for name in names)]
        for layer in range(1, self.layers + 1):
            cells = [self.scores[(layer, head)]
                     for head in [*range(1, self.heads + 1), MEAN]]
            lines.append(ljust_columns(_("layer {layer}").format(layer=layer), 13) + "".join(
                f"{f'{100 * s.top1:.0f} % ({s.aer:.2f})':>15}" for s in cells))
        return "\n".join(lines)


def score_heads(model, src_vocab, tgt_vocab, gold_pairs, num_steps: int,
                as_drawn: bool = False) -> HeadScores:
    """Score the teacher-forced cross-attention of every layer and head on ``gold_pairs``.

    Besides each head, each layer's mean map (the average of its heads' weights) is scored as
    head ``MEAN``. ``as_drawn`` as in ``utils.alignment.score_maps``.
    """
    gold_pairs = list(gold_pairs)
    if not gold_pairs:
        raise ValueError(_("no gold pairs to score; pass utils.gold_alignment.load_gold()"))
    maps = [teacher_forced_cross_attention(model, pair.english, pair.french, src_vocab,
                                           tgt_vocab, num_steps)
            for pair in gold_pairs]                                           # (L, H, f+1, e+1)
    layers, heads = maps[0].shape[:2]
    scores = {}
    for layer in range(layers):
        for head in range(heads):
            scores[(layer + 1, head + 1)] = score_maps([m[layer, head] for m in maps],
                                                       gold_pairs, as_drawn)
        scores[(layer + 1, MEAN)] = score_maps([m[layer].mean(dim=0) for m in maps],
                                               gold_pairs, as_drawn)
    return HeadScores(scores, layers, heads)


def top1_grid(head_scores: HeadScores) -> torch.Tensor:
    """(layers, heads + 1) top-1 values, the last column the mean of the heads: for a figure."""
    return torch.tensor([[head_scores.scores[(layer, head)].top1
                          for head in [*range(1, head_scores.heads + 1), MEAN]]
                         for layer in range(1, head_scores.layers + 1)])


__all__ = ["AlignmentScore", "HeadScores", "MEAN", "score_heads", "teacher_forced_cross_attention",
           "top1_grid"]
