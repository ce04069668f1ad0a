"""``export --format canvas|moodle``: grade CSVs an LMS imports, checked on a small class.

The class goes through the real CLI (release, collect, autograde, export) like in
test_grading_workflow (every command through the CLI's entry point in the session's one CLI
process, tests/conftest.py's ``grading_cli``): "full" hands in the instructor version (full marks on the autograded
cells, 1.5 on the written answer), "blank" the untouched student version, and "absent" is in
the gradebook (as after ``nbgrader db student add``) but hands in nothing. The LMS files are
read back with the csv module and compared with the nbgrader table and with the points written
in the notebook.
"""

import csv
import pathlib
import tempfile

import nbformat
import pytest

from test_grading_workflow import ASSIGNMENT, INSTRUCTOR_NB, run_cli, with_venv_path
from utils.grading.export import AssignmentTotals, canvas_table, moodle_table

CLASS = ["absent", "blank", "full"]
MANUAL_SCORE = 1.5
IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MISSING_COLUMN = "Missing (ignore on import)"
# export options an instructor may get wrong, and the one-line error each must give
BAD_OPTIONS = [
    (["--format", "xlsx"], "--format 'xlsx' is not one of 'nbgrader', 'canvas', 'moodle'"),
    (["--format", "moodle", "--moodle-id-column", "matriculation"],
     "'ID number', 'Username', 'Email address'"),
    (["--format", "canvas", "--moodle-id-column", "username"],
     "--moodle-id-column only applies to --format moodle"),
    (["--canvas-id-column", "ID"], "--canvas-id-column only applies to --format canvas"),
    (["--format", "moodle", "--moodle-id-column", "email"],
     "is not an email address; use --moodle-id-column 'ID number' or 'Username'"),
    (["--format", "canvas", "--canvas-id-column", "ID"],
     "is not a Canvas user ID (a number); use --canvas-id-column"),
]


def notebook_points() -> tuple:
    """(total points of the chapter, grade id and points of its written answer), by reading
    the instructor notebook's nbgrader metadata (not the code under test)."""
    cells = [c for c in nbformat.read(INSTRUCTOR_NB, as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("grade")]
    written = [c for c in cells if c.cell_type == "markdown"]
    assert len(written) == 1, "the chapter should have exactly one written answer"
    total = sum(c.metadata.nbgrader["points"] for c in cells)
    return total, written[0].metadata.nbgrader["grade_id"], written[0].metadata.nbgrader["points"]


def read_csv(path) -> list:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


@pytest.fixture(scope="module")
def course(grading_cli):
    with tempfile.TemporaryDirectory(prefix="grading-lms-") as tmp:
        yield build_class(pathlib.Path(tmp), grading_cli)


def build_class(tmp: pathlib.Path, cli) -> dict:
    course, inbox = tmp / "course", tmp / "inbox"
    inbox.mkdir()
    run_cli("release", "--chapter", "01", course_dir=course, cli=cli)
    released = course / "release" / ASSIGNMENT / "exercises.ipynb"
    (inbox / "blank.ipynb").write_bytes(released.read_bytes())
    (inbox / "full.ipynb").write_bytes(INSTRUCTOR_NB.read_bytes())
    run_cli("collect", str(inbox), "--chapter", "01", course_dir=course, cli=cli)
    run_cli("autograde", "--chapter", "01", "--timeout", "120", course_dir=course, cli=cli,
            timeout=600)          # generous: a loaded machine is slow to import torch

    from nbgrader.api import Gradebook
    with_venv_path()
    _, written, _ = notebook_points()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-course") as gradebook:
        gradebook.add_student("absent")                    # on the roster, no submission
        grade = gradebook.find_grade(written, "exercises", ASSIGNMENT, "full")
        grade.manual_score = MANUAL_SCORE
        grade.needs_manual_grade = False
        gradebook.db.commit()

    # The five exports and the bad-option cases, each command with its own exit status and
    # output.
    exports = [["export", "--chapter", "01"],                         # default: nbgrader table
               ["export", "--chapter", "01", "--format", "canvas"],
               ["export", "--chapter", "01", "--format", "Moodle", "--to", str(tmp / "moodle.csv")],
               ["export", "--chapter", "01", "--format", "canvas", "--canvas-id-column",
                "sis login id", "--to", str(tmp / "canvas-login.csv")],
               ["export", "--chapter", "01", "--format", "moodle", "--moodle-id-column",
                "username", "--to", str(tmp / "moodle-username.csv")]]
    bad = [["export", "--chapter", "01", *options, "--to", str(course / "bad.csv")]
           for options, _ in BAD_OPTIONS]
    results = [run_cli(*command, course_dir=course, cli=cli, check=False)
               for command in exports + bad]
    for command, result in zip(exports, results):
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    out = {"course": course, "canvas": results[1], "moodle": results[2],
           "bad_options": results[len(exports):]}
    out["nbgrader"] = read_csv(course / "grades.csv")
    out["canvas_rows"] = read_csv(course / "grades-canvas.csv")
    out["canvas_login"] = read_csv(tmp / "canvas-login.csv")
    out["moodle_rows"] = read_csv(tmp / "moodle.csv")
    out["moodle_username"] = read_csv(tmp / "moodle-username.csv")
    return out


def nbgrader_totals(course) -> dict:
    header, *rows = course["nbgrader"]
    return {row[0]: (row[header.index("total")], row[header.index("max_total")]) for row in rows}


@pytest.mark.slow
def test_nbgrader_table_is_unchanged_and_knows_the_absent_student(course):
    header, *rows = course["nbgrader"]
    assert header[0] == "student_id" and header[-3:] == ["total", "max_total",
                                                         "needs_manual_grade"]
    absent = next(row for row in rows if row[0] == "absent")
    assert absent[1:-3] == [""] * (len(header) - 4) and absent[-3] == "0"


@pytest.mark.slow
def test_canvas_csv(course):
    points, _, written_points = notebook_points()
    header, possible, *rows = course["canvas_rows"]
    assert header == [*IDENTITY, ASSIGNMENT, MISSING_COLUMN]
    assert possible == ["Points Possible", "", "", "", "", f"{points:g}", "(read only)"]
    by_id = {row[2]: row for row in rows}
    assert sorted(by_id) == CLASS                                    # nobody dropped
    for row in rows:
        assert row[:2] == ["", ""] and row[3:5] == ["", ""]          # only SIS User ID filled
    assert by_id["absent"][5:] == ["0", ASSIGNMENT]                  # 0, marked missing
    assert by_id["blank"][5:] == ["0", ""]                           # handed in, scored 0
    full = points - written_points + MANUAL_SCORE                    # manual grade included
    assert by_id["full"][5:] == [f"{full:g}", ""] and "." in by_id["full"][5]
    nbgrader = nbgrader_totals(course)
    for student in CLASS:
        assert float(by_id[student][5]) == float(nbgrader[student][0])
        assert float(possible[5]) == float(nbgrader[student][1])
    assert "3 student row(s)" in course["canvas"].stdout
    assert "1 missing submission(s) scored 0" in course["canvas"].stdout


@pytest.mark.slow
def test_canvas_id_column_is_chosen(course):
    header, possible, *rows = course["canvas_login"]
    assert header[:5] == IDENTITY and possible[0] == "Points Possible"
    assert sorted(row[3] for row in rows) == CLASS
    assert all(row[2] == "" for row in rows)


@pytest.mark.slow
def test_moodle_csv(course):
    header, *rows = course["moodle_rows"]
    assert header == ["ID number", ASSIGNMENT, f"{ASSIGNMENT} (feedback)"]
    by_id = {row[0]: row for row in rows}
    assert sorted(by_id) == CLASS
    assert by_id["absent"][1:] == ["0", "missing: no submission"]
    assert by_id["blank"][1:] == ["0", ""]
    nbgrader = nbgrader_totals(course)
    for student in CLASS:
        assert float(by_id[student][1]) == float(nbgrader[student][0])
    assert by_id["full"][1] == nbgrader["full"][0] and "." in by_id["full"][1]
    username_header, *username_rows = course["moodle_username"]
    assert username_header[0] == "Username"
    assert sorted(row[0] for row in username_rows) == CLASS


@pytest.mark.slow
def test_bad_option_values_give_one_line_errors(course):
    assert len(course["bad_options"]) == len(BAD_OPTIONS)
    for (options, message), result in zip(BAD_OPTIONS, course["bad_options"]):
        assert result.returncode == 2, (options, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert message in lines[0], (options, lines[0])
    assert not (course["course"] / "bad.csv").exists()


def test_several_chapters_one_column_each_missing_per_chapter():
    totals = AssignmentTotals(
        assignments=[("01_attention_cues", 11.0), ("02_attention_pooling", 7.5)],
        students=[("ana", {"01_attention_cues": 11.0, "02_attention_pooling": None}),
                  ("bo", {"01_attention_cues": None, "02_attention_pooling": None}),
                  ("cy", {"01_attention_cues": 2.25, "02_attention_pooling": 7.5})])
    header, rows = canvas_table(totals, "SIS User ID")
    assert header == [*IDENTITY, "01_attention_cues", "02_attention_pooling", MISSING_COLUMN]
    assert rows == [["Points Possible", "", "", "", "", "11", "7.5", "(read only)"],
                    ["", "", "ana", "", "", "11", "0", "02_attention_pooling"],
                    ["", "", "bo", "", "", "0", "0", "01_attention_cues; 02_attention_pooling"],
                    ["", "", "cy", "", "", "2.25", "7.5", ""]]
    header, rows = moodle_table(totals, "ID number")
    assert header == ["ID number", "01_attention_cues", "01_attention_cues (feedback)",
                      "02_attention_pooling", "02_attention_pooling (feedback)"]
    missing = "missing: no submission"
    assert rows == [["ana", "11", "", "0", missing],
                    ["bo", "0", missing, "0", missing],
                    ["cy", "2.25", "", "7.5", ""]]
    assert totals.missing() == [("ana", "02_attention_pooling"), ("bo", "01_attention_cues"),
                                ("bo", "02_attention_pooling")]
