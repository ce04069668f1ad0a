"""The pattern every explorer follows: controls -> pure function -> artists updated in place."""

import base64
import html
import io
import re

import ipywidgets as widgets
from matplotlib.figure import Figure
import numpy as np
from IPython.display import clear_output, display
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image


class ExplorerBox(widgets.VBox):
    """An explorer's widget. Its display also carries a static picture (PNG) and a text line
    of the explorer's state when shown: JupyterLab renders the live widget, while viewers
    without a kernel (GitHub, nbviewer, a saved notebook) show the picture instead."""

    def __init__(self, children, explorer: "Explorer"):
        super().__init__(children)
        self._explorer = explorer

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["image/png"] = base64.b64encode(self._explorer.snapshot_png()).decode("ascii")
        bundle["text/plain"] = self._explorer.snapshot_text()
        return bundle


class Explorer:
    """Base class: subclasses fill ``self.controls`` and implement ``compute`` and ``draw``.

    - ``compute(**values) -> dict`` is pure (no widgets, no figures);
    - ``draw(state)`` updates artists created once in ``build_figure``;
    - ``readout`` is an HTML line with the numbers, for students and browser tests.
    """

    readout_class = "explorer-readout"

    def __init__(self, controls: dict, figsize=(6, 2.6)):
        self.controls = controls
        # Built once, outside pyplot (so it is never shown twice, nor kept after the explorer
        # is gone); shown through self.output only.
        self.fig = Figure(figsize=figsize)
        self.build_figure(self.fig)
        self.readout = widgets.HTML()
        self.readout.add_class(self.readout_class)
        self.output = widgets.Output()
        self.state: dict = {}
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.widget = ExplorerBox([widgets.HBox(list(controls.values()),
                                                layout=widgets.Layout(flex_flow="row wrap")),
                                   self.readout, self.output], explorer=self)
        self.update()

    # -- to override -------------------------------------------------------------------
    def build_figure(self, fig):
        raise NotImplementedError

    def compute(self, **values) -> dict:
        raise NotImplementedError

    def draw(self, state: dict) -> None:
        raise NotImplementedError

    def describe(self, state: dict) -> str:
        raise NotImplementedError

    # -- shared machinery ----------------------------------------------------------------
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def update(self) -> dict:
        """Recompute from the current control values and redraw; returns the new state."""
        self.state = self.compute(**self.values())
        self.draw(self.state)
        self.readout.value = self.describe(self.state)
        with self.output:
            clear_output(wait=True)
            display(self.fig)
        return self.state

    def _on_change(self, _change) -> None:
        self.update()

    def snapshot_png(self) -> bytes:
        """PNG of the figure in the current state (the static picture of a saved notebook)."""
        buffer = io.BytesIO()
        self.fig.savefig(buffer, format="png")
        return buffer.getvalue()

    def snapshot_text(self) -> str:
        """The readout as plain text: what the explorer shows, for text-only viewers."""
        text = html.unescape(re.sub(r"<[^>]+>", " ", self.readout.value or ""))
        return "Interactive explorer (run the notebook to use it). " + " ".join(text.split())

    def _ipython_display_(self):
        display(self.widget)


class BlittedExplorer(Explorer):
    """An Explorer that redraws only its changing artists on a cached background.

    Re-rendering a whole figure costs 100-300 ms on a small CPU; here the static parts (axes,
    ticks, colour bar, legend) are drawn once, and each update draws the artists listed by
    ``animated_artists()`` over a copy of them and sends the PNG to an ``ipywidgets.Image``.
    """

    def animated_artists(self) -> list:
        raise NotImplementedError

    def snapshot_png(self) -> bytes:
        return self.render_png()

    def render_png(self) -> bytes:
        """PNG of the figure as it is now (cached background + animated artists)."""
        canvas = self.background_canvas()
        canvas.restore_region(self._background)
        for artist in self.animated_artists():
            self.fig.draw_artist(artist)
        return self.canvas_png()

    def background_canvas(self) -> FigureCanvasAgg:
        """The Agg canvas, with the static background (everything not animated) cached."""
        if not isinstance(self.fig.canvas, FigureCanvasAgg):
            FigureCanvasAgg(self.fig)                           # attaches itself to the figure
        canvas = self.fig.canvas
        if getattr(self, "_background", None) is None:
            for artist in self.animated_artists():
                artist.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            for artist in self.animated_artists():
                artist.set_visible(True)
            self.background_redrawn()
        return canvas

    def background_redrawn(self) -> None:
        """Hook: called after the cached background was drawn anew (layers built on it reset)."""

    def canvas_png(self) -> bytes:
        """The canvas as it is now, as PNG bytes (fast compression: it goes to the browser)."""
        buffer = io.BytesIO()
        rgb = np.ascontiguousarray(np.asarray(self.fig.canvas.buffer_rgba())[..., :3])  # (h, w, 3)
        Image.fromarray(rgb).save(buffer, format="png", compress_level=1)
        return buffer.getvalue()

    def update(self) -> dict:
        """Recompute, update the artists in place, and show the new PNG (no full redraw)."""
        if getattr(self, "view", None) is None:
            self.view = widgets.Image(format="png")
            with self.output:
                display(self.view)
        self.state = self.compute(**self.values())
        self.draw(self.state)
        self.readout.value = self.describe(self.state)
        self.view.value = self.render_png()
        return self.state
