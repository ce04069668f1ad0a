"""The model modules' error messages speak the notebook's language (issue 36).

``set_language("zh-CN")`` makes a bad call raise in Chinese, with the same numbers, shapes and
identifiers as the English; ``set_language("en")`` gives the English back, byte for byte (the
executed English lessons show these texts). Translating them leaves the models' fingerprints as
they are (``tests/test_code_fingerprint.py``, ``tests/test_translation_models.py``).
"""

import pytest
import torch

from utils.data import Vocab
from utils.data_files import find_data_file
from utils.i18n import ENVIRONMENT_VARIABLE, set_language
from utils.language_model import check_top_p
from utils.masking import masked_softmax
from utils.multihead import check_num_heads
from utils.positional import PositionalEncoding, check_encoding_dim
from utils.training import encode_source
from utils.validation import check_positive_int


@pytest.fixture
def speak(monkeypatch):
    """``speak(language)`` sets the language for the rest of the test; English afterwards."""
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "en")
    yield set_language
    set_language("en")


def message(call, error=ValueError) -> str:
    with pytest.raises(error) as raised:
        call()
    return str(raised.value)


CASES = {
    "valid_lens of the wrong shape (lesson 3)": (
        lambda: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3, 1])),
        "valid_lens has shape (3,) but scores have shape (2, 2, 4); pass shape (2,) for one "
        "length per sequence or (2, 2) for one length per query",
        "valid_lens 的形状是 (3,)，而评分的形状是 (2, 2, 4)；每个序列一个有效长度请传入形状 (2,)，"
        "每个查询一个有效长度请传入 (2, 2)"),
    "a valid length beyond the keys (lessons 3, 5)": (
        lambda: masked_softmax(torch.rand(2, 2, 4), torch.tensor([5, 1])),
        "valid_lens 5 is longer than the key axis (4 keys; scores have shape (2, 2, 4)); "
        "lengths must lie in 0..4",
        "有效长度 valid_lens 5 超过了键轴的长度（4 个键；评分的形状是 (2, 2, 4)）；"
        "长度必须在 0..4 之间"),
    "heads that do not divide the width (lessons 5, 7, 8)": (
        lambda: check_num_heads(100, 3),
        "num_heads=3 does not divide num_hiddens=100; choose one of its divisors: "
        "[1, 2, 4, 5, 10, 20, 25, 50, 100]",
        "num_heads=3 不能整除 num_hiddens=100；请从它的因数中选一个：[1, 2, 4, 5, 10, 20, 25, 50, 100]"),
    "an odd encoding dimension (lesson 6)": (
        lambda: check_encoding_dim(31),
        "encoding dimension must be a positive even integer (one sin and one cos column per "
        "frequency), got 31; use e.g. 32",
        "位置编码的维度必须是正偶数（每个频率对应一列 sin 和一列 cos），得到的是 31；例如可用 32"),
    "a sequence longer than max_len (lesson 6)": (
        lambda: PositionalEncoding(8, max_len=50)(torch.zeros(1, 60, 8)),
        "sequence of 60 steps is longer than max_len=50; build PositionalEncoding(..., "
        "max_len=60) or more",
        "序列有 60 个时间步，超过了 max_len=50；请构建 PositionalEncoding(..., max_len=60) 或更大的 max_len"),
    "top_p outside (0, 1] (lesson 8)": (
        lambda: check_top_p(1.5),
        "top_p must be None or lie in (0, 1], got 1.5; use e.g. top_p=0.9, or None to keep "
        "every token",
        "top_p 必须是 None 或位于 (0, 1] 内，得到的是 1.5；例如用 top_p=0.9，或用 None 保留所有词元"),
    "an empty sentence (lessons 4, 7)": (
        lambda: encode_source("", Vocab([["go", "."]]), 10),
        "the sentence is empty; type an English sentence such as \"i'm home .\"",
        "句子是空的；请输入一个英语句子，例如 \"i'm home .\""),
    "an integer below its minimum": (
        lambda: check_positive_int("num_steps", 1, minimum=2),
        "num_steps must be an integer >= 2, got 1",
        "num_steps 必须是 >= 2 的整数，得到的是 1"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_error_speaks_the_language_set(case, speak):
    call, english, chinese = CASES[case]
    speak("zh-CN")
    assert message(call) == chinese
    speak("en")
    assert message(call) == english


def test_unknown_words_and_a_missing_data_file_in_chinese(speak, tmp_path):
    vocab = Vocab([["go", "."]])
    speak("zh-CN")
    said = message(lambda: encode_source("xyzzy plugh", vocab, 10))
    assert said.startswith("词 ['xyzzy', 'plugh'] 都不在源词表中（共 ") and "i'm home ." in said
    missing = tmp_path / "no-such-file.txt"
    said = message(lambda: find_data_file(missing), FileNotFoundError)
    assert said.startswith(f"参数 path 指向的 {missing} 不存在；") and "assets/data/fra-eng.txt" in said
    speak("en")
    said = message(lambda: find_data_file(missing), FileNotFoundError)
    assert said == (f"the path argument points at {missing}, which does not exist; fix the path "
                    f"or leave it unset to use the course's assets/data/fra-eng.txt")
