"""Lesson 3 explorers: masks on the weight heatmap, and what the √d scale does to the softmax.

- ``MaskExplorer``: a scoring-function menu, one valid-length slider per query row and a causal
  toggle; the (queries, keys) weight heatmap and the per-row entropy update in place.
- ``ScaleExplorer``: a dimension slider and a "divide by √d" toggle; the weights of query 0 and
  its own numbers, and over all queries the mean entropy of the weights, how many keys keep a
  weight that can carry gradient, and the gradient of the weights with respect to the scores and
  to the query (mean, median and how many queries get almost none) update in place.

The numbers come from pure functions (``masked_weights``, ``random_unit_vectors``,
``saturation_stats``) that the tests call directly.
"""

import math

import ipywidgets as widgets
import numpy as np
import torch

from utils.attention import (AdditiveAttention, BilinearAttention, DotProductAttention,
                             attention_entropy, causal_valid_lens, softmax_jacobian_norm)
from utils.masking import masked_softmax
from utils.i18n import _
from utils.widgets.base import BlittedExplorer

SCORING_CHOICES = {"additive": "additive", "dot product": "dot",
                   "scaled dot product": "scaled_dot", "bilinear": "bilinear"}


def scoring_label(scoring: str) -> str:
    """The menu's name of a scoring function (a value of SCORING_CHOICES), in the current
    language (SCORING_CHOICES' keys in English)."""
    return {"additive": _("additive"), "dot": _("dot product"),
            "scaled_dot": _("scaled dot product"), "bilinear": _("bilinear")}[scoring]


DIMENSIONS = tuple(2 ** i for i in range(11))          # 1, 2, 4, ..., 1024
# A key j whose weight is below this gets a score gradient ∂L/∂a_j = α_j (g_j - αᵀg) of at
# most 2 * LIVE_WEIGHT * max|g|, g = ∂L/∂α being the gradient that arrives at the weights.
LIVE_WEIGHT = 1e-3
# Line styles of the unscaled (False) and scaled (True) curves, as in the lesson's figure (the
# first two of utils.plotting.DEFAULT_FMTS): q·k solid, q·k/√d dashed magenta.
CURVE_STYLES = {False: "-", True: "m--"}
# A query whose ‖∂α/∂q‖ is below this gets almost no gradient through its weights (with the
# scale, the lesson's median query gets about 0.35 at every d).
SMALL_GRADIENT = 1e-3


# ----------------------------------------------------------------------------- pure functions

def scoring_modules(size: int, num_hiddens: int = 8, seed: int = 0) -> dict:
    """The four scoring functions for queries and keys of one ``size``, seeded, in eval mode."""
    with torch.random.fork_rng():                      # do not disturb the caller's random stream
        torch.manual_seed(seed)
        modules = {"additive": AdditiveAttention(size, size, num_hiddens),
                   "dot": DotProductAttention(scaled=False),
                   "scaled_dot": DotProductAttention(scaled=True),
                   "bilinear": BilinearAttention(size, size)}
    return {name: module.eval() for name, module in modules.items()}


def masked_weights(scores: torch.Tensor, lengths, causal: bool) -> dict:
    """Weights of one (queries, keys) score matrix under per-row ``lengths`` and an optional
    causal mask (row i sees keys 0..i at most). Returns weights, effective lengths, entropies.
    """
    queries, keys = scores.shape
    lens = torch.as_tensor(lengths).long()                              # (queries,)
    if lens.shape != (queries,):
        raise ValueError(f"need one length per query row ({queries}), got shape "
                         f"{tuple(lens.shape)}; pass a list of {queries} lengths")
    if causal:
        if keys < queries:
            raise ValueError(f"a causal mask needs at least as many keys as queries, got "
                             f"{queries} queries and {keys} keys; switch the causal mask off")
        lens = torch.minimum(lens, causal_valid_lens(1, queries)[0])
    weights = masked_softmax(scores[None], lens[None])[0]               # (queries, keys)
    return {"weights": weights, "lengths": lens, "entropy": attention_entropy(weights)}


def random_unit_vectors(num: int, size: int, seed: int) -> torch.Tensor:
    """(num, size) entries drawn from N(0, 1) with a generator of their own."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num, size, generator=generator)


def saturation_stats(queries: torch.Tensor, keys: torch.Tensor, scaled: bool) -> dict:
    """How saturated the softmax of q·k (or q·k/√d) is, for queries (m, d) and keys (n, d).

    Returns the scores' standard deviation, the weights (m, n), and means over queries of:
    the entropy (nats), the largest weight, the number of keys whose weight is at least
    ``LIVE_WEIGHT`` (``live_keys``), the norm of the softmax Jacobian ∂α/∂scores
    (``jacobian_norm``) and the norm of ∂α/∂q, the gradient that reaches the query through the
    scores (``query_gradient``; it carries the factor 1/√d when ``scaled``).

    A mean can hide what a typical query gets, so the two norms also come per query
    (``jacobian_norms``, ``query_gradients``: (m,) tensors), with the median of ∂α/∂q
    (``median_query_gradient``; the lower of the two middle values for an even m) and how many
    queries get a ‖∂α/∂q‖ below ``SMALL_GRADIENT`` (``small_gradient_queries``).
    """
    if queries.dim() != 2 or keys.dim() != 2 or queries.shape[1] != keys.shape[1]:
        raise ValueError(f"need queries (m, d) and keys (n, d) of one size d, got "
                         f"{tuple(queries.shape)} and {tuple(keys.shape)}")
    scale = math.sqrt(queries.shape[1]) if scaled else 1.0
    scores = queries @ keys.T / scale                                   # (m, n)
    weights = torch.softmax(scores, dim=-1)                             # (m, n)
    jacobian = torch.diag_embed(weights) - weights[:, :, None] * weights[:, None, :]  # (m, n, n)
    query_jacobian = jacobian @ keys / scale                            # (m, n, d) ∂α/∂q
    jacobian_norms = softmax_jacobian_norm(weights)                     # (m,)
    query_gradients = query_jacobian.flatten(1).norm(dim=-1)            # (m,)
    return {"score_std": scores.std().item(), "weights": weights,
            "entropy": attention_entropy(weights).mean().item(),
            "max_weight": weights.max(dim=-1).values.mean().item(),
            "live_keys": (weights >= LIVE_WEIGHT).sum(dim=-1).float().mean().item(),
            "jacobian_norm": jacobian_norms.mean().item(),
            "query_gradient": query_gradients.mean().item(),
            "jacobian_norms": jacobian_norms, "query_gradients": query_gradients,
            "median_query_gradient": query_gradients.median().item(),
            "small_gradient_queries": int((query_gradients < SMALL_GRADIENT).sum())}


# ----------------------------------------------------------------------------- explorers

def length_slider(row: int, keys: int) -> widgets.IntSlider:
    return widgets.IntSlider(value=keys, min=0, max=keys, step=1, description=_("length q{row}").format(row=row),
                             continuous_update=True)


class MaskExplorer(BlittedExplorer):
    """Self-attention over a few random tokens: pick a scoring function, mask rows, go causal."""

    def __init__(self, num_tokens: int = 5, size: int = 4, seed: int = 0):
        if num_tokens < 1 or size < 1:
            raise ValueError(f"num_tokens and size must be >= 1, got {num_tokens} and {size}")
        self.tokens = random_unit_vectors(num_tokens, size, seed)[None]         # (1, t, size)
        self.scores = {}                                                        # name -> (t, t)
        with torch.no_grad():
            for name, module in scoring_modules(size, seed=seed).items():
                self.scores[name] = module.score(self.tokens, self.tokens)[0]
        controls = {"scoring": widgets.Dropdown(options={scoring_label(v): v for v in SCORING_CHOICES.values()},
                                                value="scaled_dot", description=_("scoring")),
                    "causal": widgets.Checkbox(value=False, description=_("causal mask"))}
        controls.update({f"length_{i}": length_slider(i, num_tokens) for i in range(num_tokens)})
        super().__init__(controls, figsize=(4.2, 3.2))

    def build_figure(self, fig):
        t = self.tokens.shape[1]
        self.ax = fig.subplots()
        self.heatmap = self.ax.imshow(np.zeros((t, t)), cmap="Reds", vmin=0, vmax=1)
        self.ax.set(xticks=range(t), yticks=range(t), xlabel=_("keys"), ylabel=_("queries"),
                    xticklabels=[f"k{j}" for j in range(t)], yticklabels=[f"q{i}" for i in range(t)])
        self.labels = [[self.ax.text(j, i, "", ha="center", va="center", fontsize=8)
                        for j in range(t)] for i in range(t)]
        fig.colorbar(self.heatmap, ax=self.ax, shrink=0.8, label=_("attention weight"))
        fig.tight_layout()

    def animated_artists(self):
        return [self.heatmap, *(label for row in self.labels for label in row)]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, scoring, causal, **lengths) -> dict:
        t = self.tokens.shape[1]
        state = masked_weights(self.scores[scoring], [lengths[f"length_{i}"] for i in range(t)],
                               causal)
        return {"scoring": scoring, "causal": causal, **state}

    def draw(self, state):
        weights = state["weights"].numpy()
        self.heatmap.set_array(weights)
        for i, row in enumerate(self.labels):
            for j, label in enumerate(row):
                kept = j < state["lengths"][i]
                label.set_text(f"{weights[i, j]:.2f}" if kept else "×")
                label.set_color("white" if weights[i, j] > 0.6 else "black")

    def describe(self, state) -> str:
        name = scoring_label(state["scoring"])
        lengths = ", ".join(str(n) for n in state["lengths"].tolist())
        entropy = ", ".join(f"{h:.2f}" for h in state["entropy"].tolist())
        valid = (_("valid lengths (causal): [{lengths}]") if state["causal"]
                 else _("valid lengths: [{lengths}]")).format(lengths=lengths)
        return (f"{name} · {valid} &nbsp;·&nbsp; "
                + _("entropy per row (nats): [{entropy}]").format(entropy=entropy))


class ScaleExplorer(BlittedExplorer):
    """Random N(0, 1) queries against ten keys: watch the softmax saturate as d grows."""

    def __init__(self, num_keys: int = 10, num_queries: int = 256, seed: int = 0):
        self.queries = random_unit_vectors(num_queries, DIMENSIONS[-1], seed)      # (m, 1024)
        self.keys = random_unit_vectors(num_keys, DIMENSIONS[-1], seed + 1)        # (n, 1024)
        # Every (d, scaled) the controls can reach, computed once: an update is a look-up.
        self.table = {(d, scaled): saturation_stats(self.queries[:, :d], self.keys[:, :d], scaled)
                      for d in DIMENSIONS for scaled in (False, True)}
        self.curves = {scaled: [self.table[d, scaled]["entropy"] for d in DIMENSIONS]
                       for scaled in (False, True)}
        controls = {"d": widgets.SelectionSlider(options=DIMENSIONS, value=16,
                                                 description=_("dimension d")),
                    "scaled": widgets.Checkbox(value=True, description=_("divide scores by √d"))}
        super().__init__(controls, figsize=(8, 2.8))

    def build_figure(self, fig):
        n = self.keys.shape[0]
        self.ax_bar, self.ax_curve = fig.subplots(1, 2)
        self.bars = self.ax_bar.bar(range(n), np.zeros(n), color="tab:red")
        self.ax_bar.set(ylim=(0, 1.05), xticks=range(n), xlabel=_("key"), ylabel=_("weight"),
                        title=_("weights of query 0"))
        # The lesson's convention (its figure of section 4): unscaled solid, scaled dashed magenta.
        for scaled, style in CURVE_STYLES.items():
            self.ax_curve.plot(DIMENSIONS, self.curves[scaled], style,
                               label="q·k/√d" if scaled else "q·k")
        self.ax_curve.axhline(math.log(n), color="gray", lw=0.8, ls=":", label=_("uniform"))
        (self.marker,) = self.ax_curve.plot([], [], "ko")
        self.ax_curve.set(xscale="log", xlabel=_("dimension d"), ylabel=_("mean entropy (nats)"),
                          ylim=(0, math.log(n) * 1.1), title=_("entropy of the weights"))
        self.ax_curve.legend(fontsize=8)
        fig.tight_layout()

    def animated_artists(self):
        return [*self.bars, self.marker]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, d, scaled) -> dict:
        return {"d": d, "scaled": scaled, **self.table[d, scaled]}

    def draw(self, state):
        for bar, w in zip(self.bars, state["weights"][0].tolist()):
            bar.set_height(w)
        self.marker.set_data([state["d"]], [state["entropy"]])

    def describe(self, state) -> str:
        how = "q·k/√d" if state["scaled"] else "q·k"
        n, m = self.keys.shape[0], self.queries.shape[0]
        weights_0 = state["weights"][0]                                             # (n,)
        sep = " &nbsp;·&nbsp; "
        query_0 = sep.join([
            _("d = {d}, scores {how}").format(d=state["d"], how=how),
            _("<b>query 0</b> (the bars): largest weight {weight}").format(
                weight=f"{weights_0.max().item():.2f}"),
            _("live keys {live} of {n}").format(live=int((weights_0 >= LIVE_WEIGHT).sum()), n=n),
            _("‖∂α/∂scores‖ {norm}").format(norm=f"{state['jacobian_norms'][0].item():.3f}"),
            f"‖∂α/∂q‖ {state['query_gradients'][0].item():.3f}"])
        all_queries = sep.join([
            _("<b>all {m} queries:</b> score std {std}").format(
                m=m, std=f"{state['score_std']:.2f}"),
            _("mean entropy {entropy} of {uniform} nats").format(
                entropy=f"{state['entropy']:.2f}", uniform=f"{math.log(n):.2f}"),
            _("mean largest weight {weight}").format(weight=f"{state['max_weight']:.2f}"),
            _("mean live keys (weight ≥ {live_weight}) {live} of {n}").format(
                live_weight=f"{LIVE_WEIGHT:g}", live=f"{state['live_keys']:.1f}", n=n),
            _("mean ‖∂α/∂scores‖ {norm}").format(norm=f"{state['jacobian_norm']:.3f}"),
            _("‖∂α/∂q‖ mean {mean}, median {median}, below {small} for {count} of {m}").format(
                mean=f"{state['query_gradient']:.3f}",
                median=f"{state['median_query_gradient']:.2g}", small=f"{SMALL_GRADIENT:g}",
                count=state["small_gradient_queries"], m=m)])
        return f"{query_0}<br>{all_queries}"
