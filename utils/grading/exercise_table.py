"""The instructor's table of every lesson's exercises: kind, points and named checks.

Read statically from the instructor notebooks (nothing runs): an autograded test cell's kind,
reading, bug class, points and checks come from its
``checks.Rubric(name, points=..., kind=..., reading=..., bug=...)`` call and its
``rubric.check(name, points)`` calls; a manually graded answer's kind from the cell's
``exercise_kind`` metadata ("written" or "figure"). Transfer is counted by the strict
``reading`` (see ``utils.grading.rubric``), not by the format.
"""

import ast
import pathlib
from typing import NamedTuple

import nbformat

from utils.grading.rubric import KINDS, MANUAL_KINDS, READINGS


class Item(NamedTuple):
    chapter: str
    grade_id: str
    title: str           # the exercise's heading, e.g. "Exercise 2: ..."
    kind: str
    points: float
    checks: tuple        # (name, points) of an autograded item; () for a manual one
    reading: str = ""    # copy, adapt or transfer (autograded items)
    bug: str = ""        # the planted bug's class (find-and-fix items)


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def _constant(node):
    return node.value if isinstance(node, ast.Constant) else None


def rubric_of(source: str):
    """(kind, points, [(check name, points)], reading, bug) of a test cell's rubric, or None
    without one."""
    from utils.grading.feedback import split_hidden
    visible = split_hidden(source)[0]
    try:
        tree = ast.parse(visible)
    except SyntaxError:
        return None
    kind = points = reading = bug = None
    named = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        keywords = {k.arg: _constant(k.value) for k in node.keywords}
        if node.func.attr == "Rubric":
            kind, points = keywords.get("kind"), keywords.get("points")
            reading, bug = keywords.get("reading"), keywords.get("bug")
        elif node.func.attr == "check" and len(node.args) == 2:
            named.append((_constant(node.args[0]), _constant(node.args[1])))
    if kind is None:
        return None
    named.sort(key=lambda pair: _line_of(visible, pair[0]))
    return kind, points, named, reading or "", bug or ""


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
            kind, _, named, reading, bug = rubric or ("unmarked", meta["points"], [], "", "")
            found.append(Item(chapter_dir.name, meta["grade_id"], title, kind,
                              float(meta["points"]), tuple(named), reading, bug))
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
        if item.kind in KINDS and item.reading not in READINGS:
            found.append(f"{item.grade_id}: no strict reading (reading= one of {READINGS})")
        if item.kind == "find-and-fix" and not item.bug:
            found.append(f"{item.grade_id}: a find-and-fix item without its bug class (bug=)")
        if item.kind in KINDS:
            total = sum(p for _, p in item.checks)
            if len(item.checks) < 2:
                found.append(f"{item.grade_id}: fewer than two named checks")
            if abs(total - item.points) > 1e-9:
                found.append(f"{item.grade_id}: checks add up to {total}, the cell has "
                             f"{item.points} points")
    points = sum(i.points for i in auto)
    transfer = sum(i.points for i in auto if i.reading == "transfer")
    if not points or transfer / points < 0.6:
        found.append(f"transfer items hold {transfer:g} of {points:g} autograded points "
                     f"(at least 60 % needed)")
    for kind in ("find-and-fix", "predict"):
        if not any(i.kind == kind for i in auto):
            found.append(f"no {kind} item")
    return found


def course_problems(chapters: pathlib.Path) -> list:
    """Every chapter's problems, "chapter: problem", and a bug class that two items share."""
    found, seen = [], {}
    for chapter_dir in sorted(p.parent for p in chapters.glob("*/exercises.ipynb")):
        chapter_items = items(chapter_dir)
        found += [f"{chapter_dir.name}: {p}" for p in problems(chapter_items)]
        for item in chapter_items:
            if item.bug and item.bug in seen:
                found.append(f"{chapter_dir.name}: {item.grade_id}: bug class {item.bug!r} "
                             f"repeats {seen[item.bug]}")
            elif item.bug:
                seen[item.bug] = f"{chapter_dir.name}/{item.grade_id}"
    return found


def markdown_table(chapters: pathlib.Path) -> str:
    """One row per graded item of every chapter, then a per-lesson summary line."""
    lines = ["| lesson | exercise | kind | reading | bug class | points | checks (points) |",
             "|---|---|---|---|---|---|---|"]
    for chapter_dir in sorted(p.parent for p in chapters.glob("*/exercises.ipynb")):
        chapter_items = items(chapter_dir)
        number = chapter_dir.name.split("_")[0]
        for item in chapter_items:
            named = "; ".join(f"{name} ({p:g})" for name, p in item.checks) or "by the instructor"
            lines.append(f"| {number} | {item.title} | {item.kind} | {item.reading or '—'} | "
                         f"{item.bug or '—'} | {item.points:g} | {named} |")
        auto = [i for i in chapter_items if i.kind not in MANUAL_KINDS]
        points = sum(i.points for i in auto)
        transfer = sum(i.points for i in auto if i.reading == "transfer")
        share = f"{100 * transfer / points:.0f} %" if points else "—"
        lines.append(f"| {number} | **autograded: {points:g} points, transfer {transfer:g} "
                     f"({share})** | | | | | |")
    return "\n".join(lines)
