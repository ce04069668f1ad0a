"""What the grader itself writes for the student, in the language of the submission.

The grader's notes (the cell it puts at the top of the graded notebook) and the errors it puts into
cells (a timeout, a stopped sandbox, an unreadable file) are made in English, as the instructor's
console and the grader's records keep them. Only where they are written into the notebook the
student receives are they put into the submission's language: ``notebook_language`` reads it from
the trusted copy of the released notebook, and ``translate`` turns each English sentence into that
language by its template below (``_("...")`` marks a template for ``utils/locale/<language>/
utils.po``). The template is translated first and its fields are filled in afterwards, so numbers,
cell labels and names stay exactly as in English; a field holding a reason of its own is
translated in turn. A sentence no template matches stays English.
"""

import ast
import functools
import re

from utils.i18n import ENGLISH, LANGUAGES, _translations


def _(message: str) -> str:
    """Marks an English template for utils.po (translated later, in the submission's language)."""
    return message


NOTES_TITLE = _("Grader notes")
CALLED_YOUR_CODE_LINE = _("The error was raised in your code:")
TRUNCATED = re.compile(r"\n\[\.\.\. (\d+) more characters\]\Z")
MORE_CHARACTERS = _("[... {count} more characters]")
# Error outputs the grader writes itself (evaluate.py): their text is the grader's sentence.
GRADER_ERRORS = ("TimeoutError", "SandboxStopped", "GradingError", "UnreadableSubmission")

TEMPLATES = (
    # evaluate.py
    _("{label}: {reason}"),
    _("the cell did not finish within {seconds} s and was stopped"),
    _("the notebook's time budget was used up in this cell"),
    _("the student's process was restarted {count} time(s) after it was stopped"),
    _("locked cell {label} failed in the sandbox: {detail}"),
    _("locked cell {label} could not run in the sandbox: {reason}"),
    _("{label}: while the test called your code, {reason}"),
    _("the student's process could not be started ({reason})"),
    _("the sandbox could not start: {reason}"),
    _("not run: {reason}"),
    _("{reason} (while the test called your code)"),
    # worker.py
    _("{reason}; it happened again when the whole submission was graded a second time from "
      "scratch, so it counts"),
    # sandbox.py
    _("the grading sandbox did not answer ({detail})"),
    _("the grading sandbox stopped"),
    _("the grading sandbox stopped ({detail})"),
    _("the grading sandbox sent an invalid answer"),
    _("the grading sandbox did not start"),
    _("the grading sandbox did not start ({detail})"),
    _("the grading sandbox could not start the student's process ({detail})"),
    _("the student's code wrote more than {mb} MB of output"),
    _("the student's processes used more than {mb} MB of memory"),
    _("the student's process sent an invalid answer: {detail}"),
    _("the student's code did not finish in time while other processes held the CPU (the "
      "machine was busy), and was stopped"),
    _("the student's code did not finish in time and was stopped"),
    _("the student's code did not finish in time"),
    _("the student's process closed its channel to the grader"),
    _("the student's process was killed by {signal}"),
    _("the student's process was killed by {signal} (a crash, e.g. a segmentation fault)"),
    _("the student's process was killed by {signal} (CPU time limit)"),
    _("the student's process exited (exit code {code}, e.g. os._exit or sys.exit)"),
    # remote.py
    _("the student's __len__ did not return a count"),
    _("the student's object could not be iterated"),
    _("the notebook's time budget is used up"),
    _("cell {label} failed when it was run again"),
    _("the student's process could not be restored after it was stopped ({reason})"),
    _("the student's process answered with something else than names"),
    _("{detail} no longer exists: the student's process was restarted after it was stopped"),
    _("the student's process sent an invalid value: {detail}"),
    _("the student's process sent a malformed call result"),
    _("the student's process did not describe its function"),
    # normalize.py
    _("a cell's source is neither text nor a list of lines"),
    _("the file is larger than {mb} MB"),
    _("the file is not valid notebook JSON ({detail})"),
    _("the file is JSON but not a notebook (no list of cells)"),
    _("answer cell {gid} was changed from {old} to {new}; graded as not answered"),
    _("cell {gid} appears more than once; the first copy was graded, the others ran as "
      "ordinary cells"),
    _("answer cell {gid} is missing; graded as not answered"),
    _("test cell {gid} was missing; the original was restored and run"),
    _("the submission could not be read: {reason}; it was graded as an empty notebook"),
)

# What each field of a template may hold. ``reason`` is a sentence of the grader's own, translated
# in turn; the others are kept as they are (numbers, cell labels, grade ids, raw error text).
_NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
FIELDS = {"label": r"<[^<>\n]*>", "seconds": _NUMBER, "count": _NUMBER, "mb": _NUMBER,
          "code": _NUMBER, "gid": r"\S+", "old": r"\S+", "new": r"\S+",
          "signal": r"SIG[A-Z0-9]+|signal \d+", "reason": r".+", "detail": r".*"}
_FIELD = re.compile(r"\{(\w+)\}")


def _pattern(template: str):
    parts, start = [], 0
    for match in _FIELD.finditer(template):
        parts.append(re.escape(template[start:match.start()]))
        parts.append(f"(?P<{match.group(1)}>{FIELDS[match.group(1)]})")
        start = match.end()
    parts.append(re.escape(template[start:]))
    return re.compile("".join(parts), re.DOTALL)


# The most specific template first: the one with the most fixed text.
_PATTERNS = sorted(((template, _pattern(template)) for template in TEMPLATES),
                   key=lambda pair: -len(_FIELD.sub("", pair[0])))


def notebook_language(nb) -> str:
    """The language the notebook's locked setup code sets (``set_language("zh-CN")``), else
    English. Read from the instructor's trusted copy, never run; a value the course does not
    speak counts as English."""
    from IPython.core.inputtransformer2 import TransformerManager
    from utils.grading.cell_roles import cell_role
    for cell in nb.cells:
        if cell_role(cell) != "setup":
            continue
        try:
            tree = ast.parse(TransformerManager().transform_cell(cell.source))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and len(node.args) == 1
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) == "set_language"
                    and isinstance(node.args[0], ast.Constant)):
                value = node.args[0].value
                return value if isinstance(value, str) and value in LANGUAGES else ENGLISH
    return ENGLISH


def in_language(language: str, message: str) -> str:
    """One of the grader's fixed messages in ``language`` (itself in English, in a language the
    course does not speak, or where it has no translation)."""
    if language == ENGLISH or language not in LANGUAGES:
        return message
    return _translations(language).get(message, message)


# The grader nests at most a few reasons; an error text of the student's own that repeats a
# template's words thousands of times is not followed further (nor can it exhaust the stack).
MAX_DEPTH = 8


@functools.lru_cache(maxsize=512)
def translate(text: str, language: str) -> str:
    """One of the grader's English sentences in ``language`` (unchanged if no template fits)."""
    if language == ENGLISH or language not in LANGUAGES or not isinstance(text, str):
        return text
    return _translate(text, language, MAX_DEPTH)


def _translate(text: str, language: str, depth: int) -> str:
    if depth <= 0:
        return text
    for template, pattern in _PATTERNS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        fields = match.groupdict()
        if "reason" in fields:
            fields["reason"] = _translate(fields["reason"], language, depth - 1)
        try:
            return in_language(language, template).format(**fields)
        except (KeyError, IndexError, ValueError):
            return text
    return text


def notes_title(language: str) -> str:
    return in_language(language, NOTES_TITLE)


def translate_outputs(nb, language: str) -> None:
    """The grader's sentences in the outputs of ``nb`` (in place): its own error outputs, the
    line that introduces the student's traceback, the note on a shortened output."""
    if language == ENGLISH or language not in LANGUAGES:
        return
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                ename = output.get("ename")
                if ename in GRADER_ERRORS:
                    output["evalue"] = translate(output.get("evalue", ""), language)
                output["traceback"] = [_traceback_line(line, ename, language)
                                       for line in output.get("traceback", [])]
            elif output.get("output_type") == "stream" and isinstance(output.get("text"), str):
                match = TRUNCATED.search(output["text"])
                if match:
                    output["text"] = (output["text"][:match.start()] + "\n" + in_language(
                        language, MORE_CHARACTERS).format(count=match.group(1)))


def _traceback_line(line, ename, language: str):
    if line == CALLED_YOUR_CODE_LINE:
        return in_language(language, CALLED_YOUR_CODE_LINE)
    prefix = f"{ename}: "
    if ename in GRADER_ERRORS and isinstance(line, str) and line.startswith(prefix):
        return prefix + translate(line[len(prefix):], language)
    return line
