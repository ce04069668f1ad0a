"""The words of a feedback page's own frame, in the language of the submission.

nbgrader's feedback template writes its labels in English: "Score:", "Test cell", "Student's
answer", "Comments:", "(Top)" and a few more. ``relabel`` rewrites that template's source as it
is loaded: each label becomes a call ``feedback_label("...")``, which the feedback exporter
(``utils.grading.feedback_html``) answers in the language of the page it is writing, and the
``<html>`` element gets ``lang="zh-CN"`` on a Chinese page (so a browser picks Chinese glyphs).
In English every call gives back its own words, so an English page is byte for byte the stock
page. Only the template's text changes: what a student wrote is data the template renders, never
part of its source. A label the template no longer has (another nbgrader) stays English, and
``tests/test_grading_feedback_language.py`` names it.
"""

import functools
import importlib.util
import pathlib
import re

from jinja2 import BaseLoader

from utils.grading.student_text import _
from utils.i18n import ENGLISH, LANGUAGES

# (text before, label, text after) as nbgrader's feedback template has them, and how often.
LABELS = (
    ("", _("Score: "), "", 7),                          # the page's, each part's and each cell's
    (">", _("Test cell"), "</a>", 1),                   # the table of contents, one kind per part
    (">", _("Coding free-response"), "</a>", 1),
    (">", _("Written response"), "</a>", 1),
    (">", _("Task"), "</a>", 1),
    (">", _("Comment"), "</a>", 1),
    (">", _("Late submission penalty"), " (", 1),
    ("", _("(Top)"), "", 2),                            # the link back to the table of contents
    (">", _("Student's answer"), "<", 1),               # the heading of a graded cell
    (">", _("Student's task"), "<", 1),
    (">", _("Grade cell: "), "<", 1),
    (">", _("Task: "), "<", 1),
    ("<b>", _("Comments:"), "</b>", 1),                 # the instructor's comment on a cell
)
HTML_ELEMENT = "<html>"
HTML_ELEMENT_WITH_LANGUAGE = "<html{{ feedback_html_lang() }}>"


def feedback_template() -> pathlib.Path:
    """nbgrader's feedback template (found without importing nbgrader)."""
    spec = importlib.util.find_spec("nbgrader")
    package = pathlib.Path(next(iter(spec.submodule_search_locations)))
    templates = package / "server_extensions" / "formgrader" / "templates"
    return templates / "feedback" / "index.html.j2"


def _call(label: str) -> str:
    return '{{ feedback_label("%s") }}' % label


@functools.lru_cache(maxsize=None)
def _pattern() -> re.Pattern:
    snippets = sorted((before + label + after for before, label, after, _count in LABELS),
                      key=len, reverse=True)
    return re.compile("|".join(re.escape(snippet) for snippet in snippets))


def relabel(source: str) -> tuple:
    """(the template ``source`` with every label a ``feedback_label`` call and the ``<html>``
    element given the page's language, the labels not found as often as expected)."""
    replacement = {before + label + after: before + _call(label) + after
                   for before, label, after, _count in LABELS}
    missing = [label for before, label, after, count in LABELS
               if source.count(before + label + after) != count]
    if source.count(HTML_ELEMENT) != 1:
        missing.append(HTML_ELEMENT)
    # One pass over the source: a call written in is never matched again.
    source = _pattern().sub(lambda match: replacement[match.group(0)], source)
    return source.replace(HTML_ELEMENT, HTML_ELEMENT_WITH_LANGUAGE, 1), missing


def html_lang(language: str) -> str:
    """The ``lang`` attribute a page in ``language`` gets (none in English, as nbgrader's)."""
    return "" if language == ENGLISH or language not in LANGUAGES else f' lang="{language}"'


class RelabellingLoader(BaseLoader):
    """A Jinja loader that gives nbgrader's feedback template relabelled (``relabel``) and
    every other template as ``loader`` does."""

    def __init__(self, loader, log=None):
        self.loader, self.log = loader, log
        self.template = feedback_template().resolve()

    def get_source(self, environment, name):
        source, filename, uptodate = self.loader.get_source(environment, name)
        if filename and pathlib.Path(filename).resolve() == self.template:
            source, missing = relabel(source)
            if missing and self.log is not None:
                self.log.warning("nbgrader's feedback template has changed; these labels stay "
                                 "English: %s", ", ".join(missing))
        return source, filename, uptodate

    def list_templates(self):
        return self.loader.list_templates()
