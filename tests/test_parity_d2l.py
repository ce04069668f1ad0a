"""Parity with the book's reference implementation (d2l 1.0.3, used only as an oracle)."""

import pytest
import torch

from d2l_oracle import load_d2l
from utils.masking import masked_softmax, sequence_mask


@pytest.fixture(scope="module")
def d2l():
    return load_d2l()


@pytest.mark.parametrize("seed", range(5))
def test_sequence_mask_matches_d2l(d2l, seed):
    g = torch.Generator().manual_seed(seed)
    batch, steps = 3 + seed, 6
    X = torch.randn(batch, steps, 2, generator=g)
    lens = torch.randint(0, steps + 1, (batch,), generator=g)
    expected = d2l.sequence_mask(X.clone(), lens, value=-7)   # d2l writes into its input
    torch.testing.assert_close(sequence_mask(X, lens, value=-7), expected, rtol=0, atol=0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("per_query", [False, True])
def test_masked_softmax_matches_d2l(d2l, seed, per_query):
    g = torch.Generator().manual_seed(seed)
    batch, queries, keys = 2 + seed, 3, 7
    X = torch.randn(batch, queries, keys, generator=g) * 4
    shape = (batch, queries) if per_query else (batch,)
    # Lengths >= 1: with length 0 the book returns uniform weights, we return zeros (see masking.py).
    lens = torch.randint(1, keys + 1, shape, generator=g)
    torch.testing.assert_close(masked_softmax(X, lens), d2l.masked_softmax(X, lens))


def test_masked_softmax_matches_d2l_without_lengths(d2l):
    X = torch.randn(2, 3, 5)
    torch.testing.assert_close(masked_softmax(X), d2l.masked_softmax(X, None))
