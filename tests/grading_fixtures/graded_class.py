"""One grading run of every chapter's fixture submissions through the real CLI, shared by the
tests that read its grades and feedback (tests/conftest.py's ``graded_class``).

Per chapter: the instructor notebook itself (``instructor``), the released notebook with the
instructor's answers (``correct``), the second correct answers (``alternative``), one submission per catalogued mistake (``mistakes.py``) and one per null
submission (``null_submissions.py``: each must earn 0). Release, collect, ONE autograde for all
chapters, feedback and export, in one course directory; the eight collects run in one process
(``run_cli_batch``), and so do feedback and export.
"""

import csv
import json
import os
import pathlib
import subprocess
import sys

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


def run_cli(*args, course):
    env = dict(os.environ, ATTENTION_COURSE_GRADING_DIR=str(course))
    result = subprocess.run([sys.executable, "-m", "utils.grading", *args, "--quiet"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (f"utils.grading {' '.join(args)} exited "
                                    f"{result.returncode}:\n{result.stdout}\n{result.stderr[-3000:]}")
    return result


# Runs several commands through the CLI's own entry point (utils.grading.cli.main: the same
# argument parsing, course lock, gradebook check and roster as `python -m utils.grading`), one
# after another in one Python process; stops at the first that does not exit 0.
_BATCH = """\
import json, sys
from utils.grading.cli import main
for argv in json.loads(sys.argv[1]):
    status = main(argv)
    print(f"== utils.grading {' '.join(argv)}: exit {status}", flush=True)
    if status != 0:
        sys.exit(1)
"""


def run_cli_batch(commands, course):
    """``run_cli`` for each of ``commands`` (argument lists), in ONE process: a grading command's
    process start and imports (nbgrader, nbconvert, jsonschema: about 5 s of CPU) are paid once
    instead of once per command (8 collects per class). Each must exit 0."""
    env = dict(os.environ, ATTENTION_COURSE_GRADING_DIR=str(course))
    argvs = [[*command, "--quiet"] for command in commands]
    result = subprocess.run([sys.executable, "-c", _BATCH, json.dumps(argvs)], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=1200)
    finished = result.stdout.count("== utils.grading ")
    assert result.returncode == 0 and finished == len(argvs), (
        f"utils.grading: {len(argvs)} commands in one process, {finished} ran, the last did not "
        f"exit 0:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


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


def grade_class(tmp: pathlib.Path):
    """(course directory, {(assignment, student): {grade_id: score}}) after the whole run."""
    course, inbox = tmp / "course", tmp / "inbox"
    run_cli("release", "--chapter", CHAPTER_SPEC, course=course)
    run_cli_batch([write_submissions(course, inbox, assignment) for assignment in ASSIGNMENTS],
                  course=course)
    run_cli("autograde", "--chapter", CHAPTER_SPEC, "--timeout", "60", course=course)
    run_cli_batch([["feedback", "--chapter", CHAPTER_SPEC],
                   ["export", "--chapter", CHAPTER_SPEC, "--to", str(course / "grades.csv")]],
                  course=course)
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
