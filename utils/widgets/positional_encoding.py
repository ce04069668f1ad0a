"""Lesson 6 explorer: the sinusoidal table, four of its columns, and PE(i)·PE(j) over positions."""

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.ticker import MaxNLocator

from utils.positional import sinusoid_frequencies
from utils.i18n import _
from utils.widgets.base import BlittedExplorer

COLUMNS_DRAWN = 4
LINE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def encoding_view(dim: int, base: float, positions: tuple, first_column: int) -> dict:
    """Everything the explorer shows, as plain arrays (no widgets, no figures).

    positions: (start, stop) inclusive; columns first_column .. first_column + 3 (those that exist).
    Returns the table (n, dim), the drawn columns, their periods 2π/w, the cosine similarity
    (n, n) = PE(i)·PE(j) / (dim/2), and how far it strays from a function of j - i alone.
    """
    start, stop = int(positions[0]), int(positions[1])
    if not 0 <= start <= stop:
        raise ValueError(f"position range must satisfy 0 <= start <= stop, got ({start}, {stop})")
    if not 0 <= first_column < dim:
        raise ValueError(f"first_column must lie in 0..{dim - 1} for an encoding of dimension "
                         f"{dim}, got {first_column}")
    # numpy rather than torch here: on a busy 2-core machine torch's thread pool makes these
    # small float64 sin/cos calls take ~10 ms instead of ~0.05 ms. tests/ check that the table
    # equals utils.positional.positional_encoding_table.
    steps = np.arange(start, stop + 1)                                            # (n,)
    frequencies = sinusoid_frequencies(dim, base).numpy()                         # (d/2,)
    angles = np.outer(steps, frequencies)                                         # (n, d/2)
    table = np.empty((len(steps), dim))                                           # (n, d)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    columns = list(range(first_column, min(first_column + COLUMNS_DRAWN, dim)))
    periods = [2 * math.pi / frequencies[c // 2] for c in columns]
    similarity = table @ table.T / (dim / 2)                                      # (n, n) in [-1, 1]
    # Closed form of PE(i)·PE(j) from j - i alone (utils.positional.offset_similarity).
    offsets = np.arange(-(len(steps) - 1), len(steps))                           # (2n - 1,)
    by_offset = np.cos(np.outer(offsets, frequencies)).sum(1) / (dim / 2)         # (2n - 1,)
    toeplitz = by_offset[steps[None, :] - steps[:, None] + len(steps) - 1]        # (n, n)
    return {"dim": dim, "base": float(base), "positions": steps, "table": table,
            "columns": columns, "periods": periods, "similarity": similarity,
            "offset_spread": float(np.abs(similarity - toeplitz).max()),
            "longest_period": 2 * math.pi / frequencies[-1]}


class PositionalEncodingExplorer(BlittedExplorer):
    """Sliders: encoding dimension, base, position range, first drawn column.

    Left: columns first..first+3 versus position. Middle: the table as a heatmap.
    Right: cosine similarity of PE(i) and PE(j), constant along every diagonal.
    """

    def __init__(self, dim: int = 32, base: float = 10000.0, positions=(0, 59),
                 first_column: int = 6, max_dim: int = 128, max_position: int = 200):
        if dim % 2 or not 4 <= dim <= max_dim:
            raise ValueError(f"dim must be even and lie in 4..{max_dim}, got {dim}")
        style = {"description_width": "initial"}
        controls = {
            "dim": widgets.IntSlider(value=dim, min=4, max=max_dim, step=2,
                                     description=_("encoding dim"), style=style),
            "base": widgets.FloatLogSlider(value=base, base=10, min=1, max=5, step=0.5,
                                           description=_("base"), readout_format=".0f", style=style),
            "positions": widgets.IntRangeSlider(value=positions, min=0, max=max_position,
                                                description=_("positions"), style=style),
            "first_column": widgets.IntSlider(value=first_column, min=0,
                                              max=dim - COLUMNS_DRAWN, description=_("first column"),
                                              style=style),
        }
        self._holding = False
        super().__init__(controls, figsize=(10, 3.0))
        self.keep_column_axes()

    def build_figure(self, fig):
        self.ax_lines, self.ax_table, self.ax_sim = fig.subplots(1, 3, width_ratios=[1.3, 1, 1])
        self.lines = [self.ax_lines.plot([], [], color=c, lw=1.4)[0] for c in LINE_COLOURS]
        # Coloured labels instead of a legend: a legend costs ~10 ms per redraw, a text ~0.3 ms.
        self.line_labels = [self.ax_lines.text(0.02 + 0.24 * k, 1.02, "", color=c, fontsize=8,
                                               transform=self.ax_lines.transAxes)
                            for k, c in enumerate(LINE_COLOURS)]
        self.ax_lines.set(ylim=(-1.1, 1.1), xlabel=_("position i"))
        self.table_image = self.ax_table.imshow(np.zeros((2, 2)), cmap="RdBu_r", vmin=-1, vmax=1,
                                                aspect="auto", interpolation="nearest")
        self.ax_table.set(xlabel=_("column (encoding dim)"), ylabel=_("position i"),
                         title=_("P[i, column]"))
        self.sim_image = self.ax_sim.imshow(np.zeros((2, 2)), cmap="viridis", vmin=-1, vmax=1,
                                            aspect="auto", interpolation="nearest")
        # Symmetric, and its rows are the middle panel's positions: x ticks suffice (each tick
        # axis redrawn costs ~8 ms when the range moves).
        self.ax_sim.set(xlabel=_("position j"), ylabel=_("position i"),
                        title="PE(i)·PE(j) / (d/2)", yticks=[])
        for axis in self.moving_axes():
            axis.set_major_locator(MaxNLocator(5, integer=True))
        for ax in (self.ax_lines, self.ax_table, self.ax_sim):   # room for 3-digit tick labels
            ax.set_xlim(0, 200)
        self.ax_table.set_ylim(200, 0)
        self.ax_sim.set_ylim(200, 0)
        fig.colorbar(self.sim_image, ax=self.ax_sim, shrink=0.85)
        fig.tight_layout()

    def position_axes(self) -> list:
        """Axes whose ticks follow the position range."""
        return [self.ax_lines.xaxis, self.ax_table.yaxis, self.ax_sim.xaxis]

    def moving_axes(self) -> list:
        return [*self.position_axes(), self.ax_table.xaxis]

    def data_artists(self) -> list:
        return [*self.lines, *self.line_labels, self.table_image, self.sim_image]

    def animated_artists(self):
        return [*self.data_artists(), *self.moving_axes()]

    def cached_sprites(self) -> list:
        """The tick axes, each kept by its own limits: the table's column axis follows the
        dimension (all of them drawn when the explorer is built, ``keep_column_axes``), the
        three position axes the range; moving the dimension or base redraws the heatmaps alone.

        Drawing an axis with its tick labels costs ~8 ms, a heatmap ~5 ms, pasting a kept one
        a copy: moving the column slider draws four lines and their labels only.
        """
        return [(("columns", self.ax_table.get_xlim()), [self.ax_table.xaxis]),
                (("lines x", self.ax_lines.get_xlim()), [self.ax_lines.xaxis]),
                (("table y", self.ax_table.get_ylim()), [self.ax_table.yaxis]),
                (("similarity x", self.ax_sim.get_xlim()), [self.ax_sim.xaxis])]

    def keep_column_axes(self) -> None:
        """Draw the column axis of every dimension the slider reaches now (~0.4 s for 63)."""
        xlim, slider = self.ax_table.get_xlim(), self.controls["dim"]
        for dim in range(slider.min, slider.max + 1, slider.step):
            self.ax_table.set_xlim(-0.5, dim - 0.5)                  # as draw sets it
            self.keep_sprite(("columns", self.ax_table.get_xlim()), [self.ax_table.xaxis])
        self.ax_table.set_xlim(*xlim)

    def cached_layers(self) -> list:
        """The two heatmaps, kept per (dim, base) and axes (the range); the lines go on top."""
        return [((self.state["dim"], self.state["base"]), [self.table_image, self.sim_image])]

    def frame_key(self, state):
        return (state["dim"], state["base"], int(state["positions"][0]),
                int(state["positions"][-1]), tuple(state["columns"]))

    def _on_change(self, change) -> None:
        if self._holding:
            return
        if change["owner"] is self.controls["dim"]:
            column = self.controls["first_column"]
            self._holding = True                 # one redraw, after the column range is fixed
            try:
                column.max = max(0, change["new"] - COLUMNS_DRAWN)
            finally:
                self._holding = False
        self.update()

    def compute(self, dim, base, positions, first_column) -> dict:
        return encoding_view(dim, base, positions, first_column)

    def draw(self, state):
        steps, table = state["positions"], state["table"]
        start, stop = steps[0], steps[-1]
        padded = state["columns"] + [None] * (COLUMNS_DRAWN - len(state["columns"]))
        for line, label, column in zip(self.lines, self.line_labels, padded):
            line.set_visible(column is not None)
            label.set_text("" if column is None else _("column {column}").format(column=column))
            if column is not None:
                line.set_data(steps, table[:, column])
        span = (start - 0.5, stop + 0.5)
        self.ax_lines.set_xlim(*span)
        self.table_image.set_data(table)
        self.table_image.set_extent((-0.5, state["dim"] - 0.5, span[1], span[0]))
        self.ax_table.set(xlim=(-0.5, state["dim"] - 0.5), ylim=(span[1], span[0]))
        self.sim_image.set_data(state["similarity"])
        self.sim_image.set_extent((span[0], span[1], span[1], span[0]))
        self.ax_sim.set(xlim=span, ylim=(span[1], span[0]))

    def describe(self, state) -> str:
        columns = state["columns"]
        periods = ", ".join(f"{p:.1f}" for p in state["periods"])
        # Round-off digits differ between machines: print the bound they stay under.
        spread = state["offset_spread"]
        deviation = _("below 1e-12") if spread < 1e-12 else f"{spread:.1e}"
        return _("d = {dim}, base = {base}, positions {start}–{stop}, columns {first}–{last} "
                 "(periods {periods}); longest period {longest}; similarity depends only on "
                 "j − i (largest deviation {deviation})").format(
            dim=state["dim"], base=f"{state['base']:.0f}", start=state["positions"][0],
            stop=state["positions"][-1], first=columns[0], last=columns[-1], periods=periods,
            longest=f"{state['longest_period']:.0f}", deviation=deviation)
