"""Recording grades the fast way (issue 35) stores exactly what nbgrader's own replay stores.

A small class of lesson 1 is graded by the real ``autograde`` with two workers: they record
with ``autograde.FastReplay`` (cells and course looked up once, validations remembered) and
nbgrader's ``optimistic_validation``. Then the same graded notebooks are recorded again into a
copy of the gradebook as it was before, by ``record_grades`` with nbgrader unchanged (no
``FastReplay``, every validation). Every table of both gradebooks must hold the same rows (the
random ids replaced by the rows they point to) and every ``autograded/`` file the same bytes.
"""

import contextlib
import datetime
import json
import pathlib
import re
import shutil
import sqlite3
import tempfile

import nbformat
import pytest

from conftest import copy_course
from grading_fixtures.hostile import SECURITY_CHAPTERS, SECURITY_ENV

ASSIGNMENT = "01_attention_cues"
INSTRUCTOR_NB = SECURITY_CHAPTERS / ASSIGNMENT / "exercises.ipynb"
SUBMITTED_AT = "2026-01-10 12:00:00.000000 UTC"
DUE = datetime.datetime(2026, 1, 9, 12, 0)     # one day before: a late submission
GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _class(released: nbformat.NotebookNode) -> dict:
    """student -> notebook: full marks, untouched, wrong, a test cell deleted, a locked cell
    edited (the late one gets a timestamp; ``garbled`` is made unreadable after collect)."""
    def edited(change):
        nb = nbformat.from_dict(json.loads(json.dumps(released)))
        change(nb)
        return nb

    def wrong(nb):
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
                cell.source = cell.source.replace("raise NotImplementedError()", "return 0")

    def delete_test(nb):
        nb.cells = [c for c in nb.cells if _grade_id(c) != "test_attend"]

    def edit_locked(nb):
        locked = next(c for c in nb.cells if c.cell_type == "code"
                      and c.metadata.get("nbgrader", {}).get("locked"))
        locked.source += "\n# changed by the student\n"

    return {"instructor": nbformat.read(INSTRUCTOR_NB, as_version=4),
            "untouched": released, "wrong": edited(wrong), "deleted": edited(delete_test),
            "locked": edited(edit_locked), "late": edited(wrong), "garbled": released}


@pytest.fixture(scope="module")
def graded(lesson_one_release, grading_cli):
    """(course graded by autograde, copy of its gradebook from before autograde)."""
    with tempfile.TemporaryDirectory(prefix="grading-replay-") as tmp:
        tmp = pathlib.Path(tmp)
        course, inbox = copy_course(lesson_one_release[0], tmp / "course"), tmp / "inbox"
        released = nbformat.read(course / "release" / ASSIGNMENT / "exercises.ipynb",
                                 as_version=4)
        for student, nb in _class(released).items():
            target = inbox / "submitted" / student / ASSIGNMENT / "exercises.ipynb"
            target.parent.mkdir(parents=True)
            nbformat.write(nb, target)
            if student == "late":
                (target.parent / "timestamp.txt").write_text(SUBMITTED_AT)
        grading_cli.run("collect", inbox, "--chapter", ASSIGNMENT, course=course,
                        env=SECURITY_ENV)
        (course / "submitted" / "garbled" / ASSIGNMENT / "exercises.ipynb").write_bytes(
            b"{not a notebook")
        with contextlib.closing(sqlite3.connect(course / "gradebook.db")) as db, db:
            db.execute("UPDATE assignment SET duedate = ? WHERE name = ?",
                       (DUE.isoformat(sep=" "), ASSIGNMENT))
        before = shutil.copy(course / "gradebook.db", tmp / "before.db")
        grading_cli.run("autograde", "--chapter", "01", "--workers", "2", "--timeout", "20",
                        course=course, env=SECURITY_ENV)
        yield course, pathlib.Path(before)


def replay_with_stock_nbgrader(course: pathlib.Path, before: pathlib.Path,
                               target: pathlib.Path) -> pathlib.Path:
    """A copy of ``course`` whose gradebook is ``before`` with every graded notebook recorded
    by nbgrader's Autograde unchanged (in this process, no FastReplay)."""
    from nbgrader import api

    from utils.grading import autograde
    from utils.grading.course import read_settings
    copy = copy_course(course, target)
    (copy / "nbgrader_config.py").write_text(                    # its own paths
        (course / "nbgrader_config.py").read_text().replace(str(course), str(copy)))
    shutil.copy(before, copy / "gradebook.db")
    shutil.rmtree(copy / "autograded")
    settings = read_settings(copy)
    assert settings.db_url == f"sqlite:///{copy / 'gradebook.db'}"
    config = autograde._replay_config(settings)
    config.NotebookExporter.optimistic_validation = False        # nbconvert's default
    assert "find_source_cell" in vars(api.Gradebook)              # not patched by FastReplay
    assert api.Gradebook.find_source_cell.__module__ == "nbgrader.api"
    for student in sorted(p.name for p in (copy / "submitted").iterdir()):
        autograde.record_grades(settings, ASSIGNMENT, student, config)
    return copy


def gradebook_rows(path: pathlib.Path) -> dict:
    """table -> sorted rows, each a tuple of (column, value); a column that points to another
    row holds that row instead, and a random id (32 hex digits) of the row itself is left
    out, so two gradebooks with the same content but other ids give the same answer."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        keys = {t: [c[1] for c in db.execute(f'PRAGMA table_info("{t}")') if c[5]]
                for t in tables}
        links = {t: {fk[3]: (fk[2], fk[4]) for fk in db.execute(
            f'PRAGMA foreign_key_list("{t}")')} for t in tables}
        content = {}
        for table in tables:
            cursor = db.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            content[table] = [dict(zip(columns, row)) for row in cursor.fetchall()]

    def row_of(table, column, value):
        return next(r for r in content[table] if r[column] == value)

    def canonical(table, row, depth=0):
        assert depth < 20, "a cycle of foreign keys"
        fields = []
        for column, value in row.items():
            if column in links[table] and value is not None:
                other, to = links[table][column]
                value = canonical(other, row_of(other, to, value), depth + 1)
            elif column in keys[table] and isinstance(value, str) and GENERATED_ID.match(value):
                continue
            fields.append((column, value))
        return (table, tuple(fields))

    return {t: sorted(repr(canonical(t, row)) for row in content[t]) for t in tables}


def files(folder: pathlib.Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_the_fast_record_stores_what_nbgrader_stores(graded, tmp_path):
    course, before = graded
    stock = replay_with_stock_nbgrader(course, before, tmp_path / "stock")
    fast_rows, stock_rows = gradebook_rows(course / "gradebook.db"), gradebook_rows(
        stock / "gradebook.db")
    assert len(fast_rows["submitted_assignment"]) == 7             # every student is in it
    assert any("'late'" in row and "2026-01-10 12:00:00" in row
               for row in fast_rows["submitted_assignment"])
    assert fast_rows.keys() == stock_rows.keys()
    for table in fast_rows:
        assert fast_rows[table] == stock_rows[table], table
    fast_files, stock_files = files(course / "autograded"), files(stock / "autograded")
    assert sum(name.endswith(".ipynb") for name in fast_files) == 7
    assert fast_files == stock_files
