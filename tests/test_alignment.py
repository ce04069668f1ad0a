"""Alignment measures (utils.alignment): gold-set scores by hand, older statistics against scipy."""

import math

import pytest
import torch
from scipy import stats
from torch import nn

from utils.alignment import (PUNCTUATION, argmax_targets, eos_weight, link_offsets,
                             monotonicity, predicted_links, ranks, score_by_tag, score_maps,
                             spearman, summarize, teacher_forced_attention)
from utils.data import Vocab
from utils.gold_alignment import parse_gold
from utils.seq2seq import BahdanauConfig, build_bahdanau
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


# ------------------------------------------------------------------------------ gold-set measures
# (utils.alignment.score_maps and friends; the gold file itself: tests/test_gold_alignment.py)

GOLD = parse_gold("""
id: 1
tags: monotone
en: the cat is on the table .
fr: le chat est sur la table .
sure: 1-1 2-2 3-3 4-4 5-5 6-6 7-7

# j'ai: sure with "i", possible with "read" (the tense)
id: 2
tags: adjective-after-noun elision
en: i read an interesting book .
fr: j'ai lu un livre intéressant .
sure: 1-1 2-2 3-3 4-5 5-4 6-6
possible: 2-1

# "le" has no English word: never scored
id: 3
tags: adjective-after-noun elision unlinked-article
en: i like black coffee .
fr: j'aime le café noir .
sure: 1-1 2-1 3-4 4-3 5-5
""")
DIAGONAL, READ, COFFEE = GOLD


def one_hot(pair, targets, eos_row=True) -> torch.Tensor:
    """(French [+ 1], English + 1) map: French token f puts all its weight on targets[f]."""
    weights = torch.zeros(len(pair.french) + eos_row, len(pair.english) + 1)
    weights[:, -1] = 1.0                                  # <eos> unless a target is given
    for f, e in targets.items():
        weights[f] = 0.0
        weights[f, e] = 1.0
    return weights


def test_diagonal_map_on_a_diagonal_pair_is_perfect():
    eye = torch.eye(8)                                    # 7 tokens + <eos> on both sides
    for weights in (eye, eye[:7], eye[:, :7], eye[:7, :7]):   # <eos> row and column optional
        score = score_maps([weights], [DIAGONAL])
        assert (score.top1, score.aer, score.sharpness) == (1.0, 0.0, 1.0)
        assert (score.words, score.pairs) == (6, 1)      # "." is not a word


def test_a_map_shifted_by_one_column_scores_low_though_it_is_just_as_monotone():
    eye = torch.eye(8)
    shifted = torch.roll(eye, shifts=1, dims=1)          # French word i attends English i + 1
    for as_drawn in (False, True):
        score = score_maps([shifted], [DIAGONAL], as_drawn=as_drawn)
        assert score.top1 <= 0.2 and score.aer >= 0.8
    # the older monotonicity sees no difference: both maps are perfectly monotone
    source, words = list(DIAGONAL.english) + ["<eos>"], list(DIAGONAL.french)
    assert monotonicity(translation(eye.tolist(), words, source)) == pytest.approx(1.0)
    assert monotonicity(translation(shifted.tolist(), words, source)) == pytest.approx(1.0)


def test_weight_on_eos_scores_zero_as_drawn_and_by_its_word_weights_otherwise():
    weights = 0.9 * one_hot(DIAGONAL, {}) + 0.1 * torch.eye(8)   # most weight on <eos>
    as_drawn = score_maps([weights], [DIAGONAL], as_drawn=True)
    assert (as_drawn.top1, as_drawn.aer) == (0.0, 1.0)
    assert {e for e, _ in predicted_links(weights, DIAGONAL.english, DIAGONAL.french,
                                          as_drawn=True)} == {7}   # the <eos> column
    words_only = score_maps([weights], [DIAGONAL])
    assert (words_only.top1, words_only.aer, words_only.sharpness) == (1.0, 0.0, 1.0)
    all_on_eos = score_maps([one_hot(DIAGONAL, {})], [DIAGONAL])   # no weight on any word:
    assert all_on_eos.sharpness == pytest.approx(1 / 6)          # as if uniform


def test_possible_links_count_for_top1_but_aer_tells_sure_from_possible():
    right = {0: 0, 1: 1, 2: 2, 3: 4, 4: 3, 5: 5}                 # j'ai -> i (sure)
    possible = {**right, 0: 1}                                   # j'ai -> read (possible)
    assert score_maps([one_hot(READ, right)], [READ]).aer == 0.0
    score = score_maps([one_hot(READ, possible)], [READ])
    # |A| = 5, |S| = 5, |A∩S| = 4, |A∩P| = 5: AER = 1 - 9/10
    assert score.top1 == 1.0 and score.aer == pytest.approx(0.1)
    assert (score.predicted, score.sure, score.predicted_sure, score.predicted_possible) == \
        (5, 5, 4, 5)


def test_unlinked_words_are_not_scored_and_aer_is_pooled_over_the_set():
    # j'aime -> like (sure), le -> black (not scored), café -> coffee, noir -> coffee (wrong)
    coffee = one_hot(COFFEE, {0: 1, 1: 2, 2: 3, 3: 3, 4: 4})
    score = score_maps([coffee], [COFFEE])
    # scored: j'aime, café, noir; S = {i-j'aime, like-j'aime, coffee-café, black-noir}
    # A = {like-j'aime, coffee-café, coffee-noir}: |A∩S| = |A∩P| = 2, AER = 1 - 4/7
    assert score.words == 3 and score.top1 == pytest.approx(2 / 3)
    assert score.aer == pytest.approx(3 / 7)
    read = one_hot(READ, {0: 1, 1: 1, 2: 2, 3: 4, 4: 3, 5: 5})
    both = score_maps([read, coffee], [READ, COFFEE])
    assert both.top1 == pytest.approx(7 / 8)                     # micro-averaged over words
    assert both.aer == pytest.approx(1 - (4 + 5 + 2 + 2) / (5 + 3 + 5 + 4))   # pooled, 4/17


def test_as_drawn_may_link_to_punctuation_without_it_ever_being_gold():
    weights = one_hot(DIAGONAL, {f: f for f in range(7)})
    weights[5] = torch.tensor([0, 0, 0, 0, 0, 0.4, 0.6, 0])     # "table" mostly on "."
    assert (5, 5) in predicted_links(weights, DIAGONAL.english, DIAGONAL.french)
    drawn = predicted_links(weights, DIAGONAL.english, DIAGONAL.french, as_drawn=True)
    assert (6, 5) in drawn and all(DIAGONAL.french[f] not in PUNCTUATION for _, f in drawn)
    assert score_maps([weights], [DIAGONAL], as_drawn=True).top1 == pytest.approx(5 / 6)
    assert score_maps([weights], [DIAGONAL]).sharpness == 1.0   # "." is not an English word


def test_sharpness_of_one_hot_and_uniform_maps():
    assert score_maps([torch.eye(8)], [DIAGONAL]).sharpness == 1.0
    uniform = torch.full((8, 8), 1 / 8)
    assert score_maps([uniform], [DIAGONAL]).sharpness == pytest.approx(1 / 6)   # 6 words


def test_maps_of_the_wrong_shape_are_rejected():
    with pytest.raises(ValueError, match=r"^pair 1: the map has shape \(5, 8\), expected "
                                         r"\(7 or 8, 8 or 7\)"):
        score_maps([torch.eye(8)[:5]], [DIAGONAL])
    with pytest.raises(ValueError, match=r"pair 2: the map has shape \(7, 9\)"):
        score_maps([torch.eye(8), torch.zeros(7, 9)], [DIAGONAL, READ])
    with pytest.raises(ValueError, match="2 maps for 1 gold pairs"):
        score_maps([torch.eye(8)] * 2, [DIAGONAL])
    with pytest.raises(ValueError, match="NaN"):
        score_maps([torch.full((8, 8), float("nan"))], [DIAGONAL])


def test_teacher_forced_attention_of_a_tiny_untrained_model():
    torch.manual_seed(0)
    src_vocab = Vocab([t for pair in GOLD for t in pair.english])
    tgt_vocab = Vocab([t for pair in GOLD for t in pair.french])
    model = build_bahdanau(BahdanauConfig(embed_size=8, num_hiddens=8, num_layers=1),
                           src_vocab, tgt_vocab)
    model.train()
    weights = teacher_forced_attention(model, src_vocab, tgt_vocab, READ.english, READ.french)
    assert weights.shape == (len(READ.french) + 1, len(READ.english) + 1)
    assert torch.allclose(weights.sum(dim=1), torch.ones(len(READ.french) + 1))
    assert model.training                                        # its mode is given back
    assert score_maps([weights], [READ]).words == 5
    with pytest.raises(ValueError, match="list of tokens"):
        teacher_forced_attention(model, src_vocab, tgt_vocab, "i read", ["j'ai"])


def test_teacher_forced_attention_needs_attention_weights():
    class NoAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = nn.Linear(1, 1)

        def forward(self, enc_X, dec_X, enc_valid_len):
            return None

    vocab = Vocab(["a"])
    with pytest.raises(ValueError, match="no attention_weights"):
        teacher_forced_attention(NoAttention(), vocab, vocab, ["a"], ["a"])


# ------------------------------------------------------------ per tag, offsets, argmax targets

def test_score_by_tag_scores_each_tags_pairs_together():
    maps = [torch.eye(8), one_hot(READ, {0: 1, 1: 1, 2: 2, 3: 4, 4: 3, 5: 5}),
            one_hot(COFFEE, {0: 1, 1: 2, 2: 3, 3: 3, 4: 4})]
    by_tag = score_by_tag(maps, GOLD)
    assert list(by_tag) == sorted({"monotone", "adjective-after-noun", "elision",
                                   "unlinked-article"})
    assert by_tag["monotone"] == score_maps(maps[:1], GOLD[:1])
    assert by_tag["adjective-after-noun"] == score_maps(maps[1:], GOLD[1:])
    assert by_tag["unlinked-article"].top1 == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="2 maps for 3 gold pairs"):
        score_by_tag(maps[:2], GOLD)


def test_link_offsets_see_a_shifted_map_look_one_word_ahead():
    eye = torch.eye(8)
    assert link_offsets([eye], [DIAGONAL]) == {0: 6}
    ahead = torch.roll(eye, shifts=1, dims=1)            # French word i attends English i + 1
    # "table" (5) would attend "." (6), not a word: its argmax over words falls back to 0
    offsets = link_offsets([ahead], [DIAGONAL])
    assert offsets[1] == 5 and sum(offsets.values()) == 6
    behind = torch.roll(eye, shifts=-1, dims=1)
    assert link_offsets([behind], [DIAGONAL])[-1] == 5
    # unlinked "le" of "j'aime le café noir" is not counted; noir -> coffee is 1 to the right
    coffee = one_hot(COFFEE, {0: 1, 1: 2, 2: 3, 3: 3, 4: 4})
    assert link_offsets([coffee], [COFFEE]) == {0: 2, 1: 1}


def test_argmax_targets_count_where_the_drawn_maximum_falls():
    weights = one_hot(DIAGONAL, {0: 0, 1: 1, 2: 3, 3: 6})  # 4, 5 on <eos>; 3 on "."
    counts = argmax_targets([weights], [DIAGONAL])
    assert counts == {"gold link": 2, "other English word": 1, "punctuation": 1, "<eos>": 2}
    no_eos_column = torch.eye(7)                         # a map without an <eos> column
    assert argmax_targets([no_eos_column], [DIAGONAL])["gold link"] == 6
    # "table" (5) is the last scored word: on <eos>
    assert argmax_targets([weights], [DIAGONAL], words="last") == {
        "gold link": 0, "other English word": 0, "punctuation": 0, "<eos>": 1}
    assert argmax_targets([weights], [DIAGONAL], words="others") == {
        "gold link": 2, "other English word": 1, "punctuation": 1, "<eos>": 1}
    with pytest.raises(ValueError, match="words must be"):
        argmax_targets([weights], [DIAGONAL], words="first")
