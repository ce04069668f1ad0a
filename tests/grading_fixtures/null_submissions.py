"""Submissions that show no understanding, built by rule from any chapter's notebooks (issue 33).

Each must earn 0 points in every autograded cell (tests/test_null_submissions.py):

- ``untouched``: the released notebook as the student got it;
- ``returns-first-argument``: every function of every answer cell returns its first argument (a
  method: its first argument after ``self``);
- ``returns-zeros``: ... returns zeros shaped like its first argument;
- ``returns-constant``: ... returns the constant 0.0;
- ``calls-the-draft``: every find-and-fix answer calls the draft it was asked to fix, unchanged
  (the draft: a function of a locked cell with the same parameter names); other answers as
  released.

In the first three, each prediction of a prediction cell (an answer cell with no ``def``: its
top-level assignments) is a well-formed wrong value: a number n becomes 3n + 17, -n - 1 or
10n + 1 (one per submission), a shape gets one more on each size, a bool flips. The answers are
rebuilt from the instructor's answer cells, so no null depends on how a chapter words its
scaffolding.
"""

import ast
import copy

NULL_KINDS = ("untouched", "returns-first-argument", "returns-zeros", "returns-constant",
              "calls-the-draft")

# What a nulled function returns, given the name of its first argument (or None).
_RETURNS = {
    "returns-first-argument": lambda first: first or "None",
    "returns-zeros": lambda first: (f"torch.zeros_like(torch.as_tensor({first}, "
                                    f"dtype=torch.float32))" if first else "torch.zeros(())"),
    "returns-constant": lambda first: "0.0",
}
# The wrong value each function-null gives a prediction (well-formed: same type and length).
_WRONG_NUMBER = {"returns-first-argument": "3 * v + 17", "returns-zeros": "-v - 1",
                 "returns-constant": "10 * v + 1"}

_WRONG_PREDICTION = '''def _null_wrong(v):
    """A well-formed wrong prediction (the null submissions of issue 33)."""
    import torch as _torch
    if isinstance(v, bool):
        return not v
    if isinstance(v, (tuple, list)):
        return type(v)(_null_wrong(x) for x in v)
    if isinstance(v, _torch.Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, int):
        return int({number})
    if isinstance(v, float):
        return float({number})
    return v
'''


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def _is_answer(cell) -> bool:
    return cell.cell_type == "code" and bool(_nbgrader(cell).get("solution"))


def _params(function: ast.FunctionDef) -> list:
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def _first_argument(function: ast.FunctionDef, method: bool):
    names = [a.arg for a in function.args.posonlyargs + function.args.args]
    names = names[1:] if method and names else names
    return names[0] if names else (function.args.vararg.arg if function.args.vararg else None)


def _docstring(function) -> list:
    first = function.body[0] if function.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return [first]
    return []


def _with_body(function, statement: str):
    new = copy.deepcopy(function)
    new.body = _docstring(function) + ast.parse(statement).body
    return new


def _null_function(function, kind: str, method: bool = False):
    if method and function.name == "__init__":
        return _with_body(function, "super(type(self), self).__init__()")
    return _with_body(function, f"return {_RETURNS[kind](_first_argument(function, method))}")


def _null_class(cls: ast.ClassDef, kind: str):
    new = copy.deepcopy(cls)
    new.body = [_null_function(node, kind, method=True) if isinstance(node, ast.FunctionDef)
                else node for node in cls.body]
    return new


def is_prediction_cell(source: str) -> bool:
    """An answer cell of predictions: no function or class, only assignments."""
    tree = ast.parse(source)
    return not any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body)


def null_functions(source: str, kind: str) -> str:
    """An answer cell whose functions (and methods) do nothing useful, by ``kind``."""
    tree = ast.parse(source)
    body = [ast.parse("import torch").body[0]]
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            body.append(node)
        elif isinstance(node, ast.FunctionDef):
            body.append(_null_function(node, kind))
        elif isinstance(node, ast.ClassDef):
            body.append(_null_class(node, kind))
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def wrong_predictions(source: str, kind: str) -> str:
    """The instructor's prediction cell with every assigned value made wrong, well-formed."""
    tree = ast.parse(source)
    helper = ast.parse(_WRONG_PREDICTION.format(number=_WRONG_NUMBER[kind])).body
    body = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            node = copy.deepcopy(node)
            node.value = ast.Call(func=ast.Name("_null_wrong", ast.Load()), args=[node.value],
                                  keywords=[])
        body.append(node)
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=helper + body,
                                                            type_ignores=[])))


def locked_functions(nb) -> dict:
    """name -> parameter names of every function defined in a code cell that is not an answer."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or _is_answer(cell):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                found[node.name] = _params(node)
    return found


def answers_graded_as(instructor_nb, kind: str) -> list:
    """grade_ids of the answer cells that a test cell of this ``kind`` (find-and-fix, predict...)
    grades: those since the previous test cell, in notebook order."""
    from utils.grading.exercise_table import rubric_of
    found, pending = [], []
    for cell in instructor_nb.cells:
        meta = _nbgrader(cell)
        if _is_answer(cell):
            pending.append(meta["grade_id"])
        elif cell.cell_type == "code" and meta.get("grade"):
            rubric = rubric_of(cell.source)
            if rubric and rubric[0] == kind:
                found += pending
            pending = []
    return found


def find_and_fix_answers(instructor_nb) -> list:
    """grade_ids of the answer cells a find-and-fix test cell grades."""
    return answers_graded_as(instructor_nb, "find-and-fix")


def calls_the_draft(source: str, drafts: dict) -> str:
    """A find-and-fix answer whose function calls the locked draft with the same parameters."""
    tree = ast.parse(source)
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            params = _params(node)
            matches = [name for name, p in drafts.items() if p == params and name != node.name]
            if not matches:
                raise ValueError(f"{node.name}{tuple(params)}: no locked draft with the same "
                                 f"parameter names (a find-and-fix draft must have them)")
            call = ", ".join(f"{p}={p}" for p in params)
            body.append(_with_body(node, f"return {matches[0]}({call})"))
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def null_submission(student_nb, instructor_nb, kind: str):
    """The released notebook ``student_nb`` filled in as the null ``kind`` would fill it."""
    from grading_fixtures.mistakes import solution_sources
    if kind not in NULL_KINDS:
        raise ValueError(f"kind must be one of {NULL_KINDS}, got {kind!r}")
    nb = copy.deepcopy(student_nb)
    if kind == "untouched":
        return nb
    answers = solution_sources(instructor_nb)
    fixes = find_and_fix_answers(instructor_nb)
    drafts = locked_functions(student_nb)
    if kind == "calls-the-draft" and not fixes:
        raise ValueError("no find-and-fix item in this chapter")
    for cell in nb.cells:
        if not _is_answer(cell):
            continue
        grade_id = _nbgrader(cell)["grade_id"]
        source = answers[grade_id]
        if kind == "calls-the-draft":
            if grade_id in fixes:
                cell.source = calls_the_draft(source, drafts)
        elif is_prediction_cell(source):
            cell.source = wrong_predictions(source, kind)
        else:
            cell.source = null_functions(source, kind)
    return nb
