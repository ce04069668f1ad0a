"""Headless tests of the lesson-6 explorer: set slider values, check state, readout and artists."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.positional import encoding_similarity, positional_encoding_table  # noqa: E402
from utils.widgets.positional_encoding import (PositionalEncodingExplorer,  # noqa: E402
                                               encoding_view)


@pytest.fixture
def explorer():
    return PositionalEncodingExplorer()


def test_starts_on_the_lessons_figure(explorer):
    state = explorer.state
    assert state["table"].shape == (60, 32) and state["columns"] == [6, 7, 8, 9]
    text = explorer.readout.value
    assert text.startswith("d = 32, base = 10000, positions 0–59, columns 6–9")
    # Columns 6 and 7 share w_3 = 1/10000**(6/32); their period is 2π / w_3.
    period = 2 * np.pi * 10000 ** (6 / 32)
    assert f"periods {period:.1f}, {period:.1f}" in text
    assert explorer.view.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_view_matches_the_library_table_and_similarity():
    state = encoding_view(16, 100.0, (5, 30), 2)
    expected = positional_encoding_table(31, 16, base=100, dtype=torch.float64)[5:]
    np.testing.assert_allclose(state["table"], expected.numpy(), atol=1e-12)
    np.testing.assert_allclose(state["similarity"],
                               encoding_similarity(expected).numpy() / 8, atol=1e-12)
    assert state["offset_spread"] < 1e-12


def test_dimension_slider_resizes_the_table_and_redraws_in_place(explorer):
    image, lines, picture = explorer.table_image, list(explorer.lines), explorer.view.value
    explorer.controls["dim"].value = 64
    assert explorer.state["table"].shape == (60, 64)
    assert explorer.table_image is image and explorer.lines == lines
    assert np.asarray(explorer.table_image.get_array()).shape == (60, 64)
    assert explorer.ax_table.get_xlim() == (-0.5, 63.5)
    assert explorer.readout.value.startswith("d = 64,")
    assert explorer.view.value != picture
    # The drawn column 6 now has frequency 1/10000**(6/64): compare with the formula.
    x, y = explorer.lines[0].get_data()
    np.testing.assert_allclose(y, np.sin(np.arange(60) / 10000 ** (6 / 64)), atol=1e-12)


def test_shrinking_the_dimension_moves_the_column_slider_and_hides_missing_lines(explorer):
    explorer.controls["dim"].value = 6
    assert explorer.controls["first_column"].max == 2
    assert explorer.controls["first_column"].value == 2
    assert explorer.state["columns"] == [2, 3, 4, 5]
    explorer.controls["dim"].value = 4
    explorer.controls["first_column"].value = 0
    assert [line.get_visible() for line in explorer.lines] == [True] * 4
    explorer.controls["dim"].value = 128
    assert explorer.controls["first_column"].max == 124


def test_position_range_and_base_change_what_is_drawn(explorer):
    explorer.controls["positions"].value = (20, 120)
    assert explorer.state["positions"][0] == 20 and len(explorer.state["positions"]) == 101
    assert explorer.ax_lines.get_xlim() == (19.5, 120.5)
    assert np.asarray(explorer.sim_image.get_array()).shape == (101, 101)
    before = explorer.state["table"][:, 2].copy()
    explorer.controls["base"].value = 100.0
    assert "base = 100," in explorer.readout.value
    assert not np.allclose(before, explorer.state["table"][:, 2])
    np.testing.assert_allclose(explorer.state["table"][:, 0], np.sin(np.arange(20, 121)))


def test_similarity_is_constant_along_diagonals_and_readout_says_so(explorer):
    explorer.controls["positions"].value = (0, 150)
    S = explorer.state["similarity"]
    for offset in (0, 3, 40):
        diagonal = np.diagonal(S, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    np.testing.assert_allclose(np.diagonal(S), 1.0)
    assert "similarity depends only on j − i (largest deviation below 1e-12)" in explorer.readout.value


def test_column_slider_picks_the_drawn_columns(explorer):
    explorer.controls["first_column"].value = 0
    assert [t.get_text() for t in explorer.line_labels] == [f"column {c}" for c in range(4)]
    x, y = explorer.lines[1].get_data()
    np.testing.assert_allclose(y, np.cos(np.arange(60)), atol=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    (dict(dim=7), r"dim must be even and lie in 4\.\.128"),
    (dict(dim=2), r"dim must be even"),
])
def test_explorer_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PositionalEncodingExplorer(**kwargs)


@pytest.mark.parametrize("args, message", [
    ((8, 100.0, (5, 2), 0), r"0 <= start <= stop"),
    ((8, 100.0, (0, 5), 8), r"first_column must lie in 0\.\.7"),
    ((7, 100.0, (0, 5), 0), r"positive even integer"),
])
def test_encoding_view_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        encoding_view(*args)


# -- the rendering machinery every explorer shares (utils.widgets.base) -----------------------

def _uncached_png(explorer) -> bytes:
    """The explorer's picture drawn again with every cache dropped: background, layers, glyphs."""
    from utils.widgets.base import GlyphCachingCanvas
    GlyphCachingCanvas(explorer.fig)                          # a new renderer: no glyphs kept
    explorer._background = None                               # drops the layers and frames too
    return explorer.render_png()


def _decoded(png: bytes) -> np.ndarray:
    import io
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_cached_layers_glyphs_and_frames_give_the_uncached_picture(explorer):
    steps = (("first_column", 10), ("positions", (20, 120)), ("base", 100.0), ("dim", 48),
             ("first_column", 3), ("positions", (0, 59)), ("positions", (20, 120)),
             ("dim", 32), ("base", 10000.0))                  # the last three: from the caches
    shown = []
    for name, value in steps:
        explorer.controls[name].value = value
        shown.append(explorer.view.value)
    fresh = PositionalEncodingExplorer()
    for (name, value), png in zip(steps, shown):
        fresh.controls[name].value = value
        assert np.array_equal(_decoded(png), _decoded(_uncached_png(fresh))), (name, value)
    seen = explorer.view.value
    explorer.controls["first_column"].value = 5
    explorer.controls["first_column"].value = 3                # back to a setting seen before
    assert explorer.view.value == seen
    # The tick axes are sprites: every picture equals the one drawn with them in place.
    edges = (("dim", 128), ("positions", (0, 60)), ("dim", 4), ("positions", (3, 200)),
             ("dim", 128), ("positions", (0, 59)))           # ticks meeting at an axes corner
    steps += (("first_column", 3), *edges)
    shown.append(seen)
    for name, value in edges:
        explorer.controls[name].value = value
        shown.append(explorer.view.value)
    reference = PositionalEncodingExplorer()
    reference.use_sprites = False                             # the tick axes drawn in place
    for (name, value), png in zip(steps, shown):
        reference.controls[name].value = value
        assert np.array_equal(_decoded(png), _decoded(_uncached_png(reference))), (name, value)
    assert len(explorer._sprites) >= 63                       # every dimension's column axis


def test_rgb_png_is_lossless():
    from utils.widgets.base import rgb_png
    pixels = np.random.default_rng(0).integers(0, 256, (7, 5, 4), dtype=np.uint8)
    assert np.array_equal(_decoded(rgb_png(pixels)), pixels[..., :3])


def test_glyph_cache_draws_the_pixels_agg_draws():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from utils.widgets.base import GlyphCachingCanvas
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.set(xlabel="position i", title="P[i, column] ×")
    ax.text(0.3, 0.4, "0.25", rotation=60, fontsize=7, color="white")
    ax.text(0.6, 0.5, "<bos> je", rotation=90, fontweight="bold")
    ax.set_xticks(np.linspace(0, 1, 23), [f"{k % 7}.{k % 3}" for k in range(23)], rotation=40)
    ax.set_yticks(np.linspace(0, 1, 11), [str(10 * k) for k in range(11)])
    pictures = []
    FigureCanvasAgg(fig).draw()
    pictures.append(np.asarray(fig.canvas.buffer_rgba()).copy())
    canvas = GlyphCachingCanvas(fig)
    for _ in range(2):                                    # the second time: from its cache
        canvas.draw()
        pictures.append(np.asarray(canvas.buffer_rgba()).copy())
    renderer = canvas.get_renderer()
    assert len(renderer._layouts) >= 30
    pasted = sum(len(s) for s, *_ in renderer._layouts)       # glyphs drawn per figure
    assert len(renderer._glyphs) < pasted                     # some reused at other pixels
    assert np.array_equal(pictures[0], pictures[1]) and np.array_equal(pictures[0], pictures[2])
