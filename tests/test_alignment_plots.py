"""Maps with gold links on top (utils.alignment_plots): the marks are where the links are."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib import patches  # noqa: E402
from matplotlib.backends import backend_agg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from utils.alignment_plots import compare_maps, draw_alignment, link_squares  # noqa: E402
from utils.gold_alignment import parse_gold  # noqa: E402

# j'ai: sure with "i", possible with "read"; "un" sure with "an"
(READ,) = parse_gold("""
id: 2
tags: adjective-after-noun elision
en: i read an interesting book .
fr: j'ai lu un livre intéressant .
sure: 1-1 2-2 3-3 4-5 5-4 6-6
possible: 2-1
""")


def squares_on(ax):
    """{(english, french): linestyle} of the link squares drawn on ``ax``."""
    return {(round(p.get_x() + 0.5), round(p.get_y() + 0.5)): p.get_linestyle()
            for p in ax.patches if isinstance(p, patches.Rectangle)}


def marks_on(ax):
    """{marker kind: set of (english, french)} of the argmax marks drawn on ``ax``."""
    found = {}
    for collection in ax.collections:
        cells = {(round(x), round(y)) for x, y in collection.get_offsets()}
        kind = "hit" if np.allclose(collection.get_facecolors()[0][:3], 1) else "miss"
        found[kind] = cells
    return found


def test_link_squares_solid_for_sure_dashed_for_possible():
    squares = link_squares({(0, 0)}, {(0, 0), (1, 0)})
    assert [(s.get_x(), s.get_y(), s.get_linestyle()) for s in squares] == [
        (-0.5, -0.5, "-"), (0.5, -0.5, "--")]


def test_draw_alignment_marks_gold_links_hits_and_misses():
    # every French word on its gold word, except "intéressant" (4) on "book" (4): a miss
    weights = torch.zeros(7, 7)
    for e, f in [(0, 0), (1, 1), (2, 2), (4, 3), (4, 4), (5, 5), (6, 6)]:
        weights[f, e] = 1.0
    ax = Figure().subplots()
    draw_alignment(ax, weights, READ.english, READ.french, READ)
    squares = squares_on(ax)
    assert {cell for cell, style in squares.items() if style == "-"} == set(READ.sure)
    assert {cell for cell, style in squares.items() if style == "--"} == {(1, 0)}
    marks = marks_on(ax)
    assert marks["hit"] == {(0, 0), (1, 1), (2, 2), (4, 3)}
    assert marks["miss"] == {(4, 4)}
    assert [t.get_text() for t in ax.get_xticklabels()] == list(READ.english) + ["<eos>"]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(READ.french) + ["<eos>"]


def test_draw_alignment_without_a_pair_or_eos_and_bad_input():
    ax = Figure().subplots()
    draw_alignment(ax, np.eye(6), READ.english, READ.french)       # no <eos> row or column
    assert squares_on(ax) == {} and len(ax.collections) == 0
    with pytest.raises(ValueError, match=r"weights have shape \(3, 3\)"):
        draw_alignment(Figure().subplots(), np.eye(3), READ.english, READ.french)
    with pytest.raises(ValueError, match="not the sentences given"):
        draw_alignment(Figure().subplots(), np.eye(3), ["a", "b"], ["x", "y"], READ)


def test_compare_maps_draws_one_panel_per_model():
    fig = compare_maps(READ, {"one": torch.eye(7), "two": torch.full((7, 7), 1 / 7)})
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in panels] == ["one", "two"]
        assert all(set(squares_on(ax)) == set(READ.possible) for ax in panels)
        assert [t.get_text() for t in panels[1].get_yticklabels()] == [""] * 7
        with pytest.raises(ValueError, match="maps is empty"):
            compare_maps(READ, {})
    finally:
        plt.close(fig)


def test_compare_maps_keeps_the_rows_in_line_when_a_map_has_no_eos():
    # IBM Model 1's map has no <eos> row or column: its rows must stay level with the others'
    fig = compare_maps(READ, {"with <eos>": torch.eye(7), "without": torch.eye(6)})
    try:
        with_eos, without = [ax for ax in fig.axes if ax.get_title()]
        assert without.get_ylim() == with_eos.get_ylim() == (6.5, -0.5)
        assert without.get_xlim() == with_eos.get_xlim() == (-0.5, 6.5)
        fig.canvas.draw()
        assert without.get_position().height == pytest.approx(with_eos.get_position().height)
    finally:
        plt.close(fig)


def test_compare_maps_places_its_panels_once_with_every_label_inside_the_figure():
    # No layout engine: the panels are placed from the labels' sizes; nothing overlaps, every
    # label lies inside the figure, and the cells are square and level across panels
    before = plt.get_fignums()
    fig = compare_maps(READ, {"a long title for one": torch.eye(7), "two": torch.eye(7),
                              "Model 1": torch.eye(6)}, detached=True)
    assert plt.get_fignums() == before                      # detached: pyplot does not know it
    assert fig.get_layout_engine() is None
    backend_agg.FigureCanvasAgg(fig)                         # sets fig.canvas
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_title()]
    boxes = [ax.get_window_extent(renderer) for ax in panels]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))          # side by side, apart
    assert len({(round(b.y0, 3), round(b.height, 3)) for b in boxes}) == 1
    assert all(b.width == pytest.approx(b.height) for b in boxes)      # 7 x 7 square cells
    figure_box = fig.bbox
    texts = [t for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels(),
                                            ax.title, ax.yaxis.label) if t.get_text()]
    for text in texts:
        box = text.get_window_extent(renderer)
        assert (box.x0 >= figure_box.x0 and box.x1 <= figure_box.x1 and box.y0 >= figure_box.y0
                and box.y1 <= figure_box.y1), text.get_text()
    colorbar = fig.axes[-1].get_window_extent(renderer)
    assert colorbar.x0 > boxes[-1].x1


def test_compare_maps_with_a_figsize_uses_the_constrained_layout():
    fig = compare_maps(READ, {"one": torch.eye(7)}, figsize=(4, 3), detached=True)
    assert fig.get_layout_engine() is not None and tuple(fig.get_size_inches()) == (4, 3)
