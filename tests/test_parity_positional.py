"""Parity of utils.positional.PositionalEncoding with d2l 1.0.3 (oracle)."""

import pytest
import torch

from d2l_oracle import load_d2l
from utils.positional import PositionalEncoding


@pytest.fixture(scope="module")
def d2l():
    return load_d2l()


@pytest.mark.parametrize("num_hiddens, max_len", [(32, 60), (20, 1000), (2, 7)])
def test_table_matches_d2l(d2l, num_hiddens, max_len):
    ours = PositionalEncoding(num_hiddens, 0.0, max_len)
    book = d2l.PositionalEncoding(num_hiddens, 0.0, max_len)
    assert ours.P.shape == book.P.shape
    # The book computes the angles i / 10000**(2j/d) in float32; we compute them in float64.
    # A float32 angle near i is off by up to ~i * 6e-8 rad (~4e-6 at i = 60, ~6e-5 at i = 1000).
    atol = 5e-6 if max_len <= 60 else 2e-4
    torch.testing.assert_close(ours.P, book.P, atol=atol, rtol=0)


def test_forward_matches_d2l_in_eval_mode(d2l):
    torch.manual_seed(0)
    X = torch.randn(2, 60, 32)
    ours = PositionalEncoding(32, dropout=0.5).eval()
    book = d2l.PositionalEncoding(32, 0.5).eval()
    torch.testing.assert_close(ours(X), book(X), atol=5e-6, rtol=0)


def test_forward_matches_d2l_in_training_mode_with_the_same_dropout_draws(d2l):
    X = torch.randn(3, 10, 8)
    ours, book = PositionalEncoding(8, dropout=0.3).train(), d2l.PositionalEncoding(8, 0.3).train()
    torch.manual_seed(5)
    a = ours(X)
    torch.manual_seed(5)
    b = book(X)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert (a == 0).any(), "dropout should have zeroed something at p=0.3"


def test_our_table_is_closer_to_the_exact_values_than_the_float32_one(d2l):
    exact = torch.zeros(1000, 20, dtype=torch.float64)
    i = torch.arange(1000, dtype=torch.float64)[:, None]
    angles = i / 10000 ** (torch.arange(0, 20, 2, dtype=torch.float64) / 20)
    exact[:, 0::2], exact[:, 1::2] = torch.sin(angles), torch.cos(angles)
    ours_error = (PositionalEncoding(20).P[0].double() - exact).abs().max()
    book_error = (d2l.PositionalEncoding(20, 0.0).P[0].double() - exact).abs().max()
    assert ours_error < 1e-7 < book_error
