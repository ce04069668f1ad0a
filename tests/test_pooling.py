"""Unit tests of utils/pooling.py: data, average / Nadaraya–Watson / parametric pooling, LOO.

Expected numbers are worked out by hand in the comments (or are limits known from theory).
"""

import math

import numpy as np
import pytest
import torch

from d2l_oracle import load_d2l
from utils.pooling import (KERNELS, ParametricNadarayaWatson, average_pooling,
                           check_leave_one_out, check_query_rows, kernel_weights,
                           leave_one_out_curve, leave_one_out_error, leave_one_out_pairs,
                           make_regression_data, mean_squared_error, nadaraya_watson,
                           train_parametric, true_function, uncovered_queries)


@pytest.fixture(scope="module")
def data():
    return make_regression_data(n_train=50, seed=0)


# ----------------------------------------------------------------------------- data

def test_data_shapes_ranges_and_test_grid(data):
    assert data.x_train.shape == data.y_train.shape == (50,)
    assert torch.all(data.x_train[1:] >= data.x_train[:-1]), "training inputs must be sorted"
    assert data.x_train.min() >= 0 and data.x_train.max() < 5
    np.testing.assert_allclose(data.x_test.numpy(), np.linspace(0.0, 4.9, 50), atol=1e-6)


def test_truth_is_two_sine_plus_power():
    # f(1) = 2 sin 1 + 1 = 2.682941970; f(4) = 2 sin 4 + 4^0.8 = -1.513604990 + 3.031433133
    np.testing.assert_allclose(true_function(torch.tensor([1.0, 4.0])).numpy(),
                               [2.682941970, 1.517828143], rtol=1e-6)


def test_noise_has_standard_deviation_one_half():
    big = make_regression_data(n_train=20000, seed=1)
    residuals = big.y_train - true_function(big.x_train)
    assert abs(float(residuals.mean())) < 0.02
    assert 0.49 < float(residuals.std()) < 0.51


def test_data_is_reproducible_and_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = make_regression_data(seed=3)
    assert torch.equal(torch.rand(1), expected_next)
    assert torch.equal(first.y_train, make_regression_data(seed=3).y_train)
    assert not torch.equal(first.y_train, make_regression_data(seed=4).y_train)


@pytest.mark.parametrize("n_train", [0, 1, 2.5, True])
def test_data_rejects_bad_sizes(n_train):
    with pytest.raises(ValueError, match="n_train must be an int >= 2"):
        make_regression_data(n_train=n_train)


# ----------------------------------------------------------------------------- bmm, averages

def test_bmm_example_shapes_and_values():
    assert torch.bmm(torch.ones(2, 1, 4), torch.ones(2, 4, 6)).shape == (2, 1, 6)
    weights = torch.ones(2, 10) * 0.1
    values = torch.arange(20.0).reshape(2, 10)
    out = torch.bmm(weights.unsqueeze(1), values.unsqueeze(-1))
    np.testing.assert_allclose(out.numpy(), [[[4.5]], [[14.5]]], rtol=1e-6)  # means of 0..9, 10..19


def test_parametric_model_with_w_zero_is_the_bmm_average():
    # w = 0: every score is 0, the weights are uniform 1/10, the outputs the row means.
    model = ParametricNadarayaWatson(w_init=0.0)
    keys = torch.rand(2, 10)
    with torch.no_grad():
        out = model(torch.tensor([0.3, 0.7]), keys, torch.arange(20.0).reshape(2, 10))
    np.testing.assert_allclose(out.numpy(), [4.5, 14.5], rtol=1e-6)
    np.testing.assert_allclose(model.attention_weights.numpy(), np.full((2, 10), 0.1), rtol=1e-6)


def test_bmm_parity_with_d2l_batch_matmul():
    # d2l 1.0.3 has no Nadaraya–Watson code in its library (the book computes it inline);
    # its batch_matmul is the one counterpart.
    d2l = load_d2l()
    weights = torch.ones(2, 10) * 0.1
    values = torch.arange(20.0).reshape(2, 10)
    theirs = d2l.batch_matmul(weights.unsqueeze(1), values.unsqueeze(-1)).reshape(-1)
    model = ParametricNadarayaWatson(w_init=0.0)
    with torch.no_grad():
        ours = model(torch.zeros(2), torch.zeros(2, 10), values)
    torch.testing.assert_close(ours, theirs)


def test_average_pooling_is_the_mean_with_uniform_weights():
    predictions, weights = average_pooling(torch.tensor([1.0, 2.0, 3.0, 6.0]), n_queries=3)
    np.testing.assert_allclose(predictions.numpy(), [3.0, 3.0, 3.0])   # (1+2+3+6)/4
    np.testing.assert_allclose(weights.numpy(), np.full((3, 4), 0.25))


# ----------------------------------------------------------------------------- Nadaraya–Watson

def test_gaussian_two_keys_by_hand():
    # keys 0, 1; values 0, 10; query 0 scores 0 and -1/2 -> weight of key 1 is p below
    p = math.exp(-0.5) / (1 + math.exp(-0.5))
    predictions, weights = nadaraya_watson(torch.tensor([0.0, 0.5]), torch.tensor([0.0, 1.0]),
                                           torch.tensor([0.0, 10.0]))
    np.testing.assert_allclose(weights.numpy(), [[1 - p, p], [0.5, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(predictions.numpy(), [10 * p, 5.0], rtol=1e-6)


def test_gaussian_matches_softmax_of_minus_half_squared_distance(data):
    scores = -(data.x_test[:, None] - data.x_train[None, :]) ** 2 / 2
    _, weights = nadaraya_watson(data.x_test, data.x_train, data.y_train, sigma=1.0)
    torch.testing.assert_close(weights, torch.softmax(scores, dim=1))


def test_wide_gaussian_approaches_the_mean(data):
    predictions, _ = nadaraya_watson(data.x_test, data.x_train, data.y_train, sigma=1e4)
    np.testing.assert_allclose(predictions.numpy(), float(data.y_train.mean()), atol=1e-4)


def test_narrow_gaussian_reproduces_training_targets(data):
    # the closest two training inputs are about 0.007 apart, 7 widths of sigma = 1e-3
    predictions, _ = nadaraya_watson(data.x_train, data.x_train, data.y_train, sigma=1e-3)
    np.testing.assert_allclose(predictions.numpy(), data.y_train.numpy(), atol=1e-5)


def test_narrow_gaussian_does_not_underflow_far_from_the_keys():
    # exp(-(1/0.01)^2 / 2) is 0 in float32 for both keys; the softmax still picks the nearer one
    _, weights = nadaraya_watson(torch.tensor([10.0]), torch.tensor([8.0, 9.0]),
                                 torch.tensor([1.0, 2.0]), sigma=0.01)
    np.testing.assert_allclose(weights.numpy(), [[0.0, 1.0]], atol=1e-7)


def test_other_kernels_by_hand():
    keys3 = torch.tensor([0.0, 1.0, 2.0])
    # boxcar, sigma 1: keys within distance 1 of the query 0.5 are 0 and 1 (distance 0.5 each)
    np.testing.assert_allclose(
        kernel_weights(torch.tensor([0.5]), keys3, 1.0, "boxcar").numpy(), [[0.5, 0.5, 0.0]])
    # Epanechnikov, sigma 1.5: u = -2/3, 0, 2/3 -> K = 5/9, 1, 5/9 -> 5/19, 9/19, 5/19
    np.testing.assert_allclose(
        kernel_weights(torch.tensor([1.0]), keys3, 1.5, "epanechnikov").numpy(),
        [[5 / 19, 9 / 19, 5 / 19]], rtol=1e-6)
    # Laplace, sigma 1: K = 1, e^-1, e^-2 for the query 0
    k = np.exp([0.0, -1.0, -2.0])
    np.testing.assert_allclose(
        kernel_weights(torch.tensor([0.0]), keys3, 1.0, "laplace").numpy(), [k / k.sum()],
        rtol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_rows_are_probabilities_for_every_kernel(kernel, data):
    weights = kernel_weights(data.x_test, data.x_train, 0.05, kernel)
    assert torch.isfinite(weights).all()
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(dim=1).numpy(), np.ones(50), rtol=1e-5)


@pytest.mark.parametrize("kernel", ["boxcar", "epanechnikov"])
def test_compact_kernel_falls_back_to_the_nearest_key(kernel):
    x_query, keys = torch.tensor([0.2, 5.0]), torch.tensor([0.0, 1.0, 4.0])
    predictions, weights = nadaraya_watson(x_query, keys, torch.tensor([1.0, 2.0, 3.0]), 0.5, kernel)
    # query 0.2 has key 0 inside its reach; query 5.0 has none: nearest key 4 (value 3)
    assert uncovered_queries(x_query, keys, 0.5, kernel).tolist() == [False, True]
    np.testing.assert_allclose(weights[1].numpy(), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(predictions.numpy(), [1.0, 3.0])


def test_gaussian_never_leaves_a_query_uncovered():
    assert not uncovered_queries(torch.tensor([100.0]), torch.tensor([0.0]), 0.01).any()


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_rejects_bad_widths(sigma):
    with pytest.raises(ValueError, match=r"kernel width sigma must be a positive finite number.*sigma=1\.0"):
        nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(3), sigma=sigma)


def test_rejects_unknown_kernels_and_mismatched_lengths():
    with pytest.raises(ValueError, match="unknown kernel 'cosine'; choose one of gaussian, boxcar"):
        kernel_weights(torch.zeros(2), torch.zeros(3), 1.0, "cosine")
    with pytest.raises(ValueError, match="x_keys has 3 entries but y_values has 4; pass one target"):
        nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match=r"x_query must be a non-empty 1-D tensor.*reshape\(-1\)"):
        nadaraya_watson(torch.zeros(2, 2), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="predictions have shape"):
        mean_squared_error(torch.zeros(3), torch.zeros(4))


# ----------------------------------------------------------------------------- leave-one-out

def test_leave_one_out_pairs_drop_the_diagonal():
    keys, values = leave_one_out_pairs(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 5.0, 6.0]))
    assert keys.tolist() == [[2.0, 3.0], [1.0, 3.0], [1.0, 2.0]]
    assert values.tolist() == [[5.0, 6.0], [4.0, 6.0], [4.0, 5.0]]
    with pytest.raises(ValueError, match="one target per training input"):
        leave_one_out_pairs(torch.zeros(3), torch.zeros(2))


def test_leave_one_out_error_by_hand():
    x, y = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 3.0, 0.0])
    # huge sigma: each target is predicted by the mean of the other two: 1.5, 0, 1.5
    # -> squared errors 2.25, 9, 2.25 -> mean 4.5
    assert leave_one_out_error(x, y, 1e4) == pytest.approx(4.5, abs=1e-3)
    # tiny sigma: nearest other point(s): 3, 0 (tie of 0 and 0), 3 -> errors 9, 9, 9
    assert leave_one_out_error(x, y, 0.01) == pytest.approx(9.0, abs=1e-4)
    # compact kernel, sigma too small to reach any neighbour: same nearest-point answer
    assert leave_one_out_error(x, y, 0.5, "boxcar") == pytest.approx(9.0, abs=1e-6)


def test_leave_one_out_curve_has_its_minimum_at_a_moderate_width(data):
    sigmas = torch.logspace(-2, 1, 31)
    curve = leave_one_out_curve(data.x_train, data.y_train, sigmas)
    best = float(sigmas[curve.argmin()])
    assert 0.1 <= best <= 1.0, f"LOO minimum at sigma={best}"
    assert curve[0] > curve.min() * 1.3 and curve[-1] > curve.min() * 2   # both ends are worse
    for k in (0, 15, 30):
        assert float(curve[k]) == pytest.approx(
            leave_one_out_error(data.x_train, data.y_train, float(sigmas[k])), rel=1e-5)


def test_leave_one_out_minimum_beats_the_extremes_on_test_data(data):
    def test_mse(sigma):
        return mean_squared_error(
            nadaraya_watson(data.x_test, data.x_train, data.y_train, sigma)[0], data.y_truth)
    sigmas = torch.logspace(-2, 1, 31)
    best = float(sigmas[leave_one_out_curve(data.x_train, data.y_train, sigmas).argmin()])
    assert test_mse(best) < 0.5 * min(test_mse(0.01), test_mse(10.0))


# ----------------------------------------------------------------------------- parametric

def test_parametric_with_w_one_equals_gaussian_sigma_one(data):
    model = ParametricNadarayaWatson(w_init=1.0)
    keys = data.x_train.repeat(50, 1)
    values = data.y_train.repeat(50, 1)
    with torch.no_grad():
        ours = model(data.x_test, keys, values)
    expected, _ = nadaraya_watson(data.x_test, data.x_train, data.y_train, sigma=1.0)
    torch.testing.assert_close(ours, expected)
    assert ParametricNadarayaWatson(w_init=-4.0).sigma == pytest.approx(0.25)


def test_training_decreases_the_loss_and_narrows_the_kernel(data):
    seen = []
    model, losses = train_parametric(data.x_train, data.y_train, epochs=5, lr=0.5, seed=0,
                                     on_epoch=lambda epoch, loss: seen.append((epoch, loss)))
    assert len(losses) == 5 and [e for e, _ in seen] == [1, 2, 3, 4, 5]
    assert all(b < a for a, b in zip(losses, losses[1:])), f"losses {losses}"
    assert losses[-1] < 0.5 * losses[0]
    # w starts in [0, 1) and grows past 5: a kernel narrower than 0.2
    assert model.w.item() > 5 and model.sigma < 0.2


def test_parametric_rejects_bad_input():
    model = ParametricNadarayaWatson(w_init=1.0)
    with pytest.raises(ValueError, match="repeat the keys once per query"):
        model(torch.zeros(3), torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match="epochs must be a positive int"):
        train_parametric(torch.zeros(3), torch.zeros(3), epochs=0)
    with pytest.raises(ValueError, match="lr must be > 0"):
        train_parametric(torch.zeros(3), torch.zeros(3), lr=0.0)


@pytest.mark.parametrize("call, message", [
    (lambda: check_query_rows(torch.zeros(3), torch.zeros(3, 4), torch.zeros(3, 5)),
     r"need queries \(m,\), keys \(m, n\), values \(m, n\); got \(3,\), \(3, 4\), \(3, 5\)"),
    (lambda: check_query_rows(torch.zeros(2), torch.zeros(3, 4), torch.zeros(3, 4)),
     "repeat the keys once per query"),
    (lambda: check_leave_one_out(torch.zeros(1), torch.zeros(1)), r"n >= 2, got \(1,\)"),
    (lambda: check_leave_one_out(torch.zeros(2, 2), torch.zeros(2, 2)), "must both have shape"),
])
def test_checks_the_lesson_cells_call_give_one_line_errors(call, message):
    # The lesson shows ParametricNadarayaWatson and leave_one_out_pairs with their shape checks
    # as one call each; the checks themselves live here.
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
    check_query_rows(torch.zeros(3), torch.zeros(3, 4), torch.zeros(3, 4))    # good shapes pass
    check_leave_one_out(torch.zeros(2), torch.ones(2))
