"""Attention pooling as kernel regression (Nadaraya–Watson): average, non-parametric, parametric.

The toy problem of lesson 2: noisy samples of ``f(x) = 2 sin(x) + x^0.8`` on [0, 5).
Queries are test inputs, keys are training inputs, values are training targets; the
prediction at a query is the attention-weighted average of the values.

Kernels (``u = (x_query - x_key) / sigma``; constants cancel in the normalisation):

- ``gaussian``      exp(-u^2 / 2)            (sigma = standard deviation)
- ``boxcar``        1 if |u| <= 1 else 0     (sigma = half-width)
- ``epanechnikov``  max(0, 1 - u^2)          (sigma = half-width)
- ``laplace``       exp(-|u|)                (sigma = scale)

Boxcar and Epanechnikov have compact support: a query with no key within ``sigma`` would get
zero total weight. Such a query falls back to its nearest key (the limit sigma -> 0 of every
kernel); :func:`uncovered_queries` tells which queries did.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import nn

from utils.i18n import _
from utils.optimizers import sgd_step
from utils.validation import check_positive_int

KERNELS = ("gaussian", "boxcar", "epanechnikov", "laplace")
X_LOW, X_HIGH = 0.0, 5.0          # training inputs are uniform in [X_LOW, X_HIGH)
TEST_STEP = 0.1                   # test inputs 0, 0.1, ..., 4.9


# ----------------------------------------------------------------------------- checks

def _check_sigma(sigma) -> float:
    sigma = float(sigma)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(_("kernel width sigma must be a positive finite number, got {sigma}; "
                           "pass e.g. sigma=1.0").format(sigma=sigma))
    return sigma


def _check_kernel(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(_("unknown kernel {kernel!r}; choose one of {choices}").format(
            kernel=kernel, choices=', '.join(KERNELS)))
    return kernel


def _as_vector(x, name: str) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=torch.float32)
    if x.dim() != 1 or x.numel() == 0:
        raise ValueError(_("{name} must be a non-empty 1-D tensor of inputs, got shape "
                           "{x_shape}; flatten it with .reshape(-1)").format(
            name=name, x_shape=tuple(x.shape)))
    return x


def _check_pairs(x_keys, y_values) -> tuple[torch.Tensor, torch.Tensor]:
    x_keys, y_values = _as_vector(x_keys, "x_keys"), _as_vector(y_values, "y_values")
    if x_keys.numel() != y_values.numel():
        raise ValueError(_("x_keys has {num_keys} entries but y_values has {num_values}; "
                           "pass one target per training input").format(
            num_keys=x_keys.numel(), num_values=y_values.numel()))
    return x_keys, y_values


def check_leave_one_out(x, y) -> None:
    """Raise a one-line ValueError unless x and y are both (n,) with n >= 2."""
    if x.dim() != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(_("x and y must both have shape (n,) with n >= 2, got {x_shape} and "
                           "{y_shape}; pass one target per training input").format(
            x_shape=tuple(x.shape), y_shape=tuple(y.shape)))


def check_query_rows(queries, keys, values) -> None:
    """Raise a one-line ValueError unless queries are (m,) and keys, values are both (m, n)."""
    if keys.shape != values.shape or keys.dim() != 2 or keys.shape[0] != queries.shape[0]:
        raise ValueError(_("need queries (m,), keys (m, n), values (m, n); got {queries_shape}, "
                           "{keys_shape}, {values_shape}: repeat the keys once per query").format(
            queries_shape=tuple(queries.shape), keys_shape=tuple(keys.shape),
            values_shape=tuple(values.shape)))


# ----------------------------------------------------------------------------- data

def true_function(x: torch.Tensor) -> torch.Tensor:
    """The noiseless truth f(x) = 2 sin(x) + x^0.8 (elementwise, x >= 0)."""
    return 2 * torch.sin(x) + x ** 0.8


@dataclasses.dataclass
class RegressionData:
    """Training pairs (sorted by input) and test inputs with the noiseless truth."""
    x_train: torch.Tensor   # (n,)  sorted, uniform in [0, 5)
    y_train: torch.Tensor   # (n,)  f(x_train) + noise
    x_test: torch.Tensor    # (m,)  0, 0.1, ..., 4.9
    y_truth: torch.Tensor   # (m,)  f(x_test), no noise


def make_regression_data(n_train: int = 50, seed: int = 0, noise_std: float = 0.5) -> RegressionData:
    """The lesson's data set, drawn from a generator of its own (the global seed is untouched)."""
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 2:
        raise ValueError(_("n_train must be an int >= 2 (leave-one-out needs two points), got "
                           "{n_train!r}").format(n_train=n_train))
    if not noise_std >= 0:
        raise ValueError(_("noise_std must be >= 0, got {noise_std}; pass e.g. "
                           "noise_std=0.5").format(noise_std=noise_std))
    generator = torch.Generator().manual_seed(seed)
    x_train, _order = torch.sort(torch.rand(n_train, generator=generator) * (X_HIGH - X_LOW) + X_LOW)
    noise = torch.randn(n_train, generator=generator) * noise_std          # (n,)
    x_test = torch.arange(X_LOW, X_HIGH, TEST_STEP)                        # (50,)
    return RegressionData(x_train, true_function(x_train) + noise, x_test, true_function(x_test))


def mean_squared_error(predictions, targets) -> float:
    """Mean of (prediction - target)^2 over all entries."""
    predictions, targets = torch.as_tensor(predictions), torch.as_tensor(targets)
    if predictions.shape != targets.shape:
        raise ValueError(_("predictions have shape {predictions_shape} but targets "
                           "{targets_shape}; pass one prediction per target").format(
            predictions_shape=tuple(predictions.shape), targets_shape=tuple(targets.shape)))
    return float(((predictions - targets) ** 2).mean())


# ----------------------------------------------------------------------------- pooling

def average_pooling(y_values, n_queries: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every query gets the mean of the values: weights 1/n, whatever the query.

    y_values (n,) -> predictions (n_queries,), weights (n_queries, n).
    """
    y_values = _as_vector(y_values, "y_values")
    check_positive_int("n_queries", n_queries)
    n = y_values.numel()
    weights = torch.full((n_queries, n), 1.0 / n)                  # (m, n)
    return weights @ y_values, weights                             # (m,), (m, n)


def _log_kernel(u: torch.Tensor, kernel: str) -> torch.Tensor:
    """Log of the unnormalised kernel at scaled distances u (any shape); -inf where it is 0."""
    if kernel == "gaussian":
        return -u ** 2 / 2
    if kernel == "laplace":
        return -u.abs()
    if kernel == "boxcar":
        return torch.where(u.abs() <= 1, 0.0, -math.inf)
    squared = u * u                                                # epanechnikov
    inside = squared < 1                                           # (0 outside: finite gradients)
    return torch.where(inside, torch.log1p(-torch.where(inside, squared, 0.0)), -math.inf)


def kernel_scores(x_query, x_keys, sigma: float = 1.0, kernel: str = "gaussian") -> torch.Tensor:
    """Log of the unnormalised kernel, (m,), (n,) -> (m, n); -inf where the kernel is 0."""
    sigma, kernel = _check_sigma(sigma), _check_kernel(kernel)
    x_query, x_keys = _as_vector(x_query, "x_query"), _as_vector(x_keys, "x_keys")
    u = (x_query[:, None] - x_keys[None, :]) / sigma               # (m, n) scaled distances
    return _log_kernel(u, kernel)


def _normalise(scores: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """Softmax over keys; a row with no finite score puts weight 1 on its nearest key.

    scores (..., m, n), distances (m, n) or (..., m, n) -> weights (..., m, n). The fallback is
    built only when some row needs it, from ``distances`` as given (not once per leading index).
    """
    empty = torch.isinf(scores).all(dim=-1, keepdim=True)          # (..., m, 1)
    if not empty.any():
        return torch.softmax(scores, dim=-1)
    nearest_key = distances.argmin(dim=-1, keepdim=True)           # (m, 1) or (..., m, 1)
    nearest = torch.zeros_like(distances).scatter_(-1, nearest_key, 1.0)     # one-hot
    # An empty row's softmax is NaN (all -inf), and torch.where takes the fallback there.
    return torch.where(empty, nearest, torch.softmax(scores, dim=-1))


def kernel_weights(x_query, x_keys, sigma: float = 1.0, kernel: str = "gaussian") -> torch.Tensor:
    """Attention weights (m, n) of queries (m,) over keys (n,); every row sums to 1.

    Computed as a softmax of log-kernel scores, so a narrow Gaussian does not underflow to 0/0.
    A query outside the support of a compact kernel gets weight 1 on its nearest key.
    """
    scores = kernel_scores(x_query, x_keys, sigma, kernel)                    # (m, n)
    distances = (torch.as_tensor(x_query, dtype=torch.float32)[:, None]
                 - torch.as_tensor(x_keys, dtype=torch.float32)[None, :]).abs()  # (m, n)
    return _normalise(scores, distances)


def uncovered_queries(x_query, x_keys, sigma: float = 1.0, kernel: str = "gaussian") -> torch.Tensor:
    """(m,) bool: queries with no key inside the kernel's support (they use the nearest key)."""
    return torch.isinf(kernel_scores(x_query, x_keys, sigma, kernel)).all(dim=1)


def nadaraya_watson(x_query, x_keys, y_values, sigma: float = 1.0,
                    kernel: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel regression: f(x) = sum_i alpha(x, x_i) y_i.

    x_query (m,), x_keys (n,), y_values (n,) -> predictions (m,), weights (m, n).
    """
    x_keys, y_values = _check_pairs(x_keys, y_values)
    weights = kernel_weights(x_query, x_keys, sigma, kernel)      # (m, n)
    return weights @ y_values, weights                            # (m,), (m, n)


# ----------------------------------------------------------------------------- parametric

def leave_one_out_pairs(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each training point, the other n - 1 pairs: x (n,), y (n,) -> keys, values (n, n-1)."""
    check_leave_one_out(x, y)
    n = len(x)
    others = ~torch.eye(n, dtype=torch.bool)                      # (n, n), False on the diagonal
    keys = x.repeat(n, 1)[others].reshape(n, n - 1)               # (n, n-1) row i: all but x_i
    values = y.repeat(n, 1)[others].reshape(n, n - 1)             # (n, n-1) row i: all but y_i
    return keys, values


class ParametricNadarayaWatson(nn.Module):
    """Gaussian attention pooling with a learnable inverse width w:
    alpha(q, k_i) = softmax_i(-((q - k_i) w)^2 / 2), i.e. sigma = 1 / |w|."""

    def __init__(self, w_init: float | None = None, seed: int = 0):
        super().__init__()
        if w_init is None:
            w = torch.rand(1, generator=torch.Generator().manual_seed(seed))  # U[0, 1)
        else:
            w = torch.tensor([float(w_init)])
        self.w = nn.Parameter(w)                                  # (1,)
        self.attention_weights = None                             # (m, n) after forward

    def forward(self, queries, keys, values):
        # queries (m,), keys (m, n), values (m, n): each query has its own row of pairs
        check_query_rows(queries, keys, values)
        scores = -((queries[:, None] - keys) * self.w) ** 2 / 2   # (m, n)
        self.attention_weights = torch.softmax(scores, dim=1)     # (m, n)
        # (m, 1, n) bmm (m, n, 1) -> (m, 1, 1) -> (m,)
        return torch.bmm(self.attention_weights.unsqueeze(1), values.unsqueeze(-1)).reshape(-1)

    @property
    def sigma(self) -> float:
        """The Gaussian width this model uses: 1 / |w|."""
        return 1.0 / abs(self.w.item())


def train_parametric(x_train, y_train, epochs: int = 5, lr: float = 0.5, seed: int = 0,
                     on_epoch: Callable[[int, float], None] | None = None):
    """Fit w by leave-one-out: predict each y_i from the other n - 1 pairs, summed squared loss,
    full-batch SGD. Returns (model, losses): the summed loss of each epoch, before its step.
    ``on_epoch(epoch, loss)`` is called after every epoch (e.g. ``Animator.add``)."""
    check_positive_int("epochs", epochs)
    if not lr > 0:
        raise ValueError(_("learning rate lr must be > 0, got {lr}; pass e.g. lr=0.5").format(
            lr=lr))
    x_train, y_train = _check_pairs(x_train, y_train)
    keys, values = leave_one_out_pairs(x_train, y_train)          # (n, n-1) each
    model = ParametricNadarayaWatson(seed=seed)
    losses = []
    for epoch in range(1, epochs + 1):
        loss = ((model(x_train, keys, values) - y_train) ** 2).sum()
        loss.backward()
        sgd_step(model.parameters(), lr)
        losses.append(loss.item())
        if on_epoch is not None:
            on_epoch(epoch, loss.item())
    return model, losses


# ----------------------------------------------------------------------------- choosing sigma

def leave_one_out_curve(x, y, sigmas, kernel: str = "gaussian") -> torch.Tensor:
    """Mean squared leave-one-out error for each width: x, y (n,), sigmas (s,) -> (s,).

    Each y_i is predicted from the other n - 1 pairs (nearest other point if none is in reach).
    """
    x, y = _check_pairs(x, y)
    if x.numel() < 2:
        raise ValueError(_("leave-one-out needs at least 2 training points, got 1"))
    sigmas = torch.as_tensor(sigmas, dtype=torch.float32).reshape(-1)        # (s,)
    for sigma in sigmas.tolist():
        _check_sigma(sigma)
    _check_kernel(kernel)
    distances = (x[:, None] - x[None, :]).abs()                              # (n, n)
    # Every kernel is a function of |u|: the absolute distances give the same scores.
    u = distances / sigmas[:, None, None]                                    # (s, n, n)
    scores = _log_kernel(u, kernel)                                          # (s, n, n)
    self_pair = torch.eye(x.numel(), dtype=torch.bool)                       # (n, n)
    scores = scores.masked_fill_(self_pair, -math.inf)                       # leave i out
    weights = _normalise(scores, distances.masked_fill(self_pair, math.inf))  # (s, n, n)
    predictions = weights @ y                                                # (s, n)
    return ((predictions - y) ** 2).mean(dim=1)                              # (s,)


def leave_one_out_error(x, y, sigma: float, kernel: str = "gaussian") -> float:
    """Mean squared leave-one-out error of Nadaraya–Watson with one width ``sigma``."""
    return float(leave_one_out_curve(x, y, [_check_sigma(sigma)], kernel)[0])
