"""Sinusoidal positional encoding (lesson 6) and the helpers the lesson and its widget draw.

Row ``i`` of the table, column pair ``(2j, 2j+1)``, holds
``sin(i * w_j)`` and ``cos(i * w_j)`` with frequency ``w_j = 1 / base**(2j / d)``.

- ``sinusoid_frequencies(dim, base)``             -> (dim/2,)  the frequencies w_j
- ``encode_positions(positions, dim, base)``      -> (n, dim)  encodings of any positions
- ``positional_encoding_table(num_positions, dim, base)`` -> (num_positions, dim), rows 0..n-1
- ``relative_shift_matrix(delta, dim, base)``     -> (dim, dim) M with PE(i + delta) = M @ PE(i)
- ``encoding_similarity(table)``                  -> (n, n)  dot products PE(i) . PE(j)
- ``offset_similarity(offsets, dim, base)``       -> (k,)    the same dot products from i - j alone
- ``binary_table(num_positions, bits)``           -> (num_positions, bits) the binary analogy
- ``PositionalEncoding(num_hiddens, dropout, max_len, base)``: nn.Module, X + P[:, :n] then dropout.

Argument checks live in ``check_*`` functions (one-line ValueErrors that name the fix), so the
functions above read as the mathematics: ``check_encoding_dim``, ``check_base``,
``check_positions``, ``check_num_positions``, ``check_encoding_layer``, ``check_embeddings``.

Angles are computed in float64 (``i * w_j`` reaches ~1000 rad, where float32 loses ~1e-4) and
the results are returned in ``dtype`` (float32 unless asked otherwise).
"""

import torch
from torch import nn

from utils.i18n import _
from utils.validation import check_dropout

DEFAULT_BASE = 10000.0


def check_encoding_dim(dim) -> int:
    """Return ``dim`` as an int, or raise a one-line ValueError unless it is a positive even int."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 2:
        raise ValueError(_("encoding dimension must be a positive even integer (one sin and "
                           "one cos column per frequency), got {dim!r}; use e.g. "
                           "{hint}").format(dim=dim, hint=_even_hint(dim)))
    return dim


def _even_hint(dim) -> int:
    try:
        return max(2, int(dim) + int(dim) % 2)
    except (TypeError, ValueError):
        return 32


def check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(_("base must be a number > 1 (the wavelengths grow as base**(2j/d)), "
                           "got {base!r}; the usual value is 10000").format(base=base))
    return float(base)


def check_positions(positions) -> torch.Tensor:
    """Return ``positions`` as a float64 tensor of shape (n,), or raise unless it is 1-D."""
    positions = torch.as_tensor(positions, dtype=torch.float64)
    if positions.dim() != 1:
        raise ValueError(_("positions must be a 1-D sequence, got shape {positions_shape}; "
                           "flatten it or pass torch.arange(n)").format(
            positions_shape=tuple(positions.shape)))
    return positions


def check_num_positions(num_positions) -> int:
    """Return ``num_positions``, or raise unless it is a positive int."""
    if isinstance(num_positions, bool) or not isinstance(num_positions, int) or num_positions < 1:
        raise ValueError(_("num_positions must be a positive integer, got {num_positions!r}; "
                           "pass e.g. num_positions=60").format(num_positions=num_positions))
    return num_positions


def check_encoding_layer(num_hiddens, dropout, max_len) -> None:
    """The arguments of ``PositionalEncoding``: even width, dropout in [0, 1), max_len >= 1."""
    check_encoding_dim(num_hiddens)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(_("max_len must be a positive integer, got {max_len!r}; pass at least "
                           "the longest sequence length, e.g. max_len=1000").format(
            max_len=max_len))
    check_dropout(dropout)


def check_embeddings(X, num_hiddens: int, max_len: int) -> None:
    """Raise unless X is (batch, steps, num_hiddens) with steps <= max_len."""
    if not isinstance(X, torch.Tensor) or X.dim() != 3:
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(_("X must have shape (batch, steps, {num_hiddens}), got {shape}; add a "
                           "batch axis with X[None]").format(num_hiddens=num_hiddens, shape=shape))
    steps, dim = X.shape[1], X.shape[2]
    if dim != num_hiddens:
        raise ValueError(_("X has {dim} features but the encoding has num_hiddens={num_hiddens}; "
                           "build PositionalEncoding({dim}, ...)").format(
            dim=dim, num_hiddens=num_hiddens))
    if steps > max_len:
        raise ValueError(_("sequence of {steps} steps is longer than max_len={max_len}; build "
                           "PositionalEncoding(..., max_len={steps}) or more").format(
            steps=steps, max_len=max_len))


def sinusoid_frequencies(dim: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """Frequencies w_j = 1 / base**(2j / dim) for j = 0 .. dim/2 - 1, float64, shape (dim/2,)."""
    dim, base = check_encoding_dim(dim), check_base(base)
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim      # (dim/2,)  2j/d
    return base ** -exponents


def encode_positions(positions, dim: int, base: float = DEFAULT_BASE,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Sinusoidal encodings of arbitrary (possibly non-integer) positions.

    positions: (n,) -> (n, dim); even columns sin(i * w_j), odd columns cos(i * w_j).
    """
    positions = check_positions(positions)                                    # (n,) float64
    angles = positions[:, None] * sinusoid_frequencies(dim, base)[None, :]   # (n, dim/2)
    table = torch.empty(positions.shape[0], dim, dtype=torch.float64)        # (n, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.to(dtype)


def positional_encoding_table(num_positions: int, dim: int, base: float = DEFAULT_BASE,
                              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The table P for positions 0 .. num_positions - 1, shape (num_positions, dim)."""
    positions = torch.arange(check_num_positions(num_positions))          # 0, 1, ..., n - 1
    return encode_positions(positions, dim, base, dtype)


def relative_shift_matrix(delta: float, dim: int, base: float = DEFAULT_BASE,
                          dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (dim, dim) matrix M with PE(i + delta) = M @ PE(i) for every position i.

    Block-diagonal: block j is the 2x2 rotation [[cos(delta w_j), sin(delta w_j)],
    [-sin(delta w_j), cos(delta w_j)]]; it depends on delta, never on i.
    """
    angles = float(delta) * sinusoid_frequencies(dim, base)          # (dim/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    matrix = torch.zeros(dim, dim, dtype=torch.float64)               # (dim, dim)
    even = torch.arange(0, dim, 2)
    matrix[even, even] = cos
    matrix[even, even + 1] = sin
    matrix[even + 1, even] = -sin
    matrix[even + 1, even + 1] = cos
    return matrix.to(dtype)


def encoding_similarity(table: torch.Tensor) -> torch.Tensor:
    """Dot products between all rows: (n, dim) -> (n, n); entry (i, j) = sum_j cos(w_j (i - j))."""
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        raise ValueError(_("table must be a 2-D tensor (positions, dim), e.g. from "
                           "positional_encoding_table(n, d)"))
    return table @ table.T


def offset_similarity(offsets, dim: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """PE(i) . PE(i + delta) in closed form, sum_j cos(delta * w_j): (k,) offsets -> (k,) float64.

    The same for every i, so ``encoding_similarity(table)[i, j] == offset_similarity(j - i)``.
    """
    offsets = torch.as_tensor(offsets, dtype=torch.float64)
    if offsets.dim() != 1:
        raise ValueError(_("offsets must be a 1-D sequence, got shape {offsets_shape}").format(
            offsets_shape=tuple(offsets.shape)))
    return torch.cos(offsets[:, None] * sinusoid_frequencies(dim, base)[None, :]).sum(1)


def binary_table(num_positions: int, bits: int) -> torch.Tensor:
    """Binary digits of 0 .. num_positions - 1, least significant bit last: (num_positions, bits)."""
    if not isinstance(bits, int) or bits < 1:
        raise ValueError(_("bits must be a positive integer, got {bits!r}").format(bits=bits))
    if not isinstance(num_positions, int) or not 1 <= num_positions <= 2 ** bits:
        raise ValueError(_("num_positions must lie in 1..{most} to fit in {bits} bits, got "
                           "{num_positions!r}; use more bits").format(
            most=2 ** bits, bits=bits, num_positions=num_positions))
    numbers = torch.arange(num_positions)[:, None]                    # (n, 1)
    weights = 2 ** torch.arange(bits - 1, -1, -1)[None, :]            # (1, bits)
    return ((numbers // weights) % 2).to(torch.float32)


class PositionalEncoding(nn.Module):
    """Add the sinusoidal table to a batch of embeddings, then apply dropout.

    forward(X): X (batch, n, num_hiddens) -> (batch, n, num_hiddens), needs n <= max_len.
    The table is kept as ``P`` with shape (1, max_len, num_hiddens), as in the book.
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, max_len: int = 1000,
                 base: float = DEFAULT_BASE):
        super().__init__()
        check_encoding_layer(num_hiddens, dropout, max_len)
        self.num_hiddens, self.max_len, self.base = num_hiddens, max_len, float(base)
        self.dropout = nn.Dropout(float(dropout))
        table = positional_encoding_table(max_len, num_hiddens, base)          # (max_len, d)
        self.register_buffer("P", table[None], persistent=False)               # (1, max_len, d)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        check_embeddings(X, self.num_hiddens, self.max_len)                    # (batch, n, d)
        X = X + self.P[:, :X.shape[1], :].to(X.dtype)                           # first n rows of P
        return self.dropout(X)

    def extra_repr(self) -> str:
        return f"num_hiddens={self.num_hiddens}, max_len={self.max_len}, base={self.base:g}"
