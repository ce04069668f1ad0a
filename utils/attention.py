"""Attention as soft addressing: score every key against a query, softmax, average the values."""

import math

import torch

from utils.masking import masked_softmax


def scaled_dot_scores(queries: torch.Tensor, keys: torch.Tensor,
                      temperature: float = 1.0) -> torch.Tensor:
    """Scores q·k / (sqrt(d) · temperature).

    queries: (batch, m, d), keys: (batch, n, d) -> scores (batch, m, n).
    """
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"queries have size {queries.shape[-1]} but keys have size "
                         f"{keys.shape[-1]}; dot-product scores need equal sizes "
                         f"(project one side, or use additive attention)")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    d = queries.shape[-1]
    return queries @ keys.transpose(-2, -1) / (math.sqrt(d) * temperature)


def soft_address(queries, keys, values, temperature: float = 1.0, valid_lens=None):
    """Attention pooling with scaled dot-product scores.

    Accepts unbatched inputs — queries (m, d), keys (n, d), values (n, v) — or batched ones
    with a leading batch axis. Returns (outputs (…, m, v), weights (…, m, n)).
    """
    queries, keys, values = (torch.as_tensor(t, dtype=torch.float32)
                             for t in (queries, keys, values))
    unbatched = queries.dim() == 2
    if unbatched:
        queries, keys, values = queries[None], keys[None], values[None]
    if not (queries.dim() == keys.dim() == values.dim() == 3):
        raise ValueError(f"expected queries (m, d), keys (n, d), values (n, v) with an optional "
                         f"batch axis; got {tuple(queries.shape)}, {tuple(keys.shape)}, "
                         f"{tuple(values.shape)}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"{keys.shape[-2]} keys but {values.shape[-2]} values; "
                         f"every key needs exactly one value")
    weights = masked_softmax(scaled_dot_scores(queries, keys, temperature), valid_lens)
    outputs = weights @ values                                  # (batch, m, v)
    if unbatched:
        return outputs[0], weights[0]
    return outputs, weights
