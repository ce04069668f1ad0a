"""The feedback pages' exporter (utils.grading.feedback_html) against nbconvert's own.

A page without images is written without nbconvert's last BeautifulSoup pass: it must be the
same document as nbconvert's page (nbconvert's page is that pass's output, so parsing the fast
page with BeautifulSoup must give it exactly), and the pass must really be skipped. A page with
an image goes through nbconvert's exporter and is its page byte for byte, default alt text
included. The notebook is a real exercises notebook, graded cells and outputs included.
"""

import copy

import nbconvert.exporters.html as nbconvert_html
import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter

from conftest import CHAPTERS
from test_grading_inert import course_config, render  # noqa: F401 - the course's page set-up

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
       "RU5ErkJggg==")


def exercises():
    """Chapter 3's instructor notebook, as graded: outputs, points and a comment per test."""
    nb = nbformat.read(CHAPTERS / "03_scoring_functions" / "exercises.ipynb", as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta.update(score=meta.get("points", 0), comment="well done")
    return nb


@pytest.fixture
def soup_calls(monkeypatch):
    """How many pages nbconvert's last pass parsed."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return BeautifulSoup(*args, **kwargs)

    monkeypatch.setattr(nbconvert_html, "BeautifulSoup", counting)
    return calls


def stock(config, nb) -> str:
    """The page nbconvert's HTMLExporter writes with the same settings."""
    import test_grading_inert
    original = test_grading_inert.FeedbackHTMLExporter
    test_grading_inert.FeedbackHTMLExporter = HTMLExporter
    try:
        return render(config, "feedback", nb)
    finally:
        test_grading_inert.FeedbackHTMLExporter = original


def test_a_page_without_images_skips_the_pass_and_is_the_same_document(course_config,
                                                                        soup_calls):
    nb = exercises()
    fast = render(course_config, "feedback", copy.deepcopy(nb))
    assert soup_calls == [], "the feedback exporter parsed a page without images"
    assert "<img" not in fast.lower() and "attention scoring functions" in fast
    reference = stock(course_config, copy.deepcopy(nb))
    assert len(soup_calls) == 1                       # nbconvert's own exporter did parse it
    assert str(BeautifulSoup(fast, features="html.parser")) == reference


def test_a_page_with_an_image_is_nbconverts_page(course_config, soup_calls):
    nb = exercises()
    code = next(cell for cell in nb.cells if cell.cell_type == "code")
    code.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": PNG,
                                                                     "text/plain": "<Figure>"}))
    fast = render(course_config, "feedback", copy.deepcopy(nb))
    assert fast == stock(course_config, copy.deepcopy(nb))
    assert 'alt="No description has been provided for this image"' in fast
