"""What a reader reads in a notebook, cut into the pieces a translator translates.

- Markdown cells: one piece per heading, paragraph, list item, table cell or quote, as mdpo
  (``md2po``) cuts them; code blocks, inline code and math stay inside their paragraph.
- Code cells: one piece per comment and per string literal that reads as prose (it holds a
  letter and a space), and per string a figure shows, one word or more: the value of
  ``xlabel=``, ``ylabel=`` or ``title=``, and the strings inside ``titles=[...]``,
  ``row_titles=[...]`` or ``legend=[...]``. Its msgid is the token as written (``# the weights``,
  ``f"period {p:.1f}"``), so a translation replaces exactly that token and nothing else.

nbgrader's markers (``### BEGIN SOLUTION`` and the like) are never pieces: the grader needs them.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

MARKDOWN, COMMENT, STRING = "markdown", "comment", "string"
NBGRADER_MARKER = re.compile(r"^#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\b")
PROSE = re.compile(r"[A-Za-z]{2,}")
STRING_PREFIX = re.compile(r"^([A-Za-z]*)(['\"])")


@dataclass(frozen=True)
class Piece:
    kind: str           # MARKDOWN, COMMENT or STRING
    msgid: str          # the English text (for code: the token as written)
    cell: int           # index of the cell in the notebook
    start: int = 0      # code pieces: character offsets of the token in the cell's source
    end: int = 0


DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)


def one_line_display_math(source: str) -> str:
    """``$$ ... $$`` blocks on one line each. md2po drops a line break inside display math
    while po2md keeps it as a space, so a two-line formula would never find its translation;
    extraction and build both read the Markdown through this function."""
    return DISPLAY_MATH.sub(lambda m: "$$" + " ".join(m.group(1).split("\n")) + "$$", source)


def markdown_pieces(source: str, cell: int) -> list[Piece]:
    """The translatable pieces of one Markdown cell, in reading order."""
    from mdpo.md2po import markdown_to_pofile
    catalog = markdown_to_pofile(one_line_display_math(source), wrapwidth=0, location=False)
    return [Piece(MARKDOWN, entry.msgid, cell) for entry in catalog if entry.msgid.strip()]


def _line_offsets(source: str) -> list[int]:
    offsets, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def is_prose_string(token: str) -> bool:
    """A string literal a reader reads: some letters and a space (not "cpu", "mean", "x.png")."""
    body = STRING_PREFIX.sub("", token).strip("'\"")
    return bool(PROSE.search(body)) and " " in body


LABEL_KEYWORDS = ("xlabel", "ylabel", "title", "titles", "row_titles", "legend")
OPENING, CLOSING = "([{", ")]}"


def label_strings(tokens: list) -> set:
    """Indices (into ``tokens``) of the string literals a figure shows: the value of a
    ``xlabel=``, ``ylabel=`` or ``title=`` argument, and every string inside the brackets of a
    ``titles=``, ``row_titles=`` or ``legend=`` argument (``legend=["mean", "median"]``; a
    variable of one of these names assigned a list, ``legend = ["q·k", ...]``, counts too)."""
    significant = [i for i, t in enumerate(tokens)
                   if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)]
    found = set()
    for k in range(len(significant) - 2):
        name, equals, value = (tokens[j] for j in significant[k:k + 3])
        if name.type != tokenize.NAME or name.string not in LABEL_KEYWORDS or equals.string != "=":
            continue
        if value.type == tokenize.STRING:
            found.add(significant[k + 2])
        elif value.string in OPENING:
            depth = 0
            for j in significant[k + 2:]:
                depth += (tokens[j].string in OPENING) - (tokens[j].string in CLOSING)
                if tokens[j].type == tokenize.STRING:
                    found.add(j)
                if depth == 0:
                    break
    return found


def is_prose_comment(token: str) -> bool:
    return bool(PROSE.search(token)) and not NBGRADER_MARKER.match(token)


def code_pieces(source: str, cell: int) -> list[Piece]:
    """The translatable comments and string literals of one code cell, in order.

    Lines that are IPython magics or shell escapes (``%timeit``, ``!ls``) are read as Python
    tokens too; a cell that Python's tokenizer cannot read at all has no pieces.
    """
    offsets = _line_offsets(source)
    pieces = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    labels = label_strings(tokens)
    for index, token in enumerate(tokens):
        if token.type == tokenize.COMMENT and is_prose_comment(token.string):
            kind = COMMENT
        elif token.type == tokenize.STRING and (is_prose_string(token.string) or index in labels):
            kind = STRING
        else:
            continue
        start = offsets[token.start[0] - 1] + token.start[1]
        end = offsets[token.end[0] - 1] + token.end[1]
        assert source[start:end] == token.string
        pieces.append(Piece(kind, token.string, cell, start, end))
    return pieces


def notebook_pieces(nb) -> list[Piece]:
    """Every translatable piece of a notebook, cell by cell."""
    pieces = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            pieces += markdown_pieces(cell.source, index)
        elif cell.cell_type == "code":
            pieces += code_pieces(cell.source, index)
    return pieces


def code_skeleton(source: str) -> list[tuple]:
    """A code cell's tokens with comments and prose strings blanked (and the language that
    ``set_language`` gets): two cells with equal skeletons are equal up to comments and strings."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [("unreadable", source)]
    skeleton, labels = [], label_strings(tokens)
    for index, token in enumerate(tokens):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        text = token.string
        if token.type == tokenize.STRING:
            if skeleton[-2:] == [(tokenize.NAME, "set_language"), (tokenize.OP, "(")]:
                text = "<language>"
            elif is_prose_string(text) or index in labels or not text.isascii():
                text = "<prose>"          # English prose, or its translation (which may lack spaces)
        skeleton.append((token.type, text))
    return skeleton
