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
# The English–French pairs the tests use, beside the checkout (see ../shared/data/README.md).
SHARED_DATA = REPO.parent / "shared" / "data" / "fra-eng.txt"


def pytest_configure(config):
    """Every test session gets a course cache of its own (models, downloaded data), inherited by
    the notebook kernels nbval and JupyterLab start: no test reads or writes the user's
    ``~/.cache/attention-course``, and no test depends on what an earlier run left there."""
    if "ATTENTION_COURSE_CACHE" not in os.environ:
        import tempfile

        os.environ["ATTENTION_COURSE_CACHE"] = tempfile.mkdtemp(prefix="attention-course-cache-")
        config._own_course_cache = os.environ["ATTENTION_COURSE_CACHE"]


def pytest_unconfigure(config):
    """Remove the session's own course cache."""
    own = getattr(config, "_own_course_cache", None)
    if own:
        import shutil

        shutil.rmtree(own, ignore_errors=True)
        os.environ.pop("ATTENTION_COURSE_CACHE", None)


@pytest.fixture(scope="session")
def shared_pairs_file() -> pathlib.Path:
    """Path of the shared eng-fra file; fails (not skips) when it is missing."""
    if not SHARED_DATA.is_file():
        pytest.fail(f"test data not found at {SHARED_DATA}; the tests expect the course's "
                    f"'shared/data/fra-eng.txt' beside the checkout")
    return SHARED_DATA


@pytest.fixture
def artifacts_dir(request) -> pathlib.Path:
    """A folder under tests/artifacts/ for screenshots and other outputs of one test."""
    path = ARTIFACTS / request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
    path.mkdir(parents=True, exist_ok=True)
    return path
