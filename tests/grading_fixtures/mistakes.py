"""Every chapter's exercise fixtures, by assignment: typical wrong answers (``MISTAKES``) and
second correct answers (``ALTERNATIVES``), one module per chapter in ``exercises/``, and the
submissions built from them. tests/test_feedback_diagnoses.py grades one submission per mistake
and one per chapter made of the alternatives through the real CLI.
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


def submission(student_nb, instructor_nb, mistake=None, alternatives=()):
    """The released notebook with every answer cell filled in from the instructor version,
    ``mistake`` (if any) made in its one cell, the cells of ``alternatives`` replaced by
    those answers; written answers are left as released."""
    import copy
    answers = solution_sources(instructor_nb)
    for alternative in alternatives:
        if alternative.solution not in answers:
            raise ValueError(f"no answer cell {alternative.solution!r}")
        answers[alternative.solution] = alternative.source
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
            source = answers[grade_id]
            if mistake is not None and grade_id == mistake.solution:
                source = with_mistake(source, mistake)
            cell.source = source
    return nb
