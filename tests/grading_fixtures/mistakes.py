"""Every chapter's exercise fixtures, by assignment: typical wrong answers (``MISTAKES``) and
second correct answers (``ALTERNATIVES``), one module per chapter in ``exercises/``, and the
submissions built from them. tests/test_feedback_diagnoses.py grades them through the real CLI:
the mistakes packed several to a submission, one per exercise (``packs``: the exercises are
graded independently, which tests/test_feedback_diagnoses.py checks), and one submission per
chapter made of the alternatives.
"""

import importlib

from grading_fixtures.exercise_kit import Alternative, Mistake  # noqa: F401 - re-exported

CHAPTER_MODULES = {
    "01_attention_cues": "grading_fixtures.exercises.ch01",
    "02_attention_pooling": "grading_fixtures.exercises.ch02",
    "03_scoring_functions": "grading_fixtures.exercises.ch03",
    "04_bahdanau_attention": "grading_fixtures.exercises.ch04",
    "05_multihead_attention": "grading_fixtures.exercises.ch05",
    "06_self_attention_positional_encoding": "grading_fixtures.exercises.ch06",
    "07_transformer": "grading_fixtures.exercises.ch07",
    "08_language_model": "grading_fixtures.exercises.ch08",
}
MISTAKES = {name: importlib.import_module(module).MISTAKES
            for name, module in CHAPTER_MODULES.items()}
ALTERNATIVES = {name: importlib.import_module(module).ALTERNATIVES
                for name, module in CHAPTER_MODULES.items()}


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def solution_sources(instructor_nb) -> dict:
    """grade_id -> the instructor's answer, solution markers removed, for each code answer cell."""
    sources = {}
    for cell in instructor_nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("solution"):
            sources[meta["grade_id"]] = "\n".join(
                line for line in cell.source.split("\n")
                if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    return sources


def with_mistake(source: str, mistake: Mistake) -> str:
    """The instructor's answer rewritten to make ``mistake`` (each edit must match once)."""
    for old, new in mistake.edits:
        if source.count(old) != 1:
            raise ValueError(f"{mistake.name}: {old!r} occurs {source.count(old)} times")
        source = source.replace(old, new)
    return source


def packs(mistakes) -> list:
    """The mistakes of one chapter in as few submissions as possible: a submission holds at most
    one mistake per exercise (no two share their answer cell or their test cell), and none whose
    test cell another one's ``downstream`` names (a mistake that breaks a later exercise takes
    that exercise's place). Each mistake's exercise is then graded as if it were alone: no
    exercise reads a name another exercise's answers define (test_feedback_diagnoses.py), and
    the tests of an exercise run in the grader, on the grader's data. In the chapter's order."""
    found = []
    for mistake in mistakes:
        cells = {mistake.solution, mistake.test, *mistake.downstream}
        for pack in found:
            taken = {c for m in pack for c in (m.solution, m.test, *m.downstream)}
            if not cells & taken:
                pack.append(mistake)
                break
        else:
            found.append([mistake])
    return [tuple(pack) for pack in found]


def submission(student_nb, instructor_nb, mistake=None, alternatives=()):
    """The released notebook with every answer cell filled in from the instructor version,
    ``mistake`` (if any; or a tuple of mistakes in different cells) made in its cell, the cells
    of ``alternatives`` replaced by those answers; written answers are left as released."""
    import copy
    answers = solution_sources(instructor_nb)
    for alternative in alternatives:
        if alternative.solution not in answers:
            raise ValueError(f"no answer cell {alternative.solution!r}")
        answers[alternative.solution] = alternative.source
    made = {}
    for one in (() if mistake is None else mistake if isinstance(mistake, tuple)
                and not isinstance(mistake, Mistake) else (mistake,)):
        if one.solution in made:
            raise ValueError(f"{one.name} and {made[one.solution].name} rewrite the same cell")
        made[one.solution] = one
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
            source = answers[grade_id]
            if grade_id in made:
                source = with_mistake(source, made[grade_id])
            cell.source = source
    return nb
