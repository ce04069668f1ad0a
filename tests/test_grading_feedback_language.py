"""A feedback page speaks the submission's language (utils.grading.feedback_labels).

nbgrader's feedback template is loaded with its labels turned into calls the feedback exporter
answers per page. An English page must be exactly the page of the template as nbgrader ships it;
a Chinese page must have every label in Chinese, ``lang="zh-CN"``, the hidden tests' comment in
Chinese, and the student's own words untouched, even where they spell a label.
"""

import copy

import nbformat
import pytest

from conftest import CHAPTERS
from test_grading_inert import course_config, render  # noqa: F401 - the course's page set-up
from utils.grading import feedback_labels
from utils.grading.feedback import PLACEHOLDER, RedactHiddenTests, html_text
from utils.grading.feedback_labels import LABELS, feedback_template, relabel
from utils.grading.student_text import in_language

ENGLISH_LABELS = [label for _before, label, _after, _count in LABELS]
# What the student typed into an answer cell: the words of two labels, which must stay.
STUDENT_WORDS = "# Score: my own note (Top) Student's answer"


def graded(language: str):
    """Chapter 3's instructor notebook in ``language``, as graded: points, a comment per part."""
    name = "exercises.ipynb" if language == "en" else f"exercises.{language}.ipynb"
    nb = nbformat.read(CHAPTERS / "03_scoring_functions" / name, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution"):
            meta.update(score=meta.get("points", 0), comment="ok")
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = STUDENT_WORDS + "\n" + cell.source
    return nb


def test_every_label_of_nbgraders_template_is_found():
    source = feedback_template().read_text(encoding="utf-8")
    relabelled, missing = relabel(source)
    assert missing == [], f"nbgrader's feedback template no longer has: {missing}"
    for label in ENGLISH_LABELS:
        assert f'feedback_label("{label}")' in relabelled
    assert "<html{{ feedback_html_lang() }}>" in relabelled


def test_relabelling_is_one_pass_and_touches_only_the_labels():
    source = '<html>\n<span>(Score: {{ x }})</span> <a href="#a">Task</a> <b>Comments:</b>'
    relabelled, _missing = relabel(source)
    assert relabelled == ('<html{{ feedback_html_lang() }}>\n<span>({{ feedback_label("Score: ") '
                          '}}{{ x }})</span> <a href="#a">{{ feedback_label("Task") }}</a> '
                          '<b>{{ feedback_label("Comments:") }}</b>')


def test_an_english_page_is_the_stock_templates_page(course_config, monkeypatch):
    nb = graded("en")
    page = render(course_config, "feedback", copy.deepcopy(nb))
    monkeypatch.setattr(feedback_labels, "relabel", lambda source: (source, []))
    stock = render(course_config, "feedback", copy.deepcopy(nb))
    assert 'feedback_label' not in stock and "Student's answer" in stock
    assert page == stock


def test_a_chinese_page_speaks_chinese(course_config):
    page = render(course_config, "feedback", graded("zh-CN"), late_penalty=1.0)
    assert '<html lang="zh-CN">' in page
    for label in ENGLISH_LABELS:
        chinese = in_language("zh-CN", label)
        assert chinese != label, f"{label!r} has no Chinese in utils.po"
    for label in ("Score: ", "Test cell", "Late submission penalty", "(Top)", "Student's answer",
                  "Comments:"):
        assert in_language("zh-CN", label) in page, f"{label!r} is not on the Chinese page"
    # The English words left on the page are the student's own, where the student wrote them.
    text = html_text(page)
    answers = sum(STUDENT_WORDS in cell.source for cell in graded("zh-CN").cells)
    assert answers > 0 and text.count(STUDENT_WORDS) == answers
    for label in ("Score: ", "(Top)", "Student's answer", "Comments:", "Test cell",
                  "Late submission penalty"):
        assert label not in text.replace(STUDENT_WORDS, ""), label


def test_the_hidden_tests_comment_speaks_the_submissions_language():
    for language, name in (("en", "exercises.ipynb"), ("zh-CN", "exercises.zh-CN.ipynb")):
        nb = nbformat.read(CHAPTERS / "03_scoring_functions" / name, as_version=4)
        nb, _ = RedactHiddenTests().preprocess(nb, {})
        sources = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
        expected = in_language(language, PLACEHOLDER)
        assert "BEGIN HIDDEN TESTS" not in sources and expected in sources, language
        assert (language == "en") == (expected == PLACEHOLDER)


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_page_says_its_language_only_when_it_is_not_english(course_config, language):
    page = render(course_config, "feedback", graded(language))
    assert ('<html lang="zh-CN">' in page) == (language == "zh-CN")
    assert ("<html>" in page) == (language == "en")
