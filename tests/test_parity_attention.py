"""Parity of the lesson-3 scoring modules with d2l 1.0.3 (oracle) and PyTorch's fused attention."""

import pytest
import torch
from torch.nn import functional as F

from d2l_oracle import load_d2l
from utils.attention import AdditiveAttention, DotProductAttention, ScaledDotProductAttention
from utils.masking import check_valid_lens, masked_softmax


@pytest.fixture(scope="module")
def d2l():
    return load_d2l()


def _lengths(generator, shape, keys):
    # Lengths >= 1: with length 0 the book gives uniform weights, we give zeros (see masking.py).
    return torch.randint(1, keys + 1, shape, generator=generator)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_query", [False, True])
def test_masked_softmax_matches_d2l(d2l, seed, per_query):
    g = torch.Generator().manual_seed(100 + seed)
    X = torch.randn(3, 4, 6, generator=g) * 3                       # (batch, queries, keys)
    lens = _lengths(g, (3, 4) if per_query else (3,), 6)
    torch.testing.assert_close(masked_softmax(X, lens), d2l.masked_softmax(X.clone(), lens))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_query", [False, True])
def test_additive_attention_matches_d2l_with_copied_weights(d2l, seed, per_query):
    g = torch.Generator().manual_seed(seed)
    batch, m, n, q_size, k_size, v_size, hidden = 2, 3, 7, 5, 4, 6, 8
    queries = torch.randn(batch, m, q_size, generator=g)
    keys = torch.randn(batch, n, k_size, generator=g)
    values = torch.randn(batch, n, v_size, generator=g)
    lens = _lengths(g, (batch, m) if per_query else (batch,), n)

    ours = AdditiveAttention(k_size, q_size, hidden, dropout=0.0).eval()
    book = d2l.AdditiveAttention(hidden, dropout=0.0).eval()
    book(queries, keys, values, lens)                                  # materialise LazyLinear
    with torch.no_grad():
        for name in ("W_q", "W_k", "w_v"):
            getattr(book, name).weight.copy_(getattr(ours, name).weight)
    torch.testing.assert_close(ours(queries, keys, values, lens), book(queries, keys, values, lens))
    torch.testing.assert_close(ours.attention_weights, book.attention_weights)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("make", [ScaledDotProductAttention, DotProductAttention],
                         ids=["ScaledDotProductAttention", "DotProductAttention"])
def test_scaled_dot_product_matches_d2l_dot_product(d2l, seed, make):
    g = torch.Generator().manual_seed(10 + seed)
    queries, keys = torch.randn(4, 2, 8, generator=g), torch.randn(4, 5, 8, generator=g)
    values = torch.randn(4, 5, 3, generator=g)
    lens = _lengths(g, (4,), 5)
    ours, book = make(dropout=0.0).eval(), d2l.DotProductAttention(dropout=0.0).eval()
    torch.testing.assert_close(ours(queries, keys, values, lens), book(queries, keys, values, lens))
    torch.testing.assert_close(ours.attention_weights, book.attention_weights)


def _bool_mask(valid_lens, batch, queries, keys):
    """Boolean attn_mask (batch, queries, keys) for F.scaled_dot_product_attention: True = attend."""
    lens = check_valid_lens(valid_lens, batch, queries, keys)          # (batch, queries)
    return torch.arange(keys)[None, None, :] < lens[..., None]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mask", ["none", "per_sequence", "per_query", "causal"])
def test_scaled_dot_product_matches_torch_fused_attention(seed, mask):
    g = torch.Generator().manual_seed(20 + seed)
    batch, m, n, d, v = 3, 4, 4 if mask == "causal" else 6, 16, 5
    queries, keys = torch.randn(batch, m, d, generator=g), torch.randn(batch, n, d, generator=g)
    values = torch.randn(batch, n, v, generator=g)
    lens = {"none": None, "per_sequence": _lengths(g, (batch,), n),
            "per_query": _lengths(g, (batch, m), n),
            "causal": torch.arange(1, m + 1).repeat(batch, 1)}[mask]
    ours = ScaledDotProductAttention().eval()(queries, keys, values, lens)
    attn_mask = None if lens is None else _bool_mask(lens, batch, m, n)
    expected = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask)
    torch.testing.assert_close(ours, expected)
    if mask == "causal":
        causal = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        torch.testing.assert_close(ours, causal)
