"""The instructor's table of every lesson's exercises: kind, points and named checks.

Read statically from the instructor notebooks (nothing runs): an autograded test cell's kind,
points and checks come from its ``checks.Rubric(name, points=..., kind=...)`` call and its
``rubric.check(name, points)`` calls; a manually graded answer's kind from the cell's
``exercise_kind`` metadata ("written" or "figure").
"""

import ast
import pathlib
from typing import NamedTuple

import nbformat

from utils.grading.rubric import KINDS, MANUAL_KINDS, TRANSFER_KINDS


class Item(NamedTuple):
    chapter: str
    grade_id: str
    title: str           # the exercise's heading, e.g. "Exercise 2: ..."
    kind: str
    points: float
    checks: tuple        # (name, points) of an autograded item; () for a manual one


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def _constant(node):
    return node.value if isinstance(node, ast.Constant) else None


def rubric_of(source: str):
    """(kind, points, [(check name, points)]) of a test cell's rubric, or None without one."""
    from utils.grading.feedback import split_hidden
    visible = split_hidden(source)[0]
    try:
        tree = ast.parse(visible)
    except SyntaxError:
        return None
    kind = points = None
    named = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        keywords = {k.arg: _constant(k.value) for k in node.keywords}
        if node.func.attr == "Rubric":
            kind, points = keywords.get("kind"), keywords.get("points")
        elif node.func.attr == "check" and len(node.args) == 2:
            named.append((_constant(node.args[0]), _constant(node.args[1])))
    if kind is None:
        return None
    named.sort(key=lambda pair: _line_of(visible, pair[0]))
    return kind, points, named


def _line_of(source: str, text) -> int:
    """Where a check's name first appears in the cell (names are written in either quote)."""
    return source.find(text) if isinstance(text, str) else -1


def items(chapter_dir: pathlib.Path) -> list:
    """Every graded item of one chapter's instructor ``exercises.ipynb``, in notebook order."""
    nb = nbformat.read(chapter_dir / "exercises.ipynb", as_version=4)
    found, title = [], ""
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## "):
            title = cell.source.lstrip()[3:].splitlines()[0].strip()
        if not meta.get("grade"):
            continue
        if cell.cell_type == "code" and not meta.get("solution"):
            rubric = rubric_of(cell.source)
            kind, points, named = rubric if rubric else ("unmarked", meta["points"], [])
            found.append(Item(chapter_dir.name, meta["grade_id"], title, kind,
                              float(meta["points"]), tuple(named)))
        elif cell.cell_type == "markdown" and meta.get("solution"):
            found.append(Item(chapter_dir.name, meta["grade_id"], title,
                              cell.metadata.get("exercise_kind", "unmarked"),
                              float(meta["points"]), ()))
    return found


def problems(chapter_items: list) -> list:
    """What breaks the course's rules for one chapter (empty when all is well)."""
    found = []
    auto = [i for i in chapter_items if i.kind not in MANUAL_KINDS]
    for item in chapter_items:
        if item.kind == "unmarked" or item.kind not in KINDS + MANUAL_KINDS:
            found.append(f"{item.grade_id}: no known kind ({item.kind})")
        if item.kind in KINDS:
            total = sum(p for _, p in item.checks)
            if len(item.checks) < 2:
                found.append(f"{item.grade_id}: fewer than two named checks")
            if abs(total - item.points) > 1e-9:
                found.append(f"{item.grade_id}: checks add up to {total}, the cell has "
                             f"{item.points} points")
    points = sum(i.points for i in auto)
    transfer = sum(i.points for i in auto if i.kind in TRANSFER_KINDS)
    if not points or transfer / points < 0.6:
        found.append(f"transfer items hold {transfer:g} of {points:g} autograded points "
                     f"(at least 60 % needed)")
    for kind in ("find-and-fix", "predict"):
        if not any(i.kind == kind for i in auto):
            found.append(f"no {kind} item")
    return found


def markdown_table(chapters: pathlib.Path) -> str:
    """One row per graded item of every chapter, then a per-lesson summary line."""
    lines = ["| lesson | exercise | kind | points | checks (points) |",
             "|---|---|---|---|---|"]
    for chapter_dir in sorted(p.parent for p in chapters.glob("*/exercises.ipynb")):
        chapter_items = items(chapter_dir)
        number = chapter_dir.name.split("_")[0]
        for item in chapter_items:
            named = "; ".join(f"{name} ({p:g})" for name, p in item.checks) or "by the instructor"
            lines.append(f"| {number} | {item.title} | {item.kind} | {item.points:g} | {named} |")
        auto = [i for i in chapter_items if i.kind not in MANUAL_KINDS]
        points = sum(i.points for i in auto)
        transfer = sum(i.points for i in auto if i.kind in TRANSFER_KINDS)
        share = f"{100 * transfer / points:.0f} %" if points else "—"
        lines.append(f"| {number} | **autograded: {points:g} points, transfer {transfer:g} "
                     f"({share})** | | | |")
    return "\n".join(lines)
