"""``rebuild-gradebook``: a new gradebook from what the course directory keeps.

1. A damaged SQLite file (and its ``-wal``/``-shm``) is moved aside, to ``gradebook.db.damaged-
   <time>``; another database must be empty (pass a new one's URL).
2. Each released assignment (``source/<assignment>/``) is entered again by ``nbgrader
   generate_assignment`` (its student version goes to a scratch folder: ``release/`` is not
   touched).
3. Every student with a submission, and every student of ``.grading/roster.json`` (kept by each
   command while the gradebook was whole), is added.
4. Each graded submission is recorded again from the grader's own results: the graded notebook
   in ``.grading/graded/`` whose done marker matches the submitted file, with nbgrader's replay
   (``autograde.record_grades``). Submissions without one are left to ``autograde``.
"""

import json
import os
import shutil
import time

from utils.grading import integrity
from utils.grading.course import EXERCISES, CourseSettings

ROSTER = ".grading/roster.json"


def save_roster(settings: CourseSettings) -> None:
    """Keep the gradebook's students (id, names, e-mail) in ``.grading/roster.json`` (SQLite
    only; skipped quietly if it cannot be read or written)."""
    import contextlib
    import sqlite3
    from utils.grading.diskfull import atomic_write
    path = integrity.sqlite_path(settings.db_url)
    if path is None or not path.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as connection:
            rows = connection.execute("SELECT id, first_name, last_name, email, lms_user_id "
                                      "FROM student ORDER BY id").fetchall()
        fields = ("first_name", "last_name", "email", "lms_user_id")
        roster = {row[0]: dict(zip(fields, row[1:])) for row in rows}
        target = settings.course_dir / ROSTER
        text = json.dumps(roster, indent=1, sort_keys=True).encode()
        if not target.is_file() or target.read_bytes() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, text)
    except (sqlite3.Error, OSError):
        pass


def _move_aside(settings: CourseSettings) -> str:
    path = integrity.sqlite_path(settings.db_url)
    if path is None:
        if integrity.problem(settings.db_url) is None and _has_tables(settings.db_url):
            raise ValueError(f"the gradebook {integrity.shown_url(settings.db_url)} is not "
                             f"empty; pass --db-url with the URL of a new, empty database")
        return ""
    if not path.exists():
        return ""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm", "-journal"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            os.replace(part, aside.with_name(aside.name + suffix))
    return f"; the old file is kept as {aside}"


def _has_tables(db_url: str) -> bool:
    import sqlalchemy
    engine = sqlalchemy.create_engine(db_url)
    try:
        return bool(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def rebuild(settings: CourseSettings, run_nbgrader, force: bool = False) -> str:
    """Rebuild the gradebook (see the module docstring); returns the summary line.
    ``run_nbgrader(*args)`` runs one nbgrader command in the course (raises on failure)."""
    from nbgrader.api import Gradebook

    from utils.grading import alembic_head, autograde
    alembic_head.install()

    course = settings.course_dir
    found = integrity.problem(settings.db_url)
    if found is None and not force and integrity.sqlite_path(settings.db_url) is not None \
            and integrity.sqlite_path(settings.db_url).is_file():
        raise ValueError(f"the gradebook {integrity.sqlite_path(settings.db_url)} is not "
                         f"damaged; pass --force to rebuild it anyway")
    assignments = sorted(p.parent.name for p in (course / "source").glob(f"*/{EXERCISES}"))
    if not assignments:
        raise ValueError(f"nothing was released in {course} (no source/<assignment>/"
                         f"{EXERCISES}); there is nothing to rebuild from")
    kept = _move_aside(settings)
    scratch = course / ".grading" / "rebuild-release"
    try:
        for assignment in assignments:
            run_nbgrader("generate_assignment", assignment, "--force",
                         f"--CourseDirectory.release_directory={scratch}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    roster_path = course / ROSTER
    roster = json.loads(roster_path.read_text()) if roster_path.is_file() else {}
    submitted = sorted({p.parent.name for a in assignments
                        for p in (course / "submitted").glob(f"*/{a}")})
    with Gradebook(settings.db_url, settings.course_id) as gradebook:
        for student in sorted(set(roster) | set(submitted)):
            fields = {k: v for k, v in (roster.get(student) or {}).items() if v is not None}
            gradebook.update_or_create_student(student, **fields)
    replayed, left = 0, []
    config = autograde._replay_config(settings)
    with autograde.FastReplay():
        for assignment in assignments:
            for student, path in autograde.submissions(settings, assignment).items():
                if _graded_result(settings, assignment, student, path):
                    autograde.record_grades(settings, assignment, student, config)
                    replayed += 1
                else:
                    left.append(f"{student}/{assignment}")
    rest = (f"; not graded yet, run autograde: {', '.join(left)}" if left else "")
    return (f"rebuilt the gradebook {integrity.shown_url(settings.db_url)}: "
            f"{len(assignments)} assignment(s), {len(set(roster) | set(submitted))} student(s), "
            f"{replayed} graded submission(s) recorded again{kept}{rest}")


def _graded_result(settings, assignment, student, path) -> bool:
    """The grader's result of this exact submission is kept (marker hash and graded file)."""
    from utils.grading import autograde
    graded = settings.course_dir / autograde.GRADED_DIR / student / assignment / EXERCISES
    return graded.is_file() and autograde._maybe_done(settings, assignment, student, path)
