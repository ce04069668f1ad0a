"""The gettext catalogs (``.po``) that hold a notebook's translation, and the checks that keep
them in step with the English source.

    chapters/01_attention_cues/lesson.ipynb              the English source
    chapters/01_attention_cues/locale/zh-CN/lesson.po     its Chinese catalog (one entry per piece)
    chapters/01_attention_cues/lesson.zh-CN.ipynb         built from the two (utils.i18n.build)

``update`` brings a catalog in line with its source the way gettext's msgmerge does: an entry
whose English changed keeps its old translation marked *fuzzy*, with the old English beside it
(``#| msgid``), so a stale translation is never used silently; ``problems`` reports it.
"""

from __future__ import annotations

import difflib
import pathlib
import re

import nbformat
import polib

from utils.i18n.segments import COMMENT, MARKDOWN, STRING, STRING_PREFIX, notebook_pieces

CHINESE = "zh-CN"
FUZZY_MATCH = 0.6          # how alike an old English text must be to offer its translation
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$", re.S)
LINK_TARGET = re.compile(r"\]\(([^)\s]+)")
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:[.,]\d+)*(?:e-?\d+)?")   # 第5课 counts
FIELD = re.compile(r"(?<!\{)\{([^{}]*)\}(?!\})")


def catalog_path(notebook: pathlib.Path, language: str = CHINESE) -> pathlib.Path:
    notebook = pathlib.Path(notebook)
    return notebook.parent / "locale" / language / f"{notebook.stem}.po"


def translated_path(notebook: pathlib.Path, language: str = CHINESE) -> pathlib.Path:
    notebook = pathlib.Path(notebook)
    return notebook.with_name(f"{notebook.stem}.{language}.ipynb")


def _new_catalog(language: str) -> polib.POFile:
    catalog = polib.POFile(wrapwidth=0)
    catalog.metadata = {"Project-Id-Version": "Attention, interactively",
                        "Language": language.replace("-", "_"),
                        "MIME-Version": "1.0",
                        "Content-Type": "text/plain; charset=UTF-8",
                        "Content-Transfer-Encoding": "8bit"}
    return catalog


def template(notebook: pathlib.Path, language: str = CHINESE) -> polib.POFile:
    """An empty catalog with one entry per distinct piece of the English notebook, in order."""
    nb = nbformat.read(notebook, as_version=4)
    catalog, seen = _new_catalog(language), {}
    for piece in notebook_pieces(nb):
        where = (f"{piece.kind}/cell-{piece.cell}", "")
        if piece.msgid in seen:
            if where not in seen[piece.msgid].occurrences:
                seen[piece.msgid].occurrences.append(where)
            continue
        entry = polib.POEntry(msgid=piece.msgid, msgstr="", occurrences=[where])
        seen[piece.msgid] = entry
        catalog.append(entry)
    return catalog


def update(notebook: pathlib.Path, language: str = CHINESE) -> tuple[pathlib.Path, dict]:
    """Write the notebook's catalog anew from its source, keeping every translation: current
    ones as they are, changed ones fuzzy, unused ones obsolete (``#~``). Returns the path and
    counts of translated / fuzzy / untranslated / obsolete entries."""
    path = catalog_path(notebook, language)
    old = polib.pofile(str(path), wrapwidth=0) if path.is_file() else _new_catalog(language)
    known = {entry.msgid: entry for entry in old if entry.msgstr}
    fresh = template(notebook, language)
    unused = dict(known)
    for entry in fresh:
        if entry.msgid in known:
            previous = unused.pop(entry.msgid)
            entry.msgstr, entry.tcomment = previous.msgstr, previous.tcomment
            entry.flags = list(previous.flags)
            entry.previous_msgid = previous.previous_msgid
    for entry in fresh:
        if entry.msgstr or not unused:
            continue
        best = difflib.get_close_matches(entry.msgid, list(unused), n=1, cutoff=FUZZY_MATCH)
        if best:
            previous = unused.pop(best[0])
            entry.msgstr, entry.flags = previous.msgstr, ["fuzzy"]
            entry.previous_msgid = previous.msgid
    for msgid, previous in unused.items():
        previous.obsolete, previous.occurrences = True, []
        fresh.append(previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh.save(str(path))
    counts = {"translated": len(fresh.translated_entries()),
              "fuzzy": len(fresh.fuzzy_entries()),
              "untranslated": len(fresh.untranslated_entries()),
              "obsolete": len(fresh.obsolete_entries())}
    return path, counts


def entry_kind(entry: polib.POEntry) -> str:
    """markdown, comment or string: what the entry's first occurrence (``kind/cell-N``) says."""
    return entry.occurrences[0][0].split("/")[0] if entry.occurrences else ""


def _spans(pattern: re.Pattern, text: str) -> list[str]:
    return sorted(match.group(0) for match in pattern.finditer(text))


def _without_code_and_math(text: str) -> str:
    return MATH.sub(" ", INLINE_CODE.sub(" ", text))


def entry_problems(kind: str, msgid: str, msgstr: str) -> list[str]:
    """What is wrong with one translation: what a reader would see differ from the English
    beyond the words (numbers, inline code, math, link targets, format fields, quoting)."""
    found = []
    if kind == MARKDOWN:
        for name, pattern in (("inline code", INLINE_CODE), ("math", MATH),
                              ("link targets", LINK_TARGET)):
            if _spans(pattern, msgid) != _spans(pattern, msgstr):
                found.append(f"its {name} differ from the English: {_spans(pattern, msgid)} "
                             f"in English, {_spans(pattern, msgstr)} translated")
        english = _spans(NUMBER, _without_code_and_math(msgid))
        chinese = _spans(NUMBER, _without_code_and_math(msgstr))
        if english != chinese:
            found.append(f"its numbers differ from the English: {english} in English, "
                         f"{chinese} translated")
    elif kind == STRING:
        import io
        import tokenize
        try:
            tokens = [t for t in tokenize.generate_tokens(io.StringIO(msgstr).readline)
                      if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
        except (tokenize.TokenError, SyntaxError):
            tokens = []
        if len(tokens) != 1 or tokens[0].type != tokenize.STRING:
            found.append("the translation is not one Python string literal, quotes included")
        elif STRING_PREFIX.match(msgid).group(1) != STRING_PREFIX.match(msgstr).group(1):
            found.append("the translation changes the string's prefix (f, r, b)")
        if sorted(FIELD.findall(msgid)) != sorted(FIELD.findall(msgstr)):
            found.append(f"its {{fields}} differ from the English: {sorted(FIELD.findall(msgid))}"
                         f" in English, {sorted(FIELD.findall(msgstr))} translated")
        english, chinese = _spans(NUMBER, FIELD.sub(" ", msgid)), _spans(NUMBER, FIELD.sub(" ", msgstr))
        if english != chinese:
            found.append(f"its numbers differ from the English: {english} in English, "
                         f"{chinese} translated")
    elif kind == COMMENT:
        if not msgstr.startswith("#") or "\n" in msgstr:
            found.append("the translation is not a one-line comment starting with #")
    return found


def problems(notebook: pathlib.Path, language: str = CHINESE) -> list[str]:
    """Everything that keeps the catalog from translating the current English notebook: a
    missing catalog, a piece with no translation or a fuzzy one (its English changed), and
    translations that change numbers, inline code, math or code. Empty when in step."""
    notebook = pathlib.Path(notebook)
    path = catalog_path(notebook, language)
    if not path.is_file():
        return [f"{path}: missing; run python -m utils.i18n update {notebook}"]
    catalog = polib.pofile(str(path), wrapwidth=0)
    current = {entry.msgid: entry for entry in catalog if not entry.obsolete}
    found = []
    for entry in template(notebook, language):
        kind = entry_kind(entry)
        where = f"{path}:{entry.occurrences[0][0]} {entry.msgid[:60]!r}"
        translation = current.get(entry.msgid)
        if translation is None or not translation.msgstr:
            found.append(f"{where}: no translation; translate it in {path.name}")
        elif translation.fuzzy:
            found.append(f"{where}: fuzzy (the English changed); check the translation against "
                         "the new English and remove the fuzzy flag")
        else:
            found += [f"{where}: {problem}" for problem in
                      entry_problems(kind, entry.msgid, translation.msgstr)]
    return found


def translations(notebook: pathlib.Path, language: str = CHINESE) -> dict:
    """msgid -> msgstr of the catalog's current entries (translated and not fuzzy)."""
    catalog = polib.pofile(str(catalog_path(notebook, language)), wrapwidth=0)
    return {entry.msgid: entry.msgstr for entry in catalog
            if entry.msgstr and not entry.fuzzy and not entry.obsolete}
