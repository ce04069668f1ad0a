"""A CJK font for matplotlib that works offline: Noto Sans CJK SC from the ``mplfonts`` package.

matplotlib's default font (DejaVu Sans) has no Chinese glyphs and draws empty boxes instead.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib

CJK_FAMILY = "Noto Sans CJK SC"


@functools.lru_cache(maxsize=None)
def cjk_font_file() -> pathlib.Path:
    """The Noto Sans CJK SC file that ships inside ``mplfonts`` (no download)."""
    spec = importlib.util.find_spec("mplfonts")      # found, not imported (its import takes 0.5 s)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the package mplfonts, which carries the Chinese font, is "
                                  "missing; run make setup (or pip install mplfonts==0.0.11)")
    folder = pathlib.Path(spec.submodule_search_locations[0]) / "fonts"
    candidates = sorted(folder.glob("NotoSansCJKsc-Regular.*")) + sorted(
        folder.glob("NotoSansCJK*Regular*"))
    if not candidates:
        raise FileNotFoundError(f"no Noto Sans CJK SC font in {folder}; reinstall the course's "
                                "packages (make setup) to get mplfonts back")
    return candidates[0]


def use_cjk_font() -> str:
    """Register the CJK font with matplotlib and put it first; DejaVu Sans stays the fallback
    for the glyphs it lacks. Returns the family name."""
    import matplotlib
    from matplotlib import font_manager
    path = cjk_font_file()
    if CJK_FAMILY not in {font.name for font in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(path))
    family = font_manager.FontProperties(fname=str(path)).get_name()
    sans = [family] + [name for name in matplotlib.rcParams["font.sans-serif"] if name != family]
    matplotlib.rcParams["font.sans-serif"] = sans
    matplotlib.rcParams["font.family"] = "sans-serif"
    matplotlib.rcParams["axes.unicode_minus"] = False   # the CJK font lacks U+2212 in places
    return family
