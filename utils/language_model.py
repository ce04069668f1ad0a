"""From attention to a language model (lesson 8): a decoder-only Transformer, sampling, generation.

Shapes: b = batch, n = new steps, t = steps already cached, d = num_hiddens, h = heads,
d_h = d / h, V = vocabulary size.

The model is built from the course's own layers (``MultiHeadAttention``, ``PositionalEncoding``,
``PositionWiseFFN``, ``AddNorm``)::

    DecoderOnlyConfig(vocab_size, num_hiddens=32, num_heads=4, num_blks=2, ffn_num_hiddens=64,
                      dropout=0.0, max_len=256, attention_only=False, use_bias=False)
    DecoderOnlyLM(config)
        model(tokens (b, n), state=None) -> (logits (b, n, V), state)
        model.attention_weights -> [layer] (b, h, n, t + n), recorded on every forward
    DecoderOnlyBlock                        causal self-attention (+ FFN), each with AddNorm
    cached_self_attention(mha, X, cache)    the block's attention with a key/value cache
    KeyValueCache(keys, values)             one layer's projected keys and values (b, h, t, d_h)

``state`` is a list with one ``KeyValueCache`` per layer (None before the first call). A call
with n new tokens computes their keys and values only, appends them to the cache and lets query
``t + j`` see keys ``0 .. t + j``; positions continue at t. One call on the whole sequence and
one call per token therefore give the same logits (tested), which is what ``generate`` uses.

Sampling (logits (..., V) -> ...)::

    filter_logits(logits, top_k=None, top_p=None)                  masked entries -> -inf
    next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None) -> probabilities
    sample(logits, temperature=1.0, top_k=None, top_p=None, generator=None)  -> token ids (...)
    generate(model, prompt_tokens, max_new_tokens, *, use_cache=True, temperature=1.0,
             top_k=None, top_p=None, generator=None, greedy=False) -> (b, n0 + max_new_tokens)
    stepwise_logits(model, tokens)          the logits of feeding ``tokens`` one at a time

Every argument check raises a one-line ValueError that names the fix.
"""

import dataclasses
import math
import operator

import torch
from torch import nn
from torch.nn import functional as F

from utils.i18n import _, gettext
from utils.multihead import MultiHeadAttention, check_num_heads, merge_heads, split_heads
from utils.positional import PositionalEncoding, check_encoding_layer
from utils.transformer import AddNorm, PositionWiseFFN, check_token_batch
from utils.validation import check_dropout, check_flag, check_positive_int


# ============================================================================ the model

@dataclasses.dataclass(frozen=True)
class DecoderOnlyConfig:
    """Sizes of a decoder-only language model; validated on construction."""

    vocab_size: int
    num_hiddens: int = 32
    num_heads: int = 4
    num_blks: int = 2
    ffn_num_hiddens: int = 64
    dropout: float = 0.0
    max_len: int = 256
    attention_only: bool = False         # True: no FFN sublayer (the induction-head experiment)
    use_bias: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "num_hiddens", "num_heads", "num_blks", "ffn_num_hiddens",
                     "max_len"):
            check_positive_int(name, getattr(self, name))
        check_num_heads(self.num_hiddens, self.num_heads)
        check_encoding_layer(self.num_hiddens, check_dropout(self.dropout), self.max_len)
        for name in ("attention_only", "use_bias"):
            check_flag(name, getattr(self, name))


@dataclasses.dataclass(frozen=True)
class KeyValueCache:
    """One layer's keys and values for every position seen so far, each (b, h, t, d_h)."""

    keys: torch.Tensor
    values: torch.Tensor

    @property
    def length(self) -> int:
        """t, the number of cached positions."""
        return self.keys.shape[2]


def causal_lens_after(cached: int, steps: int, rows: int, device=None) -> torch.Tensor:
    """Valid lengths (rows, steps) for ``steps`` new queries after ``cached`` positions:
    query ``cached + j`` sees keys ``0 .. cached + j``, i.e. ``cached + j + 1`` of them."""
    return torch.arange(cached + 1, cached + steps + 1, device=device).repeat(rows, 1)


def cached_self_attention(mha: MultiHeadAttention, X: torch.Tensor, cache=None):
    """Causal multi-head self-attention of ``mha`` for n new positions X (b, n, d).

    Only the new positions are projected; their keys and values are appended to ``cache`` (a
    ``KeyValueCache`` of t earlier positions, or None). The weights come from the layer's own
    ``ScaledDotProductAttention`` and end up in ``mha.attention_weights`` (b, h, n, t + n).
    With ``cache=None`` this is ``mha(X, X, X, causal lengths)`` (tested).
    Returns (output (b, n, d), the longer cache).
    """
    b, n, _ = X.shape
    h = mha.num_heads
    keys = split_heads(mha.W_k(X), h, fold=False)                 # (b, h, n, d_h)
    values = split_heads(mha.W_v(X), h, fold=False)               # (b, h, n, d_h)
    if cache is not None:
        keys = torch.cat((cache.keys, keys), dim=2)               # (b, h, t + n, d_h)
        values = torch.cat((cache.values, values), dim=2)         # (b, h, t + n, d_h)
    t_plus_n = keys.shape[2]
    queries = split_heads(mha.W_q(X), h)                          # (b·h, n, d_h)
    lens = causal_lens_after(t_plus_n - n, n, b * h, X.device)    # (b·h, n)
    out = mha.attention(queries, keys.reshape(b * h, t_plus_n, -1),
                        values.reshape(b * h, t_plus_n, -1), lens)   # (b·h, n, d_h)
    mha.attention_weights = mha.attention.attention_weights.reshape(b, h, n, t_plus_n)
    return mha.W_o(merge_heads(out, h)), KeyValueCache(keys, values)   # (b, n, d)


class DecoderOnlyBlock(nn.Module):
    """Causal self-attention then (unless ``attention_only``) an FFN, each followed by AddNorm:
    the decoder block of lesson 7 without its encoder–decoder attention."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 dropout: float = 0.0, use_bias: bool = False, attention_only: bool = False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, check_dropout(dropout),
                                            bias=use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention_only = attention_only
        if not attention_only:
            self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
            self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, cache=None):
        """X (b, n, d), cache None or KeyValueCache (b, h, t, d_h) -> ((b, n, d), cache)."""
        attended, cache = cached_self_attention(self.attention, X, cache)
        Y = self.addnorm1(X, attended)                                # (b, n, d)
        if self.attention_only:
            return Y, cache
        return self.addnorm2(Y, self.ffn(Y)), cache                   # (b, n, d)


class DecoderOnlyLM(nn.Module):
    """Embedding × √d + positional encoding, ``num_blks`` causal blocks, a linear layer to V."""

    def __init__(self, config: DecoderOnlyConfig):
        super().__init__()
        if not isinstance(config, DecoderOnlyConfig):
            raise ValueError(_("DecoderOnlyLM takes a DecoderOnlyConfig, got {config_type}; "
                               "build one with DecoderOnlyConfig(vocab_size=...)").format(
                config_type=type(config).__name__))
        self.config = config
        d = config.num_hiddens
        self.embedding = nn.Embedding(config.vocab_size, d)
        # Entries ~N(0, 1/d), so embedding × √d has unit scale, like the encoding's sin and cos
        # (PyTorch's default N(0, 1) would drown the positions, which a previous-token head needs).
        nn.init.normal_(self.embedding.weight, std=d ** -0.5)
        self.pos_encoding = PositionalEncoding(d, config.dropout, config.max_len)
        self.blks = nn.ModuleList(DecoderOnlyBlock(d, config.ffn_num_hiddens, config.num_heads,
                                                   config.dropout, config.use_bias,
                                                   config.attention_only)
                                  for _ in range(config.num_blks))
        self.dense = nn.Linear(d, config.vocab_size)

    @property
    def attention_weights(self) -> list:
        """Self-attention weights of the last forward, one (b, h, n, t + n) tensor per layer."""
        return [blk.attention.attention_weights for blk in self.blks]

    def forward(self, tokens, state=None):
        """tokens (b, n) after ``state`` (None or the state a previous call returned)
        -> (logits (b, n, V), state with these n positions appended)."""
        cached = self.check_inputs(tokens, state)                     # t
        steps = tokens.shape[1]
        X = self.embedding(tokens) * math.sqrt(self.config.num_hiddens)   # (b, n, d)
        positions = self.pos_encoding.P[:, cached:cached + steps].to(X.dtype)  # (1, n, d)
        X = self.pos_encoding.dropout(X + positions)                  # (b, n, d)
        new_state = []
        for i, blk in enumerate(self.blks):
            X, layer_cache = blk(X, None if state is None else state[i])   # (b, n, d)
            new_state.append(layer_cache)
        return self.dense(X), new_state                               # (b, n, V)

    def check_inputs(self, tokens, state) -> int:
        """Raise a one-line ValueError for bad tokens or state; return t, the cached length."""
        check_token_batch(tokens, self.config.vocab_size, "tokens")
        cached = 0
        if state is not None:
            if (not isinstance(state, (list, tuple)) or len(state) != len(self.blks)
                    or not all(isinstance(c, KeyValueCache) for c in state)):
                raise ValueError(_("state must be None or the list of {num_layers} KeyValueCache a "
                                   "previous call returned; pass state=None to start a new "
                                   "sequence").format(num_layers=len(self.blks)))
            cached = state[0].length
            if state[0].keys.shape[0] != tokens.shape[0]:
                raise ValueError(_("state holds {state_size} sequences but tokens has "
                                   "{tokens_size}; feed the same batch or pass state=None").format(
                    state_size=state[0].keys.shape[0], tokens_size=tokens.shape[0]))
        if cached + tokens.shape[1] > self.config.max_len:
            raise ValueError(_("position {position} is past max_len={max_len}; build "
                               "the model with a larger max_len or use a shorter sequence").format(
                position=cached + tokens.shape[1], max_len=self.config.max_len))
        return cached


# ============================================================================ sampling

def check_logits(logits) -> None:
    """Raise unless logits is a floating tensor (..., V) with V >= 1."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() < 1:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(_("logits must be a float tensor (..., vocab_size), got {shape}; pass "
                           "the model's output, e.g. logits[:, -1]").format(shape=shape))
    if logits.shape[-1] == 0:
        raise ValueError(_("logits have an empty vocabulary axis; pass (..., vocab_size) with "
                           "vocab_size >= 1"))


def check_top_k(top_k) -> int:
    """None, or an int >= 1 (a k at least the vocabulary size keeps every token)."""
    if top_k is None:
        return None
    try:
        k = operator.index(top_k)
    except TypeError:
        k = None
    if k is None or isinstance(top_k, bool) or k < 1:
        raise ValueError(_("top_k must be None or an integer >= 1, got {top_k!r}; use None to "
                           "keep every token").format(top_k=top_k))
    return k


def check_top_p(top_p) -> float:
    """None, or a probability in (0, 1] (1 keeps every token)."""
    if top_p is None:
        return None
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(_("top_p must be None or lie in (0, 1], got {top_p!r}; use e.g. "
                           "top_p=0.9, or None to keep every token").format(top_p=top_p))
    return float(top_p)


def check_temperature(temperature) -> float:
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not 0 < temperature < math.inf):
        raise ValueError(_("temperature must be a finite number > 0, got {temperature!r}; use "
                           "greedy=True for the temperature -> 0 limit").format(
            temperature=temperature))
    return float(temperature)


def filter_logits(logits: torch.Tensor, top_k=None, top_p=None) -> torch.Tensor:
    """Set the logits of tokens outside the top-k and the top-p (nucleus) set to -inf.

    logits (..., V) -> (..., V). Tokens are ranked by logit; tied logits rank by index, lower
    first, so the result is deterministic. top-k keeps the k best ranks. top-p then keeps the
    shortest prefix of the ranking (of what top-k kept) whose probability reaches ``top_p``;
    the best token is always kept. None (or k >= V, or p = 1) keeps everything.
    """
    check_logits(logits)
    k, p = check_top_k(top_k), check_top_p(top_p)
    vocab = logits.shape[-1]
    if (k is None or k >= vocab) and (p is None or p == 1.0):
        return logits.clone()
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices   # (..., V)
    ranked = logits.gather(-1, order)                              # (..., V), descending
    keep = torch.ones_like(ranked, dtype=torch.bool)               # by rank
    if k is not None and k < vocab:
        keep[..., k:] = False
    if p is not None and p < 1.0:
        probs = F.softmax(ranked.masked_fill(~keep, -math.inf), dim=-1)    # (..., V)
        before = probs.cumsum(dim=-1) - probs                      # mass of better ranks
        keep &= before < p
        keep[..., 0] = True
    keep_by_token = torch.empty_like(keep).scatter_(-1, order, keep)   # back to token order
    return logits.masked_fill(~keep_by_token, -math.inf)


def next_token_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k=None,
                            top_p=None) -> torch.Tensor:
    """Probabilities (..., V) of the next token: softmax(filter(logits / temperature))."""
    check_logits(logits)
    scaled = logits / check_temperature(temperature)
    return F.softmax(filter_logits(scaled, top_k, top_p), dim=-1)


def check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(_("generator must be None or a torch.Generator, got {generator_type}; "
                           "use utils.reproducibility.seeded_generator(seed)").format(
            generator_type=type(generator).__name__))


def sample(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None,
           generator=None) -> torch.Tensor:
    """Draw one token per row: logits (..., V) -> token ids (...). The same seeded
    ``torch.Generator`` gives the same tokens."""
    check_generator(generator)
    probs = next_token_distribution(logits, temperature, top_k, top_p)   # (..., V)
    flat = probs.reshape(-1, probs.shape[-1])                            # (rows, V)
    tokens = torch.multinomial(flat, 1, generator=generator)             # (rows, 1)
    return tokens.reshape(probs.shape[:-1])


# ============================================================================ generation

def _as_prompt(prompt_tokens, vocab_size: int) -> torch.Tensor:
    """(n0,) or (b, n0) integer tokens -> (b, n0)."""
    if isinstance(prompt_tokens, torch.Tensor) and prompt_tokens.dim() == 1:
        prompt_tokens = prompt_tokens[None]                               # (1, n0)
    check_token_batch(prompt_tokens, vocab_size, "prompt")
    return prompt_tokens


@torch.no_grad()
def generate(model: DecoderOnlyLM, prompt_tokens, max_new_tokens: int, *, use_cache: bool = True,
             temperature: float = 1.0, top_k=None, top_p=None, generator=None,
             greedy: bool = False) -> torch.Tensor:
    """Continue ``prompt_tokens`` (b, n0) or (n0,) by ``max_new_tokens`` tokens -> (b, n0 + new).

    ``greedy`` takes the most likely token (ties: the lowest index); otherwise each token is
    drawn with ``sample``. With ``use_cache`` the prompt is read once and then one token per
    step, reusing the cached keys and values; without it every step rereads the whole sequence.
    Both give the same tokens. Runs in eval mode and restores the model's mode afterwards.
    """
    tokens = _as_prompt(prompt_tokens, model.config.vocab_size)            # (b, n0)
    check_positive_int("max_new_tokens", max_new_tokens, minimum=0)
    last_fed = tokens.shape[1] + max_new_tokens - 1                        # the last token is not fed
    if last_fed > model.config.max_len:
        raise ValueError(gettext("{prompt} prompt tokens + {new} new ones need max_len >= "
                                 "{needed}, the model has {max_len}; generate fewer tokens or "
                                 "build a larger max_len").format(
            prompt=tokens.shape[1], new=max_new_tokens, needed=last_fed,
            max_len=model.config.max_len))
    if not greedy:                                                         # fail before running
        check_temperature(temperature), check_top_k(top_k), check_top_p(top_p)
        check_generator(generator)
    was_training = model.training
    model.eval()
    try:
        state, new_input = None, tokens
        for _ in range(max_new_tokens):
            if use_cache:
                logits, state = model(new_input, state)                   # (b, 1 or n0, V)
            else:
                logits, _ = model(tokens)                                 # (b, n, V)
            last = logits[:, -1]                                          # (b, V)
            if greedy:
                next_token = last.argmax(dim=-1)                          # (b,)
            else:
                next_token = sample(last, temperature, top_k, top_p, generator)
            new_input = next_token[:, None]                               # (b, 1)
            tokens = torch.cat((tokens, new_input), dim=1)
    finally:
        model.train(was_training)
    return tokens


@torch.no_grad()
def stepwise_logits(model: DecoderOnlyLM, tokens) -> torch.Tensor:
    """Logits (b, n, V) from feeding tokens (b, n) one at a time through the cache; equal
    (up to rounding) to ``model(tokens)[0]`` because the model is causal."""
    tokens = _as_prompt(tokens, model.config.vocab_size)
    state, steps = None, []
    for i in range(tokens.shape[1]):
        logits, state = model(tokens[:, i:i + 1], state)                  # (b, 1, V)
        steps.append(logits)
    return torch.cat(steps, dim=1)
