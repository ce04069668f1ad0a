"""The feedback pages' HTML exporter: nbconvert's, without a last pass that changes nothing here.

nbconvert's ``HTMLExporter`` ends every page by parsing it whole with BeautifulSoup, giving each
``<img>`` without alt text a default one and making the cells of its JupyterLab template
focusable, and writing the page out again. On a feedback page (nbgrader's template, built on
nbconvert's classic one, with every code cell highlighted by pygments: about 4,000 tags) that
pass took more than half of the page's time, 0.5-0.8 s of CPU. A page with no ``<img`` and no
JupyterLab cell (``jp-Notebook``) gives that pass nothing to change; ``FeedbackHTMLExporter``
skips it there and returns the page as the template wrote it, the same document as BeautifulSoup
reads it (``tests/test_grading_feedback_html.py``). Any other page goes through nbconvert's
exporter unchanged.

The page's own labels ("Score:", "Student's answer", ...) speak the submission's language
(``utils.grading.feedback_labels``): nbgrader's template is loaded with each label a call that
this exporter answers for the page it is writing. An English page is the stock page.
"""

import re

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.exporters.html import WidgetsDataTypeFilter
from nbconvert.filters.highlight import Highlight2HTML

from utils.grading.feedback_labels import RelabellingLoader, html_lang
from utils.grading.student_text import in_language, notebook_language
from utils.i18n import ENGLISH

# What nbconvert's last pass acts on: <img> elements, and cells inside a .jp-Notebook element.
# (Student content cannot spell a class in another way: utils.grading.inert drops every class
# but pygments' token classes.)
NEEDS_STOCK_PASS = re.compile(r"<img|jp-Notebook", re.IGNORECASE)


class FeedbackHTMLExporter(HTMLExporter):
    """``HTMLExporter`` that skips the BeautifulSoup pass on pages it would not change and
    writes the feedback template's labels in the submission's language."""

    page_language = ENGLISH                          # set for each page, from its notebook

    def _create_environment(self):
        environment = super()._create_environment()
        environment.loader = RelabellingLoader(environment.loader, self.log)
        environment.globals["feedback_label"] = lambda label: in_language(self.page_language, label)
        environment.globals["feedback_html_lang"] = lambda: html_lang(self.page_language)
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        self.page_language = notebook_language(nb)
        # The filters HTMLExporter.from_notebook_node registers before it renders.
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        given = resources
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if NEEDS_STOCK_PASS.search(page):                 # rendered again, by nbconvert itself
            return super().from_notebook_node(nb, given, **kw)
        return page, resources
