"""One grading run of every chapter's fixture submissions through the real CLI, shared by the
tests that read its grades and feedback (tests/conftest.py's ``graded_class``).

Per chapter: the instructor notebook itself (``instructor``), the released notebook with the
instructor's answers (``correct``), the second correct answers (``alternative``), one submission per catalogued mistake (``mistakes.py``) and one per null
submission (``null_submissions.py``: each must earn 0). Release (the session's one release of
every chapter, copied), collect, ONE autograde for all chapters, feedback and export, in one
course directory; every command runs in the session's one
CLI process (tests/conftest.py's ``grading_cli``, a ``grading_fixtures.cli_session.CliSession``).
"""

import csv
import os
import pathlib

import nbformat

from grading_fixtures.mistakes import ALTERNATIVES, MISTAKES, packs, submission
from grading_fixtures.null_submissions import NULL_KINDS, null_submission

REPO = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = REPO / "chapters"
# A development aid: FIXTURE_CHAPTERS=03_scoring_functions grades only that chapter.
ASSIGNMENTS = sorted(a for a in MISTAKES if os.environ.get("FIXTURE_CHAPTERS", a) in (a, ""))
CHAPTER_SPEC = os.environ.get("FIXTURE_CHAPTERS") or "all"
CORRECT = "correct"
ALTERNATIVE = "alternative"
INSTRUCTOR = "instructor"


def null_student(kind: str) -> str:
    return f"null-{kind}"


def mistake_students(assignment: str) -> dict:
    """student id -> the mistakes their submission makes (one per exercise at most)."""
    return {f"mistakes-{number:02d}": pack
            for number, pack in enumerate(packs(MISTAKES[assignment]), 1)}


def student_of(assignment: str, mistake) -> str:
    """The student id of the submission that makes ``mistake``."""
    return next(student for student, pack in mistake_students(assignment).items()
                if mistake in pack)


def instructor(assignment: str):
    return nbformat.read(CHAPTERS / assignment / "exercises.ipynb", as_version=4)


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def write_submissions(course: pathlib.Path, inbox: pathlib.Path, assignment: str) -> list:
    """Every fixture submission of one chapter, written to ``inbox``; returns the collect
    command that brings them into ``course``."""
    released = nbformat.read(course / "release" / assignment / "exercises.ipynb", as_version=4)
    teacher = instructor(assignment)
    box = inbox / assignment
    box.mkdir(parents=True)
    (box / f"{INSTRUCTOR}.ipynb").write_bytes((CHAPTERS / assignment / "exercises.ipynb")
                                              .read_bytes())
    nbformat.write(submission(released, teacher), box / f"{CORRECT}.ipynb")
    nbformat.write(submission(released, teacher, alternatives=ALTERNATIVES[assignment]),
                   box / f"{ALTERNATIVE}.ipynb")
    for student, pack in mistake_students(assignment).items():
        nbformat.write(submission(released, teacher, pack), box / f"{student}.ipynb")
    for kind in NULL_KINDS:
        nbformat.write(null_submission(released, teacher, kind),
                       box / f"{null_student(kind)}.ipynb")
    return ["collect", str(box), "--chapter", assignment]


def grade_class(course: pathlib.Path, inbox: pathlib.Path, cli):
    """(course directory, {(assignment, student): {grade_id: score}}) after the whole run of
    ``course`` (every chapter released: tests/conftest.py's ``released_chapters``, copied);
    ``cli``: a ``CliSession``."""
    for assignment in ASSIGNMENTS:
        cli.run(*write_submissions(course, inbox, assignment), course=course)
    cli.run("autograde", "--chapter", CHAPTER_SPEC, "--timeout", "60", course=course)
    cli.run("feedback", "--chapter", CHAPTER_SPEC, course=course)
    cli.run("export", "--chapter", CHAPTER_SPEC, "--to", str(course / "grades.csv"), course=course)
    return course, read_grades(course / "grades.csv")


def read_grades(path: pathlib.Path) -> dict:
    """{(assignment, student): {grade_id: score}} from an export (one chapter: no prefix)."""
    grades, names = {}, {_nbgrader(c).get("grade_id") for a in ASSIGNMENTS
                         for c in instructor(a).cells}
    with open(path, encoding="utf-8") as table:
        for row in csv.DictReader(table):
            for column, value in row.items():
                if ":" not in column and column in names and value not in ("", None):
                    column = f"{ASSIGNMENTS[0]}:{column}"          # one chapter: no prefix
                if ":" in column and value not in ("", None):
                    assignment, grade_id = column.split(":", 1)
                    grades.setdefault((assignment, row["student_id"]), {})[grade_id] = float(value)
    return grades
