"""Gather student submissions into nbgrader's ``submitted/<student>/<assignment>/`` layout."""

import pathlib
import re

import nbformat

from utils.grading.course import EXERCISES, CourseSettings
from utils.grading.diskfull import atomic_write

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$")
ID_RULE = ("a student id is 1-100 ASCII letters, digits and _.@+- starting with a letter or "
           "digit (it becomes a folder name and a gradebook key)")


def find_submissions(folder, assignment: str) -> tuple:
    """(student id -> notebook path, [(path, reason) of files that cannot be collected]).

    Layouts: ``<folder>/<student_id>.ipynb`` (one notebook per student), or
    ``<folder>/[submitted/]<student_id>/<assignment>/exercises.ipynb`` (nbgrader's layout).
    A file whose name is not a valid id is listed with the reason, never collected.
    """
    folder = pathlib.Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(f"submissions folder {folder} does not exist; pass the folder that "
                         f"holds <student_id>.ipynb files or submitted/<student>/<assignment>/")
    found = {path.stem: path for path in sorted(folder.glob("*.ipynb"))}
    root = folder / "submitted" if (folder / "submitted").is_dir() else folder
    for path in sorted(root.glob(f"*/{assignment}/{EXERCISES}")):
        student = path.parent.parent.name
        if student in found:
            raise ValueError(f"student {student!r} has two submissions ({found[student]} and "
                             f"{path}); keep one of them")
        found[student] = path
    rejected = [(path, f"{student!r} is not a valid student id: {ID_RULE}; rename the file "
                       f"and run collect again")
                for student, path in found.items() if not STUDENT_ID.match(student)]
    found = {student: path for student, path in found.items() if STUDENT_ID.match(student)}
    if not found and not rejected:
        raise ValueError(f"no submissions for {assignment} in {folder}: expected "
                         f"<student_id>.ipynb files or <student>/{assignment}/{EXERCISES}")
    return found, rejected


def collect(settings: CourseSettings, folder, assignment: str) -> list:
    """Copy submissions into the course and add their students to the gradebook.

    Returns ``(student_id or file, message)`` pairs; an unreadable notebook or a file name that
    is not a valid id is skipped (message starting "SKIPPED") and never stops the others.
    """
    from nbgrader.api import Gradebook, MissingEntry

    from utils.grading import alembic_head
    alembic_head.install()
    with Gradebook(settings.db_url, settings.course_id) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"assignment {assignment} is not in the gradebook; release it "
                             f"first: python -m utils.grading release --chapter "
                             f"{assignment}") from None
        found, rejected = find_submissions(folder, assignment)
        report = [(repr(str(path)), f"SKIPPED: {reason}") for path, reason in rejected]
        for student, source in found.items():
            try:
                nbformat.read(source, as_version=4)
            except Exception as error:   # noqa: BLE001 - any unreadable file is skipped
                report.append((student, f"SKIPPED: {source} is not a readable notebook "
                                        f"({type(error).__name__}: {error})"))
                continue
            target = settings.course_dir / "submitted" / student / assignment
            _copy_in(source, target)
            gradebook.update_or_create_student(student)
            report.append((student, f"collected -> {target / EXERCISES}"))
    return report


def _copy_in(source: pathlib.Path, target: pathlib.Path) -> None:
    """Copy one submission whole: on failure (a full disk) no new folder or partial file is
    left, so autograde never sees half a submission."""
    new = [folder for folder in (target.parent, target) if not folder.exists()]
    try:
        target.mkdir(parents=True, exist_ok=True)
        stamp = source.parent / "timestamp.txt"
        if source.name == EXERCISES and stamp.is_file():   # nbgrader layout keeps its time
            atomic_write(target / "timestamp.txt", stamp.read_bytes())
        atomic_write(target / EXERCISES, source.read_bytes())
    except BaseException:
        for folder in reversed(new):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise
