"""Lesson 2 explorer: choose a kernel, its width and the training size; watch the fit,
the attention heatmap, the test error and the leave-one-out error curve over the width."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.colors import PowerNorm
from matplotlib.ticker import NullLocator

from utils.pooling import (KERNELS, leave_one_out_curve, leave_one_out_error, make_regression_data,
                           mean_squared_error, nadaraya_watson, train_parametric,
                           uncovered_queries)
from utils.i18n import _
from utils.widgets.base import BlittedExplorer, one_torch_thread

KERNEL_LABELS = {"gaussian": "Gaussian", "boxcar": "boxcar", "epanechnikov": "Epanechnikov",
                 "laplace": "Laplace"}
# Kernel widths on the slider's grid: 10^-2 ... 10^1 in steps of 10^0.05 (61 values).
LOG_SIGMA_MIN, LOG_SIGMA_MAX, LOG_SIGMA_STEP = -2.0, 1.0, 0.05
SIGMA_GRID = 10 ** torch.arange(LOG_SIGMA_MIN, LOG_SIGMA_MAX + LOG_SIGMA_STEP / 2, LOG_SIGMA_STEP,
                                dtype=torch.float64)                         # (61,)
N_TRAIN_MIN, N_TRAIN_MAX, N_TRAIN_STEP = 10, 200, 10
LOO_TOPS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)          # the leave-one-out axis' tops


def kernel_label(kernel: str) -> str:
    """The menu's name of ``kernel`` in the current language (KERNEL_LABELS in English)."""
    return {"gaussian": _("Gaussian"), "boxcar": _("boxcar"), "epanechnikov": _("Epanechnikov"),
            "laplace": _("Laplace")}[kernel]


def loo_axis_top(curve_max: float) -> float:
    """Upper y limit of the leave-one-out plot, from a short ladder (changes rarely)."""
    for top in LOO_TOPS:
        if curve_max * 1.05 <= top:
            return top
    return float(np.ceil(curve_max * 1.05))


class AttentionPoolingExplorer(BlittedExplorer):
    """Kernel width (log slider), kernel menu and training size; fit, heatmap, LOO curve live."""

    def __init__(self, sigma: float = 1.0, kernel: str = "gaussian", n_train: int = 50,
                 seed: int = 0):
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
        if not (N_TRAIN_MIN <= n_train <= N_TRAIN_MAX and n_train % N_TRAIN_STEP == 0):
            raise ValueError(f"n_train must be a multiple of {N_TRAIN_STEP} between "
                             f"{N_TRAIN_MIN} and {N_TRAIN_MAX} (the slider's grid), got {n_train}")
        if not 10 ** LOG_SIGMA_MIN <= sigma <= 10 ** LOG_SIGMA_MAX:
            raise ValueError(f"sigma must be between {10 ** LOG_SIGMA_MIN:g} and "
                             f"{10 ** LOG_SIGMA_MAX:g} (the slider's range), got {sigma}")
        self.seed = seed
        self._data_cache: dict = {}      # n_train -> (RegressionData, trained w)
        self._loo_cache: dict = {}       # (kernel, n_train) -> LOO error per SIGMA_GRID entry
        self._loo_max: dict = {}         # n_train -> largest LOO error drawn so far
        style = {"description_width": "initial"}
        controls = {
            "sigma": widgets.FloatLogSlider(
                value=sigma, base=10, min=LOG_SIGMA_MIN, max=LOG_SIGMA_MAX, step=LOG_SIGMA_STEP,
                description=_("kernel width σ"), readout_format=".3f", style=style),
            "kernel": widgets.Dropdown(options=[(kernel_label(k), k) for k in KERNELS],
                                       value=kernel, description=_("kernel"), style=style),
            "n_train": widgets.IntSlider(value=n_train, min=N_TRAIN_MIN, max=N_TRAIN_MAX,
                                         step=N_TRAIN_STEP, description=_("training size"),
                                         style=style),
        }
        for size in range(N_TRAIN_MIN, N_TRAIN_MAX + 1, N_TRAIN_STEP):
            with one_torch_thread():             # every size the slider reaches: ~0.15 s
                self.data(size)
        super().__init__(controls, figsize=(10.5, 3.0))
        self.keep_axes()

    # -- cached, per training size / kernel ----------------------------------------------
    def data(self, n_train: int):
        """(RegressionData, trained w) for ``n_train`` points; computed once per size."""
        if n_train not in self._data_cache:
            data = make_regression_data(n_train, seed=self.seed)
            model, _losses = train_parametric(data.x_train, data.y_train, seed=self.seed)
            self._data_cache[n_train] = (data, model.w.item())
        return self._data_cache[n_train]

    def loo_curve(self, kernel: str, n_train: int) -> torch.Tensor:
        """Leave-one-out error (61,) over SIGMA_GRID; computed once per (kernel, n_train)."""
        key = (kernel, n_train)
        if key not in self._loo_cache:
            data, _w = self.data(n_train)
            self._loo_cache[key] = leave_one_out_curve(data.x_train, data.y_train,
                                                       SIGMA_GRID.float(), kernel)
        return self._loo_cache[key]

    # -- the explorer's four steps -------------------------------------------------------
    def build_figure(self, fig):
        self.ax_fit, self.ax_map, self.ax_loo = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
        self.truth_line, = self.ax_fit.plot([], [], "-", color="tab:blue", label=_("truth"))
        self.fit_line, = self.ax_fit.plot([], [], "--", color="tab:purple", label=_("prediction"))
        self.points, = self.ax_fit.plot([], [], "o", color="tab:green", alpha=0.5,
                                        markersize=3, label=_("training"))
        self.uncovered_marks, = self.ax_fit.plot([], [], "x", color="tab:orange",
                                                 markersize=5, label=_("nearest-point fallback"))
        # No legends: they are the costliest artists to draw; titles and the lesson name the lines.
        self.ax_fit.set(xlim=(0, 5), ylim=(-1.5, 5), xlabel="x", ylabel="y")
        self.ax_fit.set_title(_("truth (blue), prediction (purple)"), fontsize=9)
        # A fixed colour scale (so colours compare across settings, and the colour bar can stay
        # in the cached background); the power scale keeps the small weights of wide kernels visible.
        self.image = self.ax_map.imshow(np.zeros((2, 2)), cmap="Reds", aspect="auto",
                                        interpolation="nearest", norm=PowerNorm(0.4, 0.0, 1.0))
        self.ax_map.set(xlabel=_("sorted training inputs"), ylabel=_("sorted test inputs"),
                        title=_("attention weights"))
        fig.colorbar(self.image, ax=self.ax_map, shrink=0.8)
        self.loo_line, = self.ax_loo.plot([], [], "-", color="tab:blue", label=_("leave-one-out"))
        self.sigma_line = self.ax_loo.axvline(1.0, color="tab:red", label=_("σ (slider)"))
        self.trained_line = self.ax_loo.axvline(1.0, color="tab:purple", linestyle=":",
                                                label=_("σ = 1/|w| (trained)"))
        self.best_mark, = self.ax_loo.plot([], [], "*", color="black", markersize=9,
                                           label=_("best σ"))
        self.ax_loo.set(xscale="log", xlim=(10 ** LOG_SIGMA_MIN, 10 ** LOG_SIGMA_MAX),
                        xlabel=_("kernel width σ"), ylabel=_("leave-one-out error"))
        self.ax_loo.set_title(_("σ (red), trained 1/|w| (dotted), best (★)"), fontsize=9)
        self.ax_loo.xaxis.set_minor_locator(NullLocator())      # minor log ticks cost draw time
        fig.tight_layout()
        self._shown_curve = None         # (kernel, n_train) whose LOO curve is drawn

    def animated_artists(self) -> list:
        # The heatmap's x axis is redrawn too: its ticks follow the training size; and the
        # leave-one-out y axis, whose top follows the curves.
        return [self.truth_line, self.fit_line, self.points, self.uncovered_marks, self.image,
                self.ax_map.xaxis, self.ax_loo.yaxis, self.loo_line, self.sigma_line,
                self.trained_line, self.best_mark]

    def cached_sprites(self) -> list:
        """The heatmap's x axis follows the training size, the leave-one-out y axis its top:
        each drawn once per value (all of them when the explorer is built) and pasted."""
        return [(("sizes", self.state["n_train"]), [self.ax_map.xaxis]),
                (("top", self.ax_loo.get_ylim()), [self.ax_loo.yaxis])]

    def cached_layers(self) -> list:
        """The leave-one-out curve follows the kernel too: drawn once per key over the axes and
        kept, so moving σ redraws the fit, the heatmap, the σ line and the two marks over it only
        (in the order they had)."""
        return [(self.state["kernel"], [self.loo_line])]

    def keep_axes(self) -> None:
        """Draw the heatmap's x axis for every training size and the leave-one-out y axis for
        every top of the ladder now (~0.3 s): a first visit of a size then pastes them."""
        extent, ylim = self.image.get_extent(), self.ax_loo.get_ylim()
        for size in range(N_TRAIN_MIN, N_TRAIN_MAX + 1, N_TRAIN_STEP):
            self.image.set_extent((-0.5, size - 0.5, extent[2], extent[3]))   # as draw sets it
            self.keep_sprite(("sizes", size), [self.ax_map.xaxis])
        for top in LOO_TOPS:
            self.ax_loo.set_ylim(0, top)
            self.keep_sprite(("top", self.ax_loo.get_ylim()), [self.ax_loo.yaxis])
        self.image.set_extent(extent)
        self.ax_loo.set_ylim(*ylim)

    def frame_key(self, state):
        # The controls, and the leave-one-out axis' top (it only grows, with what was seen).
        return (*self.values().items(), self.ax_loo.get_ylim())

    def compute(self, sigma, kernel, n_train) -> dict:
        data, trained_w = self.data(n_train)
        predictions, weights = nadaraya_watson(data.x_test, data.x_train, data.y_train,
                                               sigma, kernel)          # (50,), (50, n)
        curve = self.loo_curve(kernel, n_train)                         # (61,)
        best = int(curve.argmin())
        return {
            "sigma": sigma, "kernel": kernel, "n_train": n_train, "data": data,
            "predictions": predictions, "weights": weights,
            "uncovered": uncovered_queries(data.x_test, data.x_train, sigma, kernel),
            "test_mse": mean_squared_error(predictions, data.y_truth),
            "loo_error": leave_one_out_error(data.x_train, data.y_train, sigma, kernel),
            "loo_curve": curve, "best_sigma": float(SIGMA_GRID[best]),
            "best_loo_error": float(curve[best]),
            "trained_w": trained_w, "trained_sigma": 1.0 / abs(trained_w),
        }

    def draw(self, state):
        data = state["data"]
        x_test, y_hat = data.x_test.numpy(), state["predictions"].numpy()
        self.truth_line.set_data(x_test, data.y_truth.numpy())
        self.fit_line.set_data(x_test, y_hat)
        self.points.set_data(data.x_train.numpy(), data.y_train.numpy())
        mask = state["uncovered"].numpy()
        self.uncovered_marks.set_data(x_test[mask], y_hat[mask])
        weights = state["weights"].numpy()                              # (50, n)
        self.image.set_data(weights)
        self.image.set_extent((-0.5, weights.shape[1] - 0.5, weights.shape[0] - 0.5, -0.5))
        self.sigma_line.set_xdata([state["sigma"]] * 2)
        curve_key = (state["kernel"], state["n_train"])
        if curve_key != self._shown_curve:                              # once per kernel / size
            curve = state["loo_curve"].numpy()
            self.loo_line.set_data(SIGMA_GRID.numpy(), curve)
            self.best_mark.set_data([state["best_sigma"]], [state["best_loo_error"]])
            self.trained_line.set_xdata([state["trained_sigma"]] * 2)
            # The y range only grows for a training size, so going back to a kernel seen
            # before never rescales the axis (and never costs a full redraw).
            n = state["n_train"]
            self._loo_max[n] = max(self._loo_max.get(n, 0.0), float(curve.max()))
            top = loo_axis_top(self._loo_max[n])
            if top != self.ax_loo.get_ylim()[1]:     # its y axis is a cached layer
                self.ax_loo.set_ylim(0, top)
            self._shown_curve = curve_key

    def describe(self, state) -> str:
        parts = [
            f"σ = {state['sigma']:.3f}",
            _("{kernel} kernel").format(kernel=kernel_label(state["kernel"])),
            f"n = {state['n_train']}",
            _("<b>test MSE = {mse}</b> (vs. noiseless truth)").format(
                mse=f"{state['test_mse']:.3f}"),
            _("leave-one-out error = {error}").format(error=f"{state['loo_error']:.3f}"),
            _("best σ by leave-one-out = {sigma}").format(sigma=f"{state['best_sigma']:.3f}"),
            _("trained w = {w} → σ = 1/|w| = {sigma}").format(
                w=f"{state['trained_w']:.2f}", sigma=f"{state['trained_sigma']:.3f}"),
        ]
        text = " &nbsp;·&nbsp; ".join(parts)
        uncovered = int(state["uncovered"].sum())
        if uncovered:
            total = state["uncovered"].numel()
            text += "<br>⚠ " + _(
                "{uncovered} of {total} test points have no training point within the kernel's "
                "reach (|x − xᵢ| ≤ σ): they use the nearest training point (orange ×).").format(
                uncovered=uncovered, total=total)
        return text
