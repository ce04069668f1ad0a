"""``utils.training_summary`` says what ``TrainResult.summary`` says, in the notebook's language."""

import re

from utils.training import TrainResult
from utils.training_summary import training_summary

RESULT = TrainResult(loss=0.4104, book_loss=0.04104, tokens_per_sec=2439.4, seconds=563.46,
                     epochs=15, losses=[1.0, 0.4104])


def test_in_english_it_is_the_results_own_summary(monkeypatch):
    monkeypatch.setattr("utils.i18n._language", "en")
    assert training_summary(RESULT) == RESULT.summary()


def test_in_chinese_it_keeps_the_numbers_and_no_english_words(monkeypatch):
    monkeypatch.setattr("utils.i18n._language", "zh-CN")
    line = training_summary(RESULT)
    assert sorted(re.findall(r"[\d.]+", line)) == sorted(re.findall(r"[\d.]+", RESULT.summary()))
    assert not re.search(r"[A-Za-z]{3,}", line), line
