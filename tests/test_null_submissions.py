"""No points without understanding (issue 33): for every chapter, the null submissions of
tests/grading_fixtures/null_submissions.py (the released notebook untouched; every function
returning its first argument, zeros or a constant, with well-formed wrong predictions; every
find-and-fix answer calling the draft unchanged) are graded through the real CLI, in the
session's one grading run, and each earns 0 points in every autograded cell.

The generator is tested too, so that a null cannot pass by failing to run: each nulled function
really returns what its kind says, and each wrong prediction is well-formed and wrong.
"""

import ast

import nbformat
import pytest

from conftest import CHAPTERS
from grading_fixtures.graded_class import ASSIGNMENTS, null_student
from grading_fixtures.mistakes import solution_sources
from grading_fixtures.null_submissions import (NULL_KINDS, calls_the_draft, find_and_fix_answers,
                                               is_prediction_cell, locked_functions,
                                               null_functions, wrong_predictions)


def _instructor(assignment):
    return nbformat.read(CHAPTERS / assignment / "exercises.ipynb", as_version=4)


def _autograded(nb) -> dict:
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
    return {m["grade_id"]: m["points"] for m in meta if m.get("grade") and not m.get("solution")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", NULL_KINDS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_null_submission_earns_nothing(graded_class, assignment, kind):
    _, grades = graded_class
    scores = grades.get((assignment, null_student(kind)))
    assert scores is not None, f"{assignment}: the {kind} null submission was not graded"
    points = _autograded(_instructor(assignment))
    earned = {g: scores.get(g) for g in points if scores.get(g)}
    assert not earned, (f"{assignment}: the {kind} null submission earns points: {earned} "
                        f"(every named check must fail for it, or be grouped with one that does)")


def test_null_functions_return_what_their_kind_says():
    import torch
    source = ('import math\n\ndef f(x, y=2):\n    """doc"""\n    return x * y\n\n'
              'class M(torch.nn.Module):\n    def __init__(self, d):\n        super().__init__()\n'
              '        self.d = d\n    def forward(self, x):\n        return x + 1\n')
    x = torch.arange(3.0)
    for kind, expected in [("returns-first-argument", x), ("returns-zeros", torch.zeros(3)),
                           ("returns-constant", 0.0)]:
        namespace = {}
        exec(null_functions(source, kind), namespace)
        assert namespace["f"].__doc__ == "doc"
        for result in (namespace["f"](x), namespace["M"](4)(x)):
            assert torch.equal(torch.as_tensor(result, dtype=torch.float32),
                               torch.as_tensor(expected, dtype=torch.float32)), (kind, result)


def test_wrong_predictions_are_well_formed_and_wrong():
    import math
    source = "import math\na = 1\nb = math.log(2)\nc = (2, 3)\nd = True\n"
    truth = {}
    exec(source, truth)
    for kind in ("returns-first-argument", "returns-zeros", "returns-constant"):
        namespace = {}
        exec(wrong_predictions(source, kind), namespace)
        for name in "abcd":
            assert type(namespace[name]) is type(truth[name]), (kind, name)
            assert namespace[name] != truth[name], (kind, name)
        assert len(namespace["c"]) == 2 and not math.isclose(namespace["b"], truth["b"])


def test_calls_the_draft_needs_a_draft_with_the_same_parameters():
    namespace = {"fix_draft": lambda a, b: ("draft", a, b)}
    exec(calls_the_draft("def fix(a, b):\n    return a\n", {"fix_draft": ["a", "b"]}), namespace)
    assert namespace["fix"](1, 2) == ("draft", 1, 2)
    with pytest.raises(ValueError, match="no locked draft"):
        calls_the_draft("def fix(a, b):\n    return a\n", {"other": ["a"]})


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_find_and_fix_answer_has_its_draft_and_every_answer_nulls(assignment):
    """Static: the nulls can be built for this chapter (a find-and-fix answer's draft exists
    in a locked cell with the same parameter names; every answer cell parses)."""
    nb = _instructor(assignment)
    answers = solution_sources(nb)
    drafts = locked_functions(nb)
    fixes = find_and_fix_answers(nb)
    assert fixes, f"{assignment}: no find-and-fix answer cell found"
    for grade_id in fixes:
        calls_the_draft(answers[grade_id], drafts)
    for grade_id, source in answers.items():
        if is_prediction_cell(source):
            ast.parse(wrong_predictions(source, "returns-constant"))
        else:
            ast.parse(null_functions(source, "returns-constant"))
