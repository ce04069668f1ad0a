"""The model modules' error messages speak the notebook's language (issue 36).

``set_language("zh-CN")`` makes a bad call raise in Chinese, with the same numbers, shapes and
identifiers as the English; ``set_language("en")`` gives the English back, byte for byte (the
executed English lessons show these texts). Translating them leaves the models' fingerprints as
they are (``tests/test_code_fingerprint.py``, ``tests/test_translation_models.py``).
"""

import numpy as np
import pytest
import torch

from utils.alignment import predicted_links, score_maps
from utils.bleu import bleu, clipped_precision
from utils.data import Vocab
from utils.data_files import find_data_file
from utils.gold_alignment import parse_gold
from utils.heldout import split_pairs
from utils.i18n import ENVIRONMENT_VARIABLE, set_language
from utils.ibm_model1 import train_model1
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, check_top_p, generate
from utils.lm_training import LMConfig, lm_sentences
from utils.masking import masked_softmax
from utils.multihead import check_num_heads
from utils.plotting import plot, show_heatmaps
from utils.positional import PositionalEncoding, check_encoding_dim
from utils.reproducibility import set_seed
from utils.seq2seq import BidirectionalEncoder
from utils.training import encode_source, train_seq2seq
from utils.transformer import teacher_forced_attention
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
    # Issue 36's second round: the alignment, BLEU, held-out, IBM Model 1, plotting and seeding
    # helpers (lessons 1-8 and the exercises call them).
    "a BLEU order longer than the prediction (lesson 4)": (
        lambda: clipped_precision(["a"], ["a", "b"], 3),
        "the prediction has 1 tokens: no 3-grams to count; use n <= 1",
        "预测只有 1 个词元：没有 3 元语法可数；请使用 n <= 1"),
    "a BLEU k below 1 (lesson 4)": (
        lambda: bleu("a b", "a b", k=0),
        "k (the longest n-gram) must be a positive int, got 0",
        "k（最长的 n 元语法）必须是正整数，得到的是 0"),
    "a pair without French (held-out split)": (
        lambda: split_pairs([("go .", "va !"), ("run !", " ")]),
        "pair 1 has an empty French side; remove it before splitting",
        "句对 1 的法语一侧是空的；请在划分之前删掉它"),
    "IBM Model 1 with no iterations (lesson 4)": (
        lambda: train_model1([(["go", "."], ["va", "!"])], iterations=0),
        "iterations must be an int >= 1, got 0",
        "iterations 必须是 >= 1 的整数，得到的是 0"),
    "a map of the wrong shape (lesson 4, exercise 1)": (
        lambda: predicted_links(torch.zeros(5, 5), ["go", "."], ["va", "!"]),
        "the map has shape (5, 5), expected (2 or 3, 3 or 2): one row per French token (+ the "
        "<eos> step), one column per English token (+ <eos>)",
        "注意力图的形状是 (5, 5)，应为 (2 或 3, 3 或 2)：每个法语词元一行（可再加上预测 <eos> 的那一步），"
        "每个英语词元一列（可再加上 <eos>）"),
    "a gold pair's map with NaN (the pair's id is in the template)": (
        lambda: score_maps([torch.full((3, 3), float("nan"))],
                           parse_gold("id: 25\nen: go .\nfr: va !\nsure: 1-1 2-2\n")),
        "pair 25: the map has NaN or infinite weights; score a finite map",
        "句对 25：注意力图中有 NaN 或无穷大的权重；请对只含有限值的注意力图计分"),
    "a gold link out of range (exercise 6's parse_gold)": (
        lambda: parse_gold("id: 1\nen: go .\nfr: va !\nsure: 5-1\n", source="gold.txt"),
        "gold.txt, line 4: sure link 5-1: English position 5 is out of range (the English "
        "sentence has 2 tokens, 1..2)",
        "gold.txt，第 4 行：sure 链接 5-1：英语位置 5 超出了范围（英语句子有 2 个词元，位置为 1..2）"),
    "reversed colour limits (heat maps)": (
        lambda: show_heatmaps(np.ones((1, 1, 2, 2)), "keys", "queries", vmin=1, vmax=0.5),
        "colour limits are reversed: vmin=1 > vmax=0.5",
        "颜色范围颠倒了：vmin=1 > vmax=0.5"),
    "one row title too many (heat maps)": (
        lambda: show_heatmaps(np.ones((1, 2, 3, 4)), "keys", "queries", row_titles=["a", "b"]),
        "row_titles has 2 entries but the matrices need 1; pass one label per grid row",
        "row_titles 有 2 项，但矩阵需要 1 项；请为网格的每一行传入一个标签"),
    "a series with one point too many (plot)": (
        lambda: plot([1, 2, 3], [4, 5]),
        "series 0: X has 3 points but Y has 2",
        "数据系列 0：X 有 3 个点，而 Y 有 2 个"),
    "a negative seed": (
        lambda: set_seed(-1),
        "seed must be a non-negative int, got -1; pass e.g. set_seed(0)",
        "seed 必须是非负整数，得到的是 -1；例如传入 set_seed(0)"),
    "a decoder-only model without its config (lesson 8)": (
        lambda: DecoderOnlyLM("small"),
        "DecoderOnlyLM takes a DecoderOnlyConfig, got str; build one with "
        "DecoderOnlyConfig(vocab_size=...)",
        "DecoderOnlyLM 接受的是 DecoderOnlyConfig，得到的是 str；请用 DecoderOnlyConfig(vocab_size=...) 构建一个"),
    # Four messages of functions whose own variable ``_`` hides the short name (``gettext``).
    "a generation past the model's max_len (lesson 8)": (
        lambda: generate(DecoderOnlyLM(DecoderOnlyConfig(vocab_size=10, max_len=8)),
                         torch.tensor([[1, 2, 3]]), 10),
        "3 prompt tokens + 10 new ones need max_len >= 12, the model has 8; generate fewer "
        "tokens or build a larger max_len",
        "3 个提示词元 + 10 个新词元需要 max_len >= 12，而模型的 max_len 是 8；请少生成一些词元，"
        "或构建 max_len 更大的模型"),
    "the paper's encoder without source lengths (lesson 4)": (
        lambda: BidirectionalEncoder(10, 4, 4, 1)(torch.zeros(1, 3, dtype=torch.long)),
        "the bidirectional encoder needs valid_len (the source lengths)",
        "双向编码器需要 valid_len（源序列的有效长度）"),
    "training data without target tokens (lesson 4)": (
        lambda: train_seq2seq(torch.nn.Linear(2, 2), [], 0.01, 1, Vocab([["va"]]),
                              animate=False, show_progress=False),
        "data_iter yielded no target tokens; check the data loader",
        "data_iter 没有给出任何目标词元；请检查数据加载器"),
    "an empty reference target (lesson 7)": (
        lambda: teacher_forced_attention(None, "go .", "", Vocab([["go", "."]]), None, 10),
        "the target must have 1 to 9 words, got 0; pass a reference translation such as "
        "\"il est calme .\"",
        "目标句子必须有 1 到 9 个词，得到的是 0 个；请传入一个参考译文，例如 \"il est calme .\""),
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


def test_a_stored_model_that_cannot_be_read_is_reported_in_chinese(speak, tmp_path, monkeypatch):
    """``utils.model_cache`` warns, in the notebook's language, before it retrains."""
    import warnings

    from utils import model_cache
    monkeypatch.setattr(model_cache, "model_cache_dir", lambda: tmp_path)
    monkeypatch.setattr(model_cache, "settings_key", lambda *args, **kwargs: "k")
    (tmp_path / "toy-k.pt").write_bytes(b"not a model")

    def train(config, path, **kwargs):
        raise RuntimeError("trained")

    speak("zh-CN")
    with warnings.catch_warnings(record=True) as caught, pytest.raises(RuntimeError):
        warnings.simplefilter("always")
        model_cache.train_or_load("toy", None, vocabs=lambda config, path: (), build=None,
                                  train=train, versions={}, result_type=None)
    said = [str(w.message) for w in caught]
    assert said and said[0].startswith(f"忽略已存储的模型 {tmp_path / 'toy-k.pt'}（"), said
    assert said[0].endswith("）；将重新训练")


def test_the_language_models_sentence_messages_in_chinese(speak, tmp_path):
    """``lm_sentences``: a sentence too long for the model is left out with a warning, and data
    with nothing but held-out sentences is refused; both in the language set."""
    from utils.heldout import is_held_out

    long_sentence = "we went to the station and then we went home"         # 10 words + "."
    data = tmp_path / "pairs.txt"
    data.write_text(f"{long_sentence} .\tnous sommes partis .\ngo .\tva !\n", encoding="utf-8")
    speak("zh-CN")
    with pytest.warns(UserWarning) as caught:
        lm_sentences(LMConfig(max_len=8), data)
    assert [str(w.message) for w in caught] == [
        "有 1 个句子超过 max_len - 1 = 7 个词，已被略去；要保留它们，请用更大的 max_len 构建 "
        "LMConfig(max_len=...)"]
    held_out = next(f"sentence number {n} ." for n in range(1000)
                    if is_held_out(f"sentence number {n} ."))
    data.write_text(f"{held_out}\tphrase numéro .\n", encoding="utf-8")
    assert message(lambda: lm_sentences(LMConfig(), data)) == (
        "没有训练句子：数据中的英语句子全都是留出句子；请使用更多句子对（num_examples=None）")
    speak("en")
    assert message(lambda: lm_sentences(LMConfig(), data)) == (
        "no training sentences: the data holds no English sentence that is not held out; use "
        "more pairs (num_examples=None)")
