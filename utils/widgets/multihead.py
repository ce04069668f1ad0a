"""Lesson 5 explorer: how many heads, and what each head looks at.

``HeadsExplorer`` runs a ``MultiHeadAttention`` (hidden size 12) over eight tokens that carry
only their position. Its query and key projections are *built*, not trained, so that head i
looks a fixed number of steps away (one back, here, one ahead, two back, ...): the per-head
heatmaps show heads that differ. Heads of size 1 cannot do that (see ``offset_multihead``).
A heads slider offers only the divisors of the hidden size; a valid-length slider masks the
last keys.

Pure functions (tested directly): ``position_tokens``, ``head_offsets``,
``offset_multihead``, ``head_weights`` and ``favourite_keys``.
"""

import math

import ipywidgets as widgets
import matplotlib
import numpy as np
import torch

from utils.multihead import MultiHeadAttention, check_num_heads, divisors
from utils.i18n import _
from utils.widgets.base import BlittedExplorer

HIDDEN = 12                      # divisors 1, 2, 3, 4, 6, 12 -> head sizes 12, 6, 4, 3, 2, 1
TOKENS = 8
MASKED = -1.0                    # drawn in grey (below vmin) in the heatmaps


# ----------------------------------------------------------------------------- pure functions

def frequencies(num_hiddens: int, num_tokens: int) -> torch.Tensor:
    """Angular frequencies ω_k = 2πk/P, k = 1..num_hiddens/2, period P = 2·num_tokens (no wrap)."""
    return 2 * math.pi * torch.arange(1, num_hiddens // 2 + 1) / (2 * num_tokens)


def position_tokens(num_tokens: int = TOKENS, num_hiddens: int = HIDDEN) -> torch.Tensor:
    """Tokens that carry only their position t: pairs (cos ω_k t, sin ω_k t) -> (num_tokens, D)."""
    if num_hiddens % 2 or num_hiddens < 2 or num_tokens < 1:
        raise ValueError(f"need an even num_hiddens >= 2 and num_tokens >= 1, got "
                         f"{num_hiddens} and {num_tokens}")
    t = torch.arange(num_tokens, dtype=torch.float32)[:, None]            # (n, 1)
    angles = t * frequencies(num_hiddens, num_tokens)[None, :]            # (n, D/2)
    return torch.stack([angles.cos(), angles.sin()], dim=-1).reshape(num_tokens, num_hiddens)


def head_offsets(num_heads: int) -> list:
    """The step each head is built to look at: -1 (previous), 0 (same), +1 (next), -2, +2, ..."""
    offsets = [-1, 0, 1]
    while len(offsets) < num_heads:
        step = len(offsets) // 2 + 1
        offsets += [-step, step]
    return offsets[:num_heads]


def offset_multihead(num_heads: int, num_hiddens: int = HIDDEN, num_tokens: int = TOKENS,
                     margin: float = 5.0) -> MultiHeadAttention:
    """A MultiHeadAttention whose head i scores key s for query t by how close s is to t + o_i.

    Head i owns d = D/h features, i.e. p = d // 2 (cos, sin) pairs. Its query rotates pair k of
    the token by ω_k·o_i, its key copies it, so q_t·k_s ∝ Σ_k cos(ω_k (t + o_i - s)): largest at
    s = t + o_i. The scale makes the target beat its neighbours by ``margin`` (in scores).
    A head of size 1 has room for one feature of a pair only: the first row of the same
    construction, q_t ∝ cos(ω_1 (t + o_i)) and k_s = cos(ω_1 s). Each size-1 head keeps its own
    offset (so the heads differ), but its score q_t·k_s is a product of two numbers: with k_s
    falling from the first key to the last, a query with q_t > 0 prefers the first valid key,
    one with q_t < 0 the last, and one with q_t = 0 (t + o_i = ±num_tokens / 2) a uniform row.
    """
    d = check_num_heads(num_hiddens, num_heads)
    omega = frequencies(num_hiddens, num_tokens)                          # (D/2,)
    W_q = torch.zeros(num_hiddens, num_hiddens)                          # rows: head features
    W_k = torch.zeros(num_hiddens, num_hiddens)                          # cols: token features
    for head, offset in enumerate(head_offsets(num_heads)):
        row = head * d
        pairs = max(d // 2, 1)
        scale = margin * math.sqrt(d) / float((1 - torch.cos(omega[:pairs])).sum())
        if d == 1:                                                        # first rows only:
            angle = float(omega[0]) * offset                              # q = scale·cos ω_1(t+o)
            W_q[row, 0], W_q[row, 1] = scale * math.cos(angle), -scale * math.sin(angle)
            W_k[row, 0] = 1.0                                             # k = cos ω_1 s
            continue
        for k in range(pairs):
            angle = float(omega[k]) * offset
            c, s = math.cos(angle), math.sin(angle)
            # query pair = scale · R(ω_k o) (cos ω_k t, sin ω_k t) = scale · (cos ω_k(t+o), sin ω_k(t+o))
            W_q[row + 2 * k: row + 2 * k + 2, 2 * k: 2 * k + 2] = scale * torch.tensor(
                [[c, -s], [s, c]])
            W_k[row + 2 * k, 2 * k] = W_k[row + 2 * k + 1, 2 * k + 1] = 1.0
    mha = MultiHeadAttention(num_hiddens, num_heads)
    with torch.no_grad():
        mha.W_q.weight.copy_(W_q)
        mha.W_k.weight.copy_(W_k)
        mha.W_v.weight.copy_(torch.eye(num_hiddens))
        mha.W_o.weight.copy_(torch.eye(num_hiddens))
    return mha.eval()


def head_weights(num_heads: int, valid_len: int, num_hiddens: int = HIDDEN,
                 num_tokens: int = TOKENS) -> torch.Tensor:
    """Self-attention weights per head of ``offset_multihead`` -> (num_heads, tokens, tokens)."""
    if not 1 <= valid_len <= num_tokens:
        raise ValueError(f"valid_len must lie in 1..{num_tokens}, got {valid_len}")
    mha = offset_multihead(num_heads, num_hiddens, num_tokens)
    X = position_tokens(num_tokens, num_hiddens)[None]                     # (1, n, D)
    with torch.no_grad():
        mha(X, X, X, torch.tensor([valid_len]))
    return mha.attention_weights[0]                                       # (h, n, n)


def favourite_keys(weights: torch.Tensor, query: int, valid_len: int,
                   flat: float = 1e-3) -> list:
    """Per head, the key that ``query`` weighs most, or None where its row is uniform.

    weights: (h, n, n). Only the first ``valid_len`` keys count (the others weigh 0). A row whose
    valid weights differ by less than ``flat`` has no favourite: its argmax would be round-off.
    """
    row = weights[:, query, :valid_len]                                   # (h, valid_len)
    spread = row.max(-1).values - row.min(-1).values                      # (h,)
    return [None if s < flat else int(k) for s, k in zip(spread.tolist(), row.argmax(-1).tolist())]


def mosaic_layout(num_heads: int, columns: int = 6, rows: int = 2) -> tuple:
    """(rows, columns, scale) of the panel grid; fewer heads get bigger panels."""
    cols = min(num_heads, columns)
    used_rows = math.ceil(num_heads / columns)
    return used_rows, cols, min(columns / cols, rows / used_rows)


# ----------------------------------------------------------------------------- explorer

class HeadsExplorer(BlittedExplorer):
    """Per-head heatmaps of a MultiHeadAttention with built heads; choose heads and a length."""

    columns, rows = 6, 2

    def __init__(self, num_hiddens: int = HIDDEN, num_tokens: int = TOKENS):
        self.num_hiddens, self.num_tokens = num_hiddens, num_tokens
        self.max_heads = num_hiddens
        self.cache = {}                        # (heads, valid_len) -> weights (h, n, n)
        controls = {
            "heads": widgets.SelectionSlider(options=divisors(num_hiddens), value=3,
                                             description=_("heads")),
            "valid_len": widgets.IntSlider(value=num_tokens, min=1, max=num_tokens,
                                           description=_("valid length")),
        }
        super().__init__(controls, figsize=(9, 3.6))

    def build_figure(self, fig):
        n, slot = self.num_tokens, self.num_tokens + 1
        self.ax = fig.add_axes([0.01, 0.08, 0.98, 0.84])
        self.ax.set_xlim(0, self.columns * slot)
        self.ax.set_ylim(self.rows * slot, 0)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        # grey below vmin: masked keys; white for NaN: gaps between panels
        cmap = matplotlib.colormaps["Reds"].with_extremes(under="0.82", bad="white")
        self.image = self.ax.imshow(np.full((n, n), np.nan), cmap=cmap, vmin=0, vmax=1,
                                    interpolation="nearest", extent=(0, n, n, 0))
        self.titles = [self.ax.text(0, 0, "", fontsize=8, ha="left", va="bottom")
                       for _head in range(self.max_heads)]
        fig.text(0.01, 0.01, _("each panel: rows = queries 0..{last} (top to bottom), columns = "
                               "keys 0..{last} (left to right); grey = masked key").format(
                                   last=n - 1), fontsize=8)

    def animated_artists(self):
        return [self.image, *self.titles]

    def frame_key(self, state):
        return tuple(self.values().items())          # the picture follows the controls alone

    def compute(self, heads, valid_len) -> dict:
        key = (heads, valid_len)
        if key not in self.cache:              # 6 x 8 settings at most: each computed once
            self.cache[key] = head_weights(heads, valid_len, self.num_hiddens, self.num_tokens)
        weights = self.cache[key]                                           # (h, n, n)
        query = min(self.num_tokens // 2, valid_len - 1)
        return {"heads": heads, "valid_len": valid_len, "weights": weights,
                "head_size": self.num_hiddens // heads, "offsets": head_offsets(heads),
                "query": query, "looks_at": favourite_keys(weights, query, valid_len)}

    def mosaic(self, state) -> np.ndarray:
        """All panels in one picture: (rows·(n+1), cols·(n+1)), NaN gaps, MASKED masked keys."""
        n, slot = self.num_tokens, self.num_tokens + 1
        rows, cols, _scale = mosaic_layout(state["heads"], self.columns, self.rows)
        picture = np.full((rows * slot, cols * slot), np.nan)
        for head, panel in enumerate(state["weights"].numpy()):
            panel = panel.copy()
            panel[:, state["valid_len"]:] = MASKED
            r, c = divmod(head, cols)
            picture[r * slot: r * slot + n, c * slot: c * slot + n] = panel
        return picture

    def draw(self, state):
        slot = self.num_tokens + 1
        rows, cols, scale = mosaic_layout(state["heads"], self.columns, self.rows)
        self.image.set_data(self.mosaic(state))
        self.image.set_extent((0, cols * slot * scale, rows * slot * scale, 0))
        for head, title in enumerate(self.titles):
            if head >= state["heads"]:
                title.set_text("")
                continue
            r, c = divmod(head, cols)
            offset = state["offsets"][head]
            aim = "t" if offset == 0 else f"t{offset:+d}"
            title.set_position((c * slot * scale, r * slot * scale - 0.1))
            title.set_text(_("head {i} (aim {aim})").format(i=head + 1, aim=aim))          # built for; size 1 misses

    def describe(self, state) -> str:
        looks = ", ".join("–" if k is None else str(k) for k in state["looks_at"])
        uniform = (" " + _("(–: a uniform row, no favourite key)")
                   if None in state["looks_at"] else "")
        note = (" &nbsp;·&nbsp; " + _("size-1 heads can only pick the first or last key (of the "
                                      "valid keys)")
                if state["head_size"] == 1 else "")
        return (" &nbsp;·&nbsp; ".join([
            _("heads: {heads}").format(heads=state["heads"]),
            _("head size: {size}").format(size=state["head_size"]),
            _("valid length: {length}").format(length=state["valid_len"]),
            _("query {query} looks hardest at keys: [{keys}]").format(query=state["query"],
                                                                        keys=looks)])
                + uniform + note)
