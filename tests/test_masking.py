"""Unit tests of utils.masking: sequence_mask and masked_softmax."""

import pytest
import torch

from utils.masking import masked_softmax, sequence_mask


def test_sequence_mask_replaces_entries_past_each_length_and_keeps_input():
    X = torch.arange(1.0, 7.0).reshape(2, 3)
    out = sequence_mask(X, torch.tensor([1, 2]))
    assert out.tolist() == [[1.0, 0.0, 0.0], [4.0, 5.0, 0.0]]
    assert X.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "input must not be modified"


def test_sequence_mask_on_3d_input_with_fill_value():
    X = torch.ones(2, 3, 4)
    out = sequence_mask(X, torch.tensor([1, 2]), value=-1)
    assert (out[0, 1:] == -1).all() and (out[0, :1] == 1).all()
    assert (out[1, 2:] == -1).all() and (out[1, :2] == 1).all()


@pytest.mark.parametrize("lens, message", [
    ([1, 2, 3], r"valid_len has shape \(3,\) but X has shape \(2, 3\)"),
    ([4, 1], r"must lie in 0\.\.3"),
    ([-1, 1], r"must lie in 0\.\.3"),
])
def test_sequence_mask_rejects_bad_lengths(lens, message):
    with pytest.raises(ValueError, match=message):
        sequence_mask(torch.ones(2, 3), torch.tensor(lens))


def test_masked_softmax_1d_lengths_zero_beyond_length_and_rows_sum_to_one():
    torch.manual_seed(0)
    X = torch.rand(2, 2, 4)
    W = masked_softmax(X, torch.tensor([2, 3]))
    assert (W[0, :, 2:] == 0).all() and (W[1, :, 3:] == 0).all()
    assert (W[0, :, :2] > 0).all() and (W[1, :, :3] > 0).all()
    torch.testing.assert_close(W.sum(-1), torch.ones(2, 2))
    # The kept part equals a plain softmax over the kept keys.
    torch.testing.assert_close(W[1, 0, :3], torch.softmax(X[1, 0, :3], dim=-1))


def test_masked_softmax_2d_lengths_apply_per_query():
    torch.manual_seed(0)
    X = torch.rand(2, 2, 4)
    W = masked_softmax(X, torch.tensor([[1, 3], [2, 4]]))
    nonzero = (W > 0).sum(-1)
    assert nonzero.tolist() == [[1, 3], [2, 4]]
    assert W[0, 0, 0] == 1.0


def test_masked_softmax_without_lengths_is_softmax():
    X = torch.randn(3, 2, 5)
    torch.testing.assert_close(masked_softmax(X), torch.softmax(X, dim=-1))


def test_masked_softmax_zero_length_gives_zero_weights_not_uniform():
    W = masked_softmax(torch.randn(2, 1, 3), torch.tensor([0, 3]))
    assert W[0].abs().sum() == 0
    torch.testing.assert_close(W[1].sum(), torch.tensor(1.0))


def test_masked_softmax_gradient_flows_only_to_kept_scores():
    X = torch.randn(1, 1, 4, requires_grad=True)
    (masked_softmax(X, torch.tensor([2]))[..., 0]).sum().backward()
    assert (X.grad[..., 2:] == 0).all() and (X.grad[..., :2] != 0).all()


@pytest.mark.parametrize("lens, message", [
    (torch.tensor([1, 2, 3]), r"valid_lens has shape \(3,\) but scores have shape \(2, 2, 4\)"),
    (torch.tensor([[1, 2, 3]]), r"valid_lens has shape \(1, 3\) but scores have shape \(2, 2, 4\)"),
    (torch.tensor([5, 1]), r"valid_lens 5 is longer than the key axis \(4 keys"),
    (torch.tensor([-1, 1]), r"valid_lens must be >= 0, got -1"),
    (torch.tensor([1.5, 2.0]), r"whole numbers"),
])
def test_masked_softmax_rejects_bad_lengths_naming_the_shapes(lens, message):
    with pytest.raises(ValueError, match=message):
        masked_softmax(torch.rand(2, 2, 4), lens)


def test_masked_softmax_rejects_non_3d_scores():
    with pytest.raises(ValueError, match=r"\(batch, queries, keys\), got \(2, 4\)"):
        masked_softmax(torch.rand(2, 4), torch.tensor([1, 2]))


def test_masked_softmax_accepts_float_lengths_as_in_the_book():
    W = masked_softmax(torch.rand(2, 2, 4), torch.tensor([2.0, 3.0]))
    assert (W[0, :, 2:] == 0).all()


def test_length_mask_marks_the_first_length_positions():
    from utils.masking import length_mask
    mask = length_mask(torch.tensor([0, 2, 4]), 4)                       # (3, 4)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [[False] * 4, [True, True, False, False], [True] * 4]
    per_query = length_mask(torch.tensor([[1, 3]]), 3)                    # (1, 2, 3)
    assert per_query.tolist() == [[[True, False, False], [True, True, True]]]
