"""Plotting helpers with the book's names and arguments: ``show_heatmaps``, ``plot``, ``Animator``.

Readers of *Dive into Deep Learning* can call them exactly as in the book; the code is the course's own.

- ``show_heatmaps`` returns a :class:`HeatmapGrid` whose ``update()`` swaps the data of the existing
  images (``set_array``) instead of drawing a new figure, which is what widgets need.
- ``Animator`` draws a live training curve in Jupyter by updating *one* display in place; with no
  Jupyter kernel (a script, pytest) it only records the points and draws them when ``finish()`` is
  called. Either way a notebook cell ends with exactly one figure, so nbval sees the same outputs
  as the saved notebook.
- ``progress`` wraps ``tqdm.auto``; set ``ATTENTION_COURSE_NO_PROGRESS=1`` to switch progress bars
  off (useful under nbval or in CI logs).

Importing this module is light: matplotlib, IPython and tqdm are imported only when used. It never
calls ``matplotlib.use()``: Jupyter's inline backend stays in charge in notebooks, and matplotlib
itself falls back to the non-interactive Agg backend when no display is available.
"""

from __future__ import annotations

import io
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from utils.i18n import _

DEFAULT_FMTS = ("-", "m--", "g-.", "r:")
NO_PROGRESS_ENV = "ATTENTION_COURSE_NO_PROGRESS"
_TRUE_WORDS = {"1", "true", "yes", "on"}
_FALSE_WORDS = {"", "0", "false", "no", "off"}


# ----------------------------------------------------------------------------- helpers

def _to_numpy(data: Any, name: str) -> np.ndarray:
    """A float numpy array from a tensor (detached, on the CPU), an array or nested lists."""
    if hasattr(data, "detach"):                      # torch.Tensor, without importing torch
        data = data.detach().cpu().numpy()
    try:
        array = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(_("{name} must hold real numbers (a tensor, array or list); "
                           "could not convert it: {error}").format(name=name, error=error)) from None
    return array


def _kernel_shell():
    """The running IPython shell if it is attached to a Jupyter kernel, else None."""
    if "IPython" not in sys.modules:                 # no IPython loaded -> certainly no kernel
        return None
    from IPython import get_ipython
    shell = get_ipython()
    return shell if getattr(shell, "kernel", None) is not None else None


def _png_bytes(fig, dpi: float | None = None) -> bytes:
    """Render ``fig`` to PNG bytes (trimmed like Jupyter's inline backend)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi or fig.dpi, bbox_inches="tight",
                facecolor="white")
    return buffer.getvalue()


def _figure_mimebundle(fig) -> dict:
    return {"image/png": _png_bytes(fig), "text/plain": repr(fig)}


def _check_positive(values: np.ndarray, scale: str, axis: str) -> None:
    if scale == "log" and values.size and not (values[np.isfinite(values)] > 0).all():
        raise ValueError(_("{axis}scale='log' needs positive {axis} values, got minimum "
                           "{minimum:g}; use {axis}scale='linear' or drop the non-positive "
                           "points").format(axis=axis, minimum=np.nanmin(values)))


def _configure_axes(ax, xlabel, ylabel, xlim, ylim, xscale, yscale) -> None:
    """Labels, scales and limits of one Axes (legend is set where the lines are known)."""
    ax.set_xscale(xscale)
    ax.set_yscale(yscale)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if xlim is not None:
        ax.set_xlim(xlim)
    if ylim is not None:
        ax.set_ylim(ylim)
    ax.grid(True, alpha=0.4)


def _check_styles(n_series: int, fmts: Sequence[str], legend: Sequence[str] | None) -> None:
    if n_series > len(fmts):
        raise ValueError(_("{n_series} series but only {num_fmts} formats in fmts={fmts}; "
                           "pass one format per series").format(
            n_series=n_series, num_fmts=len(fmts), fmts=tuple(fmts)))
    if legend is not None and len(legend) != n_series:
        raise ValueError(_("legend has {num_entries} entries but there are {n_series} series; "
                           "pass one legend entry per series").format(
            num_entries=len(legend), n_series=n_series))


# ----------------------------------------------------------------------------- heatmaps

@dataclass(eq=False)
class HeatmapGrid:
    """The figure drawn by :func:`show_heatmaps` and the artists needed to update it in place.

    fig: matplotlib Figure; axes: (rows, cols) array of Axes; images: (rows, cols) array of
    AxesImage; colorbar: the one Colorbar shared by all images (they share one colour scale).
    """

    fig: Any
    axes: np.ndarray
    images: np.ndarray
    colorbar: Any
    vmin: float | None = None     # fixed colour limits, or None to follow the data
    vmax: float | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(rows, cols, queries, keys) of the matrices shown."""
        rows, cols = self.images.shape
        queries, keys = self.images[0, 0].get_array().shape
        return rows, cols, queries, keys

    def update(self, matrices) -> "HeatmapGrid":
        """Show new ``matrices`` of the same shape in the existing images; returns self.

        Calls ``set_array`` on every image and resets the shared colour limits (unless fixed by
        ``vmin``/``vmax``), so the colour bar follows. Nothing is redrawn from scratch.
        """
        data = _heatmap_data(matrices)
        if data.shape != self.shape:
            raise ValueError(_("update() needs matrices of shape {expected} (rows, cols, queries, "
                               "keys) like the grid, got {shape}; call show_heatmaps() again for "
                               "a new shape").format(expected=self.shape, shape=data.shape))
        for (i, j), image in np.ndenumerate(self.images):
            image.set_array(data[i, j])
        low, high = _colour_limits(data, self.vmin, self.vmax)
        self.images[0, 0].set_clim(low, high)        # the norm is shared: all images follow
        self.fig.canvas.draw_idle()
        return self

    def to_png(self, dpi: float | None = None) -> bytes:
        """The figure as PNG bytes, e.g. for an ``ipywidgets.Image`` that a slider updates."""
        return _png_bytes(self.fig, dpi)

    def _ipython_display_(self) -> None:
        # Called when the grid is a cell's last value. A figure still open in pyplot is shown by
        # Jupyter at the end of the cell anyway, so showing it here too would duplicate it.
        if getattr(self.fig, "number", None) is not None:
            import matplotlib.pyplot as plt
            if plt.fignum_exists(self.fig.number):
                return
        from IPython.display import display
        display(_figure_mimebundle(self.fig), raw=True)


def _heatmap_data(matrices) -> np.ndarray:
    data = _to_numpy(matrices, "matrices")
    if data.ndim != 4:
        raise ValueError(_("matrices must have shape (rows, cols, queries, keys), got shape "
                           "{shape}; for a single (queries, keys) matrix m pass "
                           "m.reshape(1, 1, *m.shape)").format(shape=data.shape))
    if 0 in data.shape:
        raise ValueError(_("matrices of shape {shape} (rows, cols, queries, keys) are empty; "
                           "every axis needs at least one entry").format(shape=data.shape))
    if not np.isfinite(data).all():
        raise ValueError(_("matrices contain NaN or infinite values; heatmaps need finite numbers "
                           "(plot attention weights, or replace masked scores first)"))
    return data


def _colour_limits(data: np.ndarray, vmin: float | None, vmax: float | None):
    low = float(data.min()) if vmin is None else float(vmin)
    high = float(data.max()) if vmax is None else float(vmax)
    if high < low:
        raise ValueError(_("colour limits are reversed: vmin={low:g} > vmax={high:g}").format(
            low=low, high=high))
    if high == low:                                  # constant data: widen so the colour bar works
        pad = 0.05 * abs(low) or 0.05
        low, high = low - pad, high + pad
    return low, high


def show_heatmaps(matrices, xlabel, ylabel, titles=None, figsize=(2.5, 2.5), cmap="Reds", *,
                  vmin: float | None = None, vmax: float | None = None,
                  detached: bool = False, xticklabels=None, yticklabels=None,
                  row_titles=None) -> HeatmapGrid:
    """Draw a rows x cols grid of heatmaps with one shared colour bar.

    matrices: (rows, cols, queries, keys), a tensor or array. ``xlabel`` goes under the bottom
    row, ``ylabel`` beside the first column, ``titles`` (one per column) above the top row.
    ``vmin``/``vmax`` fix the colour scale (e.g. 0 and 1 for attention weights); by default it
    spans the data. ``figsize`` is the size of the whole figure, in inches.
    ``xticklabels``/``yticklabels`` name the keys/queries (e.g. tokens; one per column/row of a
    matrix); ``row_titles`` (one per grid row, e.g. "layer 1") go beside the first column.

    As in the book, the figure goes through pyplot, so a notebook shows it once at the end of the
    cell. ``detached=True`` makes a figure unknown to pyplot instead (for widgets: render it with
    ``HeatmapGrid.to_png()`` or display ``grid.fig`` yourself).
    """
    data = _heatmap_data(matrices)
    rows, cols = data.shape[:2]
    if titles is not None and len(titles) != cols:
        raise ValueError(_("titles has {num_titles} entries but the grid has {cols} columns; "
                           "pass one title per column").format(num_titles=len(titles), cols=cols))
    for name, labels, size in (("xticklabels", xticklabels, data.shape[3]),
                               ("yticklabels", yticklabels, data.shape[2]),
                               ("row_titles", row_titles, rows)):
        if labels is not None and len(labels) != size:
            raise ValueError((_("{name} has {num_labels} entries but the matrices need {size}; "
                                "pass one label per grid row") if name == "row_titles" else
                              _("{name} has {num_labels} entries but the matrices need {size}; "
                                "pass one label per entry")).format(
                name=name, num_labels=len(labels), size=size))
    low, high = _colour_limits(data, vmin, vmax)

    from matplotlib.colors import Normalize
    if detached:
        from matplotlib.figure import Figure
        fig = Figure(figsize=figsize, layout="constrained")
        axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    else:
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(rows, cols, figsize=figsize, sharex=True, sharey=True,
                                 squeeze=False, layout="constrained")
    norm = Normalize(low, high)                      # one colour scale for every image
    images = np.empty((rows, cols), dtype=object)
    for (i, j), ax in np.ndenumerate(axes):
        images[i, j] = ax.imshow(data[i, j], cmap=cmap, norm=norm)  # (queries, keys)
        # The axes share their ticks; only the outer ones show labels (the bottom row's x, the
        # first column's y), so only they get them: labelling all of them cost 0.2 s a grid.
        if xticklabels is not None and i == rows - 1:
            ax.set_xticks(range(len(xticklabels)), [str(t) for t in xticklabels], rotation=90)
        if yticklabels is not None and j == 0:
            ax.set_yticks(range(len(yticklabels)), [str(t) for t in yticklabels])
        if i == rows - 1:
            ax.set_xlabel(xlabel)
        if j == 0:
            ax.set_ylabel(ylabel if row_titles is None else f"{row_titles[i]}\n{ylabel}")
        if titles is not None and i == 0:
            ax.set_title(titles[j])
    colorbar = fig.colorbar(images[0, 0], ax=axes.ravel().tolist(), shrink=0.6)
    return HeatmapGrid(fig, axes, images, colorbar, vmin, vmax)


# ----------------------------------------------------------------------------- line plots

def _as_series(data, name: str) -> list[np.ndarray]:
    """One or several 1-D series -> list of 1-D arrays."""
    if hasattr(data, "detach") or isinstance(data, np.ndarray):
        array = _to_numpy(data, name)
        if array.ndim == 1:
            return [array]
        if array.ndim == 2:
            return list(array)                       # (series, points): one row per series
        raise ValueError(_("{name} must be 1-D (one series) or 2-D (series, points), "
                           "got shape {shape}").format(name=name, shape=array.shape))
    try:
        items = list(data)
    except TypeError:
        raise ValueError(_("{name} must be a sequence of numbers or of series, "
                           "got {data!r}").format(name=name, data=data)) from None
    if not items:
        raise ValueError(_("{name} is empty; pass at least one point").format(name=name))
    if np.ndim(_to_numpy(items[0], name)) == 0:      # a list of numbers is one series
        return [_to_numpy(items, name)]
    series = [_to_numpy(item, name) for item in items]
    for k, s in enumerate(series):
        if s.ndim != 1:
            raise ValueError(_("{name}[{k}] must be 1-D, got shape {shape}").format(
                name=name, k=k, shape=s.shape))
    return series


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=DEFAULT_FMTS, figsize=(3.5, 2.5), axes=None):
    """Plot one or several series and return the Axes.

    Y: one series or a list of series; X: one series shared by all Y series, or one per series.
    With Y=None, X holds the series and they are plotted against their index. Without ``axes``
    a new figure of size ``figsize`` is made; given ``axes`` are cleared first (as in the book).
    """
    legend = list(legend) if legend else None         # the book's default is legend=[]
    xs = _as_series(X, "X")
    if Y is None:
        ys, xs = xs, [np.arange(len(s), dtype=float) for s in xs]
    else:
        ys = _as_series(Y, "Y")
    if len(xs) == 1 and len(ys) > 1:
        xs = xs * len(ys)                            # one X shared by every Y series
    if len(xs) != len(ys):
        raise ValueError(_("X has {num_x} series but Y has {num_y}; pass one X series "
                           "shared by all, or one per Y series").format(num_x=len(xs),
                                                                        num_y=len(ys)))
    for k, (x, y) in enumerate(zip(xs, ys)):
        if len(x) != len(y):
            raise ValueError(_("series {k}: X has {num_x} points but Y has {num_y}").format(
                k=k, num_x=len(x), num_y=len(y)))
        _check_positive(x, xscale, "x")
        _check_positive(y, yscale, "y")
    _check_styles(len(ys), fmts, legend)

    if axes is None:
        import matplotlib.pyplot as plt
        _figure, axes = plt.subplots(figsize=figsize, layout="constrained")
    else:
        axes.cla()
    for x, y, fmt in zip(xs, ys, fmts):
        axes.plot(x, y, fmt)
    _configure_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale)
    if legend is not None:
        axes.legend(legend)
    return axes


# ----------------------------------------------------------------------------- animator

class Animator:
    """A training curve that grows as ``add(x, y)`` is called.

    In Jupyter the figure is shown once and updated in place (at most every ``min_interval``
    seconds; the last points are drawn when the cell ends). Without a kernel nothing is shown:
    points are recorded and ``finish()`` draws them. ``X[k]``, ``Y[k]`` hold series k's points.
    The curves go on the first Axes; with nrows*ncols > 1 the others in ``axes`` are yours.
    ``live`` forces (True) or forbids (False) the in-place display; None detects a kernel.
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
                 xscale="linear", yscale="linear", fmts=DEFAULT_FMTS, nrows=1, ncols=1,
                 figsize=(3.5, 2.5), *, min_interval: float = 0.2, live: bool | None = None):
        from matplotlib.figure import Figure       # not pyplot: Jupyter must not show it again
        if min_interval < 0:
            raise ValueError(_("min_interval must be >= 0 seconds, got {min_interval}").format(
                min_interval=min_interval))
        self.fig = Figure(figsize=figsize, layout="constrained")
        self.axes = list(np.ravel(self.fig.subplots(nrows, ncols, squeeze=False)))
        self.legend = list(legend) if legend else None
        self.fmts = tuple(fmts)
        self.xscale, self.yscale = xscale, yscale
        _configure_axes(self.axes[0], xlabel, ylabel, xlim, ylim, xscale, yscale)
        self._autoscale = (xlim is None, ylim is None)
        self.X: list[list[float]] = []
        self.Y: list[list[float]] = []
        self.lines: list = []
        self.min_interval = min_interval
        self._shell = None if live is False else _kernel_shell()
        if live and self._shell is None:
            raise ValueError(_("live=True needs a running Jupyter kernel; use live=None to "
                               "detect it"))
        self._handle = None          # display handle of this cell's figure output
        self._last_draw = -float("inf")
        self._pending = False        # points recorded but not yet drawn

    def __repr__(self) -> str:
        return f"Animator(series={len(self.Y)}, points={sum(map(len, self.Y))})"

    def add(self, x, y) -> None:
        """Record one point per series. y: a number or one per series (None skips a series);
        x: a number shared by all series, or one per series."""
        ys = list(y) if isinstance(y, (list, tuple)) or np.ndim(y) == 1 else [y]
        xs = list(x) if isinstance(x, (list, tuple)) or np.ndim(x) == 1 else [x] * len(ys)
        if len(xs) != len(ys):
            raise ValueError(_("add() got {num_x} x values for {num_y} y values; pass one x "
                               "or one per y").format(num_x=len(xs), num_y=len(ys)))
        if not self.Y:                               # first call fixes the number of series
            _check_styles(len(ys), self.fmts, self.legend)
            self.X = [[] for _ in ys]
            self.Y = [[] for _ in ys]
        elif len(ys) != len(self.Y):
            raise ValueError(_("add() got {num_y} y values but the first call had {first}; "
                               "pass one value per series (None to skip one)").format(
                num_y=len(ys), first=len(self.Y)))
        for k, (a, b) in enumerate(zip(xs, ys)):
            if a is None or b is None:
                continue
            a, b = float(a), float(b)                # also turns 0-d tensors into floats
            _check_positive(np.array([a]), self.xscale, "x")
            _check_positive(np.array([b]), self.yscale, "y")
            self.X[k].append(a)
            self.Y[k].append(b)
        self._pending = True
        if self._shell is not None and time.monotonic() - self._last_draw >= self.min_interval:
            self._show_live()

    def finish(self) -> "Animator":
        """Draw every recorded point (updating the live display, if any); returns self.

        The figure is ``self.fig`` (e.g. ``animator.finish().fig.savefig(...)``). As a cell's
        last value the animator adds no second copy of a figure already shown in that cell.
        """
        if self._shell is not None and self._handle is not None:
            self._show_live()
        else:
            self._draw()
        return self

    def _draw(self) -> None:
        """Copy the recorded points into the lines (creating them on first use)."""
        ax = self.axes[0]
        if not self.lines and self.Y:
            self.lines = [ax.plot([], [], fmt)[0] for fmt, _ in zip(self.fmts, self.Y)]
            if self.legend is not None:
                ax.legend(self.lines, self.legend)
        for line, xs, ys in zip(self.lines, self.X, self.Y):
            line.set_data(xs, ys)
        if any(self._autoscale):
            ax.relim()
            ax.autoscale_view(scalex=self._autoscale[0], scaley=self._autoscale[1])
        self._pending = False

    def _show_live(self) -> None:
        """Draw and publish: the first time in a cell a new display, later an in-place update."""
        from IPython.display import display
        self._draw()
        bundle = _figure_mimebundle(self.fig)
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
            self._shell.events.register("post_execute", self._end_of_cell)
        else:
            self._handle.update(bundle, raw=True)
        self._last_draw = time.monotonic()

    def _end_of_cell(self) -> None:
        # Runs once after the cell that showed the figure: draw the last points, then let a later
        # cell that adds points (or shows the animator) start a display of its own.
        if self._pending:
            self._show_live()
        self._shell.events.unregister("post_execute", self._end_of_cell)
        self._handle = None

    def _ipython_display_(self) -> None:
        # As a cell's last value: refresh the figure already shown in this cell, or show it once.
        if self._shell is not None:
            self._show_live()
            return
        from IPython.display import display
        self._draw()
        display(_figure_mimebundle(self.fig), raw=True)


# ----------------------------------------------------------------------------- progress bars

def progress_disabled() -> bool:
    """True when the environment variable ``ATTENTION_COURSE_NO_PROGRESS`` switches bars off."""
    value = os.environ.get(NO_PROGRESS_ENV, "").strip().lower()
    if value in _TRUE_WORDS:
        return True
    if value in _FALSE_WORDS:
        return False
    raise ValueError(_("{variable}={value!r} is not understood; set it to 1 to hide "
                       "progress bars or 0 (or unset it) to show them").format(
        variable=NO_PROGRESS_ENV, value=value))


def progress(iterable: Iterable | None = None, **kw):
    """``tqdm.auto.tqdm(iterable, **kw)``: a bar in Jupyter, a text bar in a terminal.

    Every training loop in the course wraps its loop in this. Set the environment variable
    ``ATTENTION_COURSE_NO_PROGRESS=1`` to disable all bars (an explicit ``disable=`` wins).
    """
    from tqdm.auto import tqdm
    if "disable" not in kw:
        kw["disable"] = progress_disabled()
    return tqdm(iterable, **kw)
