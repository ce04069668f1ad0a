"""The pattern every explorer follows: controls -> pure function -> artists updated in place."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import clear_output, display


class Explorer:
    """Base class: subclasses fill ``self.controls`` and implement ``compute`` and ``draw``.

    - ``compute(**values) -> dict`` is pure (no widgets, no figures);
    - ``draw(state)`` updates artists created once in ``build_figure``;
    - ``readout`` is an HTML line with the numbers, for students and browser tests.
    """

    readout_class = "explorer-readout"

    def __init__(self, controls: dict, figsize=(6, 2.6)):
        self.controls = controls
        with plt.ioff():                      # build once; shown through self.output only
            self.fig = plt.figure(figsize=figsize)
        self.build_figure(self.fig)
        self.readout = widgets.HTML()
        self.readout.add_class(self.readout_class)
        self.output = widgets.Output()
        self.state: dict = {}
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.widget = widgets.VBox([widgets.HBox(list(controls.values()),
                                                 layout=widgets.Layout(flex_flow="row wrap")),
                                    self.readout, self.output])
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

    def _ipython_display_(self):
        display(self.widget)
