"""Predictions that cannot be copied (issue 33): no predict item's graded truth is visible before
the student commits to it.

For every chapter, the released notebook is run the way a student runs it (outside the grader:
no hidden tests), with every answer filled in from the instructor's and every prediction filled
in wrongly but well-formed. A last cell, added by this test, computes the truths from the
instructor's prediction cells. Then each truth is searched, in every rendering a notebook would
print (3.000, 1.386, 12,576, (2, 8, 5, 5), ...), in:
- the released notebook's text (markdown and code) and every output of the student's run;
- the lesson notebook's text and committed outputs.

A truth with fewer than three significant digits (0, 1, 2.0, 1000) cannot be searched without
matching unrelated text; such a value is not searched, and the test names none of them as
checked. Shapes are searched as written by Python: (2, 8, 5, 5), [2, 8, 5, 5],
torch.Size([2, 8, 5, 5]).
"""

import json
import math
import os
import pathlib
import re

import nbformat
import pytest

from conftest import CHAPTERS
from grading_fixtures.mistakes import solution_sources
from grading_fixtures.null_submissions import (answers_graded_as, is_prediction_cell,
                                               wrong_predictions)

ASSIGNMENTS = sorted(p.parent.name for p in CHAPTERS.glob("*/exercises.ipynb")
                     if os.environ.get("FIXTURE_CHAPTERS", "") in ("", p.parent.name))
MARKER = "TRUTHS-OF-THIS-TEST:"


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def predict_answer_cells(instructor_nb) -> list:
    """grade_ids of the answer cells a predict test cell grades."""
    return answers_graded_as(instructor_nb, "predict")


def significant_digits(text: str) -> int:
    """Digits that carry information: leading and trailing zeros left out (3.000 has 1)."""
    return len(re.sub(r"[^0-9]", "", text.split("e")[0]).strip("0"))


def renderings(value) -> set:
    """How a notebook would print ``value``, keeping only renderings with >= 3 significant
    digits (fewer match unrelated text)."""
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, (list, tuple)):
        inner = ", ".join(str(v) for v in value)
        return {f"({inner})", f"[{inner}]", f"torch.Size([{inner}])"} if len(value) > 1 else set()
    value = float(value)
    if not math.isfinite(value):
        return set()
    texts = set()
    if value == int(value) and abs(value) < 1e15:
        whole = int(value)
        texts |= {str(whole), f"{whole:,}", f"{whole:_}", f"{whole:,}".replace(",", " ")}
    for spec in (".2f", ".3f", ".4f", ".3g", ".4g", ".5g", ".6g"):
        texts.add(format(value, spec))
    texts.add(repr(value))
    # Integers print as themselves: a float rendering of an integer (3.000) is searched only
    # when the integer itself is searchable.
    return {t for t in texts if significant_digits(t.replace(",", "").replace("_", "")
                                                    .replace(" ", "")) >= 3}


def find(texts: set, haystack: str) -> list:
    found = []
    for text in texts:
        pattern = r"(?<![0-9.])" + re.escape(text) + r"(?![0-9])"
        for match in re.finditer(pattern, haystack):
            found.append(haystack[max(0, match.start() - 60):match.end() + 20].replace("\n", " "))
    return found


def student_run(released_nb, instructor_nb, chapter_dir: pathlib.Path):
    """(executed notebook, {variable: truth}, indices of the cells this test filled in)."""
    from nbclient import NotebookClient
    nb = nbformat.reads(nbformat.writes(released_nb), as_version=4)
    answers = solution_sources(instructor_nb)
    predicted = predict_answer_cells(instructor_nb)
    filled, truth_sources = set(), []
    for index, cell in enumerate(nb.cells):
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
            source = answers[grade_id]
            if grade_id in predicted and is_prediction_cell(source):
                cell.source = wrong_predictions(source, "returns-constant")
                truth_sources.append(source)
                filled.add(index)
            else:
                cell.source = source
    assert truth_sources, f"{chapter_dir.name}: no prediction cell found"
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json as _json, math as _math\n"
        "_truths = {}\n"
        f"for _source in {truth_sources!r}:\n"
        "    _space = dict(globals())\n"
        "    exec(_source, _space)\n"
        "    for _name in compile(_source, 'p', 'exec').co_names:\n"
        "        _v = _space.get(_name)\n"
        "        if hasattr(_v, 'tolist'):\n"
        "            _v = _v.tolist()\n"
        "        if isinstance(_v, (bool, int, float, tuple, list)):\n"
        "            _truths[_name] = _v\n"
        f"print({MARKER!r} + _json.dumps(_truths))\n"))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(chapter_dir)}})
    client.execute()
    last = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    assert MARKER in last, f"{chapter_dir.name}: the truths were not computed: {nb.cells[-1].outputs}"
    truths = json.loads(last.split(MARKER, 1)[1].strip().splitlines()[0])
    names = set()
    for source in truth_sources:
        import ast
        names |= {t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)}
    return nb, {k: v for k, v in truths.items() if k in names}, filled | {len(nb.cells) - 1}


def notebook_text(nb, skip=()) -> str:
    """Every cell's source and every output's text of ``nb`` (cells in ``skip`` left out)."""
    parts = []
    for index, cell in enumerate(nb.cells):
        if index in skip:
            continue
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") if isinstance(output.get("text"), str)
                         else "".join(output.get("text", [])))
            for key in ("text/plain", "text/html", "text/markdown"):
                data = output.get("data", {}).get(key)
                if data:
                    parts.append(data if isinstance(data, str) else "".join(data))
            if output.get("output_type") == "error":
                parts.append(output.get("evalue", ""))
                parts.extend(output.get("traceback", []))
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))


@pytest.fixture(scope="module")
def released(released_chapters):
    """The release/ folder of the session's one release of every chapter (tests/conftest.py's
    ``released_chapters``, ``release --chapter all`` with the real CLI)."""
    return released_chapters / "release"


def test_renderings_find_a_printed_truth_and_skip_round_numbers():
    assert "1.386" in renderings(math.log(4)) and "12,576" in renderings(12576)
    assert not renderings(1000) and not renderings(2.0) and not renderings(True)
    assert find(renderings(math.log(4)), "entropy 1.386 nats") and not find(
        renderings(math.log(4)), "entropy 11.3863 or 1.3861")
    assert find(renderings((2, 8, 5, 5)), "weights torch.Size([2, 8, 5, 5])")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_predicted_truth_is_visible_before_grading(released, assignment):
    chapter_dir = CHAPTERS / assignment
    instructor_nb = nbformat.read(chapter_dir / "exercises.ipynb", as_version=4)
    released_nb = nbformat.read(released / assignment / "exercises.ipynb", as_version=4)
    ran, truths, filled = student_run(released_nb, instructor_nb, chapter_dir)
    assert truths, f"{assignment}: no prediction variable found"
    places = {"the released notebook and the student's run": notebook_text(ran, skip=filled),
              "the lesson": notebook_text(nbformat.read(chapter_dir / "lesson.ipynb",
                                                        as_version=4))}
    leaks = []
    for name, value in truths.items():
        for place, text in places.items():
            for context in find(renderings(value), text)[:2]:
                leaks.append(f"{name} ({value}) in {place}: ...{context}...")
    assert not leaks, f"{assignment}: graded truths visible before grading:\n" + "\n".join(leaks)
