"""Lesson 8 explorer: how temperature, top-k and top-p reshape the next-token distribution.

``SamplingExplorer(model, vocab, prompt="i am", seed=0)``: a prompt box and temperature, top-k
(0 = off) and top-p sliders. Left: the 15 most likely next tokens, bars at the chosen
temperature, grey where top-k/top-p remove the token. Right: the attention of the last prompt
position over the prompt tokens, one row per layer and head. The readout names the tokens read,
what the filters keep and a continuation sampled with the fixed seed.

The model runs once per prompt (``utils.next_token.next_token_view``, cached); a slider only
refilters the stored logits and samples again. The sampled continuation is ``continue_prompt``'s,
token for token, but the model's output after each prefix it has already read is kept
(``utils.next_token.ContinuationCache``): settings that sample the same first words share them,
and only a new prefix runs the model. A new prompt draws its tick labels and attention once (a cached layer);
a slider redraws the bars alone, and a setting seen before reuses its picture.
"""

import html

import ipywidgets as widgets
import numpy as np

from utils.next_token import ContinuationCache, next_token_table, next_token_view
from utils.i18n import _
from utils.widgets.base import BlittedExplorer

TOP = 15
KEPT, REMOVED = "#c0392b", "0.78"
FLOOR = 1e-4                     # the bars' log axis: 1e-4 .. 1 at every temperature


class SamplingExplorer(BlittedExplorer):
    """Next-token bars and last-position attention for a prompt; temperature, top-k, top-p."""

    def __init__(self, model, vocab, prompt: str = "i am", seed: int = 0,
                 max_new_tokens: int = 12):
        self.model, self.vocab, self.seed = model, vocab, seed
        self.max_new_tokens = max_new_tokens
        self.views = {}                          # prompt text -> NextTokenView (or the error)
        self.continuations = ContinuationCache(model, vocab)
        self.shown_prompt = None                 # the prompt the axes are labelled for
        config = model.config
        self.num_rows = config.num_blks * config.num_heads
        self.row_labels = [_("layer {layer} · head {head}").format(layer=l + 1, head=h + 1)
                           for l in range(config.num_blks)
                           for h in range(config.num_heads)]
        wide = {"description_width": "initial"}
        controls = {
            "prompt": widgets.Text(value=prompt, description=_("prompt"), continuous_update=False,
                                   style=wide),
            "temperature": widgets.FloatSlider(value=1.0, min=0.1, max=2.0, step=0.1,
                                               description=_("temperature"), style=wide),
            "top_k": widgets.IntSlider(value=0, min=0, max=50, description="top-k", style=wide),
            "top_p": widgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05,
                                         description="top-p", style=wide),
        }
        super().__init__(controls, figsize=(10, 3.8))

    # -- figure ------------------------------------------------------------------------
    def build_figure(self, fig):
        self.bar_ax = fig.add_axes([0.09, 0.2, 0.30, 0.7])
        self.bars = self.bar_ax.barh(np.arange(TOP), np.zeros(TOP), left=FLOOR, color=KEPT)
        self.bar_ax.set_xscale("log")
        self.bar_ax.set_ylim(TOP - 0.5, -0.5)                      # most likely on top
        self.bar_ax.set_xlim(FLOOR, 1)
        self.bar_ax.set_yticks(np.arange(TOP))
        self.bar_ax.set_xlabel(_("probability at this temperature (log scale)\n"
                                 "grey: removed by top-k / top-p"), fontsize=8)
        self.bar_ax.set_title(_("next token"), fontsize=9)
        self.heat_ax = fig.add_axes([0.52, 0.22, 0.40, 0.68])
        self.image = self.heat_ax.imshow(np.zeros((self.num_rows, 1)), cmap="Reds", vmin=0,
                                         vmax=1, aspect="auto", interpolation="nearest")
        self.heat_ax.set_yticks(np.arange(self.num_rows), self.row_labels, fontsize=7)
        self.heat_ax.set_title(_("attention of the last position"), fontsize=9)
        fig.colorbar(self.image, ax=self.heat_ax, fraction=0.04, pad=0.02)

    def prompt_axes(self) -> list:
        """The axes whose tick labels name a prompt's tokens (the top tokens, the prompt)."""
        return [self.bar_ax.yaxis, self.heat_ax.xaxis]

    def animated_artists(self):
        return [*self.prompt_axes(), *self.bars, self.image]

    def cached_layers(self) -> list:
        # The prompt's tick labels and attention: drawn once per prompt over the static
        # background, kept (a slider redraws the bars alone; they overlap neither).
        return [(self.shown_prompt, [*self.prompt_axes(), self.image])]

    def frame_key(self, state):
        if state["error"]:
            return None                          # the picture stays the last one drawn
        return (state["prompt"], state["temperature"], state["top_k"], state["top_p"])

    def label_axes(self, view, table) -> None:
        """Tick labels for a new prompt: the top tokens and the prompt's tokens (a layer)."""
        words = self.vocab.to_tokens(table["ids"].tolist())
        self.bar_ax.set_yticks(np.arange(TOP), words, fontsize=8)
        n = len(view.tokens)
        self.heat_ax.set_xticks(np.arange(n), view.tokens, rotation=60, fontsize=8)
        self.image.set_extent((-0.5, n - 0.5, self.num_rows - 0.5, -0.5))
        self.heat_ax.set_xlim(-0.5, n - 0.5)

    # -- the pure part -------------------------------------------------------------------
    def view_of(self, prompt: str):
        if prompt not in self.views:
            try:
                self.views[prompt] = next_token_view(self.model, self.vocab, prompt)
            except ValueError as error:
                self.views[prompt] = error
        return self.views[prompt]

    def compute(self, prompt, temperature, top_k, top_p) -> dict:
        view = self.view_of(prompt)
        if isinstance(view, ValueError):
            return {"prompt": prompt, "error": str(view)}
        table = next_token_table(view.logits, temperature, top_k, top_p, TOP)
        # continue_prompt(..., generator=torch.Generator().manual_seed(self.seed)), per prefix
        continuation = self.continuations.continuation(prompt, self.max_new_tokens,
                                                       temperature=temperature,
                                                       top_k=top_k or None, top_p=top_p,
                                                       seed=self.seed)
        return {"prompt": prompt, "error": None, "view": view, "table": table,
                "temperature": temperature, "top_k": top_k, "top_p": top_p,
                "continuation": continuation}

    def draw(self, state) -> None:
        if state["error"]:
            return                                                  # keep the last picture
        view, table = state["view"], state["table"]
        if state["prompt"] != self.shown_prompt:
            self.shown_prompt = state["prompt"]
            self.label_axes(view, table)
            self.image.set_data(view.attention.numpy())             # (L·h, n)
        probs, kept = table["probs"].tolist(), table["kept"].tolist()
        for bar, p, keep in zip(self.bars, probs, kept):
            bar.set_width(max(p - FLOOR, 0.0))                      # from FLOOR to p
            bar.set_color(KEPT if keep else REMOVED)

    def describe(self, state) -> str:
        if state["error"]:
            return f"<b>ValueError:</b> {html.escape(state['error'])}"
        table = state["table"]
        read = " ".join(state["view"].tokens)
        k = state["top_k"] or _("off")
        words = " ".join(state["continuation"])
        return " &nbsp;·&nbsp; ".join([
            _("read: {tokens}").format(tokens=html.escape(read)),
            _("temperature {temperature}").format(temperature=f"{state['temperature']:.1f}"),
            f"top-k {k}", f"top-p {state['top_p']:.2f}",
            _("kept {kept} tokens holding {mass} of the probability").format(
                kept=table["num_kept"], mass=f"{table['kept_mass']:.2f}"),
            _("sampled (seed {seed}): {words}").format(
                seed=self.seed, words=f"<i>{html.escape(words)}</i>")])
