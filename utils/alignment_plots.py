"""Attention maps with a hand-aligned gold set drawn on top (lesson 4).

``draw_alignment(ax, weights, english, french, pair)`` draws one map as a heat map (rows: the
French tokens, then ``<eos>`` if the map has that row; columns: the English tokens, then
``<eos>`` if the map has that column) and marks, when a gold pair is given,

- every **sure** link with a solid orange square around its cell, every **possible** (not sure)
  link with a dashed one (``utils.gold_alignment``, Och & Ney's sure and possible links);
- for every French word with a gold link, the cell of its argmax over the English words (the
  link ``utils.alignment.predicted_links`` scores): a white dot inside a gold square, a cross
  outside one.

``compare_maps(pair, {"name": weights, ...})`` draws several models' maps of one pair side by
side, one colour scale (0 to 1) for all.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import patches

from utils.alignment import is_word, predicted_links
from utils.data import EOS
from utils.i18n import _

HIT_STYLE = {"marker": "o", "s": 22, "color": "white", "edgecolors": "black", "linewidths": 0.8,
             "zorder": 4}
MISS_STYLE = {"marker": "x", "s": 34, "color": "tab:red", "linewidths": 1.6, "zorder": 4}


def link_squares(sure, possible, **style) -> list:
    """Square patches (unit cells centred on (english, french)) for the gold links: solid for
    ``sure`` links, dashed for ``possible`` links that are not sure; ``style`` overrides."""
    squares = []
    for links, linestyle in ((sorted(sure), "-"), (sorted(set(possible) - set(sure)), "--")):
        for e, f in links:
            options = {"fill": False, "edgecolor": "tab:orange", "linewidth": 2.0,
                       "linestyle": linestyle, "zorder": 3, **style}
            squares.append(patches.Rectangle((e - 0.5, f - 0.5), 1, 1, **options))
    return squares


def _labels(tokens, size: int) -> list:
    return list(tokens) + [EOS] * (size - len(tokens))


def draw_alignment(ax, weights, english, french, pair=None, *, title: str | None = None,
                   cmap: str = "Blues", show_argmax: bool = True, ylabels: bool = True):
    """Draw ``weights`` (French tokens [+ 1], English tokens [+ 1]) on ``ax``; returns the image.

    ``pair``: a ``GoldPair`` whose links are drawn (its tokens must be ``english`` and
    ``french``), or None for no marks. ``show_argmax``: mark each linked French word's argmax
    over the English words (a dot on a gold link, a cross elsewhere).
    """
    data = weights.detach().float().cpu().numpy() if isinstance(weights, torch.Tensor) \
        else np.asarray(weights, dtype=float)
    english, french = list(english), list(french)
    if (data.ndim != 2 or data.shape[0] not in (len(french), len(french) + 1)
            or data.shape[1] not in (len(english), len(english) + 1)):
        raise ValueError(_("weights have shape {shape}, expected ({n_french} or {n_french_eos}, "
                           "{n_english} or {n_english_eos}): one row per French token (+ <eos>), "
                           "one column per English token (+ <eos>)").format(
            shape=data.shape, n_french=len(french), n_french_eos=len(french) + 1,
            n_english=len(english), n_english_eos=len(english) + 1))
    if pair is not None and (tuple(pair.english), tuple(pair.french)) != (tuple(english),
                                                                           tuple(french)):
        raise ValueError(_("the gold pair {pair_id} is {english!r} / {french!r}, not the "
                           "sentences given").format(pair_id=pair.id, english=' '.join(pair.english),
                                                     french=' '.join(pair.french)))
    image = ax.imshow(data, cmap=cmap, vmin=0, vmax=1, aspect="equal")
    ax.set_xticks(range(data.shape[1]), _labels(english, data.shape[1]), rotation=60,
                  ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(data.shape[0]), _labels(french, data.shape[0]) if ylabels
                  else [""] * data.shape[0], fontsize=8)
    ax.tick_params(length=0)
    if title is not None:
        ax.set_title(title, fontsize=9)
    if pair is None:
        return image
    for square in link_squares(pair.sure, pair.possible):
        ax.add_patch(square)
    if show_argmax:
        hits, misses = [], []
        for e, f in predicted_links(torch.as_tensor(data), english, french):
            if f in pair.linked_french and is_word(french[f]):
                (hits if (e, f) in pair.possible else misses).append((e, f))
        for cells, style in ((hits, HIT_STYLE), (misses, MISS_STYLE)):
            if cells:
                xs, ys = zip(*cells)
                ax.scatter(xs, ys, **style)
    ax.set_xlim(-0.5, data.shape[1] - 0.5)
    ax.set_ylim(data.shape[0] - 0.5, -0.5)
    return image


def _extents(fig, renderer, texts, **style) -> list:
    """(width, height) in inches of each string of ``texts`` drawn with ``style`` on ``fig``."""
    sizes = []
    for text in texts:
        artist = fig.text(0, 0, text, **style)
        box = artist.get_window_extent(renderer)
        artist.remove()
        sizes.append((box.width / fig.dpi, box.height / fig.dpi))
    return sizes


def _place_panels(fig, n: int, rows: int, columns: int, xlabels, ylabels, titles, colorbar: bool):
    """Axes for ``n`` panels of ``rows`` x ``columns`` square cells, side by side in ``fig``, and
    the colour bar's axes (or None): margins measured from the tick labels, titles and colour
    bar, the largest cells that fit. Placing them once costs far less than a layout engine, which
    measures every artist again at every draw."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    width, height = fig.get_size_inches()
    renderer = RendererAgg(1, 1, fig.dpi)
    pt = 1 / 72                                                   # a point, in inches
    border, gap, tick_pad = 4 * pt, 9 * pt, 3.5 * pt
    x_sizes = _extents(fig, renderer, xlabels, rotation=60, ha="right", rotation_mode="anchor",
                       fontsize=8)
    y_width = max(w for w, _h in _extents(fig, renderer, ylabels, fontsize=8)) if ylabels else 0
    title_height = max((h for _w, h in _extents(fig, renderer, titles, fontsize=9)), default=0)
    right = border
    if colorbar:
        size = FontProperties(size=_rc_points("ytick.labelsize")).get_size_in_points()
        tick_width = max(w for w, _h in _extents(fig, renderer, ["0.0", "1.0"], fontsize=size))
        label_width = _extents(fig, renderer, [_("weight")], rotation=90,
                               fontsize=_rc_points("axes.labelsize"))[0][0]
        right += 7 * pt + 8 * pt + 2 * tick_pad + tick_width + 4 * pt + label_width
    top = border + title_height + 6 * pt
    bottom = border + tick_pad + max(h for _w, h in x_sizes)
    left, cell = border + tick_pad + y_width, 0.3
    for _pass in range(2):  # the x labels of the first columns may reach further left
        overhang = max(w - (j + 0.5) * cell for j, (w, _h) in enumerate(x_sizes))
        left = border + max(tick_pad + y_width, overhang)
        cell = min((width - left - right - (n - 1) * gap) / (n * columns),
                   (height - top - bottom) / rows)
    if cell <= 0:
        raise ValueError(_("the figure is too small for {n} maps of {rows} x {columns} cells; "
                           "pass a larger figsize").format(n=n, rows=rows, columns=columns))
    block = n * columns * cell + (n - 1) * gap
    left += (width - left - right - block) / 2                     # centred
    low = bottom + (height - top - bottom - rows * cell) / 2
    axes = [fig.add_axes((
        (left + k * (columns * cell + gap)) / width, low / height,
        columns * cell / width, rows * cell / height)) for k in range(n)]
    cax = None
    if colorbar:
        bar_height = 0.7 * rows * cell
        cax = fig.add_axes(((left + block + 7 * pt) / width,
                            (low + (rows * cell - bar_height) / 2) / height,
                            8 * pt / width, bar_height / height))
    return axes, cax


def _rc_points(name: str):
    """An rcParams size as points (``"medium"`` and the like resolved)."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=matplotlib.rcParams[name]).get_size_in_points()


def compare_maps(pair, maps: dict, *, figsize=None, cmap: str = "Blues", colorbar: bool = True,
                 detached: bool = False):
    """One figure: the maps of ``pair`` by several models, side by side, gold links marked.

    ``maps``: {title: weights (French tokens [+ 1], English tokens [+ 1])}. Returns the figure,
    made through pyplot, so a notebook shows it once at the end of the cell. ``detached=True``
    makes a figure unknown to pyplot instead: ``display(fig)`` shows it, drawn once (in a
    notebook pyplot draws its open figures once more at the end of the cell, which costs as much
    as showing them). The panels are placed once, from the sizes of their labels; with an
    explicit ``figsize`` matplotlib's constrained layout places them instead.
    """
    if not maps:
        raise ValueError(_("maps is empty; pass {title: weights} for at least one model"))
    n = len(maps)
    width = 1.2 + 0.34 * (len(pair.english) + 1) * n
    height = 1.3 + 0.3 * (len(pair.french) + 1)
    layout = "constrained" if figsize is not None else None
    if detached:
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize or (width, height), layout=layout)
    else:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=figsize or (width, height), layout=layout)
    rows = max(weights.shape[0] for weights in maps.values())
    columns = max(weights.shape[1] for weights in maps.values())
    cax = None
    if layout is None:
        panels, cax = _place_panels(fig, n, rows, columns, _labels(pair.english, columns),
                                    _labels(pair.french, rows), list(maps), colorbar)
    else:
        panels = list(fig.subplots(1, n, squeeze=False)[0])
    image = None
    for k, (ax, (title, weights)) in enumerate(zip(panels, maps.items())):
        image = draw_alignment(ax, weights, pair.english, pair.french, pair, title=title,
                               cmap=cmap, ylabels=k == 0)
        # Same cell size and rows on every panel: a map without the <eos> row and column
        # (IBM Model 1's) leaves them blank instead of stretching its rows out of line.
        ax.set_xlim(-0.5, columns - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
    if colorbar:
        if cax is not None:
            fig.colorbar(image, cax=cax, label=_("weight"))
        else:
            fig.colorbar(image, ax=panels, shrink=0.7, label=_("weight"))
    return fig
