"""Lesson 4: the alignment explorer — type English, read the French and where each word looked.

Pure parts (tested directly): ``alignment_view`` translates a sentence into everything the
explorer shows, or a one-line note instead of a traceback; ``strongest_alignment`` pairs each
output word with the source word it attends to most; ``reference_view`` finds the sentence's
references (the course's hand-aligned gold set first, then the data file) and says whether the
translation matches one of them.

When the typed sentence has a reference, the ``map of`` buttons switch between the map of the
model's own translation and the map the model makes while reading the reference (teacher
forcing, ``utils.alignment.teacher_forced_attention``). When the sentence is in the gold set,
its gold links are drawn over the map of the reference (and over the map of the translation
when the translation is the reference): solid squares for sure links, dashed for possible ones.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import patches, transforms
from matplotlib.collections import PatchCollection

from utils.alignment import is_word, teacher_forced_attention
from utils.alignment_plots import link_squares
from utils.data import EOS, preprocess, tokenize
from utils.i18n import _
from utils.training import Translation, greedy_translate
from utils.widgets.base import BlittedExplorer, one_torch_thread

MAP_OPTIONS = (("its translation", "translation"), ("the reference", "reference"))


def map_options() -> tuple:
    """MAP_OPTIONS with their labels in the current language."""
    labels = {"translation": _("its translation"), "reference": _("the reference")}
    return tuple((labels[value], value) for _label, value in MAP_OPTIONS)


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
        view["notes"].append(_("not in the training vocabulary, read as <unk>: {words}").format(
            words=words))
    if translation.dropped:
        view["notes"].append(_("too long for num_steps={num_steps}: only the first {kept} words "
                               "were translated (dropped: '{dropped}')").format(
            num_steps=num_steps, kept=num_steps - 1, dropped=" ".join(translation.dropped)))
    if not translation.ended:
        view["notes"].append(_("no <eos> within {num_steps} steps: the translation was cut").format(
            num_steps=num_steps))
    return view


def reference_view(sentence: str, translation: Translation | None, references: dict,
                   gold_by_english: dict, trained_on: set | None, num_steps: int) -> dict:
    """What the explorer knows about ``sentence`` besides the model's translation.

    ``references``: {English sentence: [French, ...]} (e.g. the data file's pairs);
    ``gold_by_english``: {English sentence: ``GoldPair``}; ``trained_on``: the English sentences
    the model was trained on, or None if unknown. Sentences are compared after
    ``utils.data.preprocess``. Returns {"key" (the preprocessed sentence), "gold" (the GoldPair
    or None), "references" (gold French first, then the data file's, without repeats),
    "seen" (True / False / None: unknown), "matches" (None without a reference or a
    translation, else whether the translation is one of the references), "teacher"
    (the first reference short enough to read in ``num_steps`` steps with <eos>, or None)}.
    """
    key = " ".join(tokenize(preprocess(sentence))) if isinstance(sentence, str) else ""
    gold = gold_by_english.get(key)
    found = ([" ".join(gold.french)] if gold is not None else []) + list(references.get(key, []))
    found = list(dict.fromkeys(found))
    matches = None if not found or translation is None else translation.text in found
    teacher = next((r for r in found if len(tokenize(r)) + 1 <= num_steps), None)
    seen = None if trained_on is None else key in trained_on
    return {"key": key, "gold": gold, "references": found, "seen": seen, "matches": matches,
            "teacher": teacher}


def _english_set(pairs_or_sentences) -> set:
    return {item[0] if isinstance(item, (tuple, list)) else item for item in pairs_or_sentences}


class AlignmentExplorer(BlittedExplorer):
    """Text box -> greedy translation and its attention heatmap; a slider picks an output word.

    The highlighted row of the heatmap and the bar chart show which source words the chosen
    output word attended to. ``references``: (English, French) pairs whose French is shown beside
    the translation of their English (e.g. ``utils.data.read_pairs()``); ``trained_on``: the
    pairs (or English sentences) the model trained on, to say whether a sentence was seen;
    ``gold``: hand-aligned ``GoldPair``s (default: the course's gold set; ``()`` for none).
    The ``map of`` buttons show the map of the model's translation or, for a sentence with a
    reference, of the reference read with teacher forcing, gold links marked.
    """

    def __init__(self, model, src_vocab, tgt_vocab, num_steps: int,
                 sentence: str = "i'm home .", *, references=(), trained_on=None, gold=None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.num_steps = num_steps
        if gold is None:
            from utils.gold_alignment import load_gold
            gold = load_gold()
        self.gold_by_english = {" ".join(pair.english): pair for pair in gold}
        self.references: dict[str, list] = {}
        for english, french in references:
            self.references.setdefault(english, []).append(french)
        self.trained_on = None if trained_on is None else _english_set(trained_on)
        self._views: dict[str, dict] = {}
        self._maps: dict[tuple, dict] = {}
        self._syncing = False
        rows = self._rows(self.compute(sentence, 0, "translation"))
        has_reference = self._has_reference(sentence)
        controls = {
            "sentence": widgets.Text(value=sentence, description=_("English"),
                                     placeholder=_("type a sentence, press Enter"),
                                     continuous_update=False),
            "map_of": widgets.ToggleButtons(options=map_options(), value="translation",
                                            description=_("map of"), disabled=not has_reference,
                                            style={"button_width": "110px"}),
            "step": widgets.IntSlider(value=max(rows - 1, 0), min=0, max=max(rows - 1, 0),
                                      description=_("output word"), continuous_update=True),
        }
        super().__init__(controls, figsize=(8, 3.4))

    # -- pure -------------------------------------------------------------------------------
    def _has_reference(self, sentence: str) -> bool:
        view = self.view_of(sentence)
        return view["translation"] is not None and view["reference"]["teacher"] is not None

    def view_of(self, sentence: str) -> dict:
        """``alignment_view`` of a sentence with its ``reference_view``, remembered (the model
        does not change)."""
        if sentence not in self._views:
            view = alignment_view(self.model, sentence, self.src_vocab, self.tgt_vocab,
                                  self.num_steps)
            view["reference"] = reference_view(sentence, view["translation"], self.references,
                                               self.gold_by_english, self.trained_on,
                                               self.num_steps)
            self._views[sentence] = view
        return self._views[sentence]

    def map_of(self, sentence: str, which: str) -> dict | None:
        """The map to draw: {"kind" ("translation" | "reference"), "weights" (rows, cols),
        "rows" (French tokens + <eos>), "cols" (source tokens + <eos>), "gold" (the GoldPair whose
        links apply to these rows, or None)}; None when there is nothing to draw."""
        view = self.view_of(sentence)
        translation, reference = view["translation"], view["reference"]
        if translation is None or translation.attention is None:
            return None
        if which == "reference" and reference["teacher"] is not None:
            cache_key = (sentence, reference["teacher"])
            if cache_key not in self._maps:
                french = tokenize(reference["teacher"])
                weights = teacher_forced_attention(self.model, self.src_vocab, self.tgt_vocab,
                                                   translation.source_tokens[:-1], french)
                gold = reference["gold"]
                self._maps[cache_key] = {
                    "kind": "reference", "weights": weights, "rows": french + [EOS],
                    "cols": list(translation.source_tokens),
                    "gold": gold if gold is not None and list(gold.french) == french else None}
            return self._maps[cache_key]
        gold = reference["gold"]
        applies = gold is not None and list(gold.french) == translation.tokens
        return {"kind": "translation", "weights": translation.attention,
                "rows": list(translation.output_tokens), "cols": list(translation.source_tokens),
                "gold": gold if applies else None}

    @staticmethod
    def _rows(state: dict) -> int:
        shown = state.get("map")
        return 0 if shown is None else len(shown["rows"])

    def compute(self, sentence: str, step: int, map_of: str = "translation") -> dict:
        view = self.view_of(sentence)
        which = map_of if map_of == "reference" and view["reference"]["teacher"] else "translation"
        shown = self.map_of(sentence, which)
        rows = 0 if shown is None else len(shown["rows"])
        return {**view, "map_of": which, "map": shown,
                "step": min(step, rows - 1) if rows else None}

    # -- figure -----------------------------------------------------------------------------
    def build_figure(self, fig):
        n = self.num_steps
        self.ax_map, self.ax_bar = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.3, 1]})
        cmap = self._cmap()
        self.image = self.ax_map.imshow(np.full((n, n), np.nan), cmap=cmap, vmin=0, vmax=1,
                                        aspect="auto")
        fig.colorbar(self.image, ax=self.ax_map, shrink=0.8, label=_("attention weight"))
        self.ax_map.set(xticks=[], yticks=[])
        for spine in self.ax_map.spines.values():  # the image's edge moves with the sentence
            spine.set_visible(False)
        self.ax_map.set_xlabel(_("English (keys)"), labelpad=38)
        self.ax_map.set_ylabel(_("French (queries)"), labelpad=58)
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
        # gold links (the gold set's sentences): solid squares sure, dashed possible
        self.sure_marks = PatchCollection([], facecolor="none", edgecolor="black", linewidth=1.6,
                                          zorder=3)
        self.possible_marks = PatchCollection([], facecolor="none", edgecolor="black",
                                              linewidth=1.6, linestyle="--", zorder=3)
        for marks in (self.sure_marks, self.possible_marks):
            self.ax_map.add_collection(marks, autolim=False)

        self.bars = self.ax_bar.barh(range(n), np.zeros(n), color="tab:blue")
        self.ax_bar.set(xlim=(0, 1), yticks=[], xlabel=_("attention weight"))
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
        return [self.image, self.sure_marks, self.possible_marks, *self.src_labels,
                *self.out_labels, self.message]

    def animated_artists(self) -> list:
        """Artists that change with the sentence (a cached layer) or the step slider."""
        return [*self.sentence_artists(), self.row_box, *self.bars, *self.bar_labels,
                self.bar_title]

    def cached_layers(self) -> list:
        """The sentence's artists, drawn once per (sentence, map) over the static parts: a
        slider move redraws only the row box and the bar chart over them."""
        return [((self.state.get("sentence"), self.state.get("map_of")),
                 self.sentence_artists())]

    def frame_key(self, state: dict):
        return (state.get("sentence"), state.get("map_of"), state.get("step"))

    def draw(self, state: dict) -> None:
        n = self.num_steps
        shown = state["map"]
        for label in (*self.src_labels, *self.out_labels, *self.bar_labels):
            label.set_text("")
        for label in self.bar_labels:
            label.set_fontweight("normal")
        for bar in self.bars:
            bar.set_width(0)
            bar.set_visible(False)
        self.sure_marks.set_paths([])
        self.possible_marks.set_paths([])
        if shown is None:
            self.image.set_array(np.full((n, n), np.nan))
            self.row_box.set_visible(False)
            self.bar_title.set_text("")
            self.message.set_text(_("nothing to show:\nsee the note above"))
            return
        self.message.set_text("")
        weights = shown["weights"].numpy()                            # (rows, cols)
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
        for j, token in enumerate(shown["cols"]):
            self.src_labels[j].set_text(token)
            self.bar_labels[j].set_text(token)
            self.bars[j].set_width(float(row[j]))
            self.bars[j].set_visible(True)
            self.bars[j].set_color("tab:red" if j == best else "tab:blue")
        self.bar_labels[best].set_fontweight("bold")
        for i, token in enumerate(shown["rows"]):
            self.out_labels[i].set_text(token)
        gold = shown["gold"]
        if gold is not None:
            self.sure_marks.set_paths(link_squares(gold.sure, gold.sure))
            self.possible_marks.set_paths(link_squares((), gold.possible - gold.sure))
        self.row_box.set_visible(True)
        self.row_box.set_bounds(-0.5, step - 0.5, cols, 1)
        self.bar_title.set_text(_("step {step}: '{word}' attends to").format(
            step=step, word=shown["rows"][step]))

    @staticmethod
    def gold_check(state: dict) -> str:
        """For a map with gold links: is the chosen step's strongest English word a gold link?"""
        shown, step = state["map"], state["step"]
        gold = None if shown is None else shown["gold"]
        if gold is None or step is None or step >= len(gold.french):
            return ""
        if not is_word(gold.french[step]):
            return _("punctuation: not scored (only words are)")
        linked = sorted(e for e, f in gold.possible if f == step)
        if not linked:
            return _("no gold link (a word with no English counterpart)")
        words = [j for j, token in enumerate(shown["cols"][:-1]) if token not in ".?!,"]
        best = max(words, key=lambda j: shown["weights"][step, j].item())
        names = ", ".join(f"'{gold.english[e]}'" for e in linked)
        verdict = ("✓ " + _("a gold link") if (best, step) in gold.possible
                   else "✗ " + _("not a gold link"))
        return _("strongest English word '{word}': {verdict} (gold: {names})").format(
            word=shown["cols"][best], verdict=verdict, names=names)

    def describe(self, state: dict) -> str:
        translation = state["translation"]
        if translation is None:
            return f"<b>{_('note:')}</b> {html.escape(state['error'])}"
        shown, step, reference = state["map"], state["step"], state["reference"]
        english = " ".join(translation.source_tokens[:-1])
        text = f"{html.escape(english)} → <b>{html.escape(translation.text) or _('(empty)')}</b>"
        if reference["matches"] is True:
            text += " ✓ " + _("matches a reference")
        elif reference["matches"] is False:
            text += " ✗ " + _("differs from every reference")
        if shown is not None:
            out, weights = shown["rows"][step], shown["weights"][step]
            best = int(weights.argmax())
            attends = (_("step {step}: '{word}' attends most to '{source}' ({weight})")
                       if shown["kind"] == "translation" else
                       _("reading the reference, step {step}: '{word}' attends most to "
                         "'{source}' ({weight})"))
            text += " &nbsp;·&nbsp; " + attends.format(
                step=step, word=html.escape(out), source=html.escape(shown["cols"][best]),
                weight=f"{float(weights[best]):.2f}")
        text += "<br>" + self._reference_line(reference)
        if shown is not None and shown["gold"] is not None:
            check = self.gold_check(state)
            text += ("<br>" + _("gold links drawn (solid: sure, dashed: possible)")
                     + ("; " + _("step {step}: {check}").format(step=step, check=html.escape(check))
                        if check else ""))
        for note in state["notes"]:
            text += f"<br><b>{_('note:')}</b> {html.escape(note)}"
        return text

    @staticmethod
    def _reference_line(reference: dict) -> str:
        seen = {True: _("a training sentence"), False: _("never seen in training"),
                None: ""}[reference["seen"]]
        if not reference["references"]:
            return (_("no reference: the sentence is neither in the data file nor in the gold set")
                    + (f" ({seen})" if seen else ""))
        where = (_("gold pair {id}, hand-aligned").format(id=reference["gold"].id)
                 if reference["gold"] else _("data file"))
        listed = " | ".join(html.escape(r) for r in reference["references"][:3])
        more = len(reference["references"]) - 3
        return (_("reference ({where}): {listed}").format(
                    where=where + ("; " + seen if seen else ""), listed=listed)
                + (" " + _("(+{more} more)").format(more=more) if more > 0 else ""))

    # -- keeping the slider's range in step with the map --------------------------------------
    def _on_change(self, change) -> None:
        if self._syncing:
            return
        if change["owner"] is not self.controls["step"]:
            sentence = self.controls["sentence"].value
            map_of = self.controls["map_of"]
            step = self.controls["step"]
            self._syncing = True
            try:                                  # clamping the values must not redraw twice
                has_reference = self._has_reference(sentence)
                if not has_reference:
                    map_of.value = "translation"
                map_of.disabled = not has_reference
                with one_torch_thread():          # may translate a new sentence
                    rows = self._rows(self.compute(sentence, 0, map_of.value))
                step.max = max(rows - 1, 0)
                step.disabled = rows == 0
            finally:
                self._syncing = False
        self.update()
