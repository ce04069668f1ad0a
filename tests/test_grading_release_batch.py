"""``release`` runs nbgrader once for all chapters (utils.grading.nbgrader_batch): a chapter that
fails stops the command with one line naming it, the chapters before it are released, and every
chapter not released has its source as it was before the command (absent, or its previous
version), so ``autograde`` never takes it for released."""

import os
import pathlib
import shutil
import subprocess
import sys

import nbformat

from conftest import REPO
from grading_fixtures.hostile import SECURITY_CHAPTERS

GOOD, BROKEN, LAST = "01_good", "02_broken", "03_last"


def chapter(chapters: pathlib.Path, name: str, broken: bool = False) -> None:
    """A chapter with lesson 1's frozen exercises; ``broken``: a solution region never closed,
    which nbgrader refuses to release."""
    nb = nbformat.read(SECURITY_CHAPTERS / "01_attention_cues" / "exercises.ipynb", 4)
    if broken:
        cell = next(c for c in nb.cells if "### END SOLUTION" in c.source)
        cell.source = cell.source.replace("### END SOLUTION", "")
    (chapters / name).mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, chapters / name / "exercises.ipynb")


def grading(*args, chapters, course):
    env = dict(os.environ, ATTENTION_COURSE_CHAPTERS_DIR=str(chapters),
               ATTENTION_COURSE_GRADING_DIR=str(course))
    env.pop("ATTENTION_COURSE_GRADING", None)
    return subprocess.run([sys.executable, "-m", "utils.grading", *args, "--quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def test_a_failing_chapter_stops_the_release_and_leaves_the_others_as_they_were(tmp_path):
    chapters, course = tmp_path / "chapters", tmp_path / "course"
    for name in (GOOD, BROKEN, LAST):
        chapter(chapters, name)
    first = grading("release", "--chapter", BROKEN, chapters=chapters, course=course)
    assert first.returncode == 0, first.stderr
    released_before = (course / "release" / BROKEN / "exercises.ipynb").read_bytes()
    source_before = (course / "source" / BROKEN / "exercises.ipynb").read_bytes()

    chapter(chapters, BROKEN, broken=True)                   # the instructor breaks chapter 2
    result = grading("release", "--chapter", "all", chapters=chapters, course=course)
    assert result.returncode == 2, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"generate_assignment {BROKEN}" in errors[0], result.stderr
    assert f"{GOOD}: hand out" in result.stdout and BROKEN not in result.stdout
    assert (course / "release" / GOOD / "exercises.ipynb").is_file()
    # Chapter 2: its previous release and source, untouched; chapter 3 (never reached): absent.
    assert (course / "release" / BROKEN / "exercises.ipynb").read_bytes() == released_before
    assert (course / "source" / BROKEN / "exercises.ipynb").read_bytes() == source_before
    assert not (course / "source" / LAST).exists() and not (course / "release" / LAST).exists()
    assert not (course / ".grading" / "staging" / "release").exists()

    shutil.rmtree(chapters / BROKEN)                         # fixed: all three are released
    chapter(chapters, BROKEN)
    again = grading("release", "--chapter", "all", chapters=chapters, course=course)
    assert again.returncode == 0, again.stderr
    assert [line.split(":")[0] for line in again.stdout.splitlines()] == [GOOD, BROKEN, LAST]
