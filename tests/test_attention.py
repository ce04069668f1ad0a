"""Unit tests of utils.attention: soft addressing (lesson 1) and the scoring modules (lesson 3)."""

import math

import pytest
import torch

from utils.attention import (AdditiveAttention, AttentionScoring, BilinearAttention,
                             DotProductAttention, ScaledDotProductAttention, attention_entropy,
                             causal_valid_lens, dot_scores, scaled_dot_scores, soft_address,
                             softmax_jacobian_norm)


def _book_check_inputs():
    """The lesson's check: keys all ones, values 0..39 as ten rows of four, lengths [2, 6]."""
    keys = torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    return keys, values, torch.tensor([2, 6])


# Mean of the first 2 and first 6 value rows, written out by hand: rows are [4i, 4i+1, 4i+2, 4i+3].
BOOK_CHECK_OUTPUT = [[[2.0, 3.0, 4.0, 5.0]], [[10.0, 11.0, 12.0, 13.0]]]


# ----------------------------------------------------------------------------- lesson 1 functions

def test_scaled_dot_scores_divides_by_sqrt_d():
    q, k = torch.tensor([[[1.0, 2.0, 2.0, 0.0]]]), torch.tensor([[[2.0, 0.0, 1.0, 5.0]]])
    assert scaled_dot_scores(q, k).item() == pytest.approx(4.0 / 2.0)
    assert scaled_dot_scores(q, k, temperature=2.0).item() == pytest.approx(1.0)


def test_soft_address_unbatched_returns_weighted_values():
    keys = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    outputs, weights = soft_address(torch.tensor([[3.0, 1.0]]), keys, torch.tensor([[2.0], [4.0]]))
    assert weights.tolist() == [[0.5, 0.5]] and outputs.tolist() == [[3.0]]


# ----------------------------------------------------------------------------- helpers

def test_dot_scores_is_batched_matrix_product():
    q, k = torch.randn(3, 2, 5), torch.randn(3, 4, 5)
    expected = torch.einsum("bmd,bnd->bmn", q, k)
    torch.testing.assert_close(dot_scores(q, k), expected)


def test_causal_valid_lens_counts_up_per_query():
    assert causal_valid_lens(2, 3).tolist() == [[1, 2, 3], [1, 2, 3]]
    with pytest.raises(ValueError, match="must be >= 1"):
        causal_valid_lens(0, 3)


def test_attention_entropy_of_uniform_one_hot_and_masked_rows():
    w = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    h = attention_entropy(w)
    torch.testing.assert_close(h, torch.tensor([math.log(4), 0.0, math.log(2)]))
    assert not torch.signbit(h[1]), "a one-hot row must have entropy +0.0, not -0.0"


def test_softmax_jacobian_norm_matches_autograd():
    scores = torch.randn(6)
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores)
    norm = softmax_jacobian_norm(torch.softmax(scores, -1))
    torch.testing.assert_close(norm, jacobian.norm())
    assert softmax_jacobian_norm(torch.tensor([0.0, 1.0, 0.0])).item() == 0.0


# ----------------------------------------------------------------------------- the notes' checks

def test_additive_attention_book_check():
    torch.manual_seed(0)
    keys, values, lens = _book_check_inputs()
    attention = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1).eval()
    output = attention(torch.normal(0, 1, (2, 1, 20)), keys, values, lens)
    torch.testing.assert_close(output, torch.tensor(BOOK_CHECK_OUTPUT))
    weights = attention.attention_weights
    assert weights.shape == (2, 1, 10)
    torch.testing.assert_close(weights[0, 0, :2], torch.full((2,), 0.5))
    assert (weights[0, 0, 2:] == 0).all() and (weights[1, 0, 6:] == 0).all()


@pytest.mark.parametrize("make", [lambda: ScaledDotProductAttention(dropout=0.5),
                                  lambda: DotProductAttention(dropout=0.5),
                                  lambda: DotProductAttention(scaled=False),
                                  lambda: BilinearAttention(query_size=2, key_size=2)],
                         ids=["scaled", "dot-default", "dot-unscaled", "bilinear"])
def test_dot_family_book_check(make):
    torch.manual_seed(0)
    keys, values, lens = _book_check_inputs()
    attention = make().eval()
    output = attention(torch.normal(0, 1, (2, 1, 2)), keys, values, lens)
    torch.testing.assert_close(output, torch.tensor(BOOK_CHECK_OUTPUT))


# ----------------------------------------------------------------------------- scores by formula

def test_additive_score_formula():
    attention = AdditiveAttention(key_size=3, query_size=5, num_hiddens=4)
    q, k = torch.randn(2, 2, 5), torch.randn(2, 3, 3)
    scores = attention.score(q, k)
    b, i, j = 1, 1, 2                                   # one entry, computed by hand
    expected = attention.w_v.weight[0] @ torch.tanh(attention.W_q.weight @ q[b, i]
                                                    + attention.W_k.weight @ k[b, j])
    torch.testing.assert_close(scores[b, i, j], expected)


def test_scaled_and_unscaled_dot_scores_differ_by_sqrt_d():
    q, k = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
    torch.testing.assert_close(DotProductAttention(scaled=False).score(q, k),
                               ScaledDotProductAttention().score(q, k) * 4.0)


def test_bilinear_score_formula():
    attention = BilinearAttention(query_size=3, key_size=5)
    assert attention.W.weight.shape == (3, 5)
    q, k = torch.randn(2, 2, 3), torch.randn(2, 4, 5)
    W = attention.W.weight
    expected = torch.einsum("bmq,qk,bnk->bmn", q, W, k)
    torch.testing.assert_close(attention.score(q, k), expected)


def test_attention_weights_are_masked_softmax_of_scores_and_rows_sum_to_one():
    attention = ScaledDotProductAttention()
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    lens = torch.tensor([[1, 3, 5], [2, 2, 4]])
    out = attention(q, k, v, lens)
    w = attention.attention_weights
    assert out.shape == (2, 3, 6) and w.shape == (2, 3, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3))
    assert ((w > 0).sum(-1) == lens).all()
    torch.testing.assert_close(out, w @ v)


def test_dropout_acts_on_weights_in_training_only():
    torch.manual_seed(0)
    attention = ScaledDotProductAttention(dropout=0.5)
    q, k, v = torch.randn(1, 4, 8), torch.randn(1, 6, 8), torch.ones(1, 6, 1)
    train_out = attention(q, k, v)                     # rows of weights with some keys dropped
    assert not torch.allclose(train_out, torch.ones(1, 4, 1))
    attention.eval()
    torch.testing.assert_close(attention(q, k, v), torch.ones(1, 4, 1))


def test_gradients_reach_queries_keys_and_parameters():
    attention = AdditiveAttention(key_size=3, query_size=2, num_hiddens=4)
    q = torch.randn(2, 1, 2, requires_grad=True)
    k = torch.randn(2, 5, 3, requires_grad=True)
    attention(q, k, torch.randn(2, 5, 2), torch.tensor([3, 5])).sum().backward()
    assert q.grad.abs().sum() > 0 and k.grad[:, :3].abs().sum() > 0
    assert (k.grad[0, 3:] == 0).all(), "masked keys must get no gradient"
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


def test_base_class_needs_a_score():
    with pytest.raises(NotImplementedError):
        AttentionScoring()(torch.ones(1, 1, 2), torch.ones(1, 1, 2), torch.ones(1, 1, 2))


# ----------------------------------------------------------------------------- bad input

def test_dot_scoring_size_mismatch_names_the_fix():
    q, k, v = torch.randn(2, 1, 20), torch.ones(2, 10, 2), torch.ones(2, 10, 4)
    for attention in (ScaledDotProductAttention(), DotProductAttention(scaled=False)):
        with pytest.raises(ValueError, match=r"query size 20 and key size 2; use AdditiveAttention "
                                             r"or BilinearAttention\(query_size=20, key_size=2\)"):
            attention(q, k, v)


@pytest.mark.parametrize("make, message", [
    (lambda: AdditiveAttention(key_size=3, query_size=20, num_hiddens=4),
     r"expects key size 3, got 2; build it with key_size=2"),
    (lambda: AdditiveAttention(key_size=2, query_size=5, num_hiddens=4),
     r"expects query size 5, got 20; build it with query_size=20"),
    (lambda: BilinearAttention(query_size=2, key_size=2),
     r"query size 2 and key size 2, got 20 and 2; build it with query_size=20, key_size=2"),
])
def test_parametrised_scorings_reject_wrong_sizes(make, message):
    with pytest.raises(ValueError, match=message):
        make()(torch.randn(2, 1, 20), torch.ones(2, 10, 2), torch.ones(2, 10, 4))


@pytest.mark.parametrize("q, k, v, message", [
    (torch.randn(1, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 2), r"queries must be a 3-D tensor"),
    (torch.randn(2, 1, 4), torch.randn(3, 3, 4), torch.randn(3, 3, 2), r"batch sizes differ"),
    (torch.randn(2, 1, 4), torch.randn(2, 3, 4), torch.randn(2, 5, 2), r"3 keys but 5 values"),
])
def test_shape_errors_are_one_line_and_name_the_problem(q, k, v, message):
    with pytest.raises(ValueError, match=message) as info:
        ScaledDotProductAttention()(q, k, v)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("lens, message", [
    (torch.tensor([1, 2, 3]), r"valid_lens has shape \(3,\).*pass shape \(2,\)"),
    (torch.tensor([[1, 2]]), r"valid_lens has shape \(1, 2\).*or \(2, 3\)"),
    (torch.tensor([6, 1]), r"longer than the key axis \(5 keys"),
])
def test_mask_shapes_that_do_not_fit_are_refused(lens, message):
    with pytest.raises(ValueError, match=message):
        ScaledDotProductAttention()(torch.randn(2, 3, 4), torch.randn(2, 5, 4),
                                    torch.randn(2, 5, 2), lens)


def test_dropout_must_be_a_probability():
    with pytest.raises(ValueError, match=r"dropout is a probability in \[0, 1\), got 1.5"):
        ScaledDotProductAttention(dropout=1.5)
