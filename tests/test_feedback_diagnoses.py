"""Feedback that teaches (issue 18): typical mistakes are named in the feedback, with the fix.

For every chapter, the mistakes listed in tests/grading_fixtures/mistakes.py (the released
notebook filled with the instructor's answers, one answer per exercise rewritten to make one
mistake: the exercises are graded independently, so a submission carries one mistake in each
of several exercises, ``packs``) and one fully correct submission go through the real CLI — release, collect, ONE
autograde call for all chapters, feedback, export — in one course directory, the session's
``graded_class`` (tests/grading_fixtures/graded_class.py, shared with the null submissions of
tests/test_null_submissions.py). Then:
each mistake's exercise earns exactly the points the mistake leaves (the checks it passes:
partial credit), the later exercises whose answers call the broken function (none so far) earn
nothing and their feedback names that function as the cause, every exercise without a mistake
keeps all its points, and the feedback of the mistake's test cell names it; the correct one, and one made of the chapter's second
correct answers (``ALTERNATIVES``), earn every autograded point; no feedback page shows a
hidden-test line.
"""

import pathlib

import nbformat
import pytest

from conftest import CHAPTERS
from grading_fixtures.graded_class import ASSIGNMENTS, mistake_students, student_of
from grading_fixtures.mistakes import ALTERNATIVES, MISTAKES, solution_sources
from grading_fixtures.null_submissions import NULL_KINDS

from grading_fixtures.graded_class import ALTERNATIVE, CORRECT


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def instructor(assignment: str):
    return nbformat.read(CHAPTERS / assignment / "exercises.ipynb", as_version=4)


def autograded_points(nb) -> dict:
    """grade_id -> points of the autograded test cells."""
    return {_nbgrader(c)["grade_id"]: _nbgrader(c)["points"] for c in nb.cells
            if _nbgrader(c).get("grade") and not _nbgrader(c).get("solution")}


def hidden_lines(nb) -> list:
    from utils.grading.feedback import split_hidden
    return [line for c in nb.cells if c.cell_type == "code" for line in split_hidden(c.source)[1]]


def page_text(path: pathlib.Path) -> str:
    from utils.grading.feedback import html_text
    return html_text(path.read_text(encoding="utf-8"))


def cell_feedback(path: pathlib.Path, grade_id: str) -> str:
    """Text of a feedback page from the test cell ``grade_id`` to the next graded or answer
    cell (nbgrader's feedback template puts an ``<a name=...>`` anchor before each): what the
    student reads about that one exercise."""
    from utils.grading.feedback import html_text
    page = path.read_text(encoding="utf-8")
    anchor = f'<a name="{grade_id}"></a>'
    assert page.count(anchor) == 1, f"{path}: {page.count(anchor)} anchors {anchor}"
    start = page.index(anchor) + len(anchor)
    end = page.find("<a name=", start)
    return html_text(page[start:end if end >= 0 else len(page)])


@pytest.fixture(scope="module")
def graded(graded_class):
    """The course directory after grading every chapter's submissions (the session's one
    grading run, tests/conftest.py), and the grades by (assignment, student): {grade_id: score}."""
    return graded_class


def test_every_autograded_exercise_has_two_diagnoses_in_visible_test_code():
    """Static: at least two mistakes per autograded cell, each named in the cell's visible code
    (so the message never comes from a hidden test) and not in any hidden region."""
    from utils.grading.feedback import split_hidden
    for assignment in ASSIGNMENTS:
        nb = instructor(assignment)
        visible = {_nbgrader(c).get("grade_id"): split_hidden(c.source)[0] for c in nb.cells}
        hidden = "\n".join(hidden_lines(nb))
        for grade_id in autograded_points(nb):
            named = [m for m in MISTAKES[assignment] if m.test == grade_id]
            assert len(named) >= 2, f"{assignment}/{grade_id}: {len(named)} diagnosed mistakes"
            for mistake in named:
                words = mistake.diagnosis.split(": ")[0][:30]
                assert words in visible[grade_id], f"{mistake.name}: not in {grade_id}'s visible code"
                assert words not in hidden, f"{mistake.name}: diagnosis text in a hidden test"


def test_no_visible_code_quotes_a_hidden_test_line():
    """Static: the feedback check refuses a page that contains a hidden-test line anywhere, so
    visible test code and the answers (which feedback shows) must not contain one."""
    from utils.grading.feedback import leak_markers, split_hidden
    for assignment in ASSIGNMENTS:
        nb = instructor(assignment)
        visible = "\n".join(split_hidden(c.source)[0] for c in nb.cells)
        quoted = sorted(m for m in leak_markers(hidden_lines(nb)) if m in visible)
        assert not quoted, f"{assignment}: visible code contains hidden-test lines {quoted}"


def test_no_visible_code_quotes_a_solution_line():
    """Static, as tests/test_exercises.py checks the released notebook: a diagnosis message or
    a wrong variant must not contain a line of the solution or of a hidden test."""
    from test_exercises import marked_lines, visible_lines
    for assignment in ASSIGNMENTS:
        path = CHAPTERS / assignment / "exercises.ipynb"
        visible = visible_lines(path)
        secret = [line for line in marked_lines(path, "### BEGIN SOLUTION", "### END SOLUTION")
                  + marked_lines(path, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
                  if line not in visible]
        text = "\n".join(visible)
        quoted = [line for line in secret if line in text]
        assert not quoted, f"{assignment}: visible code quotes {quoted[:3]}"


def test_every_answer_has_a_second_correct_answer_written_another_way():
    """Static: each code answer cell has an alternative in the chapter's fixtures, and it is
    not the instructor's answer again (at most half of its lines are the same)."""
    for assignment in ASSIGNMENTS:
        answers = solution_sources(instructor(assignment))
        alternatives = {a.solution: a.source for a in ALTERNATIVES[assignment]}
        missing = sorted(set(answers) - set(alternatives))
        assert not missing, f"{assignment}: no second correct answer for {missing}"
        for grade_id, source in alternatives.items():
            ours = {line.strip() for line in answers[grade_id].splitlines()
                    if line.strip() and not line.strip().startswith(("#", "def ", '"""'))}
            theirs = [line.strip() for line in source.splitlines()
                      if line.strip() and not line.strip().startswith(("#", "def ", '"""'))]
            same = sum(line in ours for line in theirs)
            assert theirs and same <= len(theirs) / 2, (
                f"{assignment}/{grade_id}: the alternative repeats {same} of {len(theirs)} "
                f"lines of the instructor's answer")


@pytest.mark.slow
@pytest.mark.parametrize("student", [CORRECT, ALTERNATIVE])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_correct_submissions_get_full_marks(graded, assignment, student):
    _, grades = graded
    points = autograded_points(instructor(assignment))
    scores = grades[(assignment, student)]
    for grade_id, maximum in points.items():
        assert scores.get(grade_id) == maximum, (
            f"{assignment}: the {student} submission earns {scores.get(grade_id)} of {maximum} "
            f"on {grade_id}")


def _exercises(nb) -> dict:
    """grade_id of each answer cell and test cell -> grade_id of the test cell that grades it
    (the answer cells since the previous test cell)."""
    from utils.grading.evaluate import cell_role
    exercise_of, pending = {}, []
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("solution"):
            pending.append(meta["grade_id"])
        elif cell_role(cell) == "test":
            exercise_of.update({answer: meta["grade_id"] for answer in pending},
                               **{meta["grade_id"]: meta["grade_id"]})
            pending = []
    return exercise_of


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercises_are_graded_independently_so_mistakes_can_share_a_submission(assignment):
    """Static, what packing the mistakes (``packs``) rests on: no cell of one exercise (its test
    cell with the hidden tests, the instructor's answer, every catalogued mistake and second
    answer of it) reads a global name that another exercise's answers define, so a mistake in
    one exercise cannot change what another earns (the test cells run in the grader, on the
    grader's own setup values; names as the grader finds them, ``loaded_names``). Every mistake
    is packed with others of different exercises only, none lost or doubled."""
    from grading_fixtures.mistakes import packs, with_mistake
    from utils.grading.evaluate import _compile_cell, cell_role, loaded_names, stored_names
    nb = instructor(assignment)
    answers = solution_sources(nb)
    exercise_of = _exercises(nb)
    assert set(answers) <= set(exercise_of), f"{assignment}: an answer after the last test"

    def reads(source: str) -> set:
        code, last = _compile_cell(source, "<check>")
        return loaded_names(code) | (loaded_names(last) if last else set())

    binds = {g: stored_names(_compile_cell(source, g)[0]) for g, source in answers.items()}
    cells = [(g, source) for g, source in answers.items()]
    cells += [(_nbgrader(c)["grade_id"], c.source) for c in nb.cells if cell_role(c) == "test"]
    cells += [(m.solution, with_mistake(answers[m.solution], m)) for m in MISTAKES[assignment]]
    cells += [(a.solution, a.source) for a in ALTERNATIVES[assignment]]
    for grade_id, source in cells:
        for other, names in binds.items():
            if exercise_of[other] != exercise_of[grade_id]:
                assert not reads(source) & names, (
                    f"{assignment}/{grade_id} reads {sorted(reads(source) & names)}, defined "
                    f"by {other} of another exercise: mistakes there could change it")
    packed = [m for pack in packs(MISTAKES[assignment]) for m in pack]
    assert sorted(packed) == sorted(MISTAKES[assignment])
    for pack in packs(MISTAKES[assignment]):
        assert len({exercise_of[m.test] for m in pack}) == len(pack), pack
        assert all(exercise_of[m.solution] == m.test or m.downstream for m in pack), pack


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_mistake_costs_its_exercise_and_is_named_in_the_feedback(graded, assignment):
    course, grades = graded
    points = autograded_points(instructor(assignment))
    problems = []
    for student, pack in mistake_students(assignment).items():
        scores = grades.get((assignment, student))
        if scores is None:
            problems.append(f"{student} ({', '.join(m.name for m in pack)}): no grades")
            continue
        want = {grade_id: float(maximum) for grade_id, maximum in points.items()}
        for mistake in pack:
            assert mistake.earns < points[mistake.test], f"{mistake.name}: earns all its points"
            assert student_of(assignment, mistake) == student
            want[mistake.test] = mistake.earns
            want.update((grade_id, 0.0) for grade_id in mistake.downstream)
        for grade_id, expected in want.items():
            if scores.get(grade_id) != expected:
                cause = [m.name for m in pack if grade_id in (m.test, *m.downstream)]
                problems.append(f"{student} ({cause or 'no mistake in this exercise'}): "
                                f"{grade_id} scored {scores.get(grade_id)}, expected {expected}")
        page = course / "feedback" / student / assignment / "exercises.html"
        if not page.exists():
            problems.append(f"{student}: no feedback page")
            continue
        for mistake in pack:
            said = [(mistake.test, mistake.diagnosis)]
            said += [(cell, words) for cell in mistake.downstream
                     for words in mistake.downstream_says]
            for cell, words in said:
                if words not in cell_feedback(page, cell):
                    problems.append(f"{mistake.name}: the feedback of {cell} does not say "
                                    f"{words!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_no_feedback_page_shows_a_hidden_test_line(graded):
    from utils.grading.feedback import find_leaks
    course, _ = graded
    checked = 0
    for assignment in ASSIGNMENTS:
        hidden = hidden_lines(instructor(assignment))
        for page in sorted((course / "feedback").glob(f"*/{assignment}/exercises.html")):
            leaks = find_leaks(page.read_text(encoding="utf-8"), hidden)
            assert not leaks, f"{page.relative_to(course)} shows hidden test code: {leaks[:3]}"
            checked += 1
    expected = sum(len(mistake_students(a)) + 3 + len(NULL_KINDS) for a in ASSIGNMENTS)
    assert checked == expected, f"{checked} feedback pages, expected {expected}"


def test_diagnose_names_a_known_wrong_output_and_never_a_right_one():
    import math

    import torch

    from utils.grading import checks
    scores = torch.tensor([[[1.0, 2.0], [3.0, 0.0]]])
    right, wrong = torch.softmax(scores, dim=-1), torch.softmax(scores, dim=1)
    mistakes = {"over the queries: take the softmax over the keys": wrong,
                "never shown: equal to the right answer": right.clone()}
    checks.diagnose(right, right, mistakes, "weights")                     # right: nothing
    checks.diagnose(right * 2, right, mistakes, "weights")                 # unknown: nothing
    with pytest.raises(AssertionError, match="^weights: over the queries: take the softmax"):
        checks.diagnose(wrong, right, mistakes, "weights")
    nan_row = torch.tensor([[math.nan, math.nan], [0.5, 0.5]])            # a fully masked row
    with pytest.raises(AssertionError, match="NaN"):
        checks.diagnose(nan_row.clone(), None, [("-inf mask gives NaN", nan_row)], "w")
    pair = (torch.ones(2), torch.zeros(3))
    with pytest.raises(AssertionError, match="order"):
        checks.diagnose(pair[::-1], pair, {"wrong order": pair[::-1]}, "result")
    with pytest.raises(AssertionError, match="clipping"):
        checks.diagnose(1.0, 0.5, {"clipping": 1}, "bleu")
    assert not checks.matches(torch.ones(2, 3), torch.ones(3, 2))          # shapes differ
    assert not checks.matches(object(), [1.0])                             # not data: no match
    assert checks.matches([[1.0], [1.0, 2.0]], [[1.0], [1.0, 2.0]]) in (True, False)   # no raise


def test_output_or_none_hides_student_errors_but_not_the_graders():
    from utils.grading import checks

    def unfinished():
        raise NotImplementedError()

    assert checks.output_or_none(unfinished) is None
    assert checks.output_or_none(lambda x: x + 1, 1) == 2
    with pytest.raises(TimeoutError):
        checks.output_or_none(lambda: (_ for _ in ()).throw(TimeoutError()))
