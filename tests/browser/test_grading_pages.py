"""No student script runs in the instructor's formgrader or in a feedback page (real Chromium).

A lesson-1 class of two goes through the real commands (release, collect, autograde, feedback):
- ``mallory`` answers the written question with markdown full of HTML/JavaScript payloads, adds
  a markdown cell of her own, and her answer code displays HTML, SVG, JavaScript, markdown and
  LaTeX outputs carrying payloads, so they are produced by the grading run itself;
- ``eve``'s autograded notebook is then replaced by the whole payload family (metadata, attachment
  names, every output MIME type), as if something had slipped through grading.
Each submission is opened in nbgrader's formgrader (JupyterLab on 127.0.0.1, the course directory
as its root, as ``python -m utils.grading lab`` starts it) and each feedback file from disk.
Every payload would set the page title, ``window.pwned`` and request ``/pwned-<name>``.
"""

import pathlib
import tempfile

import nbformat
import pytest

from tests.browser.conftest import start_jupyter_lab, stop_jupyter_lab
from tests.browser.helpers import save_screenshot
from tests.conftest import ARTIFACTS, copy_course
from tests.grading_fixtures.html_payloads import (DISPLAY_CODE, HARMLESS_MARKDOWN,
                                                  MARKDOWN_PAYLOADS, MARKER, hostile_notebook)
from tests.test_grading_workflow import ASSIGNMENT, run_cli, with_venv_path

pytestmark = pytest.mark.browser
SETTLE_MS = 1500        # time given to any payload (onerror, onload, fetch) to fire


def _answer(nb, grade_id: str, source: str) -> None:
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    cell.source = source


@pytest.fixture(scope="module")
def graded_class(lesson_one_release, grading_cli):
    with tempfile.TemporaryDirectory(prefix="grading-pages-") as tmp:
        tmp = pathlib.Path(tmp)
        inbox = tmp / "inbox"
        inbox.mkdir()
        # Lesson 1 released once for the session (`release --chapter 01`, as the other grading
        # tests take it), copied: about 10 s less when another test has released it already.
        course = copy_course(lesson_one_release[0], tmp / "course")
        released = nbformat.read(course / "release" / ASSIGNMENT / "exercises.ipynb", as_version=4)
        mallory = nbformat.from_dict(nbformat.reads(nbformat.writes(released), as_version=4))
        payload_markdown = HARMLESS_MARKDOWN + "\n\n" + "\n\n".join(MARKDOWN_PAYLOADS.values())
        _answer(mallory, "why_sqrt_d", payload_markdown)
        _answer(mallory, "query_for_weights", DISPLAY_CODE + "query_for_weights = None\n")
        mallory.cells.insert(1, nbformat.v4.new_markdown_cell("My own cell.\n\n" + payload_markdown))
        nbformat.write(mallory, inbox / "mallory.ipynb")
        nbformat.write(released, inbox / "eve.ipynb")
        run_cli("collect", str(inbox), "--chapter", "01", course_dir=course, cli=grading_cli)
        run_cli("autograde", "--chapter", "01", "--timeout", "20", course_dir=course, cli=grading_cli)
        eve = course / "autograded" / "eve" / ASSIGNMENT / "exercises.ipynb"
        nbformat.write(hostile_notebook(nbformat.read(eve, as_version=4), grade_id_payload=False),
                       eve)
        run_cli("feedback", "--chapter", "01", course_dir=course, cli=grading_cli)

        from nbgrader.api import Gradebook
        with_venv_path()
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-course") as gradebook:
            ids = {student: gradebook.find_submission_notebook(
                "exercises", ASSIGNMENT, student).id for student in ("mallory", "eve")}
        server = start_jupyter_lab(course, tmp / "lab", ARTIFACTS / "formgrader_lab.log")
        try:
            yield {"course": course, "server": server, "submission_ids": ids}
        finally:
            stop_jupyter_lab(server)


def _watch(page) -> list:
    """Requests the page makes that a payload would make."""
    seen = []
    page.on("request", lambda request: seen.append(request.url)
            if MARKER in request.url.lower() else None)
    return seen


def _assert_inert(page, seen: list, where: str) -> None:
    page.wait_for_timeout(SETTLE_MS)
    assert not page.title().startswith("PWNED"), f"a student script ran in {where}: {page.title()}"
    assert page.evaluate("window.pwned") is None, f"a student script set window.pwned in {where}"
    assert seen == [], f"student content made requests from {where}: {seen}"


@pytest.mark.parametrize("student", ["mallory", "eve"])
def test_formgrader_submission_view_runs_no_student_script(graded_class, browser_page,
                                                           artifacts_dir, student):
    seen = _watch(browser_page)
    submission = graded_class["submission_ids"][student]
    url = f"{graded_class['server'].base_url}/formgrader/submissions/{submission}/"
    response = browser_page.goto(url, wait_until="load")
    assert response is not None and response.status == 200, f"{url}: {response and response.status}"
    _assert_inert(browser_page, seen, f"the formgrader view of {student}")
    body = browser_page.inner_text("body")
    assert "Visible answer:" in body and "COVER" in body     # the answer itself is shown
    if student == "mallory":
        assert "html-output" in body and "markdown-output" in body   # outputs of grading run
    save_screenshot(browser_page, artifacts_dir, f"formgrader_{student}")


@pytest.mark.parametrize("student", ["mallory", "eve"])
def test_feedback_page_runs_no_student_script(graded_class, chromium_browser, artifacts_dir,
                                              student):
    page_path = graded_class["course"] / "feedback" / student / ASSIGNMENT / "exercises.html"
    assert page_path.is_file(), f"no feedback page for {student}"
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        # Nothing but the page itself may load; what a payload would fetch is recorded.
        context.route("**/*", lambda route: route.continue_()
                      if route.request.url.startswith("file://") and MARKER not in
                      route.request.url else route.abort())
        page = context.new_page()
        seen = _watch(page)
        page.goto(page_path.as_uri(), wait_until="load")
        _assert_inert(page, seen, f"the feedback page of {student}")
        body = page.inner_text("body")
        assert "Visible answer:" in body
        save_screenshot(page, artifacts_dir, f"feedback_{student}")
    finally:
        context.close()
