"""Multi-head attention (lesson 5), built on the lesson-3 ``ScaledDotProductAttention``.

Interface (stable; lessons 6 and 7 build on it)::

    MultiHeadAttention(num_hiddens, num_heads, dropout=0.0, bias=False,
                       key_size=None, query_size=None, value_size=None)
    mha(queries, keys, values, valid_lens=None, need_weights=True) -> (batch, queries, num_hiddens)

- queries (b, m, query_size), keys (b, n, key_size), values (b, n, value_size); the three sizes
  default to ``num_hiddens``.
- valid_lens: None, (b,) one length per sequence, or (b, m) one length per query (causal masks).
- ``need_weights`` (an argument of each call, default True): when True the explicit path runs
  and ``mha.attention_weights`` holds the
  weights per head, shape (b, num_heads, m, n); when False the fused
  ``torch.nn.functional.scaled_dot_product_attention`` runs and ``attention_weights`` is None.
- ``num_heads`` must divide ``num_hiddens`` (each head gets ``num_hiddens // num_heads``
  features); otherwise a one-line ValueError names the divisors.

Helpers: ``split_heads`` / ``merge_heads`` (the reshaping, shape by shape),
``repeat_valid_lens`` (one copy of the lengths per head), ``divisors``,
``multihead_cost`` (parameters and FLOPs versus heads), ``key_padding_mask`` and
``to_torch_multihead`` (the same layer as ``torch.nn.MultiheadAttention``).

Checks (the lesson cells call them in one line; each raises a one-line ValueError that names the
fix): ``check_num_heads``, ``check_split``, ``check_merge``, ``check_sequence_lens``,
``check_multihead_inputs``, ``check_torch_compatible``.
"""

import torch
from torch import nn
from torch.nn import functional as F

from utils.attention import ScaledDotProductAttention, check_attention_inputs, checked_lengths
from utils.i18n import _
from utils.masking import check_valid_lens, length_mask


def divisors(n: int) -> list:
    """All positive divisors of n, ascending: the head counts a hidden size allows."""
    if int(n) != n or n < 1:
        raise ValueError(_("n must be a positive integer, got {n}").format(n=n))
    return [d for d in range(1, int(n) + 1) if n % d == 0]


def check_num_heads(num_hiddens: int, num_heads: int) -> int:
    """Return the head size num_hiddens // num_heads, or raise if num_heads does not divide."""
    if int(num_hiddens) != num_hiddens or num_hiddens < 1:
        raise ValueError(_("num_hiddens must be a positive integer, got {num_hiddens}").format(
            num_hiddens=num_hiddens))
    if int(num_heads) != num_heads or num_heads < 1:
        raise ValueError(_("num_heads must be a positive integer, got {num_heads}").format(
            num_heads=num_heads))
    if num_hiddens % num_heads:
        raise ValueError(_("num_heads={num_heads} does not divide num_hiddens={num_hiddens}; "
                           "choose one of its divisors: {divisors}").format(
            num_heads=num_heads, num_hiddens=num_hiddens,
            divisors=divisors(num_hiddens)))
    return num_hiddens // num_heads


def check_split(X: torch.Tensor, num_heads: int) -> int:
    """Return the head size d for ``split_heads``, or raise unless X is (b, n, h·d)."""
    if X.dim() != 3:
        raise ValueError(_("split_heads expects (batch, steps, features), got {X_shape}; give it "
                           "three axes (X[None] for one sequence)").format(X_shape=tuple(X.shape)))
    return check_num_heads(X.shape[-1], num_heads)


def check_merge(X: torch.Tensor, num_heads: int) -> None:
    """Raise unless X is a ``split_heads`` output: (b·h, n, d) or (b, h, n, d) with h=num_heads."""
    if isinstance(num_heads, bool) or int(num_heads) != num_heads or num_heads < 1:
        raise ValueError(_("num_heads must be a positive integer, got {num_heads}").format(
            num_heads=num_heads))
    if X.dim() == 3 and X.shape[0] % num_heads:
        raise ValueError(_("first axis {X_size} is not batch·num_heads for "
                           "num_heads={num_heads}; pass the output of split_heads").format(
            X_size=X.shape[0], num_heads=num_heads))
    if X.dim() not in (3, 4) or (X.dim() == 4 and X.shape[1] != num_heads):
        raise ValueError(_("merge_heads expects (b·h, n, d) or (b, h, n, d) with h={num_heads}, "
                           "got {X_shape}").format(num_heads=num_heads, X_shape=tuple(X.shape)))


def split_heads(X: torch.Tensor, num_heads: int, fold: bool = True) -> torch.Tensor:
    """Cut the feature axis into heads.

    X (b, n, h·d) -> (b, n, h, d) -> (b, h, n, d); with ``fold`` the head axis is folded into
    the batch: (b·h, n, d), row ``i·h + j`` being head j of sequence i.
    """
    d = check_split(X, num_heads)              # head size d = features / h
    b, n, _ = X.shape
    X = X.reshape(b, n, num_heads, d)          # (b, n, h, d)
    X = X.permute(0, 2, 1, 3)                  # (b, h, n, d)
    return X.reshape(b * num_heads, n, d) if fold else X


def merge_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo ``split_heads``: (b·h, n, d) or (b, h, n, d) -> (b, n, h·d)."""
    check_merge(X, num_heads)
    n, d = X.shape[-2:]
    X = X.reshape(-1, num_heads, n, d)         # (b, h, n, d)
    b = X.shape[0]
    X = X.permute(0, 2, 1, 3)                  # (b, n, h, d)
    return X.reshape(b, n, num_heads * d)      # (b, n, h·d)


def repeat_valid_lens(valid_lens, num_heads: int):
    """One copy of the lengths per head, in ``split_heads`` order: (b,) -> (b·h,),
    (b, m) -> (b·h, m). None stays None."""
    if valid_lens is None:
        return None
    return torch.as_tensor(valid_lens).repeat_interleave(num_heads, dim=0)


def check_sequence_lens(valid_lens, num_keys: int) -> torch.Tensor:
    """One length per sequence, each in 0..num_keys, as a (b,) tensor; else a one-line error."""
    lens = torch.as_tensor(valid_lens)
    if lens.dim() != 1:
        raise ValueError(_("key_padding_mask takes one length per sequence, shape (batch,), got "
                           "{lens_shape}; per-query lengths need an attn_mask instead").format(
            lens_shape=tuple(lens.shape)))
    return check_valid_lens(lens, lens.shape[0], 1, num_keys)[:, 0]       # (b,)


def key_padding_mask(valid_lens, num_keys: int) -> torch.Tensor:
    """(b,) lengths -> (b, num_keys) bool, True where a key is padding (PyTorch's convention)."""
    lens = check_sequence_lens(valid_lens, num_keys)                       # (b,)
    return ~length_mask(lens, num_keys)                                    # (b, num_keys)


def multihead_cost(num_hiddens: int, num_heads: int, num_queries: int, num_keys: int,
                   bias: bool = False) -> dict:
    """Parameters and multiply-adds of one layer (queries, keys, values all of size num_hiddens).

    Projections: 4 matrices num_hiddens x num_hiddens, whatever the number of heads.
    Attention: each head scores m·n pairs over d = num_hiddens/h features and averages n values
    of size d, so h heads cost 2·m·n·num_hiddens multiply-adds, like one full-width head.
    """
    d = check_num_heads(num_hiddens, num_heads)
    params = 4 * num_hiddens * num_hiddens + (4 * num_hiddens if bias else 0)
    projection = (2 * num_queries + 2 * num_keys) * num_hiddens * num_hiddens
    attention = num_heads * 2 * num_queries * num_keys * d
    return {"num_heads": num_heads, "head_size": d, "parameters": params,
            "projection_macs": projection, "attention_macs": attention,
            "score_entries": num_heads * num_queries * num_keys}


def check_multihead_inputs(mha, queries, keys, values, valid_lens=None):
    """Check shapes against the layer's projections; return valid_lens as (b, m) on the queries'
    device, or None. The only check of the lengths in a forward call."""
    check_attention_inputs(queries, keys, values)
    for name, tensor, layer in (("query", queries, mha.W_q), ("key", keys, mha.W_k),
                                ("value", values, mha.W_v)):
        if tensor.shape[-1] != layer.in_features:
            raise ValueError(_("this MultiHeadAttention expects {name} size {in_features} (last "
                               "dimension), got {tensor_size}; build it with "
                               "{name}_size={tensor_size}").format(
                name=name, in_features=layer.in_features, tensor_size=tensor.shape[-1]))
    return checked_lengths(valid_lens, queries, keys)                     # None or (b, m)


class MultiHeadAttention(nn.Module):
    """h heads, each attention(W_q^i q, W_k^i k, W_v^i v), concatenated and projected by W_o."""

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = False, key_size=None, query_size=None, value_size=None):
        super().__init__()
        self.head_size = check_num_heads(num_hiddens, num_heads)
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        self.attention = ScaledDotProductAttention(dropout)
        self.W_q = nn.Linear(query_size or num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size or num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size or num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.attention_weights = None          # (b, num_heads, m, n) after a forward with weights

    def forward(self, queries, keys, values, valid_lens=None, need_weights: bool = True):
        """queries (b, m, q), keys (b, n, k), values (b, n, v) -> (b, m, num_hiddens)."""
        lens = check_multihead_inputs(self, queries, keys, values, valid_lens)  # None or (b, m)
        (b, m, _), n = queries.shape, keys.shape[1]
        h = self.num_heads
        if not need_weights:
            return self._fused(queries, keys, values, lens)
        q = split_heads(self.W_q(queries), h)                  # (b·h, m, d)
        k = split_heads(self.W_k(keys), h)                     # (b·h, n, d)
        v = split_heads(self.W_v(values), h)                   # (b·h, n, d)
        out = self.attention.attend(q, k, v, repeat_valid_lens(lens, h))  # (b·h, m, d)
        self.attention_weights = self.attention.attention_weights.reshape(b, h, m, n)
        return self.W_o(merge_heads(out, h))                   # (b, m, num_hiddens)

    def _fused(self, queries, keys, values, lens):
        """Fast path: fused scaled_dot_product_attention on strided views (no weights kept)."""
        (b, m, _), n, h = queries.shape, keys.shape[1], self.num_heads
        self.attention_weights = None
        # (b, len, h·d) -> view (b, len, h, d) -> (b, h, len, d): a transpose, no copy.
        heads = lambda t, length: t.view(b, length, h, -1).transpose(1, 2)
        mask = None
        if lens is not None:                                   # True = key takes part
            mask = length_mask(lens, n)[:, None]               # (b, 1, m, n): all heads
        p = self.attention.dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(heads(self.W_q(queries), m), heads(self.W_k(keys), n),
                                             heads(self.W_v(values), n), attn_mask=mask,
                                             dropout_p=p)      # (b, h, m, d)
        return self.W_o(out.transpose(1, 2).reshape(b, m, -1))  # (b, m, num_hiddens)


def check_torch_compatible(mha: MultiHeadAttention) -> None:
    """Raise unless PyTorch's layer can hold our weights (it needs query size == num_hiddens)."""
    if mha.W_q.in_features != mha.num_hiddens:
        raise ValueError(_("torch.nn.MultiheadAttention needs query size == num_hiddens "
                           "({num_hiddens}), this layer has query_size={in_features}; build ours "
                           "without query_size to compare").format(
            num_hiddens=mha.num_hiddens, in_features=mha.W_q.in_features))


def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (batch_first=True) holding copies of our weights."""
    check_torch_compatible(mha)
    bias = mha.W_q.bias is not None
    torch_mha = nn.MultiheadAttention(mha.num_hiddens, mha.num_heads,
                                      dropout=mha.attention.dropout.p, bias=bias,
                                      kdim=mha.W_k.in_features, vdim=mha.W_v.in_features,
                                      batch_first=True)
    with torch.no_grad():
        if torch_mha.in_proj_weight is not None:           # all sizes equal: one packed matrix
            torch_mha.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight,
                                                      mha.W_v.weight]))
        else:
            torch_mha.q_proj_weight.copy_(mha.W_q.weight)
            torch_mha.k_proj_weight.copy_(mha.W_k.weight)
            torch_mha.v_proj_weight.copy_(mha.W_v.weight)
        torch_mha.out_proj.weight.copy_(mha.W_o.weight)
        if bias:
            torch_mha.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
            torch_mha.out_proj.bias.copy_(mha.W_o.bias)
    return torch_mha.train(mha.training)


# ---------------------------------------------------------------------------------------------
# Measuring the two paths (lesson 5's benchmark).

def peak_memory_mib(fn) -> float:
    """Peak extra CPU memory (MiB) that PyTorch allocates while running ``fn()``.

    Replays the allocations and frees the profiler records, in time order, and returns the
    highest running total. The profiler's C++ start/stop log lines are sent to /dev/null.
    Replaced by ``utils.costs.peak_memory_mib`` (the same figures, without importing torch's
    compiler); kept until the next retraining, since removing it would change this module's
    code fingerprint (``utils.code_fingerprint``) and retire the shipped models.
    """
    import os
    from torch.profiler import ProfilerActivity, profile

    saved_stderr = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU],
                                      profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)
        os.close(devnull)
    running = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return peak / 2 ** 20
