"""The Transformer (lesson 7): FFN, AddNorm, encoder and decoder blocks, encoder, decoder, model.

Building blocks (shapes: b = batch, n = steps, d = num_hiddens, f = ffn_num_hiddens)::

    PositionWiseFFN(ffn_num_input, ffn_num_hiddens, ffn_num_outputs)   (b, n, d) -> (b, n, out)
    AddNorm(normalized_shape, dropout)                         X, Y (b, n, d) -> LN(X + dropout(Y))
    TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False)
        block(X (b, n, d), valid_lens None | (b,)) -> (b, n, d)
    TransformerEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout)
        encoder(tokens (b, n), valid_lens) -> (b, n, d)
    TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, i, causal=True)
        block(X (b, n, d), state) -> ((b, n, d), state)
    TransformerDecoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout)
        decoder.init_state(enc_outputs, enc_valid_lens) -> state
        decoder(tokens (b, n), state) -> (logits (b, n, vocab_size), state)
    Transformer(src_vocab_size, tgt_vocab_size, ...)           the encoder–decoder of lesson 4

The decoder **state** is the tuple ``(enc_outputs, enc_valid_lens, cache)``: ``cache[i]``
holds every input block ``i`` has seen so far, (b, t, d). A call with n new tokens appends them,
and their self-attention sees the t cached positions plus themselves (query ``t + j`` sees keys
``0 .. t + j`` under the causal mask). So the same code serves training (one call, the whole
target, t = 0) and greedy decoding (one call per token); positions continue at t too.

Attention weights, per layer and per head, are recorded in eval mode (training uses the fused
kernel and records nothing): ``encoder.attention_weights[layer]`` (b, heads, n, n);
``decoder.attention_weights == [self_weights, cross_weights]`` with ``self_weights[layer]``
(b, heads, n, t + n) and ``cross_weights[layer]`` (b, heads, n, source steps).
"""

import dataclasses
import math

import torch
from torch import nn

from utils.data import BOS, EOS
from utils.i18n import _, gettext
from utils.model_cache import train_or_load
from utils.multihead import MultiHeadAttention, check_num_heads
from utils.positional import PositionalEncoding
from utils.reproducibility import set_seed
from utils.training import (EncoderDecoder, model_device, TranslationConfig, Translation, encode_source,
                            greedy_translate, train_seq2seq, training_data,
                            training_vocabs)
from utils.code_fingerprint import code_fingerprint
from utils.validation import check_dropout, check_flag, check_positive_int



def check_ffn_sizes(ffn_num_input, ffn_num_hiddens, ffn_num_outputs) -> None:
    """Raise a one-line ValueError unless the three FFN sizes are positive ints."""
    for name, value in (("ffn_num_input", ffn_num_input), ("ffn_num_hiddens", ffn_num_hiddens),
                        ("ffn_num_outputs", ffn_num_outputs)):
        check_positive_int(name, value)


def check_features(X: torch.Tensor, expected: int, layer: str, argument: str) -> None:
    """Raise a one-line ValueError unless X's last axis has ``expected`` features."""
    if X.shape[-1] != expected:
        raise ValueError(_("this {layer} expects {expected} input features (last axis), got "
                           "{X_shape}; build it with {argument}={X_size}").format(
            layer=layer, expected=expected, X_shape=tuple(X.shape), argument=argument,
            X_size=X.shape[-1]))


def check_same_shape(X: torch.Tensor, Y: torch.Tensor) -> None:
    """Raise a one-line ValueError unless a sublayer's input X and output Y can be added."""
    if X.shape != Y.shape:
        raise ValueError(_("AddNorm adds X and Y, so they need one shape; got {X_shape} and "
                           "{Y_shape} (Y must be the sublayer's output for X)").format(
            X_shape=tuple(X.shape), Y_shape=tuple(Y.shape)))


class PositionWiseFFN(nn.Module):
    """One small MLP applied to every position on its own: widen, ReLU, narrow back."""

    def __init__(self, ffn_num_input: int, ffn_num_hiddens: int, ffn_num_outputs: int):
        super().__init__()
        check_ffn_sizes(ffn_num_input, ffn_num_hiddens, ffn_num_outputs)
        self.widen = nn.Linear(ffn_num_input, ffn_num_hiddens)
        self.narrow = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        """X (b, n, ffn_num_input) -> (b, n, ffn_num_outputs); positions never mix."""
        check_features(X, self.widen.in_features, "PositionWiseFFN", "ffn_num_input")
        hidden = torch.relu(self.widen(X))                   # (b, n, ffn_num_hiddens)
        return self.narrow(hidden)                           # (b, n, ffn_num_outputs)


class AddNorm(nn.Module):
    """Residual connection, then layer normalization: LayerNorm(X + dropout(Y))."""

    def __init__(self, normalized_shape, dropout: float = 0.0):
        super().__init__()
        self.drop = nn.Dropout(check_dropout(dropout))
        self.norm = nn.LayerNorm(normalized_shape)

    def forward(self, X, Y):
        """X: a sublayer's input, Y: its output, both (b, n, d) -> (b, n, d)."""
        check_same_shape(X, Y)
        return self.norm(X + self.drop(Y))


class TransformerEncoderBlock(nn.Module):
    """Multi-head self-attention and a position-wise FFN, each followed by AddNorm."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 dropout: float = 0.0, use_bias: bool = False):
        super().__init__()
        check_num_heads(num_hiddens, num_heads)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, check_dropout(dropout),
                                            bias=use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens=None):
        """X (b, n, d), valid_lens None or (b,) -> (b, n, d)."""
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens,
                                            need_weights=not self.training))  # (b, n, d)
        return self.addnorm2(Y, self.ffn(Y))                                   # (b, n, d)


def scaled_embedding(vocab_size: int, num_hiddens: int) -> nn.Embedding:
    """An embedding whose entries start ~N(0, 1/d), so that embedding × √d has unit scale.

    PyTorch's default start is N(0, 1): × √d would then give entries of size √d, attention
    scores q·k/√d of size about d at the first layer, and one-hot (saturated) maps by
    construction, whatever the data say.
    """
    embedding = nn.Embedding(vocab_size, num_hiddens)
    nn.init.normal_(embedding.weight, std=num_hiddens ** -0.5)
    return embedding


class TransformerEncoder(nn.Module):
    """Embedding × √d + positional encoding, then ``num_blks`` encoder blocks."""

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 num_blks: int, dropout: float = 0.0, use_bias: bool = False,
                 max_len: int = 1000):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("num_blks", num_blks)
        check_num_heads(num_hiddens, num_heads)
        self.num_hiddens = num_hiddens
        self.embedding = scaled_embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, check_dropout(dropout), max_len)
        self.blks = nn.Sequential(*(TransformerEncoderBlock(num_hiddens, ffn_num_hiddens,
                                                            num_heads, dropout, use_bias)
                                    for _ in range(num_blks)))
        self.attention_weights = [None] * num_blks        # layer -> (b, heads, n, n)

    def forward(self, X, valid_lens=None, *args):
        """X: token indices (b, n), valid_lens None or (b,) -> (b, n, d)."""
        check_token_batch(X, self.embedding.num_embeddings, "source")
        # The embedding entries start ~N(0, 1/d) (scaled_embedding), the positional encoding lies
        # in [-1, 1]: scaling by √d brings the embedding to the same size before adding the two.
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))   # (b, n, d)
        for i, blk in enumerate(self.blks):
            X = blk(X, valid_lens)                                               # (b, n, d)
            self.attention_weights[i] = blk.attention.attention_weights
        return X


class TransformerDecoderBlock(nn.Module):
    """Causal self-attention, encoder–decoder attention and an FFN, each followed by AddNorm.

    ``i`` is the block's index in the decoder (its slot in the state's cache). ``causal=False``
    removes the causal mask (for the lesson's demonstration of what goes wrong without it).
    """

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 dropout: float = 0.0, i: int = 0, use_bias: bool = False, causal: bool = True):
        super().__init__()
        check_num_heads(num_hiddens, num_heads)
        self.i, self.causal = i, causal
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, check_dropout(dropout),
                                             bias=use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout, bias=use_bias)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        """X (b, n, d) and state (enc_outputs (b, s, d), enc_valid_lens, cache) -> (b, n, d), state."""
        enc_outputs, enc_valid_lens, cache = state[0], state[1], state[2]
        cached = cache[self.i]                                        # (b, t, d) or None
        key_values = X if cached is None else torch.cat((cached, X), dim=1)   # (b, t + n, d)
        cache[self.i] = key_values
        batch, steps, _ = X.shape
        seen = key_values.shape[1] - steps                            # t
        # Query t + j may see keys 0 .. t + j: valid lengths t + 1 .. t + n per row.
        dec_valid_lens = (torch.arange(seen + 1, seen + steps + 1, device=X.device)
                          .repeat(batch, 1) if self.causal else None)  # (b, n)
        record = not self.training
        X2 = self.attention1(X, key_values, key_values, dec_valid_lens, need_weights=record)
        Y = self.addnorm1(X, X2)                                      # (b, n, d)
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens, need_weights=record)
        Z = self.addnorm2(Y, Y2)                                      # (b, n, d)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(nn.Module):
    """Embedding × √d + positional encoding, ``num_blks`` decoder blocks, a dense output layer."""

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 num_blks: int, dropout: float = 0.0, use_bias: bool = False,
                 causal: bool = True, max_len: int = 1000):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("num_blks", num_blks)
        check_num_heads(num_hiddens, num_heads)
        self.num_hiddens, self.num_blks = num_hiddens, num_blks
        self.embedding = scaled_embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, check_dropout(dropout), max_len)
        self.blks = nn.Sequential(*(TransformerDecoderBlock(num_hiddens, ffn_num_hiddens,
                                                            num_heads, dropout, i, use_bias,
                                                            causal)
                                    for i in range(num_blks)))
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self._attention_weights = [[None] * num_blks, [None] * num_blks]

    def init_state(self, enc_outputs, enc_valid_lens=None, *args):
        """(enc_outputs (b, s, d), enc_valid_lens None | (b,), empty cache: one slot per block)."""
        return enc_outputs, enc_valid_lens, [None] * self.num_blks

    def forward(self, X, state):
        """X: token indices (b, n) -> (logits (b, n, vocab_size), state)."""
        check_token_batch(X, self.embedding.num_embeddings, "target")
        seen = 0 if state[2][0] is None else state[2][0].shape[1]      # tokens decoded so far
        steps = X.shape[1]
        if seen + steps > self.pos_encoding.max_len:
            raise ValueError(_("decoding position {position} is past max_len={max_len}; build "
                               "the decoder with a larger max_len or decode fewer steps").format(
                position=seen + steps, max_len=self.pos_encoding.max_len))
        X = self.embedding(X) * math.sqrt(self.num_hiddens)           # (b, n, d)
        X = self.pos_encoding.dropout(X + self.pos_encoding.P[:, seen:seen + steps].to(X.dtype))
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)                                  # (b, n, d)
            self._attention_weights[0][i] = blk.attention1.attention_weights
            self._attention_weights[1][i] = blk.attention2.attention_weights
        return self.dense(X), state                                   # (b, n, vocab_size)

    @property
    def attention_weights(self):
        """[decoder self-attention per layer, encoder–decoder attention per layer] (a new list
        each time, so a caller that keeps one per decoding step keeps every step's weights)."""
        return [list(self._attention_weights[0]), list(self._attention_weights[1])]


def check_token_batch(X, vocab_size: int, side: str) -> None:
    """Raise a one-line ValueError unless X is a (batch, steps) tensor of indices < vocab_size."""
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.is_floating_point():
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(_("{side} tokens must be an integer tensor (batch, steps), got {shape}; "
                           "add a batch axis with tokens[None]").format(side=side, shape=shape))
    if X.shape[1] == 0:
        raise ValueError(_("{side} has 0 steps; pass at least one token (e.g. <eos>)").format(
            side=side))
    if X.numel() and (X.min() < 0 or X.max() >= vocab_size):
        raise ValueError(_("{side} token index {index} is outside the vocabulary of {vocab_size}; "
                           "build the model with the vocabulary of this data").format(
            side=side, index=int(X.max()), vocab_size=vocab_size))


class Transformer(EncoderDecoder):
    """The encoder–decoder Transformer, ready for lesson 4's training loop and greedy decoder."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, num_hiddens: int = 32,
                 ffn_num_hiddens: int = 64, num_heads: int = 4, num_blks: int = 2,
                 dropout: float = 0.1, use_bias: bool = False, causal: bool = True,
                 max_len: int = 1000):
        encoder = TransformerEncoder(src_vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                     num_blks, dropout, use_bias, max_len)
        decoder = TransformerDecoder(tgt_vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                     num_blks, dropout, use_bias, causal, max_len)
        super().__init__(encoder, decoder)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable numbers in ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


# ============================================================================ the lesson's model

@dataclasses.dataclass(frozen=True)
class TransformerConfig(TranslationConfig):
    """Settings of the lesson's model (shared ones: ``TranslationConfig``); the defaults are the
    book's (Chinese edition, 10.7). The course's default seed 0, as everywhere; how much a
    600-pair model depends on it is measured by tests/benchmarks/bench_seed_spread.py and
    quoted in lesson 7."""

    num_hiddens: int = 32
    ffn_num_hiddens: int = 64
    num_heads: int = 4
    num_blks: int = 2
    causal: bool = True

    def __post_init__(self):
        super().__post_init__()
        for name in ("num_hiddens", "ffn_num_hiddens", "num_heads", "num_blks"):
            check_positive_int(name, getattr(self, name))
        check_num_heads(self.num_hiddens, self.num_heads)
        check_flag("causal", self.causal)


# The lesson's main model: all training pairs of the shared file (settings chosen on held-out
# BLEU; see the README's "Translation models").
LESSON_TRANSFORMER = TransformerConfig(num_examples=None, held_out=True, num_steps=12,
                                       batch_size=128, num_hiddens=128, ffn_num_hiddens=256,
                                       num_heads=4, num_blks=2, dropout=0.1, lr=0.001,
                                       num_epochs=12, seed=0)


def build_transformer(config: TransformerConfig, src_vocab, tgt_vocab) -> Transformer:
    """An untrained ``Transformer`` sized by ``config`` for these vocabularies."""
    return Transformer(len(src_vocab), len(tgt_vocab), config.num_hiddens,
                       config.ffn_num_hiddens, config.num_heads, config.num_blks,
                       config.dropout, causal=config.causal)


def transformer_data(config: TransformerConfig, path=None):
    """(data_iter, src_vocab, tgt_vocab) for ``config`` (see ``utils.training.training_data``)."""
    return training_data(config, path)


def train_transformer(config: TransformerConfig = TransformerConfig(), path=None, *,
                      animate: bool = True, show_progress: bool = True,
                      num_threads: int | None = 1):
    """Seed, load the data, build and train with lesson 4's loop: (model, src_vocab, tgt_vocab,
    result). One intra-op thread, as lesson 4 measured best for tensors this small."""
    set_seed(config.seed)
    data_iter, src_vocab, tgt_vocab = transformer_data(config, path)
    model = build_transformer(config, src_vocab, tgt_vocab)
    result = train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab,
                           animate=animate, show_progress=show_progress, num_threads=num_threads)
    return model, src_vocab, tgt_vocab, result


def transformer_versions() -> dict:
    """The code part of the cache key: the fingerprint of this module and what it imports."""
    return {"code": code_fingerprint("utils.transformer")}


def train_or_load_transformer(config: TransformerConfig = TransformerConfig(), path=None, *,
                              use_cache: bool = True, refresh: bool = False,
                              animate: bool = True, show_progress: bool = True):
    """Like ``train_transformer``, but reuse a model trained earlier with the same settings and
    data (see ``utils.model_cache``). Returns (model, src_vocab, tgt_vocab, result, cache_file,
    from_cache)."""
    return train_or_load("transformer", config, vocabs=training_vocabs, build=build_transformer,
                         train=train_transformer, versions=transformer_versions(), path=path,
                         use_cache=use_cache, refresh=refresh, animate=animate,
                         show_progress=show_progress)


# ============================================================================ attention maps

@dataclasses.dataclass
class AttentionMaps:
    """Every attention weight of one translation, per layer and per head.

    source_tokens: the encoder's num_steps input tokens (words, ``<eos>``, ``<pad>`` ...);
    decoder_inputs / output_tokens: what each decoding step read and produced (T of each);
    encoder: (layers, heads, num_steps, num_steps), zero past ``source_valid_len`` (masked keys);
    decoder_self: (layers, heads, T, T), zero above the diagonal for a causal model;
    cross: (layers, heads, T, num_steps), zero past ``source_valid_len``.
    """

    translation: Translation
    source_tokens: list
    source_valid_len: int
    decoder_inputs: list
    output_tokens: list
    encoder: torch.Tensor
    decoder_self: torch.Tensor
    cross: torch.Tensor


@torch.no_grad()
def attention_maps(model: Transformer, sentence: str, src_vocab, tgt_vocab, num_steps: int, *,
                   truncate: bool = False) -> AttentionMaps:
    """Translate ``sentence`` greedily, then collect all attention weights of that translation.

    The decoder weights come from one pass over the decoded tokens with the causal mask; for a
    causal model this equals gathering them step by step during greedy decoding (tested).
    Bad input (empty, unknown words only, too long without ``truncate``) raises ValueError.
    """
    translation = greedy_translate(model, sentence, src_vocab, tgt_vocab, num_steps,
                                   truncate=truncate)
    X, valid_len, *_ = encode_source(sentence, src_vocab, num_steps, truncate)  # (1, s), (1,)
    device = model_device(model)
    was_training = model.training
    model.eval()
    enc_outputs = model.encoder(X.to(device), valid_len.to(device))           # (1, s, d)
    encoder = torch.stack([w[0] for w in model.encoder.attention_weights])    # (L, H, s, s)
    outputs = translation.output_tokens or [EOS]
    inputs = [BOS] + outputs[:-1]
    dec_X = torch.tensor([tgt_vocab[inputs]], device=device)                  # (1, T)
    model.decoder(dec_X, model.decoder.init_state(enc_outputs, valid_len.to(device)))
    self_weights, cross_weights = model.decoder.attention_weights
    model.train(was_training)
    return AttentionMaps(translation, src_vocab.to_tokens(X[0]), int(valid_len), inputs, outputs,
                         encoder.cpu(), torch.stack([w[0] for w in self_weights]).cpu(),
                         torch.stack([w[0] for w in cross_weights]).cpu())  # (L,H,s,s) (L,H,T,T) (L,H,T,s)


def future_attention_share(weights: torch.Tensor) -> torch.Tensor:
    """Share of each query's weight on later positions (keys j > i): (..., T, T) -> (...).

    0 for a causal decoder; large when a decoder trained without the mask peeks ahead.
    """
    future = torch.triu(torch.ones(weights.shape[-2:], dtype=torch.bool), diagonal=1)
    return (weights * future).sum(dim=(-2, -1)) / weights.shape[-2]


@torch.no_grad()
def teacher_forced_attention(model: Transformer, source: str, target: str, src_vocab, tgt_vocab,
                             num_steps: int) -> tuple:
    """Decoder self-attention while reading the *reference* target, as during training.

    Returns (weights (layers, heads, T, T), decoder input tokens ``<bos> w1 .. w_{T-1}``) for
    T = target words + 1 (the last input predicts ``<eos>``). A model trained without the causal
    mask puts weight above the diagonal here: it reads the word it is asked to predict.
    """
    X, valid_len, *_ = encode_source(source, src_vocab, num_steps)              # (1, s), (1,)
    words = target.split()
    if not words or len(words) + 1 > num_steps:
        raise ValueError(gettext("the target must have 1 to {most} words, got {count}; pass a "
                                 "reference translation such as \"il est calme .\"").format(
            most=num_steps - 1, count=len(words)))
    inputs = [BOS] + words
    device = model_device(model)
    X, valid_len = X.to(device), valid_len.to(device)
    was_training = model.training
    model.eval()
    state = model.decoder.init_state(model.encoder(X, valid_len), valid_len)
    model.decoder(torch.tensor([tgt_vocab[inputs]], device=device), state)      # (1, T, vocab)
    model.train(was_training)
    weights = torch.stack([w[0] for w in model.decoder.attention_weights[0]])    # (L, H, T, T)
    return weights.cpu(), inputs


# ============================================================================ the causal-mask demo

# The book's four test sentences and their reference translations.
TEST_PAIRS = (("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
              ("i'm home .", "je suis chez moi ."))
# Lesson 7's demo runs: the book-sized model and data, trained briefly, with and without the mask.
DEMO_CONFIG = TransformerConfig(num_epochs=30)


def causal_demo_summary(model, src_vocab, tgt_vocab, result, num_steps: int,
                        pairs=TEST_PAIRS, probe=TEST_PAIRS[2]) -> dict:
    """What one demo run shows: its loss curve, its greedy translations of ``pairs`` with BLEU,
    and its decoder self-attention (mean over layers and heads) while reading ``probe``'s
    reference translation, with the share of weight on future positions."""
    from utils.bleu import bleu

    translations = [greedy_translate(model, english, src_vocab, tgt_vocab, num_steps).text
                    for english, _ in pairs]
    scores = [bleu(text, french) for text, (_, french) in zip(translations, pairs)]
    weights, inputs = teacher_forced_attention(model, *probe, src_vocab, tgt_vocab, num_steps)
    return {"losses": list(result.losses), "final_loss": result.loss,
            "translations": translations, "bleu": scores, "mean_bleu": sum(scores) / len(scores),
            "attention": weights.mean(dim=(0, 1)).cpu().numpy(),                # (T, T)
            "future_share": float(future_attention_share(weights).mean()),
            "inputs": inputs, "pairs": list(pairs)}


def causal_demo_runs(config: TransformerConfig = DEMO_CONFIG, path=None,
                     use_cache: bool = True, refresh: bool = False) -> dict:
    """{True: summary with the causal mask, False: without}, training (or loading) both runs."""
    runs = {}
    for causal in (True, False):
        run_config = dataclasses.replace(config, causal=causal)
        model, src_vocab, tgt_vocab, result, *_ = train_or_load_transformer(
            run_config, path, use_cache=use_cache, refresh=refresh, animate=False,
            show_progress=False)
        runs[causal] = causal_demo_summary(model, src_vocab, tgt_vocab, result,
                                           run_config.num_steps)
    return runs
