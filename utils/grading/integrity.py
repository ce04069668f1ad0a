"""Is the gradebook whole? Every instructor command asks before it reads or writes it.

SQLite: ``PRAGMA quick_check`` and nbgrader's tables. PostgreSQL (any other URL): the
connection and nbgrader's tables. A database without tables is new, not damaged. On damage
``check`` raises ``GradebookDamaged`` with one line naming the gradebook and the way back:
``python -m utils.grading rebuild-gradebook`` (``utils.grading.rebuild``).
"""

import contextlib
import pathlib
import sqlite3

TABLES = {"assignment", "notebook", "base_cell", "grade_cells", "solution_cells",
          "task_cells", "source_cell", "student", "submitted_assignment",
          "submitted_notebook", "grade", "comment", "course"}


class GradebookDamaged(RuntimeError):
    """The gradebook cannot be trusted; ``str()`` is the one-line message."""


def sqlite_path(db_url: str):
    """The file of a ``sqlite:///path`` URL, else None."""
    prefix = "sqlite:///"
    return pathlib.Path(db_url[len(prefix):]) if db_url.startswith(prefix) else None


def shown_url(db_url: str) -> str:
    """The URL without its password."""
    try:
        from sqlalchemy.engine import make_url
        return make_url(db_url).render_as_string(hide_password=True)
    except Exception:                       # noqa: BLE001 - an unparsable URL is shown as is
        return db_url.split("@")[-1]


def _sqlite_problem(path: pathlib.Path):
    if not path.is_file() or path.stat().st_size == 0:
        return None                         # not created yet: nbgrader makes it
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=60)) as connection:
            rows = connection.execute("PRAGMA quick_check").fetchall()
            tables = {row[0] for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as error:
        if "locked" in str(error):
            return None                     # another program writes it: not damage
        return str(error)
    except sqlite3.DatabaseError as error:
        return str(error)
    if rows != [("ok",)]:
        return "; ".join(str(row[0]) for row in rows[:3])
    return _schema_problem(tables)


def _schema_problem(tables: set):
    missing = TABLES - set(tables)
    if tables and missing:
        return f"nbgrader's table(s) {', '.join(sorted(missing))} are missing"
    return None


def _server_problem(db_url: str):
    try:
        import sqlalchemy
        engine = sqlalchemy.create_engine(db_url)
        try:
            with engine.connect():
                tables = sqlalchemy.inspect(engine).get_table_names()
        finally:
            engine.dispose()
    except Exception as error:              # noqa: BLE001 - any failure is reported in words
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"cannot be read ({type(error).__name__}: {first[:200]})"
    return _schema_problem(set(tables))


def problem(db_url: str):
    """What is wrong with the gradebook at ``db_url``, in words, or None."""
    path = sqlite_path(db_url)
    return _sqlite_problem(path) if path is not None else _server_problem(db_url)


def check(settings) -> None:
    """Raise GradebookDamaged (one line: which gradebook, what, the way back) on damage."""
    found = problem(settings.db_url)
    if found is None:
        return
    path = sqlite_path(settings.db_url)
    where = str(path) if path is not None else shown_url(settings.db_url)
    way_back = f"python -m utils.grading rebuild-gradebook --course-dir {settings.course_dir}"
    if path is None:
        way_back = (f"check that the server runs and the URL is right; if its data is lost, "
                    f"{way_back} --db-url <URL of an empty database>")
    raise GradebookDamaged(
        f"the gradebook {where} is damaged ({found}); nothing was changed. Rebuild it from the "
        f"submissions and the grader's results: {way_back}")
