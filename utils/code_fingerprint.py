"""A fingerprint of the code that trains a model, so a cached model never outlives its code.

``code_fingerprint("utils.seq2seq")`` hashes the syntax tree of ``utils/seq2seq.py`` and of every
``utils`` module it imports, directly or through others (imports inside functions count). Comments,
docstrings and formatting do not change it; any change to a statement does (``2 * x`` and
``x * 2`` differ: the fingerprint cannot know they compute the same). Nor does the text of a
message, which cannot change a weight: a ``raise``'s message (the exception's arguments that are
strings, f-strings, ``_("...")`` translations and their ``.format(...)``), a warning's and an
``assert``'s, and the literal of any ``_("...")`` call all hash as one placeholder, and
``from utils.i18n import _`` is left out, so rewording or translating a message keeps the
fingerprint, while the exception's class, the condition that guards it and everything else still
count. ``utils.model_cache`` puts it in every model's key, so editing the model, training or data
code makes the old cached and shipped files invisible: the lesson trains anew, and
``python -m utils.shipped_models`` makes the shipped ones again
(``tests/test_translation_models.py`` fails until it has).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import pathlib

from utils.i18n import TRANSLATION_FUNCTIONS

UTILS_DIR = pathlib.Path(__file__).resolve().parent
# Tools around the models, never part of what computes the weights. ``utils.data_files`` only
# decides which file is read; the pairs it holds are hashed into every key (utils.model_cache).
# ``utils.i18n`` only picks the language a message is written in (the model modules import its
# ``_``); a message's text is no part of the fingerprint either (``_WithoutMessageText``).
NOT_MODEL_CODE = ("utils.widgets", "utils.grading", "utils.notebook_tools", "utils.plotting",
                  "utils.model_cache", "utils.shipped_models", "utils.code_fingerprint",
                  "utils.data_files", "utils.i18n")


def module_path(name: str, utils_dir: pathlib.Path = UTILS_DIR) -> pathlib.Path | None:
    """``utils.x.y`` -> its file under ``utils_dir`` (a module or a package), or None."""
    parts = name.split(".")[1:]
    base = utils_dir.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_utils_modules(tree: ast.AST) -> set:
    """Names of ``utils`` modules (or ``utils.x.name`` candidates) a syntax tree imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name == "utils" or name.startswith("utils.")}


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


MESSAGE = "<message>"                     # what every message's text hashes as


def _is_gettext(node: ast.AST) -> bool:
    """``_("literal")`` or ``gettext("literal")``: a message that ``utils.i18n`` translates."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in TRANSLATION_FUNCTIONS
            and len(node.args) == 1 and not node.keywords
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def _is_message(node: ast.AST) -> bool:
    """Whether ``node`` builds a message's text: a string or f-string, ``_("...")``, such a
    template's ``.format(...)``, ``+`` or ``%`` on one, or a choice between two of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr) or _is_gettext(node):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "format" and _is_message(node.func.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_message(node.left)
    if isinstance(node, ast.IfExp):
        return _is_message(node.body) and _is_message(node.orelse)
    return False


def _placeholder(node: ast.AST) -> ast.AST:
    return ast.Constant(value=MESSAGE) if _is_message(node) else node


class _WithoutMessageText(ast.NodeTransformer):
    """Replaces the text of messages (see the module docstring) with ``MESSAGE``."""

    def visit_Raise(self, node: ast.Raise) -> ast.Raise:
        self.generic_visit(node)
        if isinstance(node.exc, ast.Call):
            node.exc.args = [_placeholder(arg) for arg in node.exc.args]
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom):
        """``from utils.i18n import _`` only brings the function that picks a message's
        language (``NOT_MODEL_CODE``): importing it is no model code either."""
        if node.level == 0 and node.module and node.module.startswith("utils.i18n"):
            return None
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        self.generic_visit(node)
        if node.msg is not None:
            node.msg = _placeholder(node.msg)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        if _is_gettext(node):
            node.args = [ast.Constant(value=MESSAGE)]
        elif (isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"
              and node.args):
            node.args = [_placeholder(node.args[0]), *node.args[1:]]
        return node


def without_message_text(tree: ast.AST) -> ast.AST:
    """``tree`` with the text of every message replaced by ``MESSAGE`` (in place; returned):
    what the fingerprint hashes, and what tests/test_drift.py compares a lesson's copy of a
    library function by (the library's messages speak the notebook's language)."""
    return _WithoutMessageText().visit(tree)


def model_code_modules(start: str, utils_dir: pathlib.Path = UTILS_DIR) -> list:
    """``start`` and every ``utils`` module it reaches by imports, sorted (tools excluded)."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name.startswith(NOT_MODEL_CODE):
            continue
        path = module_path(name, utils_dir)
        if path is None:
            continue                                   # ``utils.x.func``: not a module
        seen.add(name)
        todo.extend(_parsed(path.read_text(encoding="utf-8"))[0])
    if start not in seen:
        raise ValueError(f"{start} is not a module under {utils_dir}; pass e.g. 'utils.seq2seq'")
    return sorted(seen)


def source_fingerprint(paths) -> str:
    """SHA-256 (20 hex digits) of the files' syntax trees without docstrings and without the
    text of messages, in the given order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(_parsed(pathlib.Path(path).read_text(encoding="utf-8"))[1])
        digest.update(b"\0")
    return digest.hexdigest()[:20]


@functools.lru_cache(maxsize=256)
def _parsed(source: str) -> tuple[frozenset, bytes]:
    """(the ``utils`` modules one file's source imports, what ``source_fingerprint`` hashes of
    it), from one parse per process for each distinct source (an edited file is parsed again).
    A lesson asks for the same module's fingerprint with every stored evaluation it reads:
    parsing it cost about 0.06 s each time."""
    tree = ast.parse(source)
    imports = frozenset(imported_utils_modules(tree))
    tree = without_message_text(_without_docstrings(tree))
    return imports, ast.dump(tree, annotate_fields=True, include_attributes=False).encode()


@functools.lru_cache(maxsize=None)
def code_fingerprint(start: str) -> str:
    """The fingerprint of ``start`` and the ``utils`` modules it imports (see the module
    docstring); computed once per process."""
    modules = model_code_modules(start)
    return source_fingerprint(module_path(name) for name in modules)
