"""``utils``' own user-visible strings: every ``_("...")`` call in ``utils/**/*.py`` (or
``gettext("...")``, where a local ``_`` hides the short name).

Their catalog is ``utils/locale/<language>/utils.po``; ``update`` and ``problems`` work as for a
notebook's catalog (a changed English message turns its entry fuzzy). A message with fields is
formatted after translation, ``_("{n} heads").format(n=n)``, so the fields must survive it.
"""

from __future__ import annotations

import ast
import difflib
import pathlib

import polib

from utils.i18n import TRANSLATION_FUNCTIONS, catalog_path
from utils.i18n.catalogs import CHINESE, FIELD, FUZZY_MATCH, NUMBER, _new_catalog

UTILS_DIR = pathlib.Path(__file__).resolve().parents[1]
MESSAGE = "message"


def source_messages(utils_dir: pathlib.Path = UTILS_DIR) -> dict:
    """msgid -> sorted module paths (relative to the repository) of every ``_("literal")``."""
    found: dict = {}
    for path in sorted(utils_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in TRANSLATION_FUNCTIONS and len(node.args) == 1
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                where = str(path.relative_to(utils_dir.parent))
                found.setdefault(node.args[0].value, set()).add(where)
    return {msgid: sorted(paths) for msgid, paths in found.items()}


def update(language: str = CHINESE) -> tuple[pathlib.Path, dict]:
    """Write utils.po anew from the source, keeping translations (changed ones fuzzy)."""
    path = catalog_path(language)
    old = polib.pofile(str(path), wrapwidth=0) if path.is_file() else _new_catalog(language)
    known = {entry.msgid: entry for entry in old if entry.msgstr}
    fresh = _new_catalog(language)
    for msgid, paths in source_messages().items():
        entry = polib.POEntry(msgid=msgid, msgstr="", occurrences=[(p, "") for p in paths])
        if msgid in known:
            previous = known.pop(msgid)
            entry.msgstr, entry.flags = previous.msgstr, list(previous.flags)
        fresh.append(entry)
    for entry in fresh:
        if not entry.msgstr and known:
            best = difflib.get_close_matches(entry.msgid, list(known), n=1, cutoff=FUZZY_MATCH)
            if best:
                previous = known.pop(best[0])
                entry.msgstr, entry.flags = previous.msgstr, ["fuzzy"]
                entry.previous_msgid = previous.msgid
    for previous in known.values():
        previous.obsolete, previous.occurrences = True, []
        fresh.append(previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh.save(str(path))
    return path, {"translated": len(fresh.translated_entries()),
                  "fuzzy": len(fresh.fuzzy_entries()),
                  "untranslated": len(fresh.untranslated_entries()),
                  "obsolete": len(fresh.obsolete_entries())}


def message_problems(msgid: str, msgstr: str) -> list[str]:
    found = []
    if sorted(FIELD.findall(msgid)) != sorted(FIELD.findall(msgstr)):
        found.append(f"its {{fields}} differ: {sorted(FIELD.findall(msgid))} in English, "
                     f"{sorted(FIELD.findall(msgstr))} translated")
    if sorted(NUMBER.findall(FIELD.sub(" ", msgid))) != sorted(NUMBER.findall(FIELD.sub(" ", msgstr))):
        found.append("its numbers differ from the English")
    return found


def problems(language: str = CHINESE) -> list[str]:
    """Untranslated, fuzzy or inconsistent entries of utils.po; empty when in step."""
    path = catalog_path(language)
    if not path.is_file():
        return [f"{path}: missing; run python -m utils.i18n update"]
    current = {e.msgid: e for e in polib.pofile(str(path), wrapwidth=0) if not e.obsolete}
    found = []
    for msgid, paths in source_messages().items():
        entry = current.get(msgid)
        where = f"{path} ({paths[0]}) {msgid[:60]!r}"
        if entry is None or not entry.msgstr:
            found.append(f"{where}: no translation")
        elif entry.fuzzy:
            found.append(f"{where}: fuzzy (the English changed)")
        else:
            found += [f"{where}: {problem}" for problem in message_problems(msgid, entry.msgstr)]
    return found
