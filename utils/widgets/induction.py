"""Lesson 8 explorer: watch an induction head form, checkpoint by checkpoint.

``InductionExplorer(run)`` takes an ``utils.induction.InductionRun``. A training-step slider moves
through its saved checkpoints. Left: the loss on the first and the second copy at every
checkpoint, with a marker at the chosen step. Right: the attention of every layer and head at that
step on the run's first evaluation sequence (rows: queries, columns: keys, position:token). The
readout gives both losses, the best previous-token score of layer 1 and the best induction score
of the last layer, with the heads that hold them.
"""

import ipywidgets as widgets
import numpy as np

from utils.i18n import _
from utils.widgets.base import BlittedExplorer


def checkpoint_summary(checkpoint) -> dict:
    """The readout's numbers for one ``InductionCheckpoint``."""
    previous = checkpoint.previous_token[0]                        # (heads,) of layer 1
    induction = checkpoint.induction[-1]                           # (heads,) of the last layer
    return {"step": checkpoint.step, "first": checkpoint.first_copy_loss,
            "second": checkpoint.second_copy_loss,
            "previous_head": int(previous.argmax()), "previous": float(previous.max()),
            "induction_head": int(induction.argmax()), "induction": float(induction.max())}


class InductionExplorer(BlittedExplorer):
    """Loss curves and every head's map of an induction run; a slider over its checkpoints."""

    def __init__(self, run):
        if not run.checkpoints:
            raise ValueError("the run has no checkpoints; train it with num_checkpoints >= 2")
        self.run = run
        self.by_step = {c.step: c for c in run.checkpoints}
        layers, heads = run.checkpoints[0].attention.shape[:2]
        self.panels = [(l, h) for l in range(layers) for h in range(heads)]
        steps = [c.step for c in run.checkpoints]
        controls = {"step": widgets.SelectionSlider(options=steps, value=steps[-1],
                                                    description=_("training step"),
                                                    style={"description_width": "initial"})}
        super().__init__(controls, figsize=(10, 3.9))

    def build_figure(self, fig):
        checkpoints = self.run.checkpoints
        steps = [c.step for c in checkpoints]
        self.loss_ax = fig.add_axes([0.06, 0.16, 0.25, 0.72])
        self.loss_ax.plot(steps, [c.first_copy_loss for c in checkpoints], label=_("first copy"))
        self.loss_ax.plot(steps, [c.second_copy_loss for c in checkpoints], "--",
                          label=_("second copy"))
        self.loss_ax.set_xlabel(_("training step"), fontsize=8)
        self.loss_ax.set_ylabel(_("loss per token"), fontsize=8)
        self.loss_ax.legend(fontsize=7)
        self.loss_ax.tick_params(labelsize=7)
        self.marker = self.loss_ax.axvline(steps[-1], color="0.3", lw=1)
        tokens = self.run.eval_tokens[0].tolist()
        labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
        n = len(tokens)
        width = 0.6 / len(self.panels)
        self.images = []
        for index, (layer, head) in enumerate(self.panels):
            ax = fig.add_axes([0.37 + index * (width + 0.02), 0.2, width, 0.68])
            image = ax.imshow(np.zeros((n, n)), cmap="Reds", vmin=0, vmax=1,
                              interpolation="nearest")
            ax.set_title(_("layer {layer}, head {head}").format(layer=layer + 1, head=head + 1),
                         fontsize=8)
            ax.set_xticks(np.arange(n), labels, rotation=90, fontsize=5)
            ax.set_yticks(np.arange(n), labels if index == 0 else [], fontsize=5)
            ax.set_xlabel(_("keys (position:token)"), fontsize=7)
            if index == 0:
                ax.set_ylabel(_("queries"), fontsize=7)
            self.images.append(image)

    def animated_artists(self):
        return [self.marker, *self.images]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, step) -> dict:
        checkpoint = self.by_step[step]
        return {"checkpoint": checkpoint, **checkpoint_summary(checkpoint)}

    def draw(self, state) -> None:
        self.marker.set_xdata([state["step"], state["step"]])
        attention = state["checkpoint"].attention                  # (layers, heads, n, n)
        for image, (layer, head) in zip(self.images, self.panels):
            image.set_data(attention[layer, head].numpy())

    def describe(self, state) -> str:
        last = len(self.run.checkpoints[0].attention)
        return " &nbsp;·&nbsp; ".join([
            _("step {step}").format(step=state["step"]),
            _("loss: first copy {first}, second copy {second}").format(
                first=f"{state['first']:.2f}", second=f"{state['second']:.2f}"),
            _("layer 1 previous-token score {score} (head {head})").format(
                score=f"{state['previous']:.2f}", head=state["previous_head"] + 1),
            _("layer {layer} induction score {score} (head {head})").format(
                layer=last, score=f"{state['induction']:.2f}", head=state["induction_head"] + 1)])
