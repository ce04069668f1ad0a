"""The language ``utils`` speaks: English, or Simplified Chinese (zh-CN) when a notebook says so.

A notebook's first cell sets it (``set_language("zh-CN")``); the machine's locale plays no part,
so a Chinese notebook speaks Chinese on an English machine and the other way round. Every
user-visible string in ``utils`` goes through ``_``: English is the source and the key, the
translation comes from ``utils/locale/<language>/utils.po`` (gettext's format, read with polib).

    from utils.i18n import _
    raise ValueError(_("num_heads={h} must divide num_hiddens={d}").format(h=h, d=d))

A string without a current translation falls back to English (the in-step tests,
``tests/test_i18n.py``, fail on it first).
"""

from __future__ import annotations

import functools
import os
import pathlib

ENGLISH = "en"
LANGUAGES = (ENGLISH, "zh-CN")
LOCALE_DIR = pathlib.Path(__file__).resolve().parents[1] / "locale"
# Read by grading sandboxes and other processes the notebook starts.
ENVIRONMENT_VARIABLE = "ATTENTION_COURSE_LANGUAGE"

_language = os.environ.get(ENVIRONMENT_VARIABLE, ENGLISH)
if _language not in LANGUAGES:
    _language = ENGLISH


def set_language(language: str) -> str:
    """Make ``utils`` speak ``language`` ("en" or "zh-CN") from now on; returns it.

    In Chinese, matplotlib also gets a CJK font, so figure titles and labels draw no empty boxes.
    """
    global _language
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not one the course speaks; "
                         f"use one of {', '.join(repr(code) for code in LANGUAGES)}")
    _language = language
    os.environ[ENVIRONMENT_VARIABLE] = language
    if language != ENGLISH:
        from utils.i18n.fonts import use_cjk_font
        use_cjk_font()
    return language


def current_language() -> str:
    """The language ``utils`` speaks now ("en" unless ``set_language`` said otherwise)."""
    return _language


def catalog_path(language: str) -> pathlib.Path:
    """Where ``utils``' own strings are translated into ``language``."""
    return LOCALE_DIR / language / "utils.po"


@functools.lru_cache(maxsize=None)
def _translations(language: str) -> dict:
    """msgid -> msgstr of the current (translated, not fuzzy) entries of ``utils.po``."""
    path = catalog_path(language)
    if language == ENGLISH or not path.is_file():
        return {}
    import polib
    return {entry.msgid: entry.msgstr for entry in polib.pofile(str(path))
            if entry.msgstr and not entry.fuzzy and not entry.obsolete}


def gettext(message: str) -> str:
    """``message`` in the current language (English if it has no current translation)."""
    if _language == ENGLISH:
        return message
    return _translations(_language).get(message, message)


_ = gettext

# The names a translated message is called through: ``_("...")``, or ``gettext("...")`` in a
# function whose own variable ``_`` hides the short name (``for english, _ in pairs``). Both the
# catalog's extraction (``utils.i18n.messages``) and the models' fingerprint
# (``utils.code_fingerprint``, which ignores a message's text) know them.
TRANSLATION_FUNCTIONS = ("_", "gettext")


def text_columns(text: str) -> int:
    """How many columns ``text`` takes in a fixed-width font: two for a Chinese character
    (Unicode's wide and fullwidth characters), one for any other."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def ljust_columns(text: str, width: int) -> str:
    """``text.ljust(width)`` counted in columns (``text_columns``): tables line up in both languages."""
    return text + " " * max(width - text_columns(text), 0)


def rjust_columns(text: str, width: int) -> str:
    """``text.rjust(width)`` counted in columns (``text_columns``)."""
    return " " * max(width - text_columns(text), 0) + text
