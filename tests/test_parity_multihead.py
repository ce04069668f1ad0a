"""Parity of utils.multihead.MultiHeadAttention with d2l 1.0.3 (oracle), torch.nn.MultiheadAttention
and torch.nn.functional.scaled_dot_product_attention, with copied weights."""

import pytest
import torch
from torch.nn import functional as F

from d2l_oracle import load_d2l
from utils.multihead import (MultiHeadAttention, key_padding_mask, merge_heads, split_heads,
                             to_torch_multihead)


@pytest.fixture(scope="module")
def d2l():
    return load_d2l()


def _inputs(seed, batch=3, m=4, n=6, size=12, per_query=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, s, size, generator=g) for s in (m, n, n))
    # lengths >= 1: with length 0 the book gives uniform weights, we give zeros (masking.py)
    lens = torch.randint(1, n + 1, (batch, m) if per_query else (batch,), generator=g)
    return q, k, v, lens


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_query", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_d2l_multihead_with_copied_weights(d2l, seed, per_query, bias):
    q, k, v, lens = _inputs(seed, per_query=per_query)
    torch.manual_seed(seed)
    ours = MultiHeadAttention(12, 4, dropout=0.0, bias=bias).eval()
    book = d2l.MultiHeadAttention(12, 4, dropout=0.0, bias=bias).eval()
    book(q, k, v, lens)                                            # materialise the LazyLinears
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_o"):
            getattr(book, name).weight.copy_(getattr(ours, name).weight)
            if bias:
                getattr(book, name).bias.copy_(getattr(ours, name).bias)
    expected = book(q, k, v, lens)
    torch.testing.assert_close(ours(q, k, v, lens), expected)
    # the book keeps weights folded (batch·heads, m, n); ours are (batch, heads, m, n)
    torch.testing.assert_close(ours.attention_weights.reshape(-1, 4, 6),
                               book.attention.attention_weights)
    torch.testing.assert_close(ours(q, k, v, lens, need_weights=False), expected)


def test_reshaping_matches_d2l_transpose_helpers(d2l):
    book = d2l.MultiHeadAttention(12, 3, dropout=0.0)
    X = torch.randn(2, 5, 12)
    torch.testing.assert_close(split_heads(X, 3), book.transpose_qkv(X))
    folded = torch.randn(6, 5, 4)
    torch.testing.assert_close(merge_heads(folded, 3), book.transpose_output(folded))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("sizes", [(None, None), (7, 5)], ids=["equal-sizes", "kdim-vdim"])
def test_matches_torch_multihead_attention(seed, bias, sizes):
    key_size, value_size = sizes
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(4, 3, 10, generator=g)                              # (N, L, E) batch_first
    k = torch.randn(4, 6, key_size or 10, generator=g)                  # (N, S, kdim)
    v = torch.randn(4, 6, value_size or 10, generator=g)                # (N, S, vdim)
    lens = torch.randint(1, 7, (4,), generator=g)
    torch.manual_seed(seed)
    ours = MultiHeadAttention(10, 5, bias=bias, key_size=key_size, value_size=value_size).eval()
    theirs = to_torch_multihead(ours).eval()
    output, weights = theirs(q, k, v, key_padding_mask=key_padding_mask(lens, 6))
    torch.testing.assert_close(ours(q, k, v, lens), output)
    torch.testing.assert_close(ours.attention_weights.mean(dim=1), weights)   # head-averaged
    _, per_head = theirs(q, k, v, key_padding_mask=key_padding_mask(lens, 6),
                         average_attn_weights=False)
    torch.testing.assert_close(ours.attention_weights, per_head)


def test_torch_multihead_sequence_first_shapes_as_in_the_notes():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(10, 10)                        # batch_first=False
    q, k = torch.randn(3, 4, 10), torch.randn(6, 4, 10)                 # (L, N, E), (S, N, E)
    output, weights = theirs(q, k, k)
    assert output.shape == (3, 4, 10) and weights.shape == (4, 3, 6)


@pytest.mark.parametrize("per_query", [False, True])
def test_matches_sdpa_on_split_heads(per_query):
    q, k, v, lens = _inputs(7, per_query=per_query)
    torch.manual_seed(7)
    ours = MultiHeadAttention(12, 3).eval()
    h = 3
    Q, K, V = (split_heads(layer(x), h, fold=False) for layer, x in
               ((ours.W_q, q), (ours.W_k, k), (ours.W_v, v)))           # (b, h, ·, d)
    lens2 = lens if per_query else lens[:, None].expand(3, 4)
    mask = (torch.arange(6)[None, None, :] < lens2[..., None])[:, None]  # (b, 1, m, n)
    heads = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)      # (b, h, m, d)
    expected = ours.W_o(merge_heads(heads, h))
    torch.testing.assert_close(ours(q, k, v, lens), expected)


def test_to_torch_multihead_rejects_other_query_size():
    with pytest.raises(ValueError, match="query_size=7"):
        to_torch_multihead(MultiHeadAttention(10, 2, query_size=7))
