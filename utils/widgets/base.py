"""The pattern every explorer follows: controls -> pure function -> artists updated in place."""

import base64
import collections
import contextlib
import html
import io
import math
import re
import struct
import zlib

import ipywidgets as widgets
from matplotlib.figure import Figure
from matplotlib.axis import Axis
from matplotlib.transforms import Bbox
import numpy as np
import torch
from IPython.display import clear_output, display
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.ft2font import RenderMode
from PIL import Image

from utils.i18n import _


@contextlib.contextmanager
def one_torch_thread():
    """Run the block with torch on one thread, then restore the caller's thread count.

    An explorer's tensors are small: a second thread saves nothing, and when the other core is
    busy (a student's laptop running something else) every parallel region waits for it, which
    makes a 20 ms model step take 100-500 ms. Setting the count costs well under a microsecond.
    """
    saved = torch.get_num_threads()
    if saved == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + tag + data
            + struct.pack(">I", zlib.crc32(data, zlib.crc32(tag)) & 0xFFFFFFFF))


def rgb_png(rgba: np.ndarray, level: int = 1) -> bytes:
    """A PNG (8-bit RGB, lossless) of an (h, w, 4) uint8 buffer, alpha dropped.

    Every row uses PNG's "up" filter (the difference from the row above, one numpy subtraction)
    and zlib at ``level``: about half the time of PIL's adaptive per-row filtering at
    compress_level=1, for a file of about the same size. Decoders return exactly ``rgba[..., :3]``.
    """
    height, width = rgba.shape[:2]
    # Dropping alpha: PIL's conversion copies ~3x faster than numpy's strided copy.
    packed = Image.frombuffer("RGBA", (width, height), np.ascontiguousarray(rgba), "raw", "RGBA",
                              0, 1).convert("RGB").tobytes()
    rgb = np.frombuffer(packed, np.uint8).reshape(height, 3 * width)     # (h, 3w)
    raw = np.empty((height, 1 + 3 * width), np.uint8)                    # filter byte + row
    raw[:, 0] = 2                                                        # "up"
    raw[0, 1:] = rgb[0]                                                  # above row 0: zeros
    np.subtract(rgb[1:], rgb[:-1], out=raw[1:, 1:])                      # wraps mod 256
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)       # 8 bits, RGB
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(raw.data, level)) + _png_chunk(b"IEND", b""))


class ExplorerBox(widgets.VBox):
    """An explorer's widget. Its display also carries a static picture (PNG) and a text line
    of the explorer's state when shown: JupyterLab renders the live widget, while viewers
    without a kernel (GitHub, nbviewer, a saved notebook) show the picture instead."""

    def __init__(self, children, explorer: "Explorer"):
        super().__init__(children)
        self._explorer = explorer

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["image/png"] = base64.b64encode(self._explorer.snapshot_png()).decode("ascii")
        bundle["text/plain"] = self._explorer.snapshot_text()
        return bundle


def font_height_metrics(prop, dpi: float) -> tuple:
    """(ascent, descent, line gap) in pixels, as ``matplotlib.text.Text._get_layout`` reads them
    from the font's OS/2 table (else hhea); (None, None, None) if the font has neither."""
    font = get_font(fontManager._find_fonts_by_props(prop))
    for table_name, gap_key, ascent_key, descent_key in (
            ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
            ("hhea", "lineGap", "ascent", "descent")):
        table = font.get_sfnt_table(table_name)
        if table is None:
            continue
        scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * dpi / 72
        return table[ascent_key] * scale, -table[descent_key] * scale, table[gap_key] * scale
    return None, None, None


def drawn_boxes(artist, renderer) -> list:
    """Display boxes that hold what ``artist`` draws: its tight box, and for an axis its tick
    marks too (``Axis.get_tightbbox`` leaves them out)."""
    box = artist.get_tightbbox(renderer)
    boxes = [] if box is None else [box]
    if isinstance(artist, Axis):
        boxes += [line.get_window_extent(renderer) for tick in artist._update_ticks()
                  for line in (tick.tick1line, tick.tick2line) if line.get_visible()]
    return boxes


class GlyphCachingRenderer(RendererAgg):
    """``RendererAgg`` that keeps the layouts of the strings and the bitmaps of the glyphs of the
    plain text it draws.

    An explorer draws the same labels and digits again and again (tick labels, the numbers in
    heatmap cells). Agg lays every string out and renders each glyph anew, ~0.3 ms a label on a
    small CPU. Here a string's layout is kept per (string, font), and a glyph's bitmap per
    (glyph, font, angle, position within its pixel): FreeType renders a glyph moved by whole
    pixels to the same bitmap, moved, so pasting the kept bitmap with Agg's own
    ``draw_text_image`` gives the pixels ``RendererAgg.draw_text`` gives (tested). Math text and
    text with font features or a language go the usual way.
    """

    max_entries = 20_000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._layouts, self._glyphs, self._heights = {}, {}, {}

    def _get_font_height_metrics(self, prop) -> tuple:
        """(ascent, descent, line gap) in pixels of ``prop``'s font, kept per font.

        ``Text._get_layout`` asks a renderer that has this method, else finds the font and reads
        its OS/2 or hhea table itself for every string it lays out (~0.1 ms each). Same numbers:
        the same tables and arithmetic, done once per (font, size, dpi).
        """
        key = (hash(prop), prop.get_size_in_points(), self.dpi)
        if key not in self._heights:
            self._heights[key] = font_height_metrics(prop, self.dpi)
        return self._heights[key]

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath or (mtext is not None and (mtext.get_fontfeatures() is not None
                                             or mtext.get_language() is not None)):
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        try:
            glyphs = self._placed_glyphs(gc, x, y, s, prop, angle)
        except (AttributeError, TypeError):          # matplotlib's private font API moved
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        for buffer, left, bottom in glyphs:
            self._renderer.draw_text_image(buffer, left, bottom, 0, gc)

    def _placed_glyphs(self, gc, x, y, s, prop, angle) -> list:
        """[(bitmap, left, bottom), ...]: what ``RendererAgg.draw_text`` pastes, in its order.

        The arithmetic is ``RendererAgg._draw_text_glyphs_and_boxes``'s for plain text (no
        slant, no stretch): each glyph moved to round(64 · position) in 26.6 fixed point.
        """
        flags, size = get_hinting_flag(), prop.get_size_in_points()
        if len(self._layouts) > self.max_entries or len(self._glyphs) > self.max_entries:
            self._layouts.clear(), self._glyphs.clear()
        layout_key = (s, hash(prop), size, self.dpi, flags)
        items = self._layouts.get(layout_key)
        if items is None:
            font = self._prepare_font(prop)
            items = self._layouts[layout_key] = [
                (item.ft_object, item.glyph_index, item.x, item.y)
                for item in font._layout(s, flags=flags, features=None, language=None)]
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        antialiased = bool(gc.get_antialiased())
        placed = []
        for font, index, dx, dy in items:
            tx = round(0x40 * (x + dx * cos - dy * sin))
            ty = round(0x40 * (self.height - y + dx * sin + dy * cos))     # FreeType's y: up
            key = (font.fname, size, self.dpi, flags, index, angle, antialiased, tx & 63, ty & 63)
            glyph = self._glyphs.get(key)
            if glyph is None:                        # rendered within its pixel, kept
                font.set_size(size, self.dpi)
                font._set_transform(
                    (0x10000 * np.array([[cos, -sin], [sin, cos]])).round().astype(int),
                    [tx & 63, ty & 63])
                bitmap = font._render_glyph(
                    index, flags, RenderMode.NORMAL if antialiased else RenderMode.MONO)
                buffer = np.array(bitmap.buffer, copy=True)
                if not antialiased:
                    buffer *= 0xff
                glyph = self._glyphs[key] = (buffer, bitmap.left, bitmap.top)
            buffer, left, top = glyph
            placed.append((buffer, left + (tx >> 6),
                           int(self.height) - (top + (ty >> 6)) + buffer.shape[0]))
        return placed


class GlyphCachingCanvas(FigureCanvasAgg):
    """An explorer's Agg canvas: its renderer keeps glyph bitmaps (``GlyphCachingRenderer``)."""

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key:
            self.renderer = GlyphCachingRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer


class Explorer:
    """Base class: subclasses fill ``self.controls`` and implement ``compute`` and ``draw``.

    - ``compute(**values) -> dict`` is pure (no widgets, no figures);
    - ``draw(state)`` updates artists created once in ``build_figure``;
    - ``readout`` is an HTML line with the numbers, for students and browser tests.
    """

    readout_class = "explorer-readout"

    def __init__(self, controls: dict, figsize=(6, 2.6)):
        self.controls = controls
        # Built once, outside pyplot (so it is never shown twice, nor kept after the explorer
        # is gone); shown through self.output only.
        self.fig = Figure(figsize=figsize)
        self.build_figure(self.fig)
        self.readout = widgets.HTML()
        self.readout.add_class(self.readout_class)
        self.output = widgets.Output()
        self.state: dict = {}
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.widget = ExplorerBox([widgets.HBox(list(controls.values()),
                                                layout=widgets.Layout(flex_flow="row wrap")),
                                   self.readout, self.output], explorer=self)
        self.update()

    # -- to override -------------------------------------------------------------------
    def build_figure(self, fig):
        raise NotImplementedError

    def compute(self, **values) -> dict:
        raise NotImplementedError

    def draw(self, state: dict) -> None:
        raise NotImplementedError

    def describe(self, state: dict) -> str:
        raise NotImplementedError

    # -- shared machinery ----------------------------------------------------------------
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def update(self) -> dict:
        """Recompute from the current control values and redraw; returns the new state."""
        with one_torch_thread():
            self.state = self.compute(**self.values())
            self.draw(self.state)
            self.readout.value = self.describe(self.state)
        with self.output:
            clear_output(wait=True)
            display(self.fig)
        return self.state

    def _on_change(self, _change) -> None:
        self.update()

    def snapshot_png(self) -> bytes:
        """PNG of the figure in the current state (the static picture of a saved notebook)."""
        buffer = io.BytesIO()
        self.fig.savefig(buffer, format="png")
        return buffer.getvalue()

    def snapshot_text(self) -> str:
        """The readout as plain text: what the explorer shows, for text-only viewers."""
        text = html.unescape(re.sub(r"<[^>]+>", " ", self.readout.value or ""))
        return _("Interactive explorer (run the notebook to use it).") + " " + " ".join(text.split())

    def _ipython_display_(self):
        display(self.widget)


class BlittedExplorer(Explorer):
    """An Explorer that redraws only its changing artists on a cached background.

    Re-rendering a whole figure costs 100-300 ms on a small CPU; here the static parts (axes,
    ticks, colour bar, legend) are drawn once, and each update draws the artists listed by
    ``animated_artists()`` over a copy of them and sends the PNG to an ``ipywidgets.Image``.

    Two more caches, both optional:

    - ``cached_layers()``: artists that change with a few settings only (tick labels that follow a
      range, an image that follows a sentence). Each layer is drawn over the ones before it and
      the canvas is kept per key, so an update redraws only the layers whose key changed (and
      the animated artists in no layer), and a setting seen before costs a copy.
    - ``frame_key(state)``: a key that fixes the whole picture; the PNG of a key seen before is
      reused without drawing (``None``, the default: always draw).
    """

    # Canvas copies kept for layers (the largest figures: 1.5 MB each) and PNGs kept per frame.
    layer_bytes = 48 * 2**20
    max_frames = 256
    # Sprites (regions of a few kB to ~100 kB) kept, and the margin kept around their boxes.
    max_sprites, sprite_padding = 512, 2
    use_sprites = True

    def animated_artists(self) -> list:
        raise NotImplementedError

    def cached_layers(self) -> list:
        """[(key, artists), ...]: drawn in this order over the background, each cached by its
        own key and those before it. The artists must be among ``animated_artists()``."""
        return []

    def cached_sprites(self) -> list:
        """[(key, artists), ...], keys unique: groups drawn over the bare background, each kept
        by its own key alone as the pixels it changed in its box (its artists' tight box, padded)
        and pasted there before the layers, e.g. a tick axis that follows one slider: unlike a
        layer, a sprite does not depend on the others, so those a slider reaches can be drawn
        when the explorer is built (``keep_sprite``). No pixel may be drawn by two sprites
        (tested against ``use_sprites = False``: drawn in place as the first layers)."""
        return []

    def frame_key(self, state: dict):
        """A hashable key that fixes the whole picture of ``state`` (after ``draw``), or None."""
        return None

    def snapshot_png(self) -> bytes:
        return self.render_png()

    def render_png(self) -> bytes:
        """PNG of the figure as it is now (cached background and layers + animated artists)."""
        in_layers = self.draw_layers()
        for artist in self.animated_artists():
            if id(artist) not in in_layers and artist.get_visible():
                self.fig.draw_artist(artist)
        return self.canvas_png()

    def prerender(self, states) -> None:
        """Draw and keep the cached layers of ``states`` now (e.g. those a menu reaches, when the
        explorer is built), so that a first visit costs what a later one does; then the artists
        show ``self.state`` again."""
        current = self.state
        for state in states:
            self.state = state
            self.draw(state)
            self.draw_layers()
        self.state = current
        self.draw(current)

    def draw_layers(self) -> set:
        """Restore the background and the deepest kept layer, draw the layers after it (keeping
        each); returns the ids of the artists in layers."""
        canvas = self.background_canvas()
        if getattr(self, "_layers", None) is None:            # a subclass set the background
            self._layers = collections.OrderedDict()
        sprites = self.cached_sprites() if self.use_sprites else []
        layers = self.cached_layers()
        if not self.use_sprites or self.sprites_collide(sprites):     # drawn in place
            sprites, layers = [], [*self.cached_sprites(), *layers]
        keys, key = [], (tuple(sprite_key for sprite_key, _artists in sprites),)
        for layer_key, _artists in layers:
            key += (layer_key,)
            keys.append(key)
        start, region = 0, self._background
        for index in range(len(layers) - 1, -1, -1):          # the deepest layer kept
            if keys[index] in self._layers:
                self._layers.move_to_end(keys[index])
                start, region = index + 1, self._layers[keys[index]]
                break
        if start == 0:
            self.paste_sprites(sprites)                        # over the background
        else:
            canvas.restore_region(region)
        for index in range(start, len(layers)):
            for artist in layers[index][1]:
                if artist.get_visible():
                    self.fig.draw_artist(artist)
            self._layers[keys[index]] = canvas.copy_from_bbox(self.fig.bbox)
        width, height = canvas.get_width_height()
        while len(self._layers) > max(2, self.layer_bytes // (4 * width * height)):
            self._layers.popitem(last=False)                   # least recently used
        return {id(artist) for _key, artists in [*sprites, *layers] for artist in artists}

    def keep_sprite(self, key, artists: list) -> None:
        """Draw ``artists`` over the bare background and keep, under ``key``, the pixels of their
        box that they changed (nothing if kept already). The canvas is left undefined."""
        canvas = self.background_canvas()
        if getattr(self, "_sprites", None) is None:
            self._sprites = collections.OrderedDict()
        if key in self._sprites:
            self._sprites.move_to_end(key)
            return
        canvas.restore_region(self._background)
        bare = np.asarray(canvas.buffer_rgba()).copy()                 # (h, w, 4)
        renderer = canvas.get_renderer()
        boxes = []
        for artist in artists:
            if artist.get_visible():
                self.fig.draw_artist(artist)
                boxes += drawn_boxes(artist, renderer)
        self._sprites[key] = None
        if boxes:
            box = Bbox.union(boxes).padded(self.sprite_padding)        # antialiased edges
            height, width = bare.shape[:2]
            left, right = max(int(np.floor(box.x0)), 0), min(int(np.ceil(box.x1)), width)
            top = max(height - int(np.ceil(box.y1)), 0)                  # rows count down
            bottom = min(height - int(np.floor(box.y0)), height)
            pixels = np.asarray(canvas.buffer_rgba())[top:bottom, left:right].copy()
            changed = (pixels != bare[top:bottom, left:right]).any(axis=2)     # (h', w')
            self._sprites[key] = (top, left, pixels, changed[..., None])
        while len(self._sprites) > self.max_sprites:
            self._sprites.popitem(last=False)                          # the oldest

    def sprites_collide(self, sprites: list) -> bool:
        """Whether two of ``sprites`` (kept now if new) change the same pixel, e.g. two tick
        marks at an axes corner: then they are drawn in place, so that both blend as before."""
        for key, artists in sprites:
            self.keep_sprite(key, artists)
        kept = [self._sprites[key] for key, _artists in sprites if self._sprites[key] is not None]
        for index, (top, left, pixels, changed) in enumerate(kept):
            for other_top, other_left, other_pixels, other_changed in kept[index + 1:]:
                rows = slice(max(top, other_top),
                             min(top + pixels.shape[0], other_top + other_pixels.shape[0]))
                cols = slice(max(left, other_left),
                             min(left + pixels.shape[1], other_left + other_pixels.shape[1]))
                if rows.start >= rows.stop or cols.start >= cols.stop:
                    continue                                           # boxes apart
                mine = changed[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left]
                theirs = other_changed[rows.start - other_top:rows.stop - other_top,
                                       cols.start - other_left:cols.stop - other_left]
                if np.logical_and(mine, theirs).any():
                    return True
        return False

    def paste_sprites(self, sprites: list) -> None:
        """Restore the background and paste the changed pixels of every sprite (drawn if new):
        boxes may overlap, as long as no pixel is drawn by two sprites."""
        for key, artists in sprites:
            self.keep_sprite(key, artists)
        canvas = self.fig.canvas
        canvas.restore_region(self._background)
        view = np.asarray(canvas.buffer_rgba())                        # (h, w, 4), the canvas
        for key, _artists in sprites:
            if self._sprites[key] is not None:
                top, left, pixels, changed = self._sprites[key]
                region = view[top:top + pixels.shape[0], left:left + pixels.shape[1]]
                np.copyto(region, pixels, where=changed)

    def background_canvas(self) -> FigureCanvasAgg:
        """The Agg canvas, with the static background (everything not animated) cached."""
        if not isinstance(self.fig.canvas, GlyphCachingCanvas):
            GlyphCachingCanvas(self.fig)                        # attaches itself to the figure
        canvas = self.fig.canvas
        if getattr(self, "_background", None) is None:
            animated = self.animated_artists()
            visible = [artist.get_visible() for artist in animated]
            for artist in animated:
                artist.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            for artist, shown in zip(animated, visible):
                artist.set_visible(shown)
            self._layers = collections.OrderedDict()            # they sat on the old background
            self._frames = collections.OrderedDict()
            self._sprites = collections.OrderedDict()
            self.background_redrawn()
        return canvas

    def background_redrawn(self) -> None:
        """Hook: called after the cached background was drawn anew (layers built on it reset)."""

    def canvas_png(self) -> bytes:
        """The canvas as it is now, as PNG bytes (fast compression: it goes to the browser)."""
        return rgb_png(np.asarray(self.fig.canvas.buffer_rgba()))           # (h, w, 4) -> PNG

    def update(self) -> dict:
        """Recompute, update the artists in place, and show the new PNG (no full redraw)."""
        if getattr(self, "view", None) is None:
            self.view = widgets.Image(format="png")
            with self.output:
                display(self.view)
        with one_torch_thread():                   # draw and describe may touch tensors too
            self.state = self.compute(**self.values())
            self.draw(self.state)
            self.readout.value = self.describe(self.state)
            key = self.frame_key(self.state)
        if getattr(self, "_frames", None) is None:
            self._frames = collections.OrderedDict()
        fresh = getattr(self, "_background", None) is not None
        if key is not None and key in self._frames and fresh:
            self._frames.move_to_end(key)
            self.view.value = self._frames[key]
        else:
            self.view.value = png = self.render_png()
            if key is not None:
                self._frames[key] = png
                while len(self._frames) > self.max_frames:
                    self._frames.popitem(last=False)
        return self.state
