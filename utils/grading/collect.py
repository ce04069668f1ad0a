"""Gather student submissions into nbgrader's ``submitted/<student>/<assignment>/`` layout."""

import pathlib
import re
import shutil

import nbformat

from utils.grading.course import EXERCISES, CourseSettings

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


def find_submissions(folder, assignment: str) -> dict:
    """student id -> notebook path, from either layout:

    - ``<folder>/<student_id>.ipynb`` (one notebook per student), or
    - ``<folder>/[submitted/]<student_id>/<assignment>/exercises.ipynb`` (nbgrader's layout).
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
    bad = [s for s in found if not STUDENT_ID.match(s)]
    if bad:
        raise ValueError(f"invalid student id(s) {bad}: ids become folder names, so use "
                         f"letters, digits and _.@+- only (rename the files)")
    if not found:
        raise ValueError(f"no submissions for {assignment} in {folder}: expected "
                         f"<student_id>.ipynb files or <student>/{assignment}/{EXERCISES}")
    return found


def collect(settings: CourseSettings, folder, assignment: str) -> list:
    """Copy submissions into the course and add their students to the gradebook.

    Returns ``(student_id, message)`` pairs; an unreadable notebook is skipped (and reported),
    it never stops the others.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(settings.db_url, settings.course_id) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"assignment {assignment} is not in the gradebook; release it "
                             f"first: python -m utils.grading release --chapter "
                             f"{assignment}") from None
        report = []
        for student, source in find_submissions(folder, assignment).items():
            try:
                nbformat.read(source, as_version=4)
            except Exception as error:   # noqa: BLE001 - any unreadable file is skipped
                report.append((student, f"SKIPPED: {source} is not a readable notebook "
                                        f"({type(error).__name__}: {error})"))
                continue
            target = settings.course_dir / "submitted" / student / assignment
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / EXERCISES)
            stamp = source.parent / "timestamp.txt"
            if source.name == EXERCISES and stamp.is_file():   # nbgrader layout keeps its time
                shutil.copyfile(stamp, target / "timestamp.txt")
            gradebook.update_or_create_student(student)
            report.append((student, f"collected -> {target / EXERCISES}"))
    return report
