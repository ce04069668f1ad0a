"""Every chapter's exercises, both directions, through the real instructor CLI.

For each chapters/NN_*/exercises.ipynb: the released student version holds no solution and no
hidden-test text; autograded, the instructor version earns every autograded point and the
untouched student version earns none, failing with NotImplementedError. The grading is the
session's one run of every fixture submission (tests/conftest.py ``graded_class``).
(tests/test_grading_workflow.py runs lesson 1's synthetic class through the whole workflow.)
"""

import os
import pathlib

import nbformat
import pytest
import torch

from conftest import CHAPTERS, REPO

# A development aid: FIXTURE_CHAPTERS=03_scoring_functions grades only that chapter.
EXERCISES = sorted(p for p in CHAPTERS.glob("*/exercises.ipynb")
                   if os.environ.get("FIXTURE_CHAPTERS", "") in ("", p.parent.name))
ASSIGNMENTS = [path.parent.name for path in EXERCISES]


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def autograded_points(path: pathlib.Path) -> dict:
    """grade_id -> points of the test cells (graded, not a solution) of an instructor notebook."""
    nb = nbformat.read(path, as_version=4)
    return {_nbgrader(c)["grade_id"]: _nbgrader(c)["points"] for c in nb.cells
            if _nbgrader(c).get("grade") and not _nbgrader(c).get("solution")}


def marked_lines(path: pathlib.Path, begin: str, end: str) -> list:
    lines = []
    for cell in nbformat.read(path, as_version=4).cells:
        inside = False
        for line in cell.source.splitlines():
            if begin in line:
                inside = True
            elif end in line:
                inside = False
            elif inside and len(line.strip()) >= 8 and not line.strip().startswith("#"):
                lines.append(line.strip())
    return lines


def visible_lines(path: pathlib.Path) -> set:
    """Lines of the instructor notebook outside solution and hidden-test regions."""
    lines = set()
    for cell in nbformat.read(path, as_version=4).cells:
        inside = False
        for line in cell.source.splitlines():
            if "### BEGIN SOLUTION" in line or "### BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "### END SOLUTION" in line or "### END HIDDEN TESTS" in line:
                inside = False
            elif not inside:
                lines.add(line.strip())
    return lines


@pytest.fixture(scope="module")
def course(graded_class):
    """The course directory of the session's one grading run (tests/conftest.py): it holds the
    instructor notebook submitted as it is and the released notebook untouched."""
    return graded_class[0]


def test_every_lesson_has_exercises_with_three_autograded_and_one_written():
    lessons = sorted(p.parent.name for p in CHAPTERS.glob("*/lesson.ipynb"))
    if not os.environ.get("FIXTURE_CHAPTERS"):
        assert ASSIGNMENTS == lessons, "every lesson needs an exercises.ipynb"
    for path in EXERCISES:
        nb = nbformat.read(path, as_version=4)
        written = [c for c in nb.cells if c.cell_type == "markdown"
                   and _nbgrader(c).get("grade") and _nbgrader(c).get("solution")]
        assert len(autograded_points(path)) >= 3, f"{path}: fewer than 3 autograded exercises"
        assert len(written) >= 1, f"{path}: no manually graded written answer"


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXERCISES)), ids=ASSIGNMENTS)
def test_released_version_has_no_solutions_or_hidden_tests(course, index):
    instructor, assignment = EXERCISES[index], ASSIGNMENTS[index]
    released = (course / "release" / assignment / "exercises.ipynb").read_text()
    secret = (marked_lines(instructor, "### BEGIN SOLUTION", "### END SOLUTION")
              + marked_lines(instructor, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))
    assert secret, f"{instructor}: no solution or hidden-test lines found"
    # A line that students see anyway (e.g. `with torch.no_grad():`) proves nothing.
    secret = [line for line in secret if line not in visible_lines(instructor)]
    leaks = [line for line in secret if line in released]
    assert not leaks, f"released {assignment} leaks: {leaks[:3]}"
    assert "raise NotImplementedError()" in released


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXERCISES)), ids=ASSIGNMENTS)
def test_instructor_full_marks_student_version_zero(graded_class, index):
    from grading_fixtures.graded_class import INSTRUCTOR, null_student
    course, grades = graded_class
    assignment = ASSIGNMENTS[index]
    points = autograded_points(EXERCISES[index])
    untouched = null_student("untouched")
    for grade_id, maximum in points.items():
        assert grades[(assignment, INSTRUCTOR)].get(grade_id) == maximum, (
            f"{assignment}: instructor version earns "
            f"{grades[(assignment, INSTRUCTOR)].get(grade_id)} of {maximum} on {grade_id}")
        assert not grades[(assignment, untouched)].get(grade_id), (
            f"{assignment}: untouched student version earns "
            f"{grades[(assignment, untouched)].get(grade_id)} on {grade_id}")
    student = nbformat.read(course / "autograded" / untouched / assignment / "exercises.ipynb",
                            as_version=4)
    errors = [f"{o.ename}: {o.evalue}" for c in student.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    assert any("NotImplementedError" in e or "not answered yet" in e for e in errors), (
        f"{assignment}: student version failed with {errors}")


@pytest.mark.parametrize("index", range(len(EXERCISES)), ids=ASSIGNMENTS)
def test_exercises_follow_the_rules_of_the_instructor_table(index):
    """Static (issue 28): every autograded cell has a kind and at least two named checks whose
    points add up to the cell's; at least 60 % of the autograded points are transfer items
    (variant, find-and-fix, predict); at least one find-and-fix and one predict item."""
    from utils.grading import exercise_table
    broken = exercise_table.problems(exercise_table.items(EXERCISES[index].parent))
    assert not broken, f"{ASSIGNMENTS[index]}: " + "; ".join(broken)


def test_instructor_guide_shows_the_instructor_table_as_generated():
    from utils.grading import exercise_table
    table = exercise_table.markdown_table(CHAPTERS)
    guide = (REPO / "docs" / "instructors.md").read_text(encoding="utf-8")
    assert table in guide, ("docs/instructors.md's exercise table is out of date: paste the "
                            "output of `python -m utils.grading table`")


def test_rubric_gives_partial_credit_names_failures_and_lets_grader_errors_through():
    from utils.grading.checks import Rubric

    def broken(x):
        return torch.ones(2, 3) @ torch.ones(2, 3)       # the raw PyTorch shape error

    rubric = Rubric("Exercise 9", points=3, kind="variant")
    with rubric.check("shape", 1):
        assert True
    with rubric.check("values", 1.5):
        raise AssertionError("values: wrong value at index (0,)")
    with rubric.check("keys transposed", 0.5):
        broken(1)
    assert rubric.result() == 1.0
    report = rubric.report()
    assert "1 of 3 checks passed (1 of 3 points)" in report
    assert "FAILED (1.5 pt) values" in report and "transpose the keys" in report
    with pytest.raises(TimeoutError):
        with Rubric("x", 1, "variant").check("slow", 1):
            raise TimeoutError("the grader stopped the student's code")
    nothing = Rubric("Exercise 8", points=1, kind="predict")
    with nothing.check("answered", 1):
        raise NotImplementedError()
    with pytest.raises(AssertionError, match="no check passed.*not answered yet"):
        nothing.result()
    short = Rubric("Exercise 7", points=2, kind="variant")
    with short.check("only one", 1):
        pass
    with pytest.raises(RuntimeError, match="add up to 1.0 points"):
        short.result()
    with pytest.raises(ValueError, match="kind must be one of"):
        Rubric("Exercise 6", points=1, kind="copy")


def test_grader_fetches_answer_names_a_test_cell_lists_in_a_tuple():
    """A predict item's test may loop over its answers' names; the grader must fetch them all
    from the student's process (names inside constant tuples count)."""
    from utils.grading.evaluate import loaded_names
    code = compile('for name, n in (("entropy_at_4", 4), ("entropy_at_2", 2)):\n'
                   '    checks.check_defined(name, globals())\n', "<test>", "exec")
    assert {"entropy_at_4", "entropy_at_2", "checks"} <= loaded_names(code)


def _plain_torch_lists(nb, call):
    """The (modules, names) a check_plain_torch call forbids, its arguments evaluated from the
    notebook's own assignments of them (checks.FORBIDDEN_* when not given)."""
    import ast

    from utils.grading import checks
    assigned = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                for target in node.targets:
                    assigned[target.id] = node.value
    namespace = {"checks": checks}
    for name, value in assigned.items():
        try:
            namespace[name] = eval(compile(ast.Expression(value), "cell", "eval"), namespace)
        except Exception:   # noqa: BLE001 - not a constant list: not needed here
            pass
    args = list(call.args[1:3])
    keywords = {k.arg: k.value for k in call.keywords}
    modules = args[0] if len(args) > 0 else keywords.get("forbidden_modules")
    names = args[1] if len(args) > 1 else keywords.get("forbidden_names")
    evaluate = (lambda node, default: default if node is None else
                eval(compile(ast.Expression(node), "cell", "eval"), namespace))
    return (evaluate(modules, checks.FORBIDDEN_MODULES), evaluate(names, checks.FORBIDDEN_NAMES))


@pytest.mark.parametrize("index", range(len(EXERCISES)), ids=ASSIGNMENTS)
def test_every_exercise_states_the_names_that_give_it_zero(index):
    """Issue 33: an exercise whose checks call check_plain_torch lists, in its own text, every
    module and function that gives it 0 points, in the one sentence every lesson uses
    (checks.not_allowed_line)."""
    import ast

    from utils.grading import checks
    from utils.grading.feedback import split_hidden
    nb = nbformat.read(EXERCISES[index], as_version=4)
    text, problems, seen = [], [], 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if cell.source.lstrip().startswith("## "):
                text = []
            text.append(cell.source)
            continue
        meta = _nbgrader(cell)
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        calls = [node for node in ast.walk(ast.parse(split_hidden(cell.source)[0]))
                 if isinstance(node, ast.Call) and getattr(node.func, "attr", "") ==
                 "check_plain_torch"]
        for call in calls:
            seen += 1
            line = checks.not_allowed_line(*_plain_torch_lists(nb, call))
            if line not in "\n".join(text):
                problems.append(f"{meta['grade_id']}: the exercise's text lacks the line\n{line}")
    assert not problems, f"{ASSIGNMENTS[index]}:\n" + "\n".join(sorted(set(problems)))
    assert seen or "check_plain_torch" not in EXERCISES[index].read_text(encoding="utf-8")
