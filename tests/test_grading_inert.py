"""Student content is inert in the grading pages (formgrader submission view, feedback files).

The hostile notebook of ``tests/grading_fixtures/html_payloads.py`` is rendered through nbgrader's
own page templates with the configuration ``python -m utils.grading`` writes, and the HTML is
parsed: a page may hold only the scripts, event handlers and styles its template has for an
empty notebook, and nothing of the payloads. The real-browser check of the same pages is
``tests/browser/test_grading_pages.py``.
"""

import html.parser
import pathlib
import re

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers as formgrader_handlers
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from tests.grading_fixtures.html_payloads import HARMLESS_MARKDOWN, MARKER, hostile_notebook
from utils.grading import course as course_mod
from utils.grading import feedback_html
from utils.grading.feedback_html import FeedbackHTMLExporter
from utils.grading.inert import clean_html, inert_cell, inert_output

DANGEROUS_TAGS = {"script", "iframe", "object", "embed", "form", "style", "link", "meta", "base",
                  "svg", "frame", "frameset", "input", "button", "textarea"}


class PageScan(html.parser.HTMLParser):
    """Every element with a risky tag, every event handler, style and URL attribute."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.risky, self.text, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag in ("script", "style")
        grading_control = ("class", "comment tabbable") in attrs   # the formgrader's comment box
        if tag in DANGEROUS_TAGS and not grading_control:
            self.risky.append((tag, tuple(sorted(attrs))))
        for name, value in attrs:
            value = value or ""
            squeezed = "".join(value.split()).lower()
            if (name.startswith("on") or name in ("style", "srcdoc", "formaction")
                    or squeezed.startswith(("javascript:", "data:text", "vbscript:"))):
                self.risky.append((tag, name, value))
            if name in ("src", "href", "data", "action") and MARKER in value:
                self.risky.append((tag, name, value))

    def handle_data(self, data):
        if self._in_script:
            self.risky.append(("script-text", data.strip()[:200]))
        else:
            self.text.append(data)


def scan(page: str) -> PageScan:
    parser = PageScan()
    parser.feed(page)
    return parser


@pytest.fixture(scope="module")
def course_config(tmp_path_factory) -> Config:
    """The nbgrader configuration that ``python -m utils.grading`` writes, loaded as nbgrader does."""
    course_dir = tmp_path_factory.mktemp("inert-course")
    settings = course_mod.CourseSettings(course_dir)
    course_mod.write_config(settings)
    return PyFileConfigLoader(course_mod.CONFIG_FILE, path=str(course_dir)).load_config()


def render(config: Config, template: str, nb, late_penalty: float = 0) -> str:
    """``nb`` through nbgrader's ``formgrade`` or ``feedback`` page template."""
    config = Config(config)
    config.HTMLExporter.template_name = template
    config.HTMLExporter.extra_template_basedirs = [formgrader_handlers.template_path]
    # Where nbgrader's GenerateFeedback finds the bootstrap.css the feedback page inlines.
    config.HTMLExporter.extra_template_paths = [str(
        pathlib.Path(formgrader_handlers.template_path).parent / "static" / "node_modules"
        / "bootstrap" / "dist" / "css")]
    resources = {"base_url": "", "submission_id": "s1", "notebook_id": "exercises",
                 "assignment_id": "a1", "notebook_path": "a/b.ipynb", "index": 0, "total": 1,
                 "student": "mallory", "last_name": None, "first_name": None,
                 "nbgrader": {"notebook": "exercises", "score": 1.0, "max_score": 2.0,
                              "late_penalty": late_penalty}}
    # The feedback files are written by the course's own exporter (utils.grading.feedback_html).
    exporter = (FeedbackHTMLExporter if template == "feedback" else HTMLExporter)(config=config)
    page, _ = exporter.from_notebook_node(nb, resources=resources)
    return page


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_pages_carry_no_student_script_handler_or_style(course_config, template):
    empty = scan(render(course_config, template, nbformat.v4.new_notebook()))
    hostile = scan(render(course_config, template, hostile_notebook()))
    template_own = set(empty.risky)
    from_student = [item for item in hostile.risky if item not in template_own]
    assert from_student == [], f"student content reached the {template} page: {from_student}"


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_pages_still_show_the_answer_math_and_tables(course_config, template):
    page = render(course_config, template, hostile_notebook())
    text = " ".join(scan(page).text)
    assert "Visible answer:" in text and "softmax" in text
    assert "$\\frac{1}{\\sqrt{d}}$" in text            # math is left for MathJax, intact
    assert "<table>" in page and "<th>var</th>" in page
    assert "nb-html" in text                          # sanitized HTML output still shows
    assert "not shown on this page: application/javascript" in text
    assert "COVER" in text                            # the text stays, its CSS does not


def test_feedback_pages_are_inert_without_nbconverts_last_pass(course_config, monkeypatch):
    """The pass the feedback exporter skips on pages without images is not what makes a page
    inert: the hostile notebook's feedback page, with the pass skipped, holds no payload."""
    monkeypatch.setattr(feedback_html, "NEEDS_STOCK_PASS", re.compile(r"(?!x)x"))   # never
    empty = scan(render(course_config, "feedback", nbformat.v4.new_notebook()))
    hostile = scan(render(course_config, "feedback", hostile_notebook()))
    from_student = [item for item in hostile.risky if item not in set(empty.risky)]
    assert from_student == [], f"student content reached the feedback page: {from_student}"


def test_without_the_course_config_the_payloads_would_run(course_config):
    """The scan has teeth: nbgrader's stock templates pass the payloads through."""
    config = Config(course_config)
    config.HTMLExporter.preprocessors = []
    config.HTMLExporter.filters = {}
    nb = hostile_notebook()
    nb.cells = [cell for cell in nb.cells if "attachments" not in cell]  # stock render raises
    hostile = scan(render(config, "formgrade", nb))
    empty = scan(render(config, "formgrade", nbformat.v4.new_notebook()))
    assert len([item for item in hostile.risky if item not in set(empty.risky)]) >= 10


@pytest.mark.parametrize("payload, forbidden", [
    ('<a href="javascript:alert(1)">x</a>', "javascript:"),
    ('<a href=" JaVaScRiPt:alert(1)">x</a>', "alert"),
    ('<img src="data:text/html;base64,PHNjcmlwdD4=">', "data:text"),
    ('<img src="http://127.0.0.1/x.png">', "127.0.0.1"),
    ('<p style="position:fixed">x</p>', "position"),
    ('<p id="base_url">x</p>', "base_url"),
    ('<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>', "onerror"),
    ('<noscript><p title="</noscript><img src=x onerror=alert(1)>">', "onerror"),
])
def test_clean_html_drops(payload, forbidden):
    assert forbidden not in clean_html(payload)


def test_clean_html_keeps_embedded_images_and_plain_links():
    image = '<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">'
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in clean_html(image)
    assert 'href="https://tatoeba.org"' in clean_html('<a href="https://tatoeba.org">t</a>')


def test_inert_output_lists_what_it_removed():
    out = inert_output(nbformat.v4.new_output("display_data", data={
        "application/javascript": "x()", "text/html": "<b onclick='x()'>b</b>"}))
    assert out.data["text/html"] == "<b>b</b>"
    assert "not shown on this page: application/javascript" in out.data["text/plain"]


def test_inert_cell_keeps_grading_fields_and_checks_their_types():
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_ok",
                                  "points": 2, "locked": True, "schema_version": 3},
                     "evil": "<script>", "tags": ["t", {"no": 1}]}
    clean = inert_cell(cell)
    assert clean.metadata == {"nbgrader": {"grade": True, "solution": False, "locked": True,
                                           "grade_id": "test_ok", "points": 2,
                                           "schema_version": 3}, "tags": ["t"]}
    cell.metadata["nbgrader"]["grade_id"] = '"><script>'
    assert inert_cell(cell).metadata["nbgrader"]["grade_id"] == "invalid-grade-id"


def test_old_course_configs_are_rewritten(tmp_path):
    settings = course_mod.CourseSettings(tmp_path, timeout=17)
    course_mod.write_config(settings)
    path = tmp_path / course_mod.CONFIG_FILE
    path.write_text(path.read_text().replace(course_mod._CONFIG_VERSION_LINE, "# old"))
    assert not course_mod.config_is_current(tmp_path)
    kept = course_mod.settings_for(tmp_path)
    assert course_mod.config_is_current(tmp_path) and kept.timeout == 17
    assert "InertStudentContent" in path.read_text()


def test_markdown_answer_keeps_harmless_content():
    from jinja2 import Environment
    from utils.grading.inert import markdown_to_inert_html
    env = Environment()
    env.filters["md"] = markdown_to_inert_html
    out = env.from_string("{{ s | md }}").render(s=HARMLESS_MARKDOWN, cell={})
    assert "<strong>softmax</strong>" in out and "$q^\\top k$" in out
