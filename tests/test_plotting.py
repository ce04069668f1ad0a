"""Tests of utils.plotting: heatmap grids, line plots, the Animator and progress bars."""

import io
import os
import pathlib
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # headless: no window, no kernel

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402

from utils.plotting import (NO_PROGRESS_ENV, Animator, HeatmapGrid, plot,  # noqa: E402
                            progress, show_heatmaps)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def weights(shape, seed=0):
    """Softmax rows of random scores: attention-like weights of the given shape."""
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=gen), dim=-1)


# ----------------------------------------------------------------------------- show_heatmaps

def test_heatmap_grid_has_one_image_per_matrix():
    data = weights((2, 3, 4, 5))
    grid = show_heatmaps(data, "Keys", "Queries")
    assert isinstance(grid, HeatmapGrid)
    assert grid.axes.shape == (2, 3) and grid.images.shape == (2, 3)
    assert grid.shape == (2, 3, 4, 5)
    for (i, j), image in np.ndenumerate(grid.images):
        assert isinstance(image, AxesImage)
        assert image.axes is grid.axes[i, j]
        np.testing.assert_allclose(image.get_array(), data[i, j].numpy(), rtol=1e-6)
    assert len(grid.fig.axes) == 2 * 3 + 1          # six heatmaps and one colour bar


def test_heatmap_labels_only_on_outer_axes_and_titles_on_top():
    grid = show_heatmaps(weights((2, 3, 4, 4)), "Keys", "Queries", titles=["h1", "h2", "h3"])
    for (i, j), ax in np.ndenumerate(grid.axes):
        assert ax.get_xlabel() == ("Keys" if i == 1 else "")
        assert ax.get_ylabel() == ("Queries" if j == 0 else "")
        assert ax.get_title() == (["h1", "h2", "h3"][j] if i == 0 else "")


def test_heatmap_token_labels_and_row_titles():
    grid = show_heatmaps(weights((2, 1, 3, 4)), "source", "target", xticklabels=list("abcd"),
                         yticklabels=["x", "y", "z"], row_titles=["layer 1", "layer 2"])
    ax = grid.axes[1, 0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    assert grid.axes[0, 0].get_ylabel() == "layer 1\ntarget"
    assert grid.axes[1, 0].get_ylabel() == "layer 2\ntarget"
    with pytest.raises(ValueError, match="xticklabels has 3 entries but the matrices need 4"):
        show_heatmaps(weights((1, 1, 3, 4)), "k", "q", xticklabels=list("abc"))
    with pytest.raises(ValueError, match="row_titles has 1 entries but the matrices need 2"):
        show_heatmaps(weights((2, 1, 3, 4)), "k", "q", row_titles=["layer 1"])


def test_heatmaps_share_one_colour_bar_spanning_the_data():
    data = weights((2, 2, 3, 3), seed=1)
    grid = show_heatmaps(data, "k", "q")
    colorbars = [ax for ax in grid.fig.axes if ax not in list(grid.axes.ravel())]
    assert colorbars == [grid.colorbar.ax]
    expected = (data.min().item(), data.max().item())
    for image in grid.images.ravel():
        assert image.get_clim() == pytest.approx(expected)
    assert (grid.colorbar.norm.vmin, grid.colorbar.norm.vmax) == pytest.approx(expected)


def test_heatmap_accepts_numpy_and_tensors_needing_grad():
    scores = torch.randn(1, 1, 3, 4, requires_grad=True)
    grid = show_heatmaps(scores * 2, "k", "q")
    np.testing.assert_allclose(grid.images[0, 0].get_array(), (scores * 2).detach()[0, 0].numpy())
    assert show_heatmaps(np.ones((1, 2, 2, 2)), "k", "q").images.shape == (1, 2)


def test_update_changes_data_in_place():
    grid = show_heatmaps(weights((2, 2, 3, 4)), "k", "q")
    images_before = [id(image) for image in grid.images.ravel()]
    new = weights((2, 2, 3, 4), seed=7) * 3
    assert grid.update(new) is grid
    assert [id(image) for image in grid.images.ravel()] == images_before
    assert len(grid.fig.axes) == 5                    # no new axes or colour bar
    for (i, j), image in np.ndenumerate(grid.images):
        np.testing.assert_allclose(image.get_array(), new[i, j].numpy(), rtol=1e-6)
        assert image.get_clim() == pytest.approx((new.min().item(), new.max().item()))
    grid.fig.canvas.draw()
    assert grid.colorbar.ax.get_ylim() == pytest.approx((new.min().item(), new.max().item()))


def test_fixed_colour_limits_survive_update():
    grid = show_heatmaps(weights((1, 1, 3, 3)), "k", "q", vmin=0, vmax=1)
    grid.update(weights((1, 1, 3, 3), seed=3) * 0.5)
    assert grid.images[0, 0].get_clim() == (0, 1)


def test_constant_matrix_gets_a_usable_colour_range():
    grid = show_heatmaps(torch.full((1, 1, 2, 5), 0.2), "k", "q")
    low, high = grid.images[0, 0].get_clim()
    assert low < 0.2 < high


@pytest.mark.parametrize("shape", [(4, 4), (1, 4, 4), (1, 1, 1, 4, 4)])
def test_wrong_dimensionality_names_expected_shape(shape):
    with pytest.raises(ValueError, match=r"\(rows, cols, queries, keys\)"):
        show_heatmaps(torch.rand(shape), "k", "q")


@pytest.mark.parametrize("bad, message", [
    (torch.rand(1, 0, 3, 3), "empty"),
    (torch.tensor([[[[0.5, float("nan")]]]]), "NaN"),
])
def test_empty_or_non_finite_matrices_are_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        show_heatmaps(bad, "k", "q")


def test_titles_must_match_columns_and_update_must_match_shape():
    with pytest.raises(ValueError, match="one title per column"):
        show_heatmaps(torch.rand(1, 2, 3, 3), "k", "q", titles=["only one"])
    grid = show_heatmaps(torch.rand(1, 2, 3, 3), "k", "q")
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 3\)"):
        grid.update(torch.rand(1, 2, 3, 4))
    with pytest.raises(ValueError, match="reversed"):
        show_heatmaps(torch.rand(1, 1, 2, 2), "k", "q", vmin=1, vmax=0)


def test_detached_grid_is_unknown_to_pyplot_and_renders_png():
    before = plt.get_fignums()
    grid = show_heatmaps(weights((1, 2, 3, 3)), "k", "q", detached=True)
    assert plt.get_fignums() == before
    png = grid.to_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert show_heatmaps(weights((1, 1, 3, 3)), "k", "q").fig.number in plt.get_fignums()


def test_heatmap_png_artifact(artifacts_dir):
    data = weights((2, 4, 6, 8), seed=2)
    grid = show_heatmaps(data, "Key positions", "Query positions",
                         titles=[f"Head {h}" for h in range(1, 5)], figsize=(8, 4))
    path = artifacts_dir / "heatmaps_2x4.png"
    grid.fig.savefig(path, dpi=100)
    assert path.stat().st_size > 10_000
    # The colour bar sits right of every heatmap (no overlap).
    grid.fig.canvas.draw()
    bar = grid.colorbar.ax.get_window_extent()
    assert all(ax.get_window_extent().x1 < bar.x0 for ax in grid.axes.ravel())


# ----------------------------------------------------------------------------- plot

def test_plot_several_series_with_log_axes_legend_and_limits():
    x = np.arange(1, 11, dtype=float)
    ax = plot(x, [x ** 2, 2 * x], "x", "f(x)", legend=["square", "double"], xlim=[1, 10],
              xscale="log", yscale="log")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((1, 10))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["square", "double"]
    assert ax.get_xlabel() == "x" and ax.get_ylabel() == "f(x)"
    lines = ax.get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[0].get_xydata(), np.c_[x, x ** 2])
    np.testing.assert_allclose(lines[1].get_xydata(), np.c_[x, 2 * x])
    assert lines[1].get_linestyle() == "--"          # second default format 'm--'


def test_plot_x_per_series_y_none_and_tensors():
    ax = plot([[0, 1, 2], [5, 6]], [[1, 2, 3], [7, 8]])
    np.testing.assert_allclose(ax.get_lines()[1].get_xydata(), [[5, 7], [6, 8]])
    ax = plot(torch.tensor([[3.0, 4.0], [5.0, 6.0]]))  # Y=None: two series against their index
    np.testing.assert_allclose(ax.get_lines()[1].get_xydata(), [[0, 5], [1, 6]])


def test_plot_reuses_and_clears_given_axes():
    _, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert plot([1, 2, 3], [4, 5, 6], axes=ax, legend=[]) is ax   # legend=[]: none, as in d2l
    assert len(ax.get_lines()) == 1 and ax.get_legend() is None


@pytest.mark.parametrize("kwargs, message", [
    (dict(X=[1, 2, 3], Y=[1, 2]), "3 points but Y has 2"),
    (dict(X=[[1, 2], [1, 2], [1, 2]], Y=[[1, 2], [3, 4]]), "X has 3 series but Y has 2"),
    (dict(X=[1, 2], Y=[0, 1], yscale="log"), "positive y"),
    (dict(X=[1, 2], Y=[[1, 2]] * 3, fmts=("-", "--")), "one format per series"),
    (dict(X=[1, 2], Y=[[1, 2]] * 2, legend=["a"]), "one legend entry per series"),
    (dict(X=np.zeros((2, 2, 2))), "2-D"),
    (dict(X=3.0), "sequence"),
    (dict(X=[[1, 2], [[3]]]), r"X\[1\] must be 1-D"),
])
def test_plot_rejects_inconsistent_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plot(**kwargs)


# ----------------------------------------------------------------------------- Animator

def test_animator_records_and_draws_final_figure_headless():
    animator = Animator(xlabel="epoch", legend=["train", "test"], xlim=[1, 5], yscale="log")
    for epoch in range(1, 6):
        animator.add(epoch, [1 / epoch, None if epoch % 2 else 2 / epoch])
    assert animator.X == [[1, 2, 3, 4, 5], [2, 4]]
    assert animator.Y[0] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5])
    assert animator.Y[1] == pytest.approx([1, 1 / 2])
    assert animator.axes[0].get_lines() == []        # headless: nothing drawn before finish()
    assert animator.finish() is animator
    ax = animator.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2
    for line, xs, ys in zip(lines, animator.X, animator.Y):
        np.testing.assert_allclose(line.get_xydata(), np.c_[xs, ys])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "test"]
    assert ax.get_yscale() == "log" and ax.get_xlim() == pytest.approx((1, 5))
    assert ax.get_ylim()[0] <= 0.2 and ax.get_ylim()[1] >= 1   # autoscaled to hold the data
    assert plt.get_fignums() == []                   # not a pyplot figure: nothing to show twice


def test_animator_scalar_series_tensor_values_and_subplots():
    animator = Animator(nrows=1, ncols=2)
    assert len(animator.axes) == 2
    animator.add(torch.tensor(1), torch.tensor(0.5))
    animator.add(2, 0.25)
    assert animator.X == [[1.0, 2.0]] and animator.Y == [[0.5, 0.25]]


def test_animator_rejects_changing_series_count_and_bad_options():
    animator = Animator()
    animator.add(1, [1.0, 2.0])
    with pytest.raises(ValueError, match="first call had 2"):
        animator.add(2, 3.0)
    with pytest.raises(ValueError, match="one legend entry per series"):
        Animator(legend=["a", "b"]).add(1, 1.0)
    with pytest.raises(ValueError, match="positive y"):
        Animator(yscale="log").add(1, 0.0)
    with pytest.raises(ValueError, match="Jupyter kernel"):
        Animator(live=True)


# ----------------------------------------------------------------------------- progress

def test_progress_wraps_tqdm_and_env_var_disables_it(monkeypatch):
    monkeypatch.delenv(NO_PROGRESS_ENV, raising=False)
    out = io.StringIO()
    assert list(progress(range(3), file=out, desc="epochs")) == [0, 1, 2]
    assert "epochs" in out.getvalue()
    monkeypatch.setenv(NO_PROGRESS_ENV, "1")
    out = io.StringIO()
    bar = progress(range(3), file=out)
    assert bar.disable and list(bar) == [0, 1, 2] and out.getvalue() == ""
    monkeypatch.setenv(NO_PROGRESS_ENV, "maybe")
    with pytest.raises(ValueError, match=NO_PROGRESS_ENV):
        progress(range(3))


# ----------------------------------------------------------------------------- in a real kernel

NOTEBOOK_CELLS = [
    "import time\nimport numpy as np\nfrom utils.plotting import Animator, show_heatmaps",
    # A training-like loop: faster than the redraw interval, so the last points are drawn only
    # by the end-of-cell flush.
    "animator = Animator(xlabel='epoch', legend=['train', 'test'], xlim=[1, 30])\n"
    "for epoch in range(1, 31):\n"
    "    time.sleep(0.01)\n"
    "    animator.add(epoch, [1 / epoch, 2 / epoch])",
    "print([len(line.get_xdata()) for line in animator.lines])",
    "animator.finish()",
    "animator",
    "show_heatmaps(np.eye(3).reshape(1, 1, 3, 3), 'Keys', 'Queries')",
    "show_heatmaps(np.eye(2).reshape(1, 1, 2, 2), 'Keys', 'Queries', detached=True)",
]


@pytest.mark.slow
def test_notebook_cells_show_exactly_one_figure_each(tmp_path):
    """Run cells in a real kernel (nbclient), then re-check the saved outputs under nbval."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    NotebookClient(nb, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [cell.outputs for cell in nb.cells]
    assert outputs[0] == []
    for k in (1, 3, 4, 5, 6):
        assert [out.output_type for out in outputs[k]] == ["display_data"], NOTEBOOK_CELLS[k]
        assert "image/png" in outputs[k][0].data
    assert outputs[2][0].text.strip() == "[30, 30]"  # the last point was drawn at the end

    # nbval counts display_data messages and ignores update_display_data: the saved outputs
    # must still match one for one when the notebook runs again.
    path = tmp_path / "animator.ipynb"
    nbformat.write(nb, path)
    # -p tests.quick_imports, as the Makefile runs nbval (2-4 s of CPU less).
    repo = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.quick_imports", "--nbval",
         "--nbval-current-env", "-p", "no:cacheprovider", "-q", path.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(repo), os.environ.get("PYTHONPATH")]))))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{len(NOTEBOOK_CELLS)} passed" in result.stdout


def test_kernels_get_the_sessions_own_matplotlib_cache():
    """A process the tests start (as nbval's kernels are) keeps its font list in the session's
    folder, not the user's ~/.cache, and draws mathematical tick labels without a warning."""
    import os
    import pathlib
    code = ("import matplotlib; matplotlib.use('agg'); import matplotlib.pyplot as plt; "
            "fig, ax = plt.subplots(); ax.plot([1, 10, 100], [1, 2, 3]); ax.set_xscale('log'); "
            "ax.set_xlabel('q·k/√d'); fig.savefig(__import__('io').BytesIO()); "
            "print(matplotlib.get_cachedir())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    session = pathlib.Path(os.environ["MPLCONFIGDIR"])
    assert pathlib.Path(done.stdout.strip()) == session
    assert not session.is_relative_to(pathlib.Path.home() / ".cache")
    assert done.stderr == ""
