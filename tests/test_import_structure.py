"""The library's import structure: no module imports another that imports it back.

Every ``import``/``from ... import`` of a ``utils`` module counts, at module level or inside a
function (a lazy import hides a cycle, it does not remove it). The student's side of the
library never imports the instructor's grader, except the light exercise checks.
"""

import ast
import pathlib

import pytest

from conftest import REPO

UTILS = REPO / "utils"
# What a student's lesson may reach: everything but the grader, whose checks module is light.
STUDENT_MAY_IMPORT = {"utils.grading", "utils.grading.checks"}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def utils_imports(path: pathlib.Path, known: set) -> set:
    """The ``utils`` modules ``path`` imports (``from utils.x import y`` counts ``utils.x``,
    or ``utils.x.y`` when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def import_graph() -> dict:
    paths = {module_name(p): p for p in UTILS.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: utils_imports(path, set(paths)) - {name} for name, path in paths.items()}


def find_cycle(graph: dict):
    """One cycle as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_cycle_in_the_library():
    graph = import_graph()
    assert len(graph) > 20 and "utils.training" in graph["utils.seq2seq"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, None),
])
def test_cycle_finder_finds_cycles(graph, cycle):
    assert find_cycle(graph) == cycle


def test_lazy_imports_count(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from utils.seq2seq import BahdanauConfig\n")
    assert utils_imports(module, {"utils.seq2seq"}) == {"utils.seq2seq"}


def test_student_modules_do_not_import_the_grader():
    graph = import_graph()
    student = [name for name in graph if not name.startswith("utils.grading")]
    reached = {name: {t for t in graph[name] if t.startswith("utils.grading")} - STUDENT_MAY_IMPORT
               for name in student}
    assert {name: targets for name, targets in reached.items() if targets} == {}
