"""What the exercise checks print to a student speaks the notebook's language (utils.grading).

A Rubric run in Chinese prints Chinese with the same numbers as in English; in English it prints
exactly what it printed before the messages went through ``_``.
"""

import re

import pytest
import torch

from utils.grading import checks
from utils.i18n import current_language, set_language

NUMBERS = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture
def language():
    """Set a language for one test and give the previous one back afterwards."""
    before = current_language()
    yield set_language
    set_language(before)


def run_rubric(capsys, exercise="Exercise 2"):
    """A rubric with one passed check, one failed check and one check whose code raised."""
    rubric = checks.Rubric(exercise, 3, kind="variant")
    with rubric.check("weights sum to 1", 1):
        checks.check_rows_sum_to_one(torch.tensor([[0.5, 0.5]]))
    with rubric.check("shape", 1.5):
        checks.check_shape(torch.zeros(2, 4, 3), (2, 3, 4), "(batch, queries, keys)", "weights")
    with rubric.check("values", 0.5):
        raise NotImplementedError
    earned = rubric.result()
    return earned, capsys.readouterr().out


ENGLISH_REPORT = (
    "Exercise 2: 1 of 3 checks passed (1 of 3 points)\n"
    "  passed (1 pt) weights sum to 1\n"
    "  FAILED (1.5 pt) shape\n"
    "      -> weights: expected shape (2, 3, 4) = (batch, queries, keys), got (2, 4, 3)\n"
    "  FAILED (0.5 pt) values\n"
    "      -> not answered yet (your function still raises NotImplementedError)\n")


def test_english_rubric_is_unchanged(language, capsys):
    language("en")
    earned, out = run_rubric(capsys)
    assert earned == 1 and out == ENGLISH_REPORT


def test_chinese_rubric_speaks_chinese_with_the_same_numbers(language, capsys):
    language("en")
    _, english = run_rubric(capsys)
    language("zh-CN")
    earned, chinese = run_rubric(capsys, exercise="练习 2")
    assert earned == 1
    assert chinese.splitlines()[0] == "练习 2：3 项检查通过 1 项（得 1 分，满分 3 分）"
    assert "未通过（1.5 分）shape" in chinese and "通过（1 分）weights sum to 1" in chinese
    assert "形状应为 (2, 3, 4)" in chinese and "尚未作答" in chinese
    assert not re.search(r"checks passed|FAILED|expected shape|not answered", chinese)
    assert sorted(NUMBERS.findall(chinese)) == sorted(NUMBERS.findall(english))


def test_chinese_prediction_messages(language, capsys):
    language("zh-CN")
    rubric = checks.Rubric("练习 1", 1, kind="predict")
    with rubric.check("(a) entropy", 1):
        checks.prediction("entropy", {"entropy": 0.5})
    rubric.result()
    out = capsys.readouterr().out
    assert "练习 1：你的 1 个预测都已提交，格式正确。" in out and "已提交：(a) entropy" in out
    checks.reveal("entropy(weights) = 0.693")
    assert capsys.readouterr().out == "自己验证：entropy(weights) = 0.693\n"
    with pytest.raises(AssertionError, match=r"^entropy：偏差 \+0\.1（真实值的 25%）；容差为 0\.01$"):
        checks.judge_prediction("entropy", 0.5, 0.4, atol=0.01)
    with pytest.raises(AssertionError, match="^entropy 还没有赋值"):
        checks.prediction("entropy", {"entropy": ...})


def test_english_prediction_messages_are_unchanged(language, capsys):
    language("en")
    checks.reveal("x")
    assert capsys.readouterr().out == "see for yourself: x\n"
    with pytest.raises(AssertionError) as error:
        checks.judge_prediction("entropy", 0.5, 0.4, atol=0.01)
    assert str(error.value) == ("entropy: off by +0.1 (25% of the true value); "
                                "the tolerance is 0.01")
    with pytest.raises(AssertionError) as error:
        checks.judge_prediction("shape", (2, 3), (2, 3, 4))
    assert str(error.value) == "shape: not the shape: 2 axes where the shape has 3"


def test_not_allowed_line_in_both_languages(language):
    language("en")
    assert checks.not_allowed_line(("utils.attention",), ("soft_address", "masked_softmax")) == (
        "**Not allowed** (an answer that uses one of these gets 0 points for this exercise): "
        "the modules `utils.attention`; the functions `soft_address`, `masked_softmax`.")
    language("zh-CN")
    assert checks.not_allowed_line(("utils.attention",), ("soft_address", "masked_softmax")) == (
        "**不允许使用**（答案用到其中任何一项，本练习得 0 分）：模块 `utils.attention`；"
        "函数 `soft_address`、`masked_softmax`。")


def test_chinese_diagnoses_and_hints(language):
    language("zh-CN")
    with pytest.raises(AssertionError, match="^你的函数：你的代码抛出了 RuntimeError: .*——矩阵乘法的内侧大小不一致"):
        checks.call(lambda: torch.zeros(2, 3) @ torch.zeros(2, 3))
    with pytest.raises(AssertionError, match=r"^scores：请转置键（它抛出了 RuntimeError"):
        checks.call(lambda: torch.zeros(2, 3) @ torch.zeros(2, 3), what="scores",
                    hints={"cannot be multiplied": "请转置键"})
    with pytest.raises(AssertionError, match="^权重 沿键轴的和必须为 1；你的结果中，查询 0 的和为 0.5$"):
        checks.check_rows_sum_to_one(torch.tensor([[0.25, 0.25]]))
    with pytest.raises(AssertionError, match="^out：没有 softmax$"):
        checks.diagnose(torch.ones(2), torch.zeros(2), {"没有 softmax": torch.ones(2)}, "out")
