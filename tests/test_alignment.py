"""Alignment statistics of translations (utils.alignment), checked against scipy and by hand."""

import math

import pytest
import torch
from scipy import stats

from utils.alignment import eos_weight, monotonicity, ranks, spearman, summarize
from utils.training import Translation


def translation(rows, words, source=("a", "b", "c", "<eos>"), ended=True):
    attention = torch.tensor(rows, dtype=torch.float32)
    return Translation(list(source), list(words), " ".join(words), attention, [], [], [], ended)


def test_ranks_share_ties():
    assert ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]


@pytest.mark.parametrize("x, y", [([0, 1, 2, 3], [0, 2, 1, 3]), ([0, 1, 2, 3, 4], [3, 3, 0, 1, 4]),
                                  ([1, 2, 3], [3, 2, 1]), ([5, 1, 4, 4, 2], [1, 2, 3, 4, 5])])
def test_spearman_equals_scipy(x, y):
    assert math.isclose(spearman(x, y), stats.spearmanr(x, y).statistic, abs_tol=1e-12)


def test_spearman_constant_and_bad_input():
    assert spearman([0, 1, 2], [4, 4, 4]) is None
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        spearman([1], [1])


def test_monotone_translation():
    # three words, each on the next source word, then <eos> on <eos>
    t = translation([[.9, .05, .03, .02], [.1, .8, .05, .05], [0, .1, .8, .1], [0, 0, 0, 1]],
                    ["x", "y", "z"])
    assert monotonicity(t) == pytest.approx(1.0)
    assert eos_weight(t) == pytest.approx((.02 + .05 + .1) / 3)   # the <eos> step is left out


def test_swapped_and_short_outputs():
    swapped = translation([[.1, .8, 0, .1], [.8, .1, 0, .1], [0, 0, .9, .1], [0, 0, 0, 1]],
                          ["x", "y", "z"])
    assert monotonicity(swapped) == pytest.approx(0.5)
    short = translation([[.5, .5, 0, 0], [0, 0, 0, 1]], ["x"])
    assert monotonicity(short) is None


def test_summary_counts_constant_argmax_as_zero():
    on_eos = translation([[0, 0, .1, .9]] * 3 + [[0, 0, 0, 1]], ["x", "y", "z"])
    monotone = translation([[.9, .05, .03, .02], [.1, .8, .05, .05], [0, .1, .8, .1],
                            [0, 0, 0, 1]], ["x", "y", "z"])
    summary = summarize([on_eos, monotone])
    assert summary.monotonicity_count == 2 and summary.constant_argmax == 1
    assert summary.mean_monotonicity == pytest.approx(0.5)
    assert summary.mean_eos_weight == pytest.approx((0.9 + (.02 + .05 + .1) / 3) / 2)
    assert "count as 0" in summary.describe()


def test_no_attention_is_a_clear_error():
    t = Translation(["a", "<eos>"], ["x"], "x", None, [], [], [], True)
    with pytest.raises(ValueError, match="no attention weights"):
        eos_weight(t)
