"""Headless tests of the lesson-2 explorer: set control values, check what the student would see."""

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.pooling import make_regression_data, mean_squared_error, nadaraya_watson  # noqa: E402
from utils.widgets.attention_pooling import AttentionPoolingExplorer  # noqa: E402


@pytest.fixture(scope="module")
def shared():
    """One explorer for the read-only checks (building it trains a model and fills caches)."""
    return AttentionPoolingExplorer()


@pytest.fixture
def explorer():
    return AttentionPoolingExplorer()


def _readout_number(explorer, label):
    match = re.search(rf"{label} = (-?[0-9.]+)", explorer.readout.value)
    assert match, f"{label!r} not in readout {explorer.readout.value!r}"
    return float(match.group(1))


def test_starts_with_the_lessons_gaussian_fit(shared):
    data = make_regression_data(50, seed=0)
    expected, _ = nadaraya_watson(data.x_test, data.x_train, data.y_train, sigma=1.0)
    torch.testing.assert_close(shared.state["predictions"], expected)
    np.testing.assert_allclose(shared.fit_line.get_ydata(), expected.numpy(), rtol=1e-6)
    assert shared.state["weights"].shape == (50, 50)
    assert "Gaussian kernel" in shared.readout.value and "n = 50" in shared.readout.value
    assert _readout_number(shared, "test MSE") == pytest.approx(
        mean_squared_error(expected, data.y_truth), abs=1e-3)


def test_trained_width_and_best_width_are_marked(shared):
    state = shared.state
    assert state["trained_w"] > 5                              # the lesson's w of about 16
    assert state["trained_sigma"] == pytest.approx(1 / abs(state["trained_w"]))
    assert shared.trained_line.get_xdata()[0] == pytest.approx(state["trained_sigma"])
    assert 0.1 <= state["best_sigma"] <= 1.0
    assert state["best_loo_error"] == pytest.approx(float(state["loo_curve"].min()))
    assert _readout_number(shared, "best σ by leave-one-out") == pytest.approx(state["best_sigma"],
                                                                               abs=1e-3)


def test_sigma_slider_changes_fit_heatmap_and_readout_in_place(explorer):
    fit_line, image, old_readout = explorer.fit_line, explorer.image, explorer.readout.value
    old_mse = explorer.state["test_mse"]
    explorer.controls["sigma"].value = explorer.state["best_sigma"]
    assert explorer.fit_line is fit_line and explorer.image is image
    assert explorer.readout.value != old_readout
    assert explorer.state["test_mse"] < old_mse                # sigma = 1 over-smooths
    np.testing.assert_allclose(np.asarray(image.get_array()), explorer.state["weights"].numpy())
    assert explorer.sigma_line.get_xdata()[0] == pytest.approx(explorer.state["best_sigma"])


def test_bias_variance_extremes(explorer):
    explorer.controls["sigma"].value = 10.0                    # wide: nearly average pooling
    wide = explorer.state
    mean = float(wide["data"].y_train.mean())
    assert float((wide["predictions"] - mean).abs().max()) < 0.3
    explorer.controls["sigma"].value = 0.01                    # narrow: nearest neighbour
    narrow = explorer.state
    # most queries give almost all weight to one key (a few sit midway between two keys)
    assert narrow["weights"].max(dim=1).values.median() > 0.99
    explorer.controls["sigma"].value = explorer.state["best_sigma"]
    assert explorer.state["test_mse"] < min(wide["test_mse"], narrow["test_mse"])


def test_compact_kernel_reports_its_fallback(explorer):
    explorer.controls["kernel"].value = "boxcar"
    explorer.controls["sigma"].value = 0.01
    uncovered = int(explorer.state["uncovered"].sum())
    assert uncovered > 0
    assert torch.isfinite(explorer.state["predictions"]).all()
    assert f"{uncovered} of 50 test points have no training point" in explorer.readout.value
    assert len(explorer.uncovered_marks.get_xdata()) == uncovered
    explorer.controls["sigma"].value = 1.0
    assert "no training point" not in explorer.readout.value
    assert len(explorer.uncovered_marks.get_xdata()) == 0


def test_kernel_menu_switches_the_curve(explorer):
    gaussian_curve = explorer.loo_line.get_ydata().copy()
    explorer.controls["kernel"].value = "epanechnikov"
    assert "Epanechnikov kernel" in explorer.readout.value
    assert not np.allclose(explorer.loo_line.get_ydata(), gaussian_curve)
    explorer.controls["kernel"].value = "gaussian"
    np.testing.assert_allclose(explorer.loo_line.get_ydata(), gaussian_curve)   # from the cache


def test_training_size_slider_changes_the_data_and_heatmap_shape(explorer):
    explorer.controls["n_train"].value = 120
    assert explorer.state["data"].x_train.shape == (120,)
    assert np.asarray(explorer.image.get_array()).shape == (50, 120)
    assert len(explorer.points.get_xdata()) == 120
    assert "n = 120" in explorer.readout.value
    assert explorer.state["trained_sigma"] != pytest.approx(1 / 16.2, rel=0.05)  # retrained


def test_curves_are_cached_per_kernel_and_size(explorer):
    explorer.controls["n_train"].value = 60
    curve = explorer.loo_curve("gaussian", 60)
    explorer.controls["sigma"].value = 0.3
    assert explorer.loo_curve("gaussian", 60) is curve
    assert set(explorer._loo_cache) == {("gaussian", 50), ("gaussian", 60)}


def test_sigma_tick_updates_in_place_without_recomputing_the_curve(shared):
    # The 50 ms budget per tick is measured by tests/benchmarks/bench_widgets.py (a timed test
    # would flake on a busy machine); here: what a tick must not do to stay within it.
    artists = (shared.image, shared.points, shared.loo_line)
    cached = dict(shared._loo_cache)
    pictures = []
    for k in range(9):
        shared.controls["sigma"].value = 10 ** (-1.5 + 0.1 * k)
        pictures.append(np.array(shared.image.get_array()))
    assert (shared.image, shared.points, shared.loo_line) == artists     # updated, not redrawn
    assert shared._loo_cache.keys() == cached.keys()                    # no new curve computed
    assert all(shared._loo_cache[key] is cached[key] for key in cached)
    assert not np.allclose(pictures[0], pictures[-1])                    # the weights did change


def test_rejects_values_off_the_sliders():
    with pytest.raises(ValueError, match="unknown kernel 'tophat'; choose one of"):
        AttentionPoolingExplorer(kernel="tophat")
    with pytest.raises(ValueError, match="n_train must be a multiple of 10 between 10 and 200"):
        AttentionPoolingExplorer(n_train=55)
    with pytest.raises(ValueError, match="sigma must be between 0.01 and 10"):
        AttentionPoolingExplorer(sigma=0.0)


def test_png_view_changes_and_matches_a_fresh_explorer_after_cache_invalidation(explorer):
    # Blitting draws changing artists over a cached background; changing the kernel or the
    # training size moves axis limits, so the background must be redrawn. A fresh explorer
    # built with the final settings is the reference picture.
    first = explorer.view.value
    explorer.controls["sigma"].value = 0.1
    assert explorer.view.value != first
    explorer.controls["n_train"].value = 150
    explorer.controls["kernel"].value = "laplace"
    fresh = AttentionPoolingExplorer(sigma=0.1, kernel="laplace", n_train=150)
    assert explorer.view.value == fresh.view.value


def _pixels(png: bytes) -> np.ndarray:
    import io
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_axes_kept_when_built_give_the_picture_drawn_in_place(explorer):
    """The heatmap's x axis (every training size) and the leave-one-out y axis (every top) are
    drawn when the explorer is built and pasted as sprites: each picture equals the one drawn
    with every axis drawn in place and no cache."""
    from utils.widgets.base import GlyphCachingCanvas
    assert {key[0] for key in explorer._sprites} == {"sizes", "top"} and len(explorer._sprites) >= 27
    steps = (("n_train", 200), ("sigma", 0.05), ("kernel", "boxcar"), ("n_train", 20),
             ("kernel", "laplace"), ("n_train", 200), ("sigma", 5.0), ("n_train", 90))
    shown = []
    for name, value in steps:
        explorer.controls[name].value = value
        shown.append(explorer.view.value)
    reference = AttentionPoolingExplorer()
    reference.use_sprites = False                      # the axes drawn in place, as layers
    for (name, value), png in zip(steps, shown):
        reference.controls[name].value = value
        GlyphCachingCanvas(reference.fig)              # no glyphs kept
        reference._background = None                   # no background, layers, frames
        assert np.array_equal(_pixels(png), _pixels(reference.render_png())), (name, value)
