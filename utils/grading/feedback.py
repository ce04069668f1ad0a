"""Feedback without hidden tests.

nbgrader's stock feedback renders the autograded notebook, whose test cells hold the hidden
tests verbatim (and tracebacks quote them). ``RedactHiddenTests`` runs before the HTML export:
each hidden region is replaced by one comment line, and output lines quoting hidden code are
dropped. Scores and pass/fail stay as they are. ``find_leaks`` double-checks the written HTML.
The comment line speaks the submission's language, as the rest of its page does.
"""

import html
import re

from nbgrader import utils as nbgrader_utils
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.student_text import _, in_language, notebook_language

BEGIN_HIDDEN = "BEGIN HIDDEN TESTS"
END_HIDDEN = "END HIDDEN TESTS"
PLACEHOLDER = _("# [hidden tests ran here; their code is not part of the feedback]")
# Hidden lines shorter than this (")", "else:") say nothing and would match everywhere.
MIN_LEAK_LENGTH = 8
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TAG = re.compile(r"<[^>]+>")


def split_hidden(source: str, placeholder: str = PLACEHOLDER):
    """(visible source with a placeholder per hidden region, list of hidden lines)."""
    visible, hidden, inside = [], [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            if inside:
                raise ValueError("nested BEGIN HIDDEN TESTS; close the first region with "
                                 "### END HIDDEN TESTS")
            inside = True
            visible.append(line[:len(line) - len(line.lstrip())] + placeholder)
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            hidden.append(line)
        else:
            visible.append(line)
    if inside:
        raise ValueError("BEGIN HIDDEN TESTS without END HIDDEN TESTS")
    return "\n".join(visible), hidden


def leak_markers(hidden_lines) -> set:
    """The hidden lines worth searching for (stripped, long enough to be specific)."""
    return {line.strip() for line in hidden_lines if len(line.strip()) >= MIN_LEAK_LENGTH}


def _scrub(text: str, markers: set) -> str:
    """Drop the lines of ``text`` that quote hidden code (ANSI colours ignored)."""
    kept = [line for line in text.split("\n")
            if not any(marker in _ANSI.sub("", line) for marker in markers)]
    return "\n".join(kept)


def redact_cell(cell, placeholder: str = PLACEHOLDER) -> bool:
    """Remove hidden tests from one test cell (in place); True if there were any."""
    visible, hidden = split_hidden(cell.source, placeholder)
    if not hidden:
        return False
    cell.source = visible
    markers = leak_markers(hidden)
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            output.text = _scrub(output.text, markers)
        elif output.output_type == "error":
            output.evalue = _scrub(output.evalue, markers)
            output.traceback = [_scrub(entry, markers) for entry in output.traceback]
        elif "data" in output and "text/plain" in output.data:
            output.data = {"text/plain": _scrub(output.data["text/plain"], markers)}
    return True


class RedactHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: strip hidden-test code from grade cells, keep their scores."""

    placeholder = PLACEHOLDER

    def preprocess(self, nb, resources):
        self.placeholder = in_language(notebook_language(nb), PLACEHOLDER)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and nbgrader_utils.is_grade(cell):
            if redact_cell(cell, self.placeholder):
                self.log.debug("Removed hidden tests from cell %s",
                               cell.metadata.nbgrader.get("grade_id"))
        return cell, resources


def html_text(page: str) -> str:
    """Visible text of an HTML page (tags dropped, entities decoded) for searching."""
    return html.unescape(_TAG.sub("", page))


def find_leaks(page: str, hidden_lines) -> list:
    """Hidden lines that appear in the text of an HTML page (should be empty)."""
    text = html_text(page)
    return sorted(marker for marker in leak_markers(hidden_lines) if marker in text)
