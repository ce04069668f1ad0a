"""Lesson 7 explorers: the trained Transformer's attention, and what the causal mask is for.

- ``TransformerAttentionExplorer``: a sentence box, an attention-kind menu and layer / head
  sliders; one heatmap of the chosen (kind, layer, head) weights updates in place. Translations
  are computed once per sentence (the menu's sentences when the explorer is built); moving a
  slider is a look-up and a blit. The tick labels (a sentence's tokens) are a layer drawn once
  per sentence and kind, and a setting seen before reuses its picture.
  For a sentence with a known reference (the four test sentences), the readout shows it beside
  the translation and says whether the two differ.
- ``CausalMaskExplorer``: a "causal mask" checkbox switching between two short training runs,
  precomputed (and cached on disk) with and without the mask: loss curves, the decoder's
  self-attention on a reference translation, and the greedy translations beside their references
  with their BLEU. The static text a saved notebook keeps describes both runs, the one shown first.

The numbers come from pure functions in ``utils.transformer`` (``attention_maps``,
``teacher_forced_attention``, ``future_attention_share``, ``causal_demo_summary``).
"""

import html
import re

import ipywidgets as widgets
import matplotlib
import numpy as np

# The demo's data and computations live in utils.transformer (re-exported here for lessons).
from utils.transformer import TEST_PAIRS, attention_maps
from utils.i18n import _
from utils.widgets.base import BlittedExplorer, one_torch_thread

ATTENTION_KINDS = {"encoder self-attention": "encoder", "decoder self-attention": "decoder_self",
                   "encoder–decoder attention": "cross"}


def kind_label(kind: str) -> str:
    """The menu's name of an attention kind (a value of ATTENTION_KINDS), in the current
    language (ATTENTION_KINDS' keys in English)."""
    return {"encoder": _("encoder self-attention"), "decoder_self": _("decoder self-attention"),
            "cross": _("encoder–decoder attention")}[kind]


# ----------------------------------------------------------------------------- pure functions

def pick_heatmap(maps, kind: str, layer: int, head: int, size: int) -> dict:
    """The (size, size) picture of one (kind, layer, head): weights top-left, NaN elsewhere.

    Returns the matrix, the query (row) and key (column) labels, and the weights' own shape.
    ``layer`` and ``head`` count from 1, as the sliders do.
    """
    if kind not in ATTENTION_KINDS.values():
        raise ValueError(f"kind must be one of {sorted(ATTENTION_KINDS.values())}, got {kind!r}")
    weights = getattr(maps, kind)                                        # (L, H, q, k)
    layers, heads = weights.shape[:2]
    if not (1 <= layer <= layers and 1 <= head <= heads):
        raise ValueError(f"layer must lie in 1..{layers} and head in 1..{heads}, "
                         f"got layer={layer}, head={head}")
    matrix = weights[layer - 1, head - 1].numpy()                        # (q, k)
    picture = np.full((size, size), np.nan)
    picture[:matrix.shape[0], :matrix.shape[1]] = matrix
    steps = [f"{i} → {o}" for i, o in zip(maps.decoder_inputs, maps.output_tokens)]
    rows = maps.source_tokens if kind == "encoder" else steps
    cols = maps.decoder_inputs if kind == "decoder_self" else maps.source_tokens
    return {"matrix": matrix, "picture": picture, "rows": list(rows), "cols": list(cols)}


def reference_note(text: str, reference: str | None) -> str:
    """HTML after a translation: nothing without a reference, else whether the two agree."""
    if reference is None:
        return ""
    note = (_("(the reference <i>{reference}</i>)") if text == reference
            else _("(differs from the reference <i>{reference}</i>)"))
    return " " + note.format(reference=html.escape(reference))


# ----------------------------------------------------------------------------- explorers

class TransformerAttentionExplorer(BlittedExplorer):
    """Type a sentence, pick encoder / decoder / encoder–decoder attention, a layer and a head."""

    def __init__(self, model, src_vocab, tgt_vocab, num_steps: int, sentence: str = "he's calm .",
                 sentences=tuple(english for english, _french in TEST_PAIRS),
                 references=None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.num_steps = num_steps
        # English sentence -> reference French, shown beside the model's translation.
        self.references = dict(TEST_PAIRS) if references is None else dict(references)
        self.layers = len(model.encoder.blks)
        self.heads = model.encoder.blks[0].attention.num_heads
        self._maps = {}                                   # sentence -> AttentionMaps (or error)
        self._labels = None                               # tick labels currently drawn
        controls = {
            "sentence": widgets.Combobox(value=sentence, options=list(sentences),
                                         description=_("sentence"), ensure_option=False,
                                         continuous_update=False),
            "kind": widgets.Dropdown(options={kind_label(k): k for k in ATTENTION_KINDS.values()},
                                     value="cross", description=_("attention")),
            "layer": widgets.IntSlider(value=1, min=1, max=self.layers, description=_("layer")),
            "head": widgets.IntSlider(value=1, min=1, max=self.heads, description=_("head")),
        }
        for option in sentences:                         # what the menu offers, computed now
            self.maps_for_one_thread(option)
        super().__init__(controls, figsize=(5.6, 4.6))
        # The tick labels of every (menu sentence, kind), drawn now: ~40 ms each, 12 for the
        # lesson's four sentences (~0.5 s); a first visit then costs what a later one does.
        with one_torch_thread():
            self.prerender(self.compute(option, kind, 1, 1) for option in sentences
                           for kind in ATTENTION_KINDS.values())

    def maps_for(self, sentence: str):
        """AttentionMaps of ``sentence`` (computed once), or the ValueError it raises."""
        if sentence not in self._maps:
            try:
                self._maps[sentence] = attention_maps(self.model, sentence, self.src_vocab,
                                                      self.tgt_vocab, self.num_steps,
                                                      truncate=True)
            except ValueError as error:
                self._maps[sentence] = error
        return self._maps[sentence]

    def maps_for_one_thread(self, sentence: str):
        """``maps_for`` with torch on one thread (see ``one_torch_thread``)."""
        with one_torch_thread():
            return self.maps_for(sentence)

    def build_figure(self, fig):
        n = self.num_steps
        self.ax = fig.subplots()
        cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#eeeeee")
        self.image = self.ax.imshow(np.full((n, n), np.nan), cmap=cmap, vmin=0, vmax=1)
        self.ax.set(xticks=range(n), yticks=range(n), xlabel=_("keys"), ylabel=_("queries"))
        self.ax.tick_params(axis="x", labelrotation=90, labelsize=8)
        self.ax.tick_params(axis="y", labelsize=8)
        self.title = self.ax.text(0.5, 1.03, "", transform=self.ax.transAxes, ha="center",
                                  fontsize=10)
        fig.colorbar(self.image, ax=self.ax, shrink=0.8, label=_("attention weight"))
        fig.subplots_adjust(left=0.25, bottom=0.22, right=0.98, top=0.92)

    def animated_artists(self):
        return [self.ax.xaxis, self.ax.yaxis, self.image, self.title]

    def cached_layers(self) -> list:
        # The tick labels name the tokens: drawn once per label set over the background, kept.
        return [(self._labels, [self.ax.xaxis, self.ax.yaxis])]

    def frame_key(self, state):
        if state["error"]:
            return None
        return (state["sentence"], state["kind"], state["layer"], state["head"])

    def compute(self, sentence, kind, layer, head) -> dict:
        maps = self.maps_for(sentence)
        state = {"sentence": sentence, "kind": kind, "layer": layer, "head": head}
        if isinstance(maps, ValueError):
            return {**state, "error": str(maps)}
        return {**state, "error": None, "maps": maps,
                **pick_heatmap(maps, kind, layer, head, self.num_steps)}

    def draw(self, state):
        n = self.num_steps
        if state["error"]:
            self.image.set_data(np.full((n, n), np.nan))
            self.title.set_text(_("no translation (see the message above)"))
            if self._labels is not None:                  # no tokens: blank the tick labels
                self.ax.set_yticks(range(n), [""] * n)
                self.ax.set_xticks(range(n), [""] * n)
                self._labels = ()                         # blank (None: the default numbers)
            return
        labels = (tuple(state["rows"]), tuple(state["cols"]))
        if labels != self._labels:                        # new tokens: new tick labels (a layer)
            pad = lambda names: list(names) + [""] * (n - len(names))   # noqa: E731
            self.ax.set_yticks(range(n), pad(state["rows"]))
            self.ax.set_xticks(range(n), pad(state["cols"]))
            self._labels = labels
        self.image.set_data(np.ma.masked_invalid(state["picture"]))
        self.title.set_text(_("{kind}, layer {layer}, head {head}").format(
            kind=kind_label(state["kind"]), layer=state["layer"], head=state["head"]))

    def describe(self, state) -> str:
        if state["error"]:
            return (f"<span style='color:#b00'>{html.escape(state['error'])}</span>")
        translation = state["maps"].translation
        source = " ".join(state["maps"].source_tokens[:state["maps"].source_valid_len])
        notes = []
        if translation.dropped:
            notes.append(_("note: only the first {kept} words fit (num_steps={num_steps}); "
                           "dropped: {dropped}").format(kept=self.num_steps - 1,
                                                        num_steps=self.num_steps,
                                                        dropped=" ".join(translation.dropped)))
        if translation.unknown:
            notes.append(_("note: unknown to the model (read as &lt;unk&gt;): {words}").format(
                words=" ".join(translation.unknown)))
        if not translation.ended:
            notes.append(_("note: no &lt;eos&gt; within num_steps"))
        matrix = state["matrix"]
        top = matrix.argmax(axis=1)
        focus = ", ".join(f"{html.escape(state['rows'][i])} ⇒ {html.escape(state['cols'][j])}"
                          for i, j in enumerate(top))
        extra = "".join(f"<br>{html.escape(note).replace('&amp;', '&')}" for note in notes)
        where = _("{kind}, layer {layer}, head {head}").format(
            kind=kind_label(state["kind"]), layer=state["layer"], head=state["head"])
        return (f"{html.escape(source)} → <b>{html.escape(translation.text)}</b>"
                f"{reference_note(translation.text, self.references.get(state['sentence']))} "
                f"&nbsp;·&nbsp; "
                + _("{where}: strongest key per query: {focus}").format(where=where, focus=focus)
                + extra)


class CausalMaskExplorer(BlittedExplorer):
    """Tick or untick "causal mask" to switch between the two precomputed demo runs."""

    def __init__(self, runs: dict):
        if set(runs) != {True, False}:
            raise ValueError("runs must map True (with the causal mask) and False (without) to "
                             "summaries; build them with causal_demo_runs()")
        self.runs = runs
        controls = {"causal": widgets.Checkbox(value=True, description=_("causal mask"))}
        super().__init__(controls, figsize=(8.4, 3.2))

    def build_figure(self, fig):
        self.ax_loss, self.ax_map = fig.subplots(1, 2, width_ratios=[1.3, 1])
        self.curves = {}
        for causal, colour in ((True, "tab:blue"), (False, "tab:red")):
            losses = self.runs[causal]["losses"]
            (self.curves[causal],) = self.ax_loss.plot(range(1, len(losses) + 1), losses,
                                                       color=colour,
                                                       label=_("with mask") if causal
                                                       else _("without mask"))
        self.ax_loss.set(yscale="log", xlabel=_("epoch"), ylabel=_("training loss per token"),
                         title=_("training loss"))
        self.ax_loss.legend(fontsize=8)
        inputs = self.runs[True]["inputs"]
        t = len(inputs)
        self.image = self.ax_map.imshow(np.zeros((t, t)), cmap="Reds", vmin=0, vmax=1)
        self.ax_map.set(xticks=range(t), yticks=range(t), xlabel=_("keys (decoder inputs)"),
                        ylabel=_("queries"))
        self.ax_map.set_xticklabels(inputs, rotation=90, fontsize=8)
        self.ax_map.set_yticklabels(inputs, fontsize=8)
        self.map_title = self.ax_map.text(0.5, 1.04, "", transform=self.ax_map.transAxes,
                                          ha="center", fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 0.9))

    def animated_artists(self):
        return [*self.curves.values(), self.image, self.map_title]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, causal) -> dict:
        return {"causal": causal, **self.runs[causal]}

    def draw(self, state):
        for causal, curve in self.curves.items():
            chosen = causal == state["causal"]
            curve.set_linewidth(2.5 if chosen else 1.0)
            curve.set_alpha(1.0 if chosen else 0.35)
        self.image.set_array(state["attention"])
        self.map_title.set_text(_("decoder self-attention, with mask\n(mean of layers and heads)")
                                if state["causal"] else
                                _("decoder self-attention, no mask\n(mean of layers and heads)"))

    def describe(self, state) -> str:
        lines = "; ".join(f"{html.escape(english)} → "
                          f"{html.escape(text) if text else _('(nothing: &lt;eos&gt; first)')}"
                          f"{reference_note(text, french)} (BLEU {score:.2f})"
                          for (english, french), text, score in zip(state["pairs"],
                                                                    state["translations"],
                                                                    state["bleu"]))
        return (" &nbsp;·&nbsp; ".join([
            _("causal mask ON") if state["causal"] else _("causal mask OFF"),
            _("final training loss {loss} per token").format(loss=f"{state['final_loss']:.3f}"),
            _("weight on future positions {share}%").format(
                share=f"{100 * state['future_share']:.0f}"),
            _("mean BLEU {bleu}").format(bleu=f"{state['mean_bleu']:.2f}")])
                + f"<br>{lines}")

    def snapshot_text(self) -> str:
        """Both runs as plain text, the one shown first: a saved notebook keeps only one picture,
        but every claim about either run can be checked against this text."""
        shown = super().snapshot_text()
        other = self.describe(self.compute(not self.state["causal"]))
        other = html.unescape(re.sub(r"<[^>]+>", " ", other))
        return f"{shown} || " + _("the other run: {text}").format(text=" ".join(other.split()))
