"""Autograde's start-up without nbgrader in the instructor's process (issue 35): the course
settings are read from nbgrader_config.py without running it, which submissions are already in
a SQLite gradebook is read with sqlite3, and a worker's nbgrader gradebooks create the tables
once per engine. Each answer must equal what running the config / nbgrader itself gives."""

import shutil
import subprocess
import sys

import pytest

from utils.grading import autograde
from utils.grading import course as course_mod


def loaded(course_dir):
    from traitlets.config.loader import PyFileConfigLoader
    return PyFileConfigLoader(course_mod.CONFIG_FILE, path=str(course_dir)).load_config()


def test_the_config_read_without_running_it_equals_running_it(tmp_path):
    settings = course_mod.CourseSettings(tmp_path, course_id="c-1", timeout=45, memory_mb=3000)
    course_mod.write_config(settings)
    literal = course_mod._read_literally(tmp_path / course_mod.CONFIG_FILE)
    config = loaded(tmp_path)
    for section, key in course_mod._READ_KEYS:
        assert literal[section][key] == config[section][key]
    assert course_mod.read_settings(tmp_path) == settings


@pytest.mark.parametrize("edit", ["c.Execute.timeout = 6 * 10",
                                  "for _ in range(1):\n    c.Execute.timeout = 60",
                                  "c.Execute.timeout += 30"])
def test_a_config_edited_beyond_plain_values_is_run(tmp_path, edit):
    course_mod.write_config(course_mod.CourseSettings(tmp_path))
    path = tmp_path / course_mod.CONFIG_FILE
    path.write_text(path.read_text() + edit + "\n")
    assert course_mod._read_literally(path) is None
    assert course_mod.read_settings(tmp_path).timeout == 60          # what running it gives


@pytest.fixture(scope="module")
def gradebook_file(tmp_path_factory):
    """A gradebook with assignments a1 and a2 and the submissions ann/a1 and bob/a2, made once
    (a new gradebook runs alembic: about 4 s of CPU); each test takes a copy."""
    from nbgrader.api import Gradebook
    course_mod.put_venv_on_path()
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}", "course") as gradebook:
        gradebook.add_assignment("a1")
        gradebook.add_assignment("a2")
        for student, assignment in [("ann", "a1"), ("bob", "a2")]:
            gradebook.update_or_create_student(student)
            gradebook.add_submission(assignment, student)
    return path


def gradebook_copy(gradebook_file, tmp_path):
    shutil.copy(gradebook_file, tmp_path / "gradebook.db")
    return course_mod.CourseSettings(tmp_path, course_id="course",
                                     db_url=f"sqlite:///{tmp_path / 'gradebook.db'}")


def test_the_sqlite_view_of_submissions_answers_as_nbgrader(gradebook_file, tmp_path):
    from nbgrader.api import Gradebook
    settings = gradebook_copy(gradebook_file, tmp_path)
    with autograde.gradebook_view(settings, "a1") as view, \
            Gradebook(settings.db_url, "course") as gradebook:
        assert isinstance(view, autograde.SubmissionsView)
        for student in ("ann", "bob", "eve"):
            answers = []
            for book in (view, gradebook):
                try:
                    book.find_submission("a1", student)
                    answers.append(True)
                except ValueError:
                    answers.append(False)
            assert answers[0] == answers[1] == (student == "ann")
    with pytest.raises(ValueError, match="No such assignment"):       # nbgrader says why
        with autograde.gradebook_view(settings, "a3"):
            pass


def test_a_workers_gradebooks_create_the_tables_once(gradebook_file, tmp_path):
    from nbgrader.api import Gradebook
    from sqlalchemy import event
    settings = gradebook_copy(gradebook_file, tmp_path)
    statements = []
    with autograde.FastReplay() as replay:
        for _ in range(3):
            with Gradebook(settings.db_url, "course") as gradebook:
                if not statements:
                    engine = next(iter(replay.engines.values()))
                    event.listen(engine, "before_cursor_execute",
                                 lambda *args: statements.append(args[2]))
                assert gradebook.find_submission("a1", "ann").student_id == "ann"
    assert statements and not any("PRAGMA" in s or "sqlite_master" in s for s in statements)


def test_the_zygote_compiles_the_trusted_cells_as_grading_does(lesson_one_release, tmp_path):
    """A zygote reads each assignment and compiles its setup and test cells before it forks
    its workers: grading an unchanged submission then compiles no trusted cell again."""
    from utils.grading import evaluate, worker
    course, _ = lesson_one_release
    (assignment,) = [p.name for p in (course / "release").iterdir()]
    source = str(course / "source" / assignment / "exercises.ipynb")
    release = str(course / "release" / assignment / "exercises.ipynb")
    evaluate._COMPILED.clear()
    worker._warm_assignment(source, release)
    compiled = set(evaluate._COMPILED)
    assert compiled
    job = worker.Job(student="s1", assignment=assignment, submission=release, source=source,
                     release=release, output=str(tmp_path / "graded.ipynb"), sandboxed=False,
                     limits={"memory_mb": 4096})
    assert worker.grade(job)["status"] == "graded"
    assert set(evaluate._COMPILED) == compiled


def test_the_workers_imports_leave_out_what_grading_never_uses():
    """The zygote's imports (``worker._warm_up``), in a fresh process: nbgrader's replay and
    jsonschema load, but not nbgrader's server extensions (its package ``__init__``) nor
    jsonschema's format packages (``arrow`` through ``isoduration``, ``rfc3986_validator``)."""
    probe = ("import sys; from utils.grading import worker; worker._warm_up(); "
             "import nbgrader, nbgrader.converters, jsonschema; "
             "print(nbgrader.__version__ == sys.modules['nbgrader._version'].__version__, "
             "sorted(m for m in ('nbgrader.server_extensions', 'nbgrader.apps', 'jupyter_server', "
             "'arrow', 'isoduration', 'rfc3986_validator', 'rfc3987_syntax') "
             "if sys.modules.get(m) is not None))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=course_mod.REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[0] == "True []", result.stdout
