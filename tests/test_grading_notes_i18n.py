"""The grader's own sentences reach a student in the language of the submission (issue 36).

The notes cell the grader puts at the top of the graded notebook and the errors it writes into
cells (a timeout, a stopped sandbox, an unreadable file) speak Chinese when the assignment was
released in Chinese, with the same numbers, cell labels and names as in English, while the
same submission of an English release gets exactly today's English, and the instructor's records
(the done markers behind the console's summary) stay English for both.

One course, one autograde run through the real CLI: lesson 1's frozen assignment
(tests/grading_fixtures/security_assignment) released twice, as chapter 01 in Chinese (a twin
whose locked setup says ``set_language("zh-CN")``, as the built exercises.zh-CN.ipynb do) and as
chapter 02 in English, each with the same four submissions built with grading_fixtures.hostile:
an output flood and an endless loop (the output limit, then a cell timeout), a segfault (a
signal), a retyped answer cell, and broken JSON. The commands run in the session's CLI process
(tests/conftest.py's ``grading_cli``), each with its own exit status and output.
"""

import ast
import functools
import json
import pathlib
import re
import shutil
import tempfile

import nbformat
import pytest

from conftest import REPO
from grading_fixtures.hostile import (GOOD, OUTPUT_FLOOD, SECURITY_CHAPTERS, SEGFAULT,
                                      SIGINT_LOOP, dump, insert_after, retyped, with_answers)

CELL_TIMEOUT = "3"
FROZEN = "01_attention_cues"
CHINESE, ENGLISH = "01_attention_cues", "02_attention_cues"
BROKEN_JSON = b'{"cells": [{"cell_type": "code", "source": "query_for_weights = 1"'
NUMBER = re.compile(r"\d+(?:\.\d+)?")
# English sentences of the grader that must not be left in a Chinese notes cell.
ENGLISH_WORDS = re.compile(r"did not finish|was stopped|was restarted|more than|killed by|"
                           r"exited|not valid|was changed|graded as|could not|happened again|"
                           r"while the test|Grader notes")


def chinese_twin(nb):
    """The frozen assignment whose locked setup sets Chinese, as a built Chinese twin's does."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    assert "set_language" not in setup.source
    setup.source = ('from utils.i18n import set_language\n\nset_language("zh-CN")   # 课程所用的语言\n'
                    + setup.source)
    return nb


def submissions(student_nb) -> dict:
    good = lambda **change: dump(with_answers(student_nb, dict(GOOD, **change)))  # noqa: E731
    limits = with_answers(student_nb, dict(GOOD, query_for_weights=SIGINT_LOOP))
    return {
        "limits": dump(insert_after(limits, "attend", OUTPUT_FLOOD)),   # two limits, one run
        "segfault": good(attend=SEGFAULT),
        "cells_retyped": retyped(student_nb),
        "broken_json": BROKEN_JSON,
    }


@pytest.fixture(scope="module")
def graded(grading_cli):
    with tempfile.TemporaryDirectory(prefix="grading-notes-i18n-") as tmp:
        tmp = pathlib.Path(tmp)
        chapters, course = tmp / "chapters", tmp / "course"
        english_nb = SECURITY_CHAPTERS / FROZEN / "exercises.ipynb"
        for name in (CHINESE, ENGLISH):
            (chapters / name).mkdir(parents=True)
            shutil.copy(english_nb, chapters / name / "exercises.ipynb")
        nbformat.write(chinese_twin(nbformat.read(english_nb, 4)),
                       chapters / CHINESE / "exercises.zh-CN.ipynb")
        run_cli = functools.partial(grading_cli.run,
                                    env={"ATTENTION_COURSE_CHAPTERS_DIR": str(chapters)})
        run_cli("release", "--chapter", "01", "--language", "zh-CN", "--timeout", CELL_TIMEOUT,
                course=course)
        run_cli("release", "--chapter", "02", "--timeout", CELL_TIMEOUT, course=course)
        students = {}
        for number, name in (("01", CHINESE), ("02", ENGLISH)):
            student_nb = nbformat.read(course / "release" / name / "exercises.ipynb", 4)
            students[name] = submissions(student_nb)
            inbox = tmp / f"inbox-{number}"
            inbox.mkdir()
            for student, raw in students[name].items():
                if student == "broken_json":         # `collect` rejects it; put in place
                    target = course / "submitted" / student / name / "exercises.ipynb"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(raw)
                else:
                    (inbox / f"{student}.ipynb").write_bytes(raw)
            run_cli("collect", str(inbox), "--chapter", number, course=course)
        run = run_cli("autograde", "--chapter", "all", course=course)
        yield {"run": run, **{
            name: {student: {
                "nb": nbformat.read(course / "autograded" / student / name / "exercises.ipynb", 4),
                "notes": json.loads((course / ".grading" / "done" / name / f"{student}.json")
                                    .read_text())["notes"]}
                for student in students[name]}
            for name in (CHINESE, ENGLISH)}}


def notes_cell(nb) -> str:
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.get("id") == "grader-notes"
    return first.source


def errors(nb, grade_id=None) -> list:
    return [output for cell in nb.cells
            if grade_id is None or cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id
            for output in cell.get("outputs", []) if output.output_type == "error"]


# case: (the student, the note in English, in Chinese; the cell with the grader's error output,
# the error's name, its value in English, in Chinese)
CASES = {
    "endless_loop": (
        "limits",
        f"the cell did not finish within {CELL_TIMEOUT} s and was stopped",
        f"该单元格未能在 {CELL_TIMEOUT} 秒内运行完毕，已被终止",
        "query_for_weights", "TimeoutError",
        f"the cell did not finish within {CELL_TIMEOUT} s and was stopped",
        f"该单元格未能在 {CELL_TIMEOUT} 秒内运行完毕，已被终止"),
    "output_flood": (
        "limits",
        "the student's code wrote more than 8 MB of output", "你的代码输出了超过 8 MB 的内容",
        None, "SandboxStopped",
        "the student's code wrote more than 8 MB of output", "你的代码输出了超过 8 MB 的内容"),
    "segfault": (
        "segfault",
        "while the test called your code, the student's process was killed by SIGSEGV (a crash, "
        "e.g. a segmentation fault)",
        "测试调用你的代码时，运行你的代码的进程被信号 SIGSEGV 终止（程序崩溃，例如段错误）",
        "test_attend", "SandboxStopped",
        "the student's process was killed by SIGSEGV (a crash, e.g. a segmentation fault)",
        "运行你的代码的进程被信号 SIGSEGV 终止（程序崩溃，例如段错误）"),
    "cells_retyped": (
        "cells_retyped",
        "answer cell query_for_weights was changed from code to raw; graded as not answered",
        "答案单元格 query_for_weights 的类型从 code 被改成了 raw；按未作答评分",
        None, None, None, None),
    "broken_json": (
        "broken_json",
        "the submission could not be read: the file is not valid notebook JSON",
        "无法读取提交的文件：文件不是有效的笔记本 JSON",
        "test_attend", "UnreadableSubmission",
        "the file is not valid notebook JSON (JSONDecodeError: ",
        "文件不是有效的笔记本 JSON（JSONDecodeError: "),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_the_notes_cell_speaks_the_submissions_language(graded, case):
    student, english, chinese = CASES[case][:3]
    zh, en = graded[CHINESE][student], graded[ENGLISH][student]
    english_notes, chinese_notes = notes_cell(en["nb"]), notes_cell(zh["nb"])
    assert english_notes == "**Grader notes**\n\n" + "\n".join(f"- {n}" for n in en["notes"])
    assert english in english_notes
    assert chinese_notes.startswith("**评分说明**\n\n- ") and chinese in chinese_notes
    assert not ENGLISH_WORDS.search(chinese_notes), chinese_notes
    # The instructor's record stays English; the Chinese cell has one line per note and its
    # numbers.
    assert english in " ".join(zh["notes"])
    assert len(chinese_notes.splitlines()) == len(zh["notes"]) + 2
    assert sorted(NUMBER.findall(chinese_notes)) == sorted(NUMBER.findall(" ".join(zh["notes"])))


@pytest.mark.slow
@pytest.mark.parametrize("case", [case for case in CASES if CASES[case][4]])
def test_the_graders_error_outputs_speak_the_submissions_language(graded, case):
    student, cell, ename, english, chinese = CASES[case][0], *CASES[case][3:]
    zh = [o for o in errors(graded[CHINESE][student]["nb"], cell) if o.ename == ename]
    en = [o for o in errors(graded[ENGLISH][student]["nb"], cell) if o.ename == ename]
    assert zh and len(zh) == len(en)
    assert all(o.evalue.startswith(english) and o.traceback[0].startswith(f"{ename}: {o.evalue}")
               for o in en), en
    for output in zh:
        assert output.evalue.startswith(chinese), output.evalue
        assert output.traceback[0].startswith(f"{ename}: {output.evalue}"), output.traceback
        assert not ENGLISH_WORDS.search(output.traceback[0]), output.traceback


@pytest.mark.slow
def test_the_instructors_console_stays_english(graded):
    out = graded["run"].stdout + graded["run"].stderr
    assert out.count("graded 4, skipped 0 already graded, failed 0") == 2, out[-2000:]
    assert not re.search(r"[\u4e00-\u9fff]", out), out[-2000:]


# --- the language of a submission (fast, no sandbox) -------------------------------------------
def _setup_notebook(setup: str, student: str = "x = 1"):
    def cell(maker, source, gid, **flags):
        meta = {"grade_id": gid, "grade": False, "solution": False, "locked": False,
                "schema_version": 3, "task": False, **flags}
        return maker(source, metadata={"nbgrader": meta})
    return nbformat.v4.new_notebook(cells=[
        cell(nbformat.v4.new_code_cell, setup, "setup", locked=True),
        cell(nbformat.v4.new_code_cell, student, "answer", solution=True)])


@pytest.mark.parametrize("setup, student, language", [
    ('from utils.i18n import set_language\nset_language("zh-CN")', "", "zh-CN"),
    ('import utils.i18n\nutils.i18n.set_language("zh-CN")\n%matplotlib inline', "", "zh-CN"),
    ('import utils.i18n\nutils.i18n.set_language("zh-CN")', "", "zh-CN"),
    ('set_language("en")', "", "en"),
    ('set_language("fr")', "", "en"),                   # a language the course does not speak
    ('set_language(LANGUAGE)', "", "en"),               # not a literal: never evaluated
    ("import torch", 'set_language("zh-CN")', "en"),    # the student's cell does not count
])
def test_the_language_is_the_trusted_setups(setup, student, language):
    from utils.grading.student_text import notebook_language
    assert notebook_language(_setup_notebook(setup, student)) == language


def test_every_template_is_translated_and_english_is_unchanged():
    from utils.grading.student_text import FIELDS, TEMPLATES, translate
    samples = {"label": "<cell 7: attend>", "seconds": "8", "count": "3", "mb": "2048",
               "code": "3", "gid": "query_for_weights", "old": "code", "new": "raw",
               "signal": "SIGSEGV", "detail": "JSONDecodeError: line 1 column 2 (char 1)",
               "reason": "the student's code did not finish in time"}
    assert set(samples) == set(FIELDS)
    for template in TEMPLATES:
        text = template.format(**samples)
        assert translate(text, "en") == text
        chinese = translate(text, "zh-CN")
        assert chinese != text and re.search(r"[\u4e00-\u9fff]", chinese), text
        assert "did not finish in time" not in chinese, chinese       # the reason, translated too
        assert sorted(NUMBER.findall(chinese)) == sorted(NUMBER.findall(text)), (text, chinese)
    assert translate("a sentence the grader never writes", "zh-CN") == \
        "a sentence the grader never writes"
    # A student's own TimeoutError("not run: " * 5000) neither breaks grading nor recurses deeply.
    nested = "not run: " * 5000 + "the student's code did not finish in time"
    assert translate(nested, "zh-CN").startswith("未运行：未运行：")


def test_every_template_is_still_what_the_grader_writes():
    """Each fixed piece of a template is text of the grading modules (a changed English sentence
    there would silently stay English in a Chinese notebook)."""
    from utils.grading.student_text import CALLED_YOUR_CODE_LINE, TEMPLATES
    pieces = set()
    for path in (REPO / "utils" / "grading").glob("*.py"):
        if path.name == "student_text.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                pieces.add(node.value)
    text = "\n".join(pieces)
    missing = [piece for template in TEMPLATES + (CALLED_YOUR_CODE_LINE,)
               for piece in re.split(r"\{\w+\}", template) if piece.strip(" :;,()") and
               piece not in text]
    assert not missing, missing
