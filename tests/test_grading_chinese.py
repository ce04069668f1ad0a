"""The Chinese exercises graded: the same code earns the same points, the feedback is Chinese.

Every chapter is released in Chinese (``release --language zh-CN``). Each fixture submission of
the English run (``graded_class``: the correct answers, the second answers and the packed
catalogued mistakes) is made again with the same answer code in the Chinese released notebook,
and the Chinese instructor notebook is submitted as it is. One autograde for all; each
submission's points, exercise by exercise, must equal the English run's, and what the checks
print for a student is Chinese.
"""

import json
import pathlib
import re
import tempfile

import nbformat

import pytest

from grading_fixtures.graded_class import (ALTERNATIVE, ASSIGNMENTS, CHAPTER_SPEC, CHAPTERS,
                                           CORRECT, INSTRUCTOR, instructor, mistake_students,
                                           read_grades)
from grading_fixtures.mistakes import ALTERNATIVES, submission

CJK = range(0x4E00, 0xA000)


def chinese_characters(text: str) -> int:
    return sum(ord(ch) in CJK for ch in text)


@pytest.fixture(scope="module")
def chinese_class(grading_cli):
    """(course directory, grades) of the Chinese run (its commands in the session's CLI
    process, tests/conftest.py's ``grading_cli``)."""
    with tempfile.TemporaryDirectory(prefix="graded-class-zh-") as tmp:
        course, inbox = pathlib.Path(tmp) / "course", pathlib.Path(tmp) / "inbox"
        grading_cli.run("release", "--chapter", CHAPTER_SPEC, "--language", "zh-CN",
                        course=course)
        for assignment in ASSIGNMENTS:
            released = nbformat.read(course / "release" / assignment / "exercises.ipynb", 4)
            assert chinese_characters(json.dumps(released.cells[0].source, ensure_ascii=False)) > 20
            teacher = instructor(assignment)             # the English answers: the same code
            box = inbox / assignment
            box.mkdir(parents=True)
            (box / f"{INSTRUCTOR}.ipynb").write_bytes(
                (CHAPTERS / assignment / "exercises.zh-CN.ipynb").read_bytes())
            nbformat.write(submission(released, teacher), box / f"{CORRECT}.ipynb")
            nbformat.write(submission(released, teacher, alternatives=ALTERNATIVES[assignment]),
                           box / f"{ALTERNATIVE}.ipynb")
            for student, pack in mistake_students(assignment).items():
                nbformat.write(submission(released, teacher, pack), box / f"{student}.ipynb")
            grading_cli.run("collect", str(box), "--chapter", assignment, course=course)
        grading_cli.run("autograde", "--chapter", CHAPTER_SPEC, "--timeout", "60", course=course)
        grading_cli.run("export", "--chapter", CHAPTER_SPEC, "--to", str(course / "grades.csv"),
                        course=course)
        yield course, read_grades(course / "grades.csv")


def test_the_same_code_earns_the_same_points_in_chinese(chinese_class, graded_class):
    _, chinese = chinese_class
    _, english = graded_class
    compared = 0
    for (assignment, student), points in chinese.items():
        english_points = english.get((assignment, student))
        assert english_points is not None, f"{assignment} {student}: not in the English run"
        assert points == english_points, f"{assignment} {student}: {points} != {english_points}"
        compared += 1
    expected = sum(3 + len(mistake_students(a)) for a in ASSIGNMENTS)
    assert compared == expected, f"{compared} Chinese submissions graded, {expected} expected"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_what_the_checks_print_is_chinese(chinese_class, assignment):
    """The graded test cells of a submission with mistakes print their verdicts in Chinese."""
    course, _ = chinese_class
    student = next(iter(mistake_students(assignment)))
    graded = nbformat.read(course / "autograded" / student / assignment / "exercises.ipynb", 4)
    printed = [output.get("text", "") + output.get("evalue", "")
               for cell in graded.cells
               if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
               and not cell.metadata.get("nbgrader", {}).get("solution")
               for output in cell.get("outputs", [])]
    assert printed, "the graded test cells printed nothing"
    assert chinese_characters(" ".join(printed)) > 10, printed[:3]
    # The checks' own verdict (utils.grading.checks, from the catalog), not only Chinese that a
    # test cell prints by itself: with utils speaking English this fails.
    text = "\n".join(printed)
    assert re.search(r"\d+ 项检查通过 \d+ 项（得 [\d.]+ 分，满分 [\d.]+ 分）|没有一项检查通过", text), printed
    assert not re.search(r"checks passed \(|no check passed", text), printed


def test_a_chinese_feedback_page_speaks_chinese(chinese_class, grading_cli):
    """The feedback a student of the Chinese class receives: the page's own labels, its language
    and the comment that stands for the hidden tests are Chinese; no hidden test shows."""
    from utils.grading.feedback import PLACEHOLDER, find_leaks, html_text, split_hidden
    from utils.grading.student_text import in_language
    course, _ = chinese_class
    assignment = ASSIGNMENTS[0]
    grading_cli.run("feedback", "--chapter", assignment, "--student", CORRECT, course=course)
    page = (course / "feedback" / CORRECT / assignment / "exercises.html").read_text("utf-8")
    text = html_text(page)
    assert '<html lang="zh-CN">' in page
    for label in ("Score: ", "Test cell", "Grade cell: ", "(Top)", PLACEHOLDER):
        assert in_language("zh-CN", label) != label and in_language("zh-CN", label) in text, label
        assert label not in text, f"{label!r} is still English on the page"
    teacher = nbformat.read(CHAPTERS / assignment / "exercises.zh-CN.ipynb", 4)
    hidden = [line for cell in teacher.cells if cell.cell_type == "code"
              for line in split_hidden(cell.source)[1]]
    assert hidden and not find_leaks(page, hidden)
