"""Does a translation model's attention align words? Measures against a hand-aligned gold set.

**Gold-set measures (use these).** ``utils.gold_alignment`` loads English–French pairs with
hand-written sure and possible word links. A *map* is a tensor ``weights`` of shape (French
tokens, source columns): row i is the attention the decoder used when producing French token i
of the reference under teacher forcing (``teacher_forced_attention``); the source columns are
the English tokens followed by ``<eos>`` (an extra last row, the step that predicts ``<eos>``,
is ignored). For each French *word* (not punctuation), the linked
English word is the argmax of its row over English words (``predicted_links``), and
``score_maps`` / ``score_model`` report, micro-averaged over the set (``AlignmentScore``):

- **top-1**: the fraction of French words whose predicted English word is a gold (possible) link;
- **AER**, the alignment error rate of Och & Ney (2003): 1 - (|A∩S| + |A∩P|) / (|A| + |S|), with
  A the predicted links, S the sure and P the possible gold links, counts summed over the set;
- **sharpness**: the largest weight on one English word over the weight on all English words.

Only French words with at least one gold link are scored (an article with no English
counterpart, as "le" in "j'aime le café", says nothing about alignment). ``as_drawn=True`` takes
the argmax over every column, punctuation and ``<eos>`` included, as a heat map shows them; a
link to those is never gold. A map may also have one column per English token and none for
``<eos>`` (e.g. a statistical aligner's p(f|e) without a NULL word).

**Where the errors go.** ``score_by_tag`` scores each tag's pairs apart; ``link_offsets``
counts how far (in English words, + to the right) each wrong argmax lands from the nearest gold
link, e.g. a map that looks one word ahead piles up at +1; ``argmax_targets`` counts where the
largest weight of all columns falls (a gold link, another word, punctuation, ``<eos>``), for
every scored word or only the last one of each sentence.

**Older statistics (kept for now).** For greedy translations (``utils.training.Translation``):
the mean weight on the source ``<eos>``, and monotonicity, Spearman's rank correlation between
an output word's position and the position of the source token it attends to most. Neither can
tell an aligned map from one shifted by a column: a map that attends to the word *after* the
right one is just as monotone and puts just as little weight on ``<eos>``. Only steps that
produce a word count (not the step that produces ``<eos>``).
"""

import dataclasses
import math

import torch

from utils.data import BOS, EOS
from utils.i18n import _


# ============================================================================ gold-set measures

PUNCTUATION = frozenset({".", "?", "!", ","})


def is_word(token: str) -> bool:
    """True for a token that is neither punctuation nor ``<eos>``."""
    return token not in PUNCTUATION and token != EOS


def _tokens(name: str, tokens) -> list:
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)):
        raise ValueError(_("{name} must be a list of tokens (e.g. sentence.split()), "
                           "got {tokens_type}").format(name=name, tokens_type=type(tokens).__name__))
    if not tokens or not all(isinstance(token, str) for token in tokens):
        raise ValueError(_("{name} must be a non-empty list of str tokens, got {tokens!r}").format(
            name=name, tokens=tokens))
    return list(tokens)


def teacher_forced_attention(model, src_vocab, tgt_vocab, english_tokens,
                             french_tokens) -> torch.Tensor:
    """The attention ``model`` pays while reading the reference French (teacher forcing).

    The encoder reads ``english_tokens`` + <eos>, the decoder <bos> + ``french_tokens``; tokens
    outside a vocabulary are read as <unk>. Returns a CPU tensor (len(french) + 1,
    len(english) + 1): row i is the step that predicts French token i, the last row the step that
    predicts <eos>; the last column is the source <eos>. The model runs in eval mode, without
    gradients, and gets its training mode back afterwards.
    """
    english = _tokens("english_tokens", english_tokens)
    french = _tokens("french_tokens", french_tokens)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    enc_X = torch.tensor([src_vocab[english] + [src_vocab[EOS]]], device=device)   # (1, e + 1)
    dec_X = torch.tensor([[tgt_vocab[BOS]] + tgt_vocab[french]], device=device)    # (1, f + 1)
    enc_valid_len = torch.tensor([len(english) + 1], device=device)               # (1,)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(enc_X, dec_X, enc_valid_len)
            try:
                weights = model.decoder.attention_weights                 # (1, f + 1, e + 1)
            except (AttributeError, RuntimeError):
                weights = None
    finally:
        model.train(was_training)
    if not isinstance(weights, torch.Tensor):
        raise ValueError(_("the model's decoder has no attention_weights tensor; use a model whose "
                           "decoder exposes them (e.g. the Bahdanau decoder, not the baseline)"))
    expected = (1, len(french) + 1, len(english) + 1)
    if tuple(weights.shape) != expected:
        raise ValueError(_("attention_weights has shape {shape}, expected {expected} (batch, "
                           "<bos> + French steps, English + <eos>); the decoder should keep the "
                           "weights of every step of its last call").format(
            shape=tuple(weights.shape), expected=expected))
    return weights[0].detach().float().cpu()


def _as_map(weights, n_english: int, n_french: int, pair_id=None) -> torch.Tensor:
    """``weights`` as (n_french, columns) on the CPU, the <eos> output row dropped.

    Rows: n_french or n_french + 1 (the step that predicts <eos>); columns: n_english + 1 (the
    last is the source <eos>) or n_english (no <eos> column). Anything else is a ValueError.
    """
    where = "" if pair_id is None else f"pair {pair_id}: "
    if not isinstance(weights, torch.Tensor):
        raise ValueError((_("pair {pair_id}: a map must be a tensor (French tokens, source "
                            "columns), got {weights_type}") if where else
                          _("a map must be a tensor (French tokens, source columns), got "
                            "{weights_type}")).format(pair_id=pair_id,
                                                      weights_type=type(weights).__name__))
    shape = tuple(weights.shape)
    if (len(shape) != 2 or shape[0] not in (n_french, n_french + 1)
            or shape[1] not in (n_english, n_english + 1)):
        raise ValueError((_("pair {pair_id}: the map has shape {shape}, expected ({n_french} or "
                            "{n_french_eos}, {n_english_eos} or {n_english}): one row per French "
                            "token (+ the <eos> step), one column per English token (+ <eos>)")
                          if where else
                          _("the map has shape {shape}, expected ({n_french} or {n_french_eos}, "
                            "{n_english_eos} or {n_english}): one row per French token (+ the "
                            "<eos> step), one column per English token (+ <eos>)")).format(
            pair_id=pair_id, shape=shape, n_french=n_french, n_french_eos=n_french + 1,
            n_english_eos=n_english + 1, n_english=n_english))
    rows = weights[:n_french].detach().float().cpu()                     # (French, columns)
    if not torch.isfinite(rows).all():
        raise ValueError((_("pair {pair_id}: the map has NaN or infinite weights; score a finite "
                            "map") if where else
                          _("the map has NaN or infinite weights; score a finite map")).format(
            pair_id=pair_id))
    return rows


def _english_words(english) -> list:
    """Column indices of the English words (punctuation and <eos> left out)."""
    columns = [e for e, token in enumerate(english) if is_word(token)]
    if not columns:
        raise ValueError(_("the English sentence {english} has no word to link to").format(
            english=list(english)))
    return columns


def predicted_links(weights, english, french, as_drawn: bool = False) -> set:
    """One link (english_index, french_index) for every French word: the argmax of its row.

    ``weights`` (French tokens [+ 1], English tokens [+ 1]) as in the module docstring. The
    argmax runs over the English words (punctuation and <eos> columns left out; renormalising
    over them would not move it), or with ``as_drawn`` over every column, so that the link may
    point to punctuation or to len(english), the <eos> column. French punctuation gets no link.
    Ties go to the leftmost column. Every French word gets a link; ``score_maps`` keeps those of
    the French words that have a gold link.
    """
    rows = _as_map(weights, len(english), len(french))                   # (French, columns)
    columns = list(range(rows.shape[1])) if as_drawn else _english_words(english)
    return {(columns[int(rows[f, columns].argmax())], f)
            for f, token in enumerate(french) if is_word(token)}


@dataclasses.dataclass(frozen=True)
class AlignmentScore:
    """Alignment of maps to a gold set, micro-averaged over the scored French words."""

    top1: float             # fraction of scored French words whose link is a gold (possible) one
    aer: float              # Och & Ney's alignment error rate, counts pooled over the set
    sharpness: float        # mean of max weight on an English word / weight on all English words
    words: int              # scored French words (French words with at least one gold link)
    pairs: int
    predicted: int          # |A|: one predicted link per scored word
    sure: int               # |S|: sure links of the scored words
    predicted_sure: int     # |A ∩ S|
    predicted_possible: int  # |A ∩ P|
    as_drawn: bool = False  # the argmax ran over every column (punctuation and <eos> too)

    def describe(self) -> str:
        over = "every column, as drawn" if self.as_drawn else "English words"
        return (f"top-1 {self.top1:.2f} | AER {self.aer:.2f} | sharpness {self.sharpness:.2f} "
                f"({self.words} French words of {self.pairs} pairs, argmax over {over})")


def _paired(maps, gold_pairs) -> tuple:
    """(maps, gold_pairs) as lists of one length, or a one-line ValueError."""
    maps, gold_pairs = list(maps), list(gold_pairs)
    if len(maps) != len(gold_pairs):
        raise ValueError(_("got {num_maps} maps for {num_pairs} gold pairs; pass one map per "
                           "pair, in the same order").format(num_maps=len(maps),
                                                             num_pairs=len(gold_pairs)))
    return maps, gold_pairs


def score_maps(maps, gold_pairs, as_drawn: bool = False) -> AlignmentScore:
    """Score attention maps against gold pairs (``utils.gold_alignment.GoldPair``).

    ``maps[k]`` is the map of ``gold_pairs[k]``: (French tokens [+ 1 <eos> row], English tokens
    [+ 1 <eos> column]). Only French words (not punctuation) with at least one gold link are
    scored; S and P are restricted to them. AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), each count
    summed over the whole set (Och & Ney). A scored word that gives no weight at all to English
    words has sharpness 1 / (number of English words), as if its weights were uniform.
    """
    maps, gold_pairs = _paired(maps, gold_pairs)
    words = predicted = sure_count = hit_sure = hit_possible = 0
    sharpness = 0.0
    for weights, pair in zip(maps, gold_pairs):
        rows = _as_map(weights, len(pair.english), len(pair.french), pair.id)
        scored = {f for f in pair.linked_french if is_word(pair.french[f])}
        links = {link for link in predicted_links(rows, pair.english, pair.french, as_drawn)
                 if link[1] in scored}
        sure = {link for link in pair.sure if link[1] in scored}
        words += len(scored)
        predicted += len(links)
        sure_count += len(sure)
        hit_sure += len(links & sure)
        hit_possible += len(links & pair.possible)
        columns = _english_words(pair.english)
        for f in scored:
            on_words = rows[f, columns]                                  # (English words,)
            total = on_words.sum().item()
            sharpness += on_words.max().item() / total if total > 0 else 1 / len(columns)
    if words == 0:
        raise ValueError(_("no French word of these pairs has a gold link; nothing to score "
                           "(check the pairs' sure/possible links)"))
    return AlignmentScore(top1=hit_possible / predicted,
                          aer=1 - (hit_sure + hit_possible) / (predicted + sure_count),
                          sharpness=sharpness / words, words=words, pairs=len(gold_pairs),
                          predicted=predicted, sure=sure_count, predicted_sure=hit_sure,
                          predicted_possible=hit_possible, as_drawn=as_drawn)


def score_model(model, src_vocab, tgt_vocab, gold_pairs, as_drawn: bool = False) -> AlignmentScore:
    """``score_maps`` of the teacher-forced attention of ``model`` on every gold pair."""
    gold_pairs = list(gold_pairs)
    maps = [teacher_forced_attention(model, src_vocab, tgt_vocab, pair.english, pair.french)
            for pair in gold_pairs]
    return score_maps(maps, gold_pairs, as_drawn)


def model1_maps(model1, gold_pairs) -> list:
    """IBM Model 1's posterior p(a_i = j | e, f) for each gold pair, one row per French token
    and one column per English token (NULL left out), ready for ``score_maps``."""
    return [model1.alignment_matrix(list(pair.english), list(pair.french), null=False)
            for pair in gold_pairs]


def train_model1_on(config, path=None, iterations: int = 10):
    """IBM Model 1 trained on exactly the pairs a translation ``config`` trains on."""
    from utils.data import tokenize
    from utils.ibm_model1 import train_model1
    from utils.training import training_pairs

    pairs = [(tokenize(english), tokenize(french))
             for english, french in training_pairs(config, path)]
    return train_model1(pairs, iterations=iterations)


def score_by_tag(maps, gold_pairs, as_drawn: bool = False) -> dict:
    """``score_maps`` of each tag's pairs: {tag: AlignmentScore}, tags in alphabetical order.

    A pair with several tags counts under each of them (``utils.gold_alignment.TAGS``); a tag
    whose pairs have no scored French word is left out.
    """
    maps, gold_pairs = _paired(maps, gold_pairs)
    groups: dict = {}
    for weights, pair in zip(maps, gold_pairs):
        for tag in pair.tags:
            groups.setdefault(tag, ([], []))
            groups[tag][0].append(weights)
            groups[tag][1].append(pair)
    scores = {}
    for tag in sorted(groups):
        tag_maps, tag_pairs = groups[tag]
        if any(is_word(pair.french[f]) for pair in tag_pairs for f in pair.linked_french):
            scores[tag] = score_maps(tag_maps, tag_pairs, as_drawn)
    return scores


def link_offsets(maps, gold_pairs) -> dict:
    """Where the argmax over English words lands, relative to the gold links.

    For every scored French word (a word with a gold link, as in ``score_maps``): 0 when its
    predicted English word is a gold (possible) link, else the signed distance in English
    positions from the nearest gold link (+1: one word to the right, "looking ahead"; ties
    between a left and a right neighbour go to the right). Returns {offset: count}, sorted.
    """
    maps, gold_pairs = _paired(maps, gold_pairs)
    counts: dict = {}
    for weights, pair in zip(maps, gold_pairs):
        rows = _as_map(weights, len(pair.english), len(pair.french), pair.id)
        for e, f in predicted_links(rows, pair.english, pair.french):
            gold = [g for g, gf in pair.possible if gf == f]
            if not gold or not is_word(pair.french[f]):
                continue
            offset = min((e - g for g in gold), key=lambda d: (abs(d), -d))
            counts[offset] = counts.get(offset, 0) + 1
    return dict(sorted(counts.items()))


ARGMAX_TARGETS = ("gold link", "other English word", "punctuation", "<eos>")


def argmax_targets(maps, gold_pairs, words: str = "all") -> dict:
    """Where the largest weight of each scored French word falls, over every column (as a
    heat map draws it): {"gold link", "other English word", "punctuation", "<eos>": count}.

    Scored words as in ``score_maps``; ``words``: "all" of them, only the "last" scored word of
    each pair (the French word written just before the final punctuation, usually), or the
    "others". A map without an ``<eos>`` column never counts "<eos>".
    """
    if words not in ("all", "last", "others"):
        raise ValueError(_("words must be 'all', 'last' or 'others', got {words!r}").format(
            words=words))
    maps, gold_pairs = _paired(maps, gold_pairs)
    counts = dict.fromkeys(ARGMAX_TARGETS, 0)
    for weights, pair in zip(maps, gold_pairs):
        rows = _as_map(weights, len(pair.english), len(pair.french), pair.id)
        scored = [f for f in sorted(pair.linked_french) if is_word(pair.french[f])]
        for e, f in predicted_links(rows, pair.english, pair.french, as_drawn=True):
            if f not in scored:
                continue
            if words != "all" and (f == scored[-1]) != (words == "last"):
                continue
            if e == len(pair.english):
                counts["<eos>"] += 1
            elif not is_word(pair.english[e]):
                counts["punctuation"] += 1
            elif (e, f) in pair.possible:
                counts["gold link"] += 1
            else:
                counts["other English word"] += 1
    return counts


# ============================================================================ older statistics


def ranks(values) -> list:
    """Ranks 1..n of ``values``; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            result[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(x, y) -> float | None:
    """Spearman's rank correlation of two equally long sequences; None if either is constant."""
    if len(x) != len(y):
        raise ValueError(_("spearman needs two sequences of one length, got {len_x} and "
                           "{len_y}").format(len_x=len(x), len_y=len(y)))
    if len(x) < 2:
        raise ValueError(_("spearman needs at least 2 pairs, got {len_x}").format(len_x=len(x)))
    rx, ry = ranks(list(x)), ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def word_rows(translation) -> torch.Tensor:
    """The attention rows of the steps that produced a word: (words, source tokens)."""
    if translation.attention is None:
        raise ValueError(_("this translation has no attention weights; translate with a model "
                           "whose decoder exposes them (e.g. the Bahdanau decoder)"))
    return translation.attention[:len(translation.tokens)]


def eos_weight(translation) -> float | None:
    """Mean weight on the source ``<eos>`` over the output words (None: no output word)."""
    rows = word_rows(translation)                                  # (words, source tokens)
    if rows.shape[0] == 0:
        return None
    if translation.source_tokens[-1] != EOS:
        raise ValueError(_("the source should end with {eos}, got {source_tokens}").format(
            eos=EOS, source_tokens=translation.source_tokens))
    return rows[:, -1].mean().item()


def monotonicity(translation, min_words: int = 3) -> float | None:
    """Spearman correlation of output position vs most-attended source position (None for
    outputs shorter than ``min_words`` or a constant argmax)."""
    rows = word_rows(translation)
    if rows.shape[0] < min_words:
        return None
    attended = rows.argmax(dim=-1).tolist()                        # (words,)
    return spearman(list(range(len(attended))), attended)


@dataclasses.dataclass
class AlignmentSummary:
    """Means over a set of translations, with how many translations each mean covers."""

    mean_eos_weight: float
    eos_count: int
    mean_monotonicity: float
    monotonicity_count: int
    constant_argmax: int          # of those, outputs whose argmax never moved (counted as 0)

    def describe(self) -> str:
        return (f"weight on the source <eos>: {self.mean_eos_weight:.2f} (mean over "
                f"{self.eos_count} outputs) | Spearman(output position, most-attended source "
                f"position): {self.mean_monotonicity:.2f} (mean over {self.monotonicity_count} "
                f"outputs of >= 3 words, {self.constant_argmax} of which attend one source token "
                f"throughout and count as 0)")


def summarize(translations, min_words: int = 3) -> AlignmentSummary:
    """Alignment statistics over ``translations`` (an iterable of ``Translation``)."""
    eos, mono, constant = [], [], 0
    for translation in translations:
        weight = eos_weight(translation)
        if weight is not None:
            eos.append(weight)
        if word_rows(translation).shape[0] >= min_words:
            value = monotonicity(translation, min_words)
            constant += value is None
            mono.append(0.0 if value is None else value)   # no movement: no monotone order
    if not eos:
        raise ValueError(_("no translation produced a word; nothing to summarize"))
    return AlignmentSummary(sum(eos) / len(eos), len(eos),
                            sum(mono) / len(mono) if mono else float("nan"), len(mono),
                            constant)
