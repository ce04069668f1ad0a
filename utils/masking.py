"""Masks for variable-length sequences: ``length_mask``, ``sequence_mask``, ``masked_softmax``
(and ``softmax_within_lengths``, its body for lengths already checked).

Valid lengths follow the book's convention:
- 1-D, shape ``(batch,)``: one length per sequence, shared by all its queries;
- 2-D, shape ``(batch, queries)``: one length per query (e.g. a causal mask).
Only the first ``valid_len`` keys of a row take part in the softmax; the rest get weight 0.
"""

import torch
from torch.nn import functional as F
from utils.i18n import _

# Scores of masked keys are replaced by this before the softmax; exp(-1e6) is exactly 0 in
# float32, so masked keys get no weight as long as one key per row is valid.
MASK_VALUE = -1e6


def _as_length_tensor(valid_lens, device) -> torch.Tensor:
    lens = torch.as_tensor(valid_lens, device=device)
    if lens.is_floating_point():
        if not torch.equal(lens, lens.round()):
            raise ValueError(_("valid lengths must be whole numbers, got {lens}").format(
                lens=lens.tolist()))
    elif lens.dtype == torch.bool or lens.is_complex():
        raise ValueError(_("valid lengths must be integers, got dtype {dtype}").format(
            dtype=lens.dtype))
    return lens.long()


def length_mask(lens: torch.Tensor, size: int) -> torch.Tensor:
    """Lengths (...) -> bool (..., size), True at the positions 0 .. length - 1 of each.

    Turns valid lengths into a mask for masked_softmax, the losses and the heads (lengths are
    checked by callers).
    """
    return torch.arange(size, device=lens.device) < lens[..., None]


def check_valid_lens(valid_lens, batch: int, queries: int, keys: int) -> torch.Tensor:
    """Validate ``valid_lens`` for scores of shape (batch, queries, keys).

    Returns the lengths as a long tensor of shape (batch, queries).
    """
    lens = _as_length_tensor(valid_lens, device=None)
    if lens.dim() == 1 and lens.shape[0] == batch:
        lens = lens[:, None].expand(batch, queries)          # (batch,) -> (batch, queries)
    elif not (lens.dim() == 2 and tuple(lens.shape) == (batch, queries)):
        raise ValueError(_("valid_lens has shape {lens_shape} but scores have shape ({batch}, "
                           "{queries}, {keys}); pass shape ({batch},) for one length per "
                           "sequence or ({batch}, {queries}) for one length per query").format(
            lens_shape=tuple(lens.shape), batch=batch, queries=queries, keys=keys))
    if (lens < 0).any():
        raise ValueError(_("valid_lens must be >= 0, got {lens} (scores have shape ({batch}, "
                           "{queries}, {keys}))").format(
            lens=lens.min().item(), batch=batch, queries=queries, keys=keys))
    if (lens > keys).any():
        raise ValueError(_("valid_lens {lens} is longer than the key axis ({keys} keys; scores "
                           "have shape ({batch}, {queries}, {keys})); lengths must lie in "
                           "0..{keys}").format(
            lens=lens.max().item(), keys=keys, batch=batch, queries=queries))
    return lens


def sequence_mask(X: torch.Tensor, valid_len, value: float = 0.0) -> torch.Tensor:
    """Replace the entries of ``X`` beyond each row's valid length by ``value``.

    X: (batch, steps, ...); valid_len: (batch,). Returns a new tensor (X is not modified).
    """
    if X.dim() < 2:
        raise ValueError(_("X must have shape (batch, steps, ...), got {X_shape}").format(
            X_shape=tuple(X.shape)))
    batch, steps = X.shape[0], X.shape[1]
    lens = _as_length_tensor(valid_len, X.device)
    if lens.dim() != 1 or lens.shape[0] != batch:
        raise ValueError(_("valid_len has shape {lens_shape} but X has shape {X_shape}; pass one "
                           "length per row, shape ({batch},)").format(
            lens_shape=tuple(lens.shape), X_shape=tuple(X.shape), batch=batch))
    if (lens < 0).any() or (lens > steps).any():
        raise ValueError(_("valid_len values {lens} must lie in 0..{steps} (X has {steps} steps "
                           "along dim 1)").format(lens=lens.tolist(), steps=steps))
    keep = length_mask(lens, steps)                                      # (batch, steps)
    keep = keep.reshape(batch, steps, *([1] * (X.dim() - 2)))
    return X.masked_fill(~keep, value)


def masked_softmax(X: torch.Tensor, valid_lens=None) -> torch.Tensor:
    """Softmax over the last axis of X (batch, queries, keys), ignoring keys past valid_lens.

    valid_lens: None, (batch,) or (batch, queries). A row with valid length 0 has no key to
    attend to and gets all-zero weights.
    """
    if X.dim() != 3:
        raise ValueError(_("scores must have shape (batch, queries, keys), got {X_shape}").format(
            X_shape=tuple(X.shape)))
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    batch, queries, keys = X.shape
    lens = check_valid_lens(valid_lens, batch, queries, keys).to(X.device)   # (batch, queries)
    return softmax_within_lengths(X, lens)


def softmax_within_lengths(X: torch.Tensor, lens) -> torch.Tensor:
    """``masked_softmax`` for lengths already checked: X (b, q, k), lens None or a long tensor
    (b, q) on X's device (as ``check_valid_lens`` returns). Callers that checked the lengths
    at their own entry point use it, so the lengths are checked once per call."""
    if lens is None:
        return F.softmax(X, dim=-1)
    keep = length_mask(lens, X.shape[-1])                                    # (b, q, k)
    weights = F.softmax(X.masked_fill(~keep, MASK_VALUE), dim=-1)
    return weights.masked_fill(~keep, 0.0)
