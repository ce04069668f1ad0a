"""Shared pytest fixtures and paths."""

import os
import pathlib

import pytest

# Notebooks under tests/ are fixtures (browser probes, grading submissions), not lessons:
# never collect them with --nbval. Lessons are passed explicitly (see the Makefile).
collect_ignore_glob = ["*.ipynb"]   # fnmatch: "*" also spans sub-folders

REPO = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = REPO / "chapters"
ARTIFACTS = REPO / "tests" / "artifacts"
# The course's English–French pairs, shipped in the repository (see assets/data/README.md).
COURSE_DATA = REPO / "assets" / "data" / "fra-eng.txt"


# Directories each test session makes its own (environment variable -> temporary folder prefix).
SESSION_DIRS = {"ATTENTION_COURSE_CACHE": "attention-course-cache-",
                "MPLCONFIGDIR": "attention-course-matplotlib-"}


def pytest_configure(config):
    """Every test session gets a course cache of its own (models, downloaded data) and a
    matplotlib configuration and font cache of its own, inherited by the notebook kernels nbval
    and JupyterLab start: no test reads or writes the user's ``~/.cache``, and no test depends
    on what an earlier run left there (a font list that another matplotlib installation wrote
    once made a lesson print font warnings)."""
    import tempfile

    config._own_session_dirs = []
    for variable, prefix in SESSION_DIRS.items():
        if variable not in os.environ:
            os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
            config._own_session_dirs.append(variable)


def pytest_collection_finish(session):
    """Collect less often in the test process: after collection (torch, matplotlib, nbformat and
    every test module imported), those objects are frozen out of the garbage collector and
    collections run at a tenth of the default rate (thresholds 10,000 / 50 / 100 instead of
    700 / 10 / 10). With the defaults, six of lane 1's modules (widgets, i18n, stored
    evaluations, translation models; 203 tests) spent 13.6 s of 116 s in the collector, 11 s of it
    in full collections of a heap of 780,000 objects; so they spent 5.2 s of 107 s. Freezing alone
    gave 12.0 s: the full collections come from the tests' own objects. Cycles are still
    collected, later."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


def pytest_unconfigure(config):
    """Remove the session's own directories."""
    import shutil

    for variable in getattr(config, "_own_session_dirs", []):
        shutil.rmtree(os.environ.pop(variable, ""), ignore_errors=True)


@pytest.fixture(scope="session")
def course_pairs_file() -> pathlib.Path:
    """Path of the course's eng-fra file in the repository; fails (not skips) when missing."""
    if not COURSE_DATA.is_file():
        pytest.fail(f"the course's data file {COURSE_DATA} is missing; restore it with "
                    f"'git checkout -- assets/data/fra-eng.txt'")
    return COURSE_DATA


@pytest.fixture
def artifacts_dir(request) -> pathlib.Path:
    """A folder under tests/artifacts/ for screenshots and other outputs of one test."""
    path = ARTIFACTS / request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module", autouse=True)
def one_intra_op_thread(request):
    """For a test module that sets ``ONE_INTRA_OP_THREAD = True``: torch uses one intra-op thread
    while the module runs (its results then do not depend on the thread count of the lane)."""
    if not getattr(request.module, "ONE_INTRA_OP_THREAD", False):
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def grading_cli():
    """One process running grading commands for the session's tests that use it
    (``grading_fixtures.cli_session.CliSession``: ``grading_cli.run(*args, course=...)``)
    instead of a process per command (each command that imports nbgrader pays it once here)."""
    from grading_fixtures.cli_session import CliSession
    with CliSession(os.environ) as session:
        yield session


@pytest.fixture(scope="session")
def released_chapters(grading_cli):
    """A course with every chapter's exercises released in English by the real CLI
    (``release --chapter all``; $FIXTURE_CHAPTERS: only that chapter), once for the session:
    ``graded_class`` grades a copy of it, tests/test_prediction_secrecy.py reads its release/.
    Nobody writes into it."""
    import tempfile

    from grading_fixtures.graded_class import CHAPTER_SPEC
    with tempfile.TemporaryDirectory(prefix="released-chapters-") as tmp:
        course = pathlib.Path(tmp) / "course"
        grading_cli.run("release", "--chapter", CHAPTER_SPEC, course=course)
        yield course


@pytest.fixture(scope="session")
def graded_class(grading_cli, released_chapters):
    """The one grading run of every chapter's fixture submissions (the correct answers, the
    second answers, the catalogued mistakes and the null submissions), shared by
    tests/test_feedback_diagnoses.py and tests/test_null_submissions.py."""
    import tempfile

    from grading_fixtures.graded_class import grade_class
    with tempfile.TemporaryDirectory(prefix="graded-class-") as tmp:
        course = copy_course(released_chapters, pathlib.Path(tmp) / "course")
        yield grade_class(course, pathlib.Path(tmp) / "inbox", grading_cli)


@pytest.fixture(scope="session")
def lesson_one_release(grading_cli):
    """(course directory, the command's result): lesson 1's frozen exercises
    (tests/grading_fixtures/security_assignment) released once with the real CLI
    (``python -m utils.grading release --chapter 01``, in the session's ``grading_cli``), for
    the grading tests that start from a released, empty course (workflow, resume, faults):
    each takes a ``copy_course`` of it instead of releasing again (about 10 s of CPU each).
    Nobody writes into it."""
    import tempfile

    from grading_fixtures.hostile import SECURITY_ENV
    with tempfile.TemporaryDirectory(prefix="lesson-one-release-") as tmp:
        course = pathlib.Path(tmp) / "course"
        result = grading_cli.run("release", "--chapter", "01", course=course, env=SECURITY_ENV,
                                 timeout=600)
        yield course, result


def copy_course(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """A copy that is a course of its own (its config, which names the gradebook, is made
    again by the next command)."""
    import shutil

    shutil.copytree(source, target, symlinks=True)
    (target / "nbgrader_config.py").unlink()
    (target / ".grading" / "lock").unlink(missing_ok=True)
    return target
