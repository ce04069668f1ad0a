"""Attention as soft addressing: score every key against a query, softmax, average the values.

Lesson 1: ``scaled_dot_scores`` and ``soft_address`` (functions).
Lesson 3: the scoring functions as modules with one interface, ``module(queries, keys, values,
valid_lens)``: ``AdditiveAttention``, ``DotProductAttention``, ``ScaledDotProductAttention``,
``BilinearAttention``; helpers ``dot_scores``, ``causal_valid_lens``, ``attention_entropy``,
``softmax_jacobian_norm``.
"""

import math

import torch
from torch import nn

from utils.i18n import _
from utils.masking import check_valid_lens, masked_softmax, softmax_within_lengths


def check_score_inputs(queries: torch.Tensor, keys: torch.Tensor, temperature: float) -> None:
    """Raise a one-line ValueError unless queries and keys share a size and temperature > 0."""
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(_("queries have size {queries_size} but keys have size {keys_size}; "
                           "dot-product scores need equal sizes (project one side, or use "
                           "additive attention)").format(
            queries_size=queries.shape[-1], keys_size=keys.shape[-1]))
    if not temperature > 0:
        raise ValueError(_("temperature must be > 0, got {temperature}").format(
            temperature=temperature))


def as_batch(queries, keys, values):
    """(queries, keys, values) as float tensors with a batch axis, and whether one was added.

    Accepts queries (m, d), keys (n, d), values (n, v), or the same with a leading batch axis;
    anything else is refused with a one-line ValueError.
    """
    queries, keys, values = (torch.as_tensor(t, dtype=torch.float32)
                             for t in (queries, keys, values))
    unbatched = queries.dim() == 2
    if unbatched:
        queries, keys, values = queries[None], keys[None], values[None]
    if not (queries.dim() == keys.dim() == values.dim() == 3):
        raise ValueError(_("expected queries (m, d), keys (n, d), values (n, v) with an optional "
                           "batch axis; got {queries_shape}, {keys_shape}, {values_shape}").format(
            queries_shape=tuple(queries.shape), keys_shape=tuple(keys.shape),
            values_shape=tuple(values.shape)))
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(_("{keys_size} keys but {values_size} values; every key needs exactly "
                           "one value").format(
            keys_size=keys.shape[-2], values_size=values.shape[-2]))
    return queries, keys, values, unbatched


def scaled_dot_scores(queries: torch.Tensor, keys: torch.Tensor,
                      temperature: float = 1.0) -> torch.Tensor:
    """Scores q·k / (sqrt(d) · temperature).

    queries (batch, m, d), keys (batch, n, d) -> scores (batch, m, n).
    """
    check_score_inputs(queries, keys, temperature)
    d = queries.shape[-1]
    return queries @ keys.transpose(-2, -1) / (math.sqrt(d) * temperature)


def soft_address(queries, keys, values, temperature: float = 1.0, valid_lens=None):
    """Attention pooling: weights = softmax(scores), output = weights @ values.

    queries (m, d), keys (n, d), values (n, v), optionally with a leading batch axis.
    Returns (outputs (…, m, v), weights (…, m, n)).
    """
    queries, keys, values, unbatched = as_batch(queries, keys, values)
    weights = masked_softmax(scaled_dot_scores(queries, keys, temperature), valid_lens)
    outputs = weights @ values                                  # (batch, m, v)
    if unbatched:
        return outputs[0], weights[0]
    return outputs, weights


# ---------------------------------------------------------------------------------------------
# Scoring functions as modules (lesson 3). Each one takes (queries, keys, values, valid_lens),
# scores every query against every key, masks and softmaxes the scores, averages the values,
# and keeps the weights in ``attention_weights`` (batch, queries, keys) for plotting.

def check_attention_inputs(queries, keys, values) -> None:
    """Raise a one-line ValueError unless queries (b, m, q), keys (b, n, k), values (b, n, v) fit."""
    for name, tensor in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 3:
            shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(_("{name} must be a 3-D tensor (batch, steps, features), got "
                               "{shape}; add a batch axis with {name}[None] or a step axis with "
                               "{name}.unsqueeze(1)").format(name=name, shape=shape))
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(_("batch sizes differ: queries {queries_size}, keys {keys_size}, values "
                           "{values_size}; pass the same batch size to all three").format(
            queries_size=queries.shape[0], keys_size=keys.shape[0], values_size=values.shape[0]))
    if keys.shape[1] != values.shape[1]:
        raise ValueError(_("{keys_size} keys but {values_size} values; every key needs exactly "
                           "one value (keys (b, n, k) and values (b, n, v) share n)").format(
            keys_size=keys.shape[1], values_size=values.shape[1]))


def checked_lengths(valid_lens, queries: torch.Tensor, keys: torch.Tensor):
    """None, or valid_lens checked against queries (b, m, q) and keys (b, n, k) as a long tensor
    (b, m) on the queries' device (one length per query; a (b,) input is repeated)."""
    if valid_lens is None:
        return None
    (b, m, _), n = queries.shape, keys.shape[1]
    return check_valid_lens(valid_lens, b, m, n).to(queries.device)      # (b, m)


def dot_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unscaled scores q·k: queries (batch, m, d), keys (batch, n, d) -> (batch, m, n)."""
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(_("dot-product scoring needs queries and keys of one size, got query "
                           "size {queries_size} and key size {keys_size}; use AdditiveAttention "
                           "or BilinearAttention(query_size={queries_size}, "
                           "key_size={keys_size}) instead").format(
            queries_size=queries.shape[-1], keys_size=keys.shape[-1]))
    return torch.bmm(queries, keys.transpose(1, 2))


def causal_valid_lens(batch: int, num_queries: int, device=None) -> torch.Tensor:
    """Valid lengths (batch, num_queries) that let query i see keys 0..i only (a causal mask)."""
    if num_queries < 1 or batch < 1:
        raise ValueError(_("batch and num_queries must be >= 1, got {batch} and "
                           "{num_queries}").format(batch=batch, num_queries=num_queries))
    steps = torch.arange(1, num_queries + 1, device=device)          # (num_queries,)
    return steps.repeat(batch, 1)                                     # (batch, num_queries)


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each weight row (..., keys) -> (...); 0·log 0 counts as 0."""
    terms = torch.where(weights > 0, weights * weights.log(), torch.zeros_like(weights))
    return -terms.sum(dim=-1) + 0.0                   # + 0.0 turns -0.0 into 0.0


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of d softmax / d scores for each row (..., keys) -> (...).

    The Jacobian of the softmax is diag(w) - w wᵀ: it vanishes when w is one-hot (saturated).
    """
    jacobian = torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]
    return jacobian.flatten(-2).norm(dim=-1)


class AttentionScoring(nn.Module):
    """Base class: score -> masked softmax -> dropout on the weights -> weighted sum of values.

    Subclasses implement ``score(queries, keys) -> (batch, queries, keys)``.
    """

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(_("dropout is a probability in [0, 1), got {dropout}").format(
                dropout=dropout))
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None                  # (batch, queries, keys) after forward

    def score(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, queries, keys, values, valid_lens=None):
        """queries (b, m, q), keys (b, n, k), values (b, n, v); valid_lens None, (b,) or (b, m).

        Returns (b, m, v).
        """
        check_attention_inputs(queries, keys, values)
        lens = checked_lengths(valid_lens, queries, keys)               # None or (b, m)
        return self.attend(queries, keys, values, lens)

    def attend(self, queries, keys, values, lens=None):
        """``forward`` without the checks, for callers that made them (lens None or (b, m))."""
        scores = self.score(queries, keys)                              # (b, m, n)
        self.attention_weights = softmax_within_lengths(scores, lens)   # (b, m, n)
        return torch.bmm(self.dropout(self.attention_weights), values)  # (b, m, v)


class AdditiveAttention(AttentionScoring):
    """Score wᵥᵀ tanh(W_q q + W_k k): queries and keys may have different sizes."""

    def __init__(self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0):
        super().__init__(dropout)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def score(self, queries, keys):
        for name, tensor, layer in (("query", queries, self.W_q), ("key", keys, self.W_k)):
            if tensor.shape[-1] != layer.in_features:
                raise ValueError(_("this AdditiveAttention expects {name} size "
                                   "{in_features}, got {tensor_size}; build it with "
                                   "{name}_size={tensor_size}").format(
                    name=name, in_features=layer.in_features, tensor_size=tensor.shape[-1]))
        features = self.W_q(queries)[:, :, None, :] + self.W_k(keys)[:, None, :, :]  # (b, m, n, h)
        return self.w_v(torch.tanh(features)).squeeze(-1)                            # (b, m, n)


class DotProductAttention(AttentionScoring):
    """Score qᵀk, divided by √d when ``scaled`` (the default, as the book's class of this name)."""

    def __init__(self, dropout: float = 0.0, scaled: bool = True):
        super().__init__(dropout)
        self.scaled = scaled

    def score(self, queries, keys):
        scores = dot_scores(queries, keys)                              # (b, m, n)
        return scores / math.sqrt(queries.shape[-1]) if self.scaled else scores


class ScaledDotProductAttention(DotProductAttention):
    """Score qᵀk/√d; queries (b, m, d), keys (b, n, d), values (b, n, v)."""

    def __init__(self, dropout: float = 0.0):
        super().__init__(dropout, scaled=True)


class BilinearAttention(AttentionScoring):
    """Score qᵀW k with a learned W of shape (query_size, key_size)."""

    def __init__(self, key_size: int, query_size: int, dropout: float = 0.0):
        super().__init__(dropout)                              # sizes in AdditiveAttention's order
        self.W = nn.Linear(key_size, query_size, bias=False)   # weight (query_size, key_size)

    def score(self, queries, keys):
        if (queries.shape[-1], keys.shape[-1]) != (self.W.out_features, self.W.in_features):
            raise ValueError(_("this BilinearAttention expects query size {out_features} and key "
                               "size {in_features}, got {queries_size} and {keys_size}; build it "
                               "with query_size={queries_size}, key_size={keys_size}").format(
                out_features=self.W.out_features, in_features=self.W.in_features,
                queries_size=queries.shape[-1], keys_size=keys.shape[-1]))
        return torch.bmm(queries, self.W(keys).transpose(1, 2))          # (b, m, n)
