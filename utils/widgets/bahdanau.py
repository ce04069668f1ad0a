"""Lesson 4: the alignment explorer — type English, read the French and where each word looked.

Pure parts (tested directly): ``alignment_view`` translates a sentence into everything the
explorer shows, or a one-line note instead of a traceback; ``strongest_alignment`` pairs each
output word with the source word it attends to most.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import patches, transforms
from matplotlib.backends.backend_agg import FigureCanvasAgg

from utils.training import Translation, greedy_translate
from utils.widgets.base import BlittedExplorer


def strongest_alignment(attention: torch.Tensor, source_tokens: list,
                        output_tokens: list) -> list:
    """[(output word, most attended source word, its weight), ...], one per output step.

    attention: (output steps, source tokens).
    """
    if tuple(attention.shape) != (len(output_tokens), len(source_tokens)):
        raise ValueError(f"attention has shape {tuple(attention.shape)} but there are "
                         f"{len(output_tokens)} output and {len(source_tokens)} source tokens; "
                         f"pass weights (output steps, source tokens)")
    weights, best = attention.max(dim=1)                               # (steps,), (steps,)
    return [(out, source_tokens[j], w) for out, j, w in
            zip(output_tokens, best.tolist(), weights.tolist())]


def alignment_view(model, sentence: str, src_vocab, tgt_vocab, num_steps: int) -> dict:
    """Everything the explorer shows for ``sentence``.

    Returns {"sentence", "translation" (a ``Translation`` or None), "alignment" (the
    ``strongest_alignment`` of every output step, or []), "notes" (list of one-line
    remarks in plain text: unknown words, words cut by ``num_steps``, no ``<eos>``), "error"
    (a one-line reason when there is nothing to translate, else None)}.
    """
    view = {"sentence": sentence, "translation": None, "alignment": [], "notes": [],
            "error": None}
    try:
        translation = greedy_translate(model, sentence, src_vocab, tgt_vocab, num_steps,
                                       truncate=True)
    except ValueError as error:
        view["error"] = str(error)
        return view
    view["translation"] = translation
    view["alignment"] = strongest_alignment(translation.attention, translation.source_tokens,
                                            translation.output_tokens)
    if translation.unknown:
        words = ", ".join(f"'{w}'" for w in dict.fromkeys(translation.unknown))
        view["notes"].append(f"not in the training vocabulary, read as <unk>: {words}")
    if translation.dropped:
        view["notes"].append(f"too long for num_steps={num_steps}: only the first "
                             f"{num_steps - 1} words were translated (dropped: "
                             f"'{' '.join(translation.dropped)}')")
    if not translation.ended:
        view["notes"].append(f"no <eos> within {num_steps} steps: the translation was cut")
    return view


class AlignmentExplorer(BlittedExplorer):
    """Text box -> greedy translation and its attention heatmap; a slider picks an output word.

    The highlighted row of the heatmap and the bar chart show which source words the chosen
    output word attended to.
    """

    def __init__(self, model, src_vocab, tgt_vocab, num_steps: int,
                 sentence: str = "i'm home ."):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.num_steps = num_steps
        self._views: dict[str, dict] = {}
        self._syncing = False
        rows = self._rows(self.view_of(sentence))
        controls = {
            "sentence": widgets.Text(value=sentence, description="English",
                                     placeholder="type a sentence, press Enter",
                                     continuous_update=False),
            "step": widgets.IntSlider(value=max(rows - 1, 0), min=0, max=max(rows - 1, 0),
                                      description="output word", continuous_update=True),
        }
        super().__init__(controls, figsize=(8, 3.4))

    # -- pure -------------------------------------------------------------------------------
    def view_of(self, sentence: str) -> dict:
        """``alignment_view`` of a sentence, remembered (the model does not change)."""
        if sentence not in self._views:
            self._views[sentence] = alignment_view(self.model, sentence, self.src_vocab,
                                                   self.tgt_vocab, self.num_steps)
        return self._views[sentence]

    @staticmethod
    def _rows(view: dict) -> int:
        translation = view["translation"]
        return 0 if translation is None else len(translation.output_tokens)

    def compute(self, sentence: str, step: int) -> dict:
        view = self.view_of(sentence)
        rows = self._rows(view)
        return {**view, "step": min(step, rows - 1) if rows else None}

    # -- figure -----------------------------------------------------------------------------
    def build_figure(self, fig):
        n = self.num_steps
        self.ax_map, self.ax_bar = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.3, 1]})
        cmap = self._cmap()
        self.image = self.ax_map.imshow(np.full((n, n), np.nan), cmap=cmap, vmin=0, vmax=1,
                                        aspect="auto")
        fig.colorbar(self.image, ax=self.ax_map, shrink=0.8, label="attention weight")
        self.ax_map.set(xticks=[], yticks=[])
        for spine in self.ax_map.spines.values():  # the image's edge moves with the sentence
            spine.set_visible(False)
        self.ax_map.set_xlabel("English (keys)", labelpad=38)
        self.ax_map.set_ylabel("French (queries)", labelpad=58)
        below = transforms.blended_transform_factory(self.ax_map.transData,
                                                     self.ax_map.transAxes)
        left = transforms.blended_transform_factory(self.ax_map.transAxes,
                                                    self.ax_map.transData)
        self.src_labels = [self.ax_map.text(j, -0.03, "", transform=below, rotation=40,
                                            ha="right", va="top", fontsize=9)
                           for j in range(n)]
        self.out_labels = [self.ax_map.text(-0.03, i, "", transform=left, ha="right",
                                            va="center", fontsize=9) for i in range(n)]
        self.row_box = patches.Rectangle((-0.5, -0.5), 1, 1, fill=False, lw=2.5,
                                         edgecolor="tab:blue")
        self.ax_map.add_patch(self.row_box)

        self.bars = self.ax_bar.barh(range(n), np.zeros(n), color="tab:blue")
        self.ax_bar.set(xlim=(0, 1), yticks=[], xlabel="attention weight")
        bar_left = transforms.blended_transform_factory(self.ax_bar.transAxes,
                                                        self.ax_bar.transData)
        self.bar_labels = [self.ax_bar.text(-0.03, j, "", transform=bar_left, ha="right",
                                            va="center", fontsize=9) for j in range(n)]
        self.bar_title = self.ax_bar.text(0.5, 1.03, "", transform=self.ax_bar.transAxes,
                                          ha="center", va="bottom", fontsize=10)
        self.message = self.ax_map.text(0.5, 0.5, "", transform=self.ax_map.transAxes,
                                        ha="center", va="center", fontsize=9, wrap=True)
        fig.subplots_adjust(left=0.14, right=0.97, bottom=0.27, top=0.88, wspace=0.55)

    @staticmethod
    def _cmap():
        from matplotlib import colormaps
        return colormaps["Reds"].with_extremes(bad="white")     # cells outside the sentence

    def sentence_artists(self) -> list:
        """Artists that change only with the sentence (drawn once per sentence, then cached)."""
        return [self.image, *self.src_labels, *self.out_labels, self.message]

    def animated_artists(self) -> list:
        """Artists that change with the step slider (drawn on every update)."""
        return [self.row_box, *self.bars, *self.bar_labels, self.bar_title]

    def render_png(self) -> bytes:
        """Two cached layers: the figure's static parts, then those plus the sentence's artists.

        A slider move redraws only the row box and the bar chart over the second layer.
        """
        if not isinstance(self.fig.canvas, FigureCanvasAgg):
            FigureCanvasAgg(self.fig)
        canvas = self.fig.canvas
        key = self.state.get("sentence")
        if getattr(self, "_static", None) is None:
            every = self.sentence_artists() + self.animated_artists()
            shown = [artist.get_visible() for artist in every]
            for artist in every:
                artist.set_visible(False)
            canvas.draw()
            self._static = canvas.copy_from_bbox(self.fig.bbox)
            for artist, visible in zip(every, shown):
                artist.set_visible(visible)
            self._sentence_key = object()                 # matches no sentence
        if key != self._sentence_key:
            canvas.restore_region(self._static)
            for artist in self.sentence_artists():
                self.fig.draw_artist(artist)
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            self._sentence_key = key
        return super().render_png()

    def draw(self, state: dict) -> None:
        n = self.num_steps
        translation: Translation | None = state["translation"]
        for label in (*self.src_labels, *self.out_labels, *self.bar_labels):
            label.set_text("")
        for label in self.bar_labels:
            label.set_fontweight("normal")
        for bar in self.bars:
            bar.set_width(0)
            bar.set_visible(False)
        if translation is None or translation.attention is None:
            self.image.set_array(np.full((n, n), np.nan))
            self.row_box.set_visible(False)
            self.bar_title.set_text("")
            self.message.set_text("nothing to show:\nsee the note above")
            return
        self.message.set_text("")
        weights = translation.attention.numpy()                       # (rows, cols)
        rows, cols = weights.shape
        grid = np.full((n, n), np.nan)
        grid[:rows, :cols] = weights
        self.image.set_array(grid)
        self.ax_map.set_xlim(-0.5, cols - 0.5)
        self.ax_map.set_ylim(rows - 0.5, -0.5)
        self.ax_bar.set_ylim(cols - 0.5, -0.5)
        step = state["step"]
        row = weights[step]
        best = int(row.argmax())
        for j, token in enumerate(translation.source_tokens):
            self.src_labels[j].set_text(token)
            self.bar_labels[j].set_text(token)
            self.bars[j].set_width(float(row[j]))
            self.bars[j].set_visible(True)
            self.bars[j].set_color("tab:red" if j == best else "tab:blue")
        self.bar_labels[best].set_fontweight("bold")
        for i, token in enumerate(translation.output_tokens):
            self.out_labels[i].set_text(token)
        self.row_box.set_visible(True)
        self.row_box.set_bounds(-0.5, step - 0.5, cols, 1)
        self.bar_title.set_text(f"step {step}: '{translation.output_tokens[step]}' attends to")

    def describe(self, state: dict) -> str:
        translation = state["translation"]
        if translation is None:
            return f"<b>note:</b> {html.escape(state['error'])}"
        step = state["step"]
        out, src, weight = state["alignment"][step]
        text = (f"{html.escape(' '.join(translation.source_tokens[:-1]))} → "
                f"<b>{html.escape(translation.text) or '(empty)'}</b> &nbsp;·&nbsp; "
                f"step {step}: '{html.escape(out)}' attends most to '{html.escape(src)}' "
                f"({weight:.2f})")
        for note in state["notes"]:
            text += f"<br><b>note:</b> {html.escape(note)}"
        return text

    # -- keeping the slider's range in step with the translation ------------------------------
    def _on_change(self, change) -> None:
        if self._syncing:
            return
        if change["owner"] is self.controls["sentence"]:
            rows = self._rows(self.view_of(change["new"]))
            step = self.controls["step"]
            self._syncing = True
            try:                                  # clamping the value must not redraw twice
                step.max = max(rows - 1, 0)
                step.disabled = rows == 0
            finally:
                self._syncing = False
        self.update()
