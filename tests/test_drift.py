"""One definition per concept: lesson cells tagged ``utils:<module>`` must equal the library.

A lesson may show the code of a function or class that lives in ``utils`` (so students read it
where they learn it). Such a cell carries the tag ``utils:<module>`` (e.g. ``utils:masking``) and
every top-level ``def``/``class`` in it must be identical, by AST, to the one in that module, up
to the text of its messages (the library's go through ``utils.i18n._`` so that they speak the
notebook's language; the lesson shows them in English, and its twin translates them).
An untagged cell must not redefine a name that ``utils`` defines.
"""

import ast
import importlib
import inspect
import pathlib

import nbformat
import pytest

from conftest import CHAPTERS, REPO
from utils.code_fingerprint import without_message_text

LESSONS = sorted(CHAPTERS.glob("*/lesson.ipynb"))


def _definitions(source: str) -> dict[str, ast.AST]:
    tree = ast.parse(source)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name: node for node in tree.body if isinstance(node, kinds)}


def _cell_source(cell) -> str:
    # IPython magics and shell escapes are not Python; they never define library code.
    return "\n".join(line for line in cell.source.splitlines()
                     if not line.lstrip().startswith(("%", "!")))


def drift(cell_source: str, module_source: str, module_name: str) -> list[str]:
    """Differences between the definitions of a lesson cell and a module (empty if none)."""
    cell_defs, module_defs = _definitions(cell_source), _definitions(module_source)
    if not cell_defs:
        return [f"cell is tagged utils:{module_name} but defines nothing"]
    found = []
    for name, node in cell_defs.items():
        if name not in module_defs:
            found.append(f"{name} is not defined in utils/{module_name.replace('.', '/')}.py")
        elif (ast.dump(without_message_text(node))
              != ast.dump(without_message_text(module_defs[name]))):
            found.append(f"{name} differs from utils.{module_name}.{name}")
    return found


def _library_names() -> set[str]:
    names = set()
    for path in (REPO / "utils").rglob("*.py"):
        names |= set(_definitions(path.read_text(encoding="utf-8")))
    return names


def _tagged_cells():
    for lesson in LESSONS:
        nb = nbformat.read(lesson, as_version=4)
        for index, cell in enumerate(nb.cells):
            for tag in cell.metadata.get("tags", []):
                if cell.cell_type == "code" and tag.startswith("utils:"):
                    yield pytest.param(lesson, index, tag[len("utils:"):],
                                       id=f"{lesson.parent.name}-cell{index}-{tag}")


def test_lessons_exist():
    assert LESSONS, f"no chapters/*/lesson.ipynb found under {CHAPTERS}"


@pytest.mark.parametrize("lesson, index, module_name", list(_tagged_cells()))
def test_tagged_cell_equals_library(lesson, index, module_name):
    cell = nbformat.read(lesson, as_version=4).cells[index]
    module = importlib.import_module(f"utils.{module_name}")
    problems = drift(_cell_source(cell), inspect.getsource(module), module_name)
    assert not problems, f"{lesson.relative_to(REPO)} cell {index}: " + "; ".join(problems)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.parent.name)
def test_untagged_cells_do_not_redefine_library_names(lesson):
    library = _library_names()
    for index, cell in enumerate(nbformat.read(lesson, as_version=4).cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or any(t.startswith("utils:") for t in tags):
            continue
        clash = set(_definitions(_cell_source(cell))) & library
        assert not clash, (f"{lesson.relative_to(REPO)} cell {index} redefines {sorted(clash)} from "
                           f"utils: import it, or tag the cell utils:<module> to show the library code")


def test_drift_detects_a_changed_body_and_a_missing_name():
    module = "def f(x):\n    return x + 1\n"
    assert drift("def f(x):\n    return x + 1\n", module, "m") == []
    assert drift("def f(x):\n    return x + 2\n", module, "m") == ["f differs from utils.m.f"]
    assert drift("def g(x):\n    return x\n", module, "m") == ["g is not defined in utils/m.py"]
    assert drift("x = 1\n", module, "m") == ["cell is tagged utils:m but defines nothing"]


def test_drift_ignores_only_the_text_of_messages():
    library = ('def f(x):\n    if x < 0:\n        raise ValueError(_("x must be >= 0, got {x}")'
               '.format(x=x))\n    return x\n')
    english = 'def f(x):\n    if x < 0:\n        raise ValueError(f"x must be >= 0, got {x}")\n    return x\n'
    assert drift(english, library, "m") == []
    stricter = english.replace("x < 0", "x <= 0")
    other_error = english.replace("ValueError", "TypeError")
    assert drift(stricter, library, "m") == ["f differs from utils.m.f"]
    assert drift(other_error, library, "m") == ["f differs from utils.m.f"]
