"""Build a translated notebook from its English source and its catalog.

The build is deterministic and keeps everything but the words: cell ids, tags, nbgrader
metadata, code (up to comments and prose strings) and the cell order are the English notebook's.
Outputs are not built: ``python -m utils.i18n build --execute`` runs the result, as the English
lessons are run, and the strict nbval tests check that the committed outputs are what it prints.
"""

from __future__ import annotations

import copy
import pathlib
import tempfile

import nbformat
import polib

from utils.i18n.catalogs import CHINESE, catalog_path, translations, translated_path
from utils.i18n.segments import code_pieces, one_line_display_math

LANGUAGE_CALL = 'set_language("en")'


def translate_markdown(source: str, table: dict, po_file: pathlib.Path) -> str:
    from mdpo.po2md import pofile_to_markdown
    return pofile_to_markdown(one_line_display_math(source), str(po_file),
                              wrapwidth=0).rstrip("\n")


def translate_code(source: str, table: dict, language: str) -> str:
    """The code cell with each translated comment and string token replaced, nothing else."""
    text = source
    for piece in reversed(code_pieces(source, 0)):
        replacement = table.get(piece.msgid)
        if replacement:
            text = text[:piece.start] + replacement + text[piece.end:]
    return text.replace(LANGUAGE_CALL, f'set_language("{language}")')


def build(notebook: pathlib.Path, language: str = CHINESE) -> nbformat.NotebookNode:
    """The translated notebook (sources only, no outputs)."""
    notebook = pathlib.Path(notebook)
    nb = nbformat.read(notebook, as_version=4)
    table = translations(notebook, language)
    result = copy.deepcopy(nb)
    result.metadata["attention_course"] = {"language": language, "source": notebook.name}
    with tempfile.TemporaryDirectory(prefix="attention-i18n-") as folder:
        current = polib.POFile(wrapwidth=0)
        for msgid, msgstr in table.items():
            current.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
        po_file = pathlib.Path(folder) / "current.po"
        current.save(str(po_file))
        for cell in result.cells:
            if cell.cell_type == "markdown":
                cell.source = translate_markdown(cell.source, table, po_file)
            elif cell.cell_type == "code":
                cell.source = translate_code(cell.source, table, language)
                cell.outputs, cell.execution_count = [], None
    return result


def sources(nb: nbformat.NotebookNode) -> list[tuple]:
    """What the build decides in a notebook: each cell's kind, id, metadata and source."""
    return [(cell.cell_type, cell.get("id"), dict(cell.metadata), cell.source)
            for cell in nb.cells]


def write(notebook: pathlib.Path, language: str = CHINESE, execute: bool = False) -> pathlib.Path:
    """Build the translated notebook next to its source (and run it if ``execute``)."""
    target = translated_path(notebook, language)
    built = build(notebook, language)
    if target.is_file() and not execute:
        committed = nbformat.read(target, as_version=4)
        if sources(committed) == sources(built):
            return target                   # unchanged: keep its outputs
    nbformat.write(built, target)
    if execute:
        from utils.notebook_tools import execute as run
        run(target)
    return target
