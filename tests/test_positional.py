"""Unit tests of utils.positional: the sinusoid table, the shift matrix, the module, the errors."""

import math

import pytest
import torch

from utils.positional import (PositionalEncoding, binary_table, check_embeddings,
                              check_encoding_layer, check_num_positions, check_positions,
                              encode_positions, encoding_similarity, offset_similarity,
                              positional_encoding_table, relative_shift_matrix,
                              sinusoid_frequencies)


def test_table_entries_follow_the_formula_written_out_by_hand():
    P = positional_encoding_table(7, 6, dtype=torch.float64)
    assert P.shape == (7, 6)
    for i in range(7):
        for j in range(3):
            angle = i / 10000 ** (2 * j / 6)
            assert P[i, 2 * j].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert P[i, 2 * j + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_position_zero_is_alternating_zero_one_and_first_pair_has_unit_frequency():
    P = positional_encoding_table(3, 8)
    assert P[0].tolist() == [0.0, 1.0] * 4
    assert P[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-7)
    assert sinusoid_frequencies(8)[0].item() == 1.0
    assert sinusoid_frequencies(8, base=100)[1].item() == pytest.approx(100 ** -0.25)


def test_base_changes_the_slow_columns_only_not_the_first_pair():
    fast = positional_encoding_table(20, 8, base=10000)
    slow = positional_encoding_table(20, 8, base=10)
    torch.testing.assert_close(fast[:, :2], slow[:, :2])
    assert not torch.allclose(fast[:, 2:], slow[:, 2:])


def test_every_pair_lies_on_the_unit_circle_so_rows_have_norm_sqrt_half_dim():
    P = positional_encoding_table(50, 16, dtype=torch.float64)
    pairs = P.reshape(50, 8, 2)
    torch.testing.assert_close(pairs.pow(2).sum(-1), torch.ones(50, 8, dtype=torch.float64))
    torch.testing.assert_close(P.norm(dim=1), torch.full((50,), math.sqrt(8), dtype=torch.float64))


def test_encode_positions_handles_fractional_positions_and_agrees_with_the_table():
    P = positional_encoding_table(10, 4, dtype=torch.float64)
    torch.testing.assert_close(encode_positions(torch.arange(3, 7), 4, dtype=torch.float64), P[3:7])
    half = encode_positions([0.5], 2, dtype=torch.float64)
    torch.testing.assert_close(half, torch.tensor([[math.sin(0.5), math.cos(0.5)]],
                                                  dtype=torch.float64))


@pytest.mark.parametrize("delta", [1, 3, 17, -4, 2.5])
def test_shift_matrix_maps_every_row_to_the_row_delta_later(delta):
    positions = torch.arange(0, 40, dtype=torch.float64)
    P = encode_positions(positions, 12, dtype=torch.float64)                  # (40, 12)
    shifted = encode_positions(positions + delta, 12, dtype=torch.float64)    # (40, 12)
    M = relative_shift_matrix(delta, 12, dtype=torch.float64)
    torch.testing.assert_close(P @ M.T, shifted, atol=1e-12, rtol=0)


def test_shift_matrix_is_block_diagonal_rotation_independent_of_position():
    M = relative_shift_matrix(3, 8, dtype=torch.float64)
    block_mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert (M[~block_mask] == 0).all()
    torch.testing.assert_close(M @ M.T, torch.eye(8, dtype=torch.float64))     # orthogonal
    w0 = 1.0
    torch.testing.assert_close(M[:2, :2], torch.tensor([[math.cos(3 * w0), math.sin(3 * w0)],
                                                        [-math.sin(3 * w0), math.cos(3 * w0)]],
                                                       dtype=torch.float64))
    torch.testing.assert_close(relative_shift_matrix(0, 8, dtype=torch.float64),
                               torch.eye(8, dtype=torch.float64))
    # Shifting by a then by b equals shifting by a + b.
    torch.testing.assert_close(relative_shift_matrix(2, 8, dtype=torch.float64) @
                               relative_shift_matrix(5, 8, dtype=torch.float64),
                               relative_shift_matrix(7, 8, dtype=torch.float64))


def test_similarity_depends_only_on_the_offset():
    S = encoding_similarity(positional_encoding_table(30, 16, dtype=torch.float64))
    assert S.shape == (30, 30)
    for offset in (0, 1, 5, 12):
        diagonal = torch.diagonal(S, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    torch.testing.assert_close(S, S.T)
    assert S[0, 0].item() == pytest.approx(8.0)
    assert (S[0, 1:] < 8.0).all(), "a row is most similar to itself"


def test_offset_similarity_is_the_closed_form_of_every_diagonal():
    n, d = 25, 10
    S = encoding_similarity(positional_encoding_table(n, d, base=50, dtype=torch.float64))
    offsets = torch.arange(n)
    closed = offset_similarity(torch.arange(-(n - 1), n), d, base=50)               # (2n - 1,)
    toeplitz = closed[(offsets[None, :] - offsets[:, None]) + n - 1]                 # (n, n)
    torch.testing.assert_close(S, toeplitz)
    assert offset_similarity([0], d).item() == pytest.approx(d / 2)


def test_binary_table_counts_zero_to_seven():
    B = binary_table(8, 3)
    as_numbers = (B * torch.tensor([4.0, 2.0, 1.0])).sum(1)
    assert as_numbers.tolist() == list(range(8))
    # The last bit flips every step, the first every four: the rate halves per column.
    flips = (B[1:] != B[:-1]).sum(0)
    assert flips.tolist() == [1, 3, 7]


def test_module_adds_the_table_and_keeps_shape():
    pe = PositionalEncoding(16, dropout=0.0, max_len=50).eval()
    X = torch.randn(3, 20, 16)
    out = pe(X)
    assert out.shape == (3, 20, 16)
    torch.testing.assert_close(out - X, positional_encoding_table(20, 16).expand(3, 20, 16))
    assert pe.P.shape == (1, 50, 16)
    assert "P" not in pe.state_dict(), "the table is a constant, not a saved parameter"
    assert list(pe.parameters()) == []


def test_module_dropout_acts_in_training_only():
    pe = PositionalEncoding(8, dropout=0.5)
    X = torch.zeros(4, 10, 8)
    torch.manual_seed(0)
    train_out = pe.train()(X)
    assert (train_out == 0).float().mean() > 0.2
    torch.testing.assert_close(pe.eval()(X), pe.P[:, :10].expand(4, 10, 8))


def test_module_follows_the_input_dtype():
    pe = PositionalEncoding(4, max_len=5)
    assert pe(torch.zeros(1, 5, 4, dtype=torch.float64)).dtype == torch.float64


@pytest.mark.parametrize("make, message", [
    (lambda: positional_encoding_table(5, 7), r"positive even integer.*got 7; use e\.g\. 8"),
    (lambda: positional_encoding_table(5, 0), r"positive even integer"),
    (lambda: positional_encoding_table(0, 4), r"num_positions must be a positive integer"),
    (lambda: positional_encoding_table(5, 4, base=1), r"base must be a number > 1"),
    (lambda: encode_positions(torch.zeros(2, 2), 4), r"positions must be a 1-D"),
    (lambda: relative_shift_matrix(1, 5), r"positive even integer"),
    (lambda: offset_similarity(torch.zeros(2, 2), 4), r"offsets must be a 1-D"),
    (lambda: encoding_similarity(torch.zeros(3)), r"table must be a 2-D tensor"),
    (lambda: binary_table(9, 3), r"must lie in 1\.\.8 to fit in 3 bits"),
    (lambda: PositionalEncoding(33), r"positive even integer.*got 33"),
    (lambda: PositionalEncoding(8, dropout=1.0), r"dropout is a probability in \[0, 1\)"),
    (lambda: PositionalEncoding(8, max_len=0), r"max_len must be a positive integer"),
    (lambda: PositionalEncoding(8, max_len=10)(torch.zeros(1, 11, 8)),
     r"11 steps is longer than max_len=10; build PositionalEncoding\(\.\.\., max_len=11\)"),
    (lambda: PositionalEncoding(8)(torch.zeros(1, 5, 6)), r"X has 6 features but .*num_hiddens=8"),
    (lambda: PositionalEncoding(8)(torch.zeros(5, 8)), r"X must have shape \(batch, steps, 8\)"),
])
def test_bad_input_gives_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


# The lesson shows encode_positions, positional_encoding_table and PositionalEncoding with each
# check as one call; the checks live in the library and keep the one-line, fix-naming errors.
@pytest.mark.parametrize("call, message", [
    (lambda: check_positions([[0, 1]]), r"positions must be a 1-D sequence.*torch\.arange\(n\)"),
    (lambda: check_num_positions(0), r"num_positions must be a positive integer, got 0; pass"),
    (lambda: check_num_positions(2.0), r"num_positions must be a positive integer, got 2\.0"),
    (lambda: check_encoding_layer(7, 0.0, 10), r"positive even integer.*use e\.g\. 8"),
    (lambda: check_encoding_layer(8, 0.0, True),
     r"max_len must be a positive integer.*max_len=1000"),
    (lambda: check_encoding_layer(8, -0.1, 10), r"dropout is a probability in \[0, 1\).*dropout=0\.1"),
    (lambda: check_embeddings([1.0], 8, 10), r"X must have shape \(batch, steps, 8\), got list"),
    (lambda: check_embeddings(torch.zeros(1, 3, 6), 8, 10),
     r"build PositionalEncoding\(6, \.\.\.\)"),
    (lambda: check_embeddings(torch.zeros(1, 11, 8), 8, 10), r"max_len=11\) or more"),
])
def test_checks_give_one_line_errors_that_name_the_fix(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_checks_pass_good_input_through():
    positions = check_positions([0, 1.5, 3])
    assert positions.dtype == torch.float64 and positions.tolist() == [0.0, 1.5, 3.0]
    assert check_num_positions(5) == 5
    check_encoding_layer(8, 0.1, 10)
    check_embeddings(torch.zeros(2, 10, 8), 8, 10)                      # steps == max_len is fine
