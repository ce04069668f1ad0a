"""Lesson 1 explorer: move a query and a temperature, watch the four attention weights."""

import ipywidgets as widgets
import numpy as np
import torch

from utils.attention import soft_address
from utils.i18n import _
from utils.widgets.base import BlittedExplorer

# The lesson's dictionary: four keys (one-hot directions scaled by 10) and their values.
LESSON_KEYS = [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0], [0.0, 0.0, 10.0]]
LESSON_VALUES = [[1.0, 0.0], [10.0, 0.0], [100.0, 5.0], [1000.0, 6.0]]


def query_slider(name: str, value: float) -> widgets.FloatSlider:
    return widgets.FloatSlider(value=value, min=-10.0, max=10.0, step=0.5, description=name,
                               continuous_update=True, readout_format=".1f",
                               style={"description_width": "initial"})


class AttentionCuesExplorer(BlittedExplorer):
    """Three query sliders and a temperature slider; bar chart, heatmap and output update live.

    Keys and query entries are numbered from 1 on every label, as in the lesson's text.
    """

    def __init__(self, keys=LESSON_KEYS, values=LESSON_VALUES, query=(0.0, 10.0, 0.0)):
        self.keys = torch.as_tensor(keys, dtype=torch.float32)       # (n, 3)
        self.values_ = torch.as_tensor(values, dtype=torch.float32)  # (n, v)
        if self.keys.shape[1] != 3 or len(query) != 3:
            raise ValueError(f"the explorer has three query sliders, so keys must have shape "
                             f"(n, 3); got keys {tuple(self.keys.shape)}, query of length {len(query)}")
        # Labels count from 1, as lesson 1 does everywhere (keys 1-4, entries 1-3 of the query).
        controls = {f"q{i + 1}": query_slider(_("query entry {i}").format(i=i + 1), q)
                    for i, q in enumerate(query)}
        controls["temperature"] = widgets.FloatLogSlider(
            value=1.0, base=10, min=-1, max=1, step=0.05, description=_("temperature"),
            readout_format=".2f", style={"description_width": "initial"})
        super().__init__(controls, figsize=(7.5, 2.6))

    def build_figure(self, fig):
        n = self.keys.shape[0]
        self.ax_bar, self.ax_map = fig.subplots(1, 2, width_ratios=[1.2, 1])
        self.bars = self.ax_bar.bar(range(n), np.zeros(n), color="tab:red")
        self.ax_bar.set(ylim=(0, 1.15), xticks=range(n),
                        xticklabels=[_("key {i}").format(i=i + 1) for i in range(n)],
                        ylabel=_("attention weight"), title=_("weights"))
        self.bar_labels = [self.ax_bar.text(i, 0, "", ha="center", va="bottom", fontsize=8)
                           for i in range(n)]
        self.image = self.ax_map.imshow(np.zeros((1, n)), cmap="Reds", vmin=0, vmax=1,
                                        aspect="auto")
        self.ax_map.set(xticks=range(n), xticklabels=range(1, n + 1), yticks=[0],
                        yticklabels=[_("query")], xlabel=_("keys"), title=_("heatmap"))
        fig.colorbar(self.image, ax=self.ax_map, shrink=0.8)
        fig.tight_layout()

    def animated_artists(self):
        return [*self.bars, *self.bar_labels, self.image]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, q1, q2, q3, temperature) -> dict:
        query = torch.tensor([[q1, q2, q3]], dtype=torch.float32)     # (1, 3)
        output, weights = soft_address(query, self.keys, self.values_, temperature=temperature)
        return {"query": query[0], "temperature": temperature, "weights": weights[0],
                "output": output[0]}

    def draw(self, state):
        weights = state["weights"].numpy()
        for bar, label, w in zip(self.bars, self.bar_labels, weights):
            bar.set_height(w)
            label.set_y(w)
            label.set_text(f"{w:.2f}")
        self.image.set_array(weights[None, :])

    def describe(self, state) -> str:
        weights = ", ".join(f"{w:.2f}" for w in state["weights"].tolist())
        output = ", ".join(f"{o:.2f}" for o in state["output"].tolist())
        query = ", ".join(f"{q:g}" for q in state["query"].tolist())
        return _("query [{query}], T = {temperature} &nbsp;·&nbsp; weights: [{weights}] "
                 "&nbsp;·&nbsp; output: [{output}]").format(
            query=query, temperature=f"{state['temperature']:.2f}", weights=weights, output=output)
