"""The instructor workflow end to end: release -> collect -> autograde -> feedback -> export.

A synthetic class (built from the released student notebook) goes through the real CLI,
``python -m utils.grading``, in a temporary course directory. Expected scores are written by
hand from the points of each exercise (see POINTS), not computed by the code under test.
"""

import contextlib
import csv
import html
import json
import os
import pathlib
import re
import sqlite3
import subprocess
import sys
import tempfile

import nbformat
import pytest

from conftest import REPO, copy_course
from grading_fixtures.hostile import SECURITY_CHAPTERS, SECURITY_ENV

ASSIGNMENT = "01_attention_cues"
INSTRUCTOR_NB = SECURITY_CHAPTERS / ASSIGNMENT / "exercises.ipynb"
# Points per graded cell, by hand from the exercise design (2 + 3 + 2 + 2 autograded, 2 written).
POINTS = {"test_scaled_scores": 2, "test_attention_weights": 3, "test_attend": 2,
          "test_query_for_weights": 2, "why_sqrt_d": 2}

# --- answers the synthetic students type into the answer cells ---------------------------------
GOOD = {
    "scaled_scores": (
        "def scaled_scores(queries, keys):\n"
        "    return torch.einsum('bmd,bnd->bmn', queries, keys) / queries.shape[-1] ** 0.5\n"),
    "attention_weights": (
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    if temperature <= 0:\n"
        "        raise ValueError('temperature must be positive')\n"
        "    return torch.softmax(scaled_scores(queries, keys) / temperature, dim=-1)\n"),
    "attend": (
        "def attend(queries, keys, values, temperature=1.0):\n"
        "    w = attention_weights(queries, keys, temperature)\n"
        "    return torch.bmm(w, values), w\n"),
    "query_for_weights": (
        "def query_for_weights(keys, weights, temperature=1.0):\n"
        "    n, d = keys.shape\n"
        "    if temperature <= 0:\n"
        "        raise ValueError('temperature must be positive')\n"
        "    if (weights <= 0).any() or abs(weights.sum().item() - 1) > 1e-4:\n"
        "        raise ValueError('weights must be positive and sum to 1')\n"
        "    if torch.linalg.matrix_rank(keys) < n:\n"
        "        raise ValueError('keys must be linearly independent')\n"
        "    b = torch.log(weights) * d ** 0.5 * temperature\n"
        "    return torch.linalg.lstsq(keys, b[:, None]).solution[:, 0]\n"),
    "why_sqrt_d": "The variance of q.k grows with d, so the softmax saturates; dividing helps.",
}
WRONG = {
    "scaled_scores": (  # divides by d instead of sqrt(d)
        "def scaled_scores(queries, keys):\n"
        "    return queries @ keys.transpose(1, 2) / queries.shape[-1]\n"),
    "attention_weights": (  # softmax over the query axis
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    return torch.softmax(scaled_scores(queries, keys) / temperature, dim=1)\n"),
    "attend": (  # forgets to normalise
        "def attend(queries, keys, values, temperature=1.0):\n"
        "    w = torch.exp(scaled_scores(queries, keys) / temperature)\n"
        "    return w @ values, w\n"),
    "query_for_weights": (  # scores log(weights) without sqrt(d) * temperature, no checks
        "def query_for_weights(keys, weights, temperature=1.0):\n"
        "    return torch.linalg.pinv(keys) @ torch.log(weights)\n"),
    "why_sqrt_d": "It makes the numbers smaller.",
}
PARTIAL = dict(GOOD, **{
    # Passes the visible tests, fails the hidden ones: exp overflows for scores of size 1e6
    # and temperature <= 0 is not rejected.
    "attention_weights": (
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    e = torch.exp(scaled_scores(queries, keys) / temperature)\n"
        "    return e / e.sum(-1, keepdim=True)\n"),
    # Calls the course library: not allowed in graded functions.
    "attend": (
        "from utils.attention import soft_address\n"
        "def attend(queries, keys, values, temperature=1.0):\n"
        "    return soft_address(queries, keys, values, temperature)\n"),
    # Right query, but no check of the weights: a weight of 0 goes into log(0) = -inf
    # instead of raising a ValueError (only hidden tests try it).
    "query_for_weights": (
        "def query_for_weights(keys, weights, temperature=1.0):\n"
        "    if temperature <= 0 or torch.linalg.matrix_rank(keys) < keys.shape[0]:\n"
        "        raise ValueError('temperature must be > 0, keys linearly independent')\n"
        "    scaled_log_weights = torch.log(weights) * keys.shape[1] ** 0.5 * temperature\n"
        "    return torch.linalg.pinv(keys) @ scaled_log_weights\n"),
})
SYNTAX = dict(GOOD, **{
    "scaled_scores": "def scaled_scores(queries, keys)\n    return queries @@ keys\n",
    # computes its own scores, so it does not depend on the broken cell
    "attention_weights": (
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    if temperature <= 0:\n"
        "        raise ValueError('temperature must be positive')\n"
        "    s = queries @ keys.transpose(1, 2) / (queries.shape[-1] ** 0.5 * temperature)\n"
        "    return torch.softmax(s, dim=-1)\n"),
})
HOSTILE = dict(GOOD, **{
    # grabs 8 GB after defining attend: the memory cap turns it into a MemoryError
    "attend": GOOD["attend"] + "hog = bytearray(8 * 2 ** 30)\n",
    # never finishes: the per-cell timeout (10 s here) interrupts it; the function stays undefined
    "query_for_weights": "while True:\n    pass\n" + GOOD["query_for_weights"],
})

# student -> (answers, test cells the student deleted); "instructor" and "empty" are special.
CLASS = {
    "correct": (GOOD, ()),
    "wrong": (WRONG, ()),
    "partial": (PARTIAL, ()),
    "syntax": (SYNTAX, ()),
    "deleted": (GOOD, ("test_attend",)),
    "hostile": (HOSTILE, ()),
}
# Manual scores for the written answer, set through nbgrader's gradebook API.
MANUAL = {"correct": 2, "partial": 1.5, "instructor": 2}
COLUMNS = ["student_id", "test_scaled_scores", "test_attention_weights", "test_attend",
           "test_query_for_weights", "why_sqrt_d", "total", "max_total", "needs_manual_grade"]
# By hand: points earned per exercise (POINTS above), total, max, written answers left to grade.
EXPECTED = [
    ["correct",    "2", "3", "2", "2", "2",   "11",  "11", "0"],
    ["deleted",    "2", "3", "2", "2", "0",   "9",   "11", "1"],  # test restored and run
    ["empty",      "0", "0", "0", "0", "0",   "0",   "11", "0"],  # untouched: no response
    ["hostile",    "2", "3", "2", "0", "0",   "7",   "11", "1"],  # timeout in exercise 4
    ["instructor", "2", "3", "2", "2", "2",   "11",  "11", "0"],
    ["partial",    "2", "0", "0", "0", "1.5", "3.5", "11", "0"],  # see PARTIAL
    ["syntax",     "0", "3", "2", "2", "0",   "7",   "11", "1"],
    ["wrong",      "0", "0", "0", "0", "0",   "0",   "11", "1"],
]


# --- helpers ------------------------------------------------------------------------------------
def run_cli(*args, course_dir, cli, check=True, timeout=240):
    """python -m utils.grading <args> in the repository, like an instructor would, through
    ``cli`` (tests/conftest.py's ``grading_cli``: the CLI's entry point, each command with its
    own exit status, stdout and stderr, in one process for the session)."""
    result = cli.run(*args, course=course_dir, expect=None, env=SECURITY_ENV, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"utils.grading {' '.join(args)} exited {result.returncode}\n"
                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}")
    return result


def marked_lines(source: str, begin: str, end: str) -> list:
    """Lines strictly between `### BEGIN x` and `### END x` markers (stripped, non-trivial)."""
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and len(line.strip()) >= 8:
            lines.append(line.strip())
    return lines


def instructor_lines(begin, end) -> list:
    nb = nbformat.read(INSTRUCTOR_NB, as_version=4)
    return [line for cell in nb.cells for line in marked_lines(cell.source, begin, end)]


def page_text(path: pathlib.Path) -> str:
    """Visible text of an HTML page: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def make_submission(student_nb, answers: dict, deleted=()) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(json.loads(json.dumps(student_nb)))   # deep copy
    nb.cells = [cell for cell in nb.cells if grade_id(cell) not in deleted]
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def with_venv_path():
    """nbgrader's Gradebook runs `alembic`, found in the venv's bin/ (not activated here)."""
    bin_dir = str(pathlib.Path(sys.executable).parent)
    if not os.environ.get("PATH", "").startswith(bin_dir):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


# --- the workflow, run once for the module ------------------------------------------------------
@pytest.fixture(scope="module")
def workflow(lesson_one_release, grading_cli):
    # Our own folder rather than tmp_path_factory: concurrent pytest runs on this machine
    # prune each other's old basetemp folders, which once deleted a course mid-run.
    with tempfile.TemporaryDirectory(prefix="grading-workflow-") as tmp:
        yield run_workflow(pathlib.Path(tmp), lesson_one_release, grading_cli)


def run_workflow(tmp: pathlib.Path, lesson_one_release, cli) -> dict:
    """The class through every command. ``release`` is the session's one release of lesson 1
    (tests/conftest.py ``lesson_one_release``, the same command), copied."""
    course, inbox = tmp / "course", tmp / "inbox"
    inbox.mkdir()
    out = {"course": course}
    released_course, out["release"] = lesson_one_release
    copy_course(released_course, course)
    released = course / "release" / ASSIGNMENT / "exercises.ipynb"
    assert released.is_file(), out["release"].stdout
    student_nb = nbformat.read(released, as_version=4)

    # Two layouts in one inbox: <student>.ipynb files, and nbgrader's submitted/ tree.
    for student, (answers, deleted) in CLASS.items():
        nb = make_submission(student_nb, answers, deleted)
        if student in ("correct", "hostile"):
            target = inbox / "submitted" / student / ASSIGNMENT / "exercises.ipynb"
            target.parent.mkdir(parents=True)
        else:
            target = inbox / f"{student}.ipynb"
        nbformat.write(nb, target)
    nbformat.write(student_nb, inbox / "empty.ipynb")
    (inbox / "instructor.ipynb").write_bytes(INSTRUCTOR_NB.read_bytes())

    out["collect"] = run_cli("collect", str(inbox), "--chapter", ASSIGNMENT, course_dir=course,
                             cli=cli)
    out["autograde"] = run_cli("autograde", "--chapter", "01", "--timeout", "10",
                               course_dir=course, cli=cli)
    with contextlib.closing(sqlite3.connect(course / "gradebook.db")) as connection:
        out["journal"] = connection.execute("PRAGMA journal_mode").fetchone()[0]
    out["wal_left"] = sorted(p.name for p in course.glob("gradebook.db-*"))

    from nbgrader.api import Gradebook
    with_venv_path()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-course") as gradebook:
        for student, score in MANUAL.items():
            grade = gradebook.find_grade("why_sqrt_d", "exercises", ASSIGNMENT, student)
            grade.manual_score = score
            grade.needs_manual_grade = False
        gradebook.db.commit()

    out["feedback"] = run_cli("feedback", "--chapter", "01", course_dir=course, cli=cli)
    out["export"] = run_cli("export", "--chapter", "01", "--to", str(course / "grades.csv"),
                            course_dir=course, cli=cli)
    return out


def autograded(workflow, student) -> nbformat.NotebookNode:
    path = workflow["course"] / "autograded" / student / ASSIGNMENT / "exercises.ipynb"
    return nbformat.read(path, as_version=4)


def cell_errors(nb, grade) -> list:
    cell = next(c for c in nb.cells if grade_id(c) == grade)
    return [f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error"]


# --- tests --------------------------------------------------------------------------------------
def test_points_in_notebook_match_the_design():
    nb = nbformat.read(INSTRUCTOR_NB, as_version=4)
    points = {grade_id(c): c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    assert points == POINTS
    written = [c for c in nb.cells if grade_id(c) == "why_sqrt_d"][0]
    assert written.cell_type == "markdown" and written.metadata.nbgrader["solution"]


@pytest.mark.slow
def test_released_version_has_no_solutions_or_hidden_tests(workflow):
    released = workflow["course"] / "release" / ASSIGNMENT / "exercises.ipynb"
    raw = released.read_text()
    sources = "\n".join("".join(cell["source"]) for cell in json.loads(raw)["cells"])
    solutions = instructor_lines("### BEGIN SOLUTION", "### END SOLUTION")
    hidden = instructor_lines("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
    assert len(solutions) >= 8 and len(hidden) >= 20       # the grep below has teeth
    for text in (raw, sources):
        for line in solutions + hidden + ["BEGIN SOLUTION", "HIDDEN TESTS"]:
            assert line not in text, f"released notebook leaks: {line}"
    stubs = [c for c in json.loads(raw)["cells"]
             if c["cell_type"] == "code" and "raise NotImplementedError()" in "".join(c["source"])]
    assert len(stubs) == 4
    assert "YOUR ANSWER HERE" in sources
    assert "checks.check_plain_torch(scaled_scores)" in sources     # visible tests stay


@pytest.mark.slow
def test_collect_reads_both_layouts(workflow):
    for student in ["correct", "hostile", "wrong", "empty", "instructor"]:
        assert f"{student}: collected" in workflow["collect"].stdout
        assert (workflow["course"] / "submitted" / student / ASSIGNMENT /
                "exercises.ipynb").is_file()


@pytest.mark.slow
def test_instructor_version_scores_full_marks(workflow):
    nb = autograded(workflow, "instructor")
    for grade in ["test_scaled_scores", "test_attention_weights", "test_attend",
                  "test_query_for_weights"]:
        assert cell_errors(nb, grade) == []
    row = next(r for r in csv.reader(open(workflow["course"] / "grades.csv"))
               if r[0] == "instructor")
    assert row[1:7] == ["2", "3", "2", "2", "2", "11"]


@pytest.mark.slow
def test_student_version_fails_cleanly(workflow):
    nb = autograded(workflow, "empty")
    for grade in ["test_scaled_scores", "test_attention_weights", "test_attend",
                  "test_query_for_weights"]:
        errors = cell_errors(nb, grade)
        assert errors and errors[0].startswith("NotImplementedError"), errors


@pytest.mark.slow
def test_hostile_submission_is_contained(workflow):
    nb = autograded(workflow, "hostile")
    assert any(e.startswith("MemoryError") for e in cell_errors(nb, "attend"))
    assert cell_errors(nb, "query_for_weights"), "the endless loop should have been interrupted"
    assert cell_errors(nb, "test_attend") == []        # the kernel survived both


@pytest.mark.slow
def test_deleted_test_cell_is_restored_and_run(workflow):
    nb = autograded(workflow, "deleted")
    assert "test_attend" in [grade_id(c) for c in nb.cells]
    assert cell_errors(nb, "test_attend") == []


@pytest.mark.slow
def test_gradebook_is_one_file_again_after_autograde(workflow):
    """Autograde grades with a write-ahead log and folds it back when it ends."""
    assert (workflow["journal"], workflow["wal_left"]) == ("delete", [])


def test_exported_scores_equal_hand_computed_table(workflow):
    rows = list(csv.reader(open(workflow["course"] / "grades.csv", newline="")))
    assert rows[0] == COLUMNS
    assert rows[1:] == EXPECTED
    for row in EXPECTED:                              # the hand table is self-consistent
        assert float(row[6]) == sum(float(x) for x in row[1:6])
        assert all(float(x) <= POINTS[c] for x, c in zip(row[1:6], COLUMNS[1:6]))


@pytest.mark.slow
def test_feedback_hides_hidden_tests_but_shows_the_rest(workflow):
    feedback = workflow["course"] / "feedback"
    pages = {p.parts[-3]: p for p in feedback.glob(f"*/{ASSIGNMENT}/exercises.html")}
    assert set(pages) == {row[0] for row in EXPECTED}
    hidden = instructor_lines("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
    for student, page in pages.items():
        text = page_text(page)
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:3]}"
        assert "checks.check_plain_torch(scaled_scores)" in text      # visible tests shown
    assert "torch.einsum('bmd,bnd->bmn', queries, keys)" in page_text(pages["correct"])
    partial = page_text(pages["partial"])
    assert "scaled_log_weights" in partial                         # the student's answer
    assert "hidden test: weights for scores of size 1e6" in partial  # why it lost points
    assert "hidden test: a weight of 0: expected ValueError, but nothing was raised" in partial
    assert "uses `soft_address`; write it with plain torch operations" in partial
    assert "Score: 3.5 / 11.0" in partial


@pytest.mark.slow
def test_stock_feedback_would_have_leaked(workflow):
    """Guards the guard: the autograded notebooks (what nbgrader renders) hold hidden tests."""
    hidden = instructor_lines("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
    source = "\n".join(c.source for c in autograded(workflow, "partial").cells)
    assert all(line in source for line in hidden)


def test_grading_mode_flag_and_light_import():
    code = ("import sys, utils.grading as g; "
            "print(g.in_grading_mode(), 'nbgrader' in sys.modules, 'torch' in sys.modules)")
    for flag, expected in [("1", "True False False"), ("", "False False False")]:
        env = dict(os.environ, ATTENTION_COURSE_GRADING=flag)
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                                capture_output=True, text=True, check=True)
        assert result.stdout.split() == expected.split()


def test_cli_rejects_bad_input(grading_cli):
    with tempfile.TemporaryDirectory(prefix="grading-cli-") as tmp:
        check_bad_input(pathlib.Path(tmp), grading_cli)


def check_bad_input(tmp_path, cli):
    bad = run_cli("release", "--chapter", "99", course_dir=tmp_path / "c", cli=cli, check=False)
    assert bad.returncode == 2 and "no chapter '99'" in bad.stderr
    inside = run_cli("init", "--course-dir", str(REPO / "grading"), course_dir=tmp_path,
                     cli=cli, check=False)
    assert inside.returncode == 2 and "inside the course repository" in inside.stderr
    empty = run_cli("collect", str(tmp_path), "--chapter", "01", course_dir=tmp_path / "c",
                    cli=cli, check=False)
    assert empty.returncode == 2 and "release it first" in empty.stderr


@pytest.mark.slow
def test_collect_keeps_the_class_when_some_file_names_are_bad(lesson_one_release,
                                                              grading_cli):
    """Bad names are listed with the rule and skipped; the others are collected; exit 1."""
    with tempfile.TemporaryDirectory(prefix="grading-collect-") as tmp:
        tmp = pathlib.Path(tmp)
        course, inbox = tmp / "course", tmp / "inbox"
        inbox.mkdir()
        copy_course(lesson_one_release[0], course)         # released (tests/conftest.py)
        released = course / "release" / ASSIGNMENT / "exercises.ipynb"
        good = ["alice", "bob.smith", "c-3po"]
        bad = ["odd id; touch $HOME-x", "\u5f20\u4f1f", ".", "-dash-first"]
        for name in good + bad:
            (inbox / f"{name}.ipynb").write_bytes(released.read_bytes())
        nested = inbox / "submitted" / "bad id" / ASSIGNMENT / "exercises.ipynb"
        nested.parent.mkdir(parents=True)
        nested.write_bytes(released.read_bytes())
        (inbox / "broken.ipynb").write_text("{not json")
        result = run_cli("collect", str(inbox), "--chapter", "01", course_dir=course,
                         cli=grading_cli, check=False)
        assert result.returncode == 1, result.stdout + result.stderr
        collected = sorted(p.name for p in (course / "submitted").iterdir())
        assert collected == sorted(good)
        skipped = [line for line in result.stdout.splitlines() if "SKIPPED" in line]
        assert len(skipped) == len(bad) + 2            # + the nested bad id + broken JSON
        for name in bad + ["bad id"]:
            line = next((line for line in skipped if repr(name)[1:-1] in line), None)
            assert line is not None, f"{name!r} not reported:\n{result.stdout}"
            assert "not a valid student id" in line and "ASCII letters, digits" in line
            assert "rename the file" in line
        assert "collected 3, skipped 6" in result.stdout


# --- the helpers every lesson's test cells use -------------------------------------------------
def test_checks_explain_what_is_wrong():
    import torch
    from utils.grading import checks

    with pytest.raises(AssertionError, match=re.escape(
            "scores: expected shape (2, 3, 4) = (batch, queries, keys), got (2, 4, 3)")):
        checks.check_shape(torch.zeros(2, 4, 3), (2, 3, 4), "(batch, queries, keys)", "scores")
    weights = torch.tensor([[[0.5, 0.87], [0.5, 0.5]]])             # row 0 sums to 1.37
    with pytest.raises(AssertionError, match=re.escape(
            "weights must sum to 1 along the key axis; yours sum to 1.37 for query 0")):
        checks.check_rows_sum_to_one(weights)
    with pytest.raises(AssertionError, match=r"did exp overflow"):
        checks.check_rows_sum_to_one(torch.tensor([[[float("nan"), 0.0]]]))
    with pytest.raises(AssertionError, match=r"index \(0, 1\): expected 2, got 5"):
        checks.check_close(torch.tensor([[1.0, 5.0]]), [[1.0, 2.0]], "outputs")
    checks.check_close(torch.tensor([[1.0, 2.0]]), [[1.0, 2.0]], "outputs")   # passes quietly
    with pytest.raises(AssertionError, match="expected ValueError, but nothing was raised"):
        checks.check_raises(ValueError, lambda: None, what="temperature 0")
    with pytest.raises(AssertionError, match="`query_for_weights` is not defined"):
        checks.check_defined("query_for_weights", {})


def test_plain_torch_check_catches_library_calls():
    import torch
    from utils.attention import soft_address
    from utils.grading import checks

    def honest(q, k):
        return torch.softmax(q @ k.transpose(1, 2), dim=-1)

    def shortcut(q, k):
        return soft_address(q, k, k)[1]

    def nested(q, k):
        helper = lambda: utils_attention.scaled_dot_scores(q, k)   # noqa: E731, F821
        return helper()

    checks.check_plain_torch(honest)
    for cheat in (shortcut, nested):
        with pytest.raises(AssertionError, match="write it with plain torch operations"):
            checks.check_plain_torch(cheat)


def test_redaction_keeps_results_and_drops_hidden_code():
    from utils.grading.feedback import PLACEHOLDER, redact_cell

    cell = nbformat.v4.new_code_cell(
        "check_visible(x)\n### BEGIN HIDDEN TESTS\nsecret_check_value(x, 42)\n"
        "### END HIDDEN TESTS\nprint('done')")
    cell.outputs = [nbformat.v4.new_output(
        "error", ename="AssertionError", evalue="hidden test: wrong for batch 5",
        traceback=["Cell In[3], line 3\n      2 ### BEGIN\n----> 3 secret_check_value(x, 42)\n",
                   "AssertionError: hidden test: wrong for batch 5"])]
    assert redact_cell(cell)
    assert "secret_check_value" not in json.dumps(cell)
    assert cell.source == f"check_visible(x)\n{PLACEHOLDER}\nprint('done')"
    assert cell.outputs[0].evalue == "hidden test: wrong for batch 5"
    assert "AssertionError: hidden test: wrong for batch 5" in cell.outputs[0].traceback
