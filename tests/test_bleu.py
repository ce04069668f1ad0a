"""The book's one-sentence BLEU (parity with d2l 1.0.3's ``bleu``) and the sacrebleu corpus BLEU."""

import math
import random

import pytest

from d2l_oracle import load_d2l
from utils.bleu import bleu, clipped_precision, corpus_bleu


@pytest.fixture(scope="module")
def d2l():
    return load_d2l()


def _random_sentence(rng: random.Random, words, low: int, high: int) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_matches_d2l_on_random_sentences(d2l, k):
    rng = random.Random(k)
    words = ["je", "suis", "chez", "moi", ".", "il", "est"]   # few words: many partial matches
    for _ in range(200):
        pred = _random_sentence(rng, words, 1, 7)
        label = _random_sentence(rng, words, 1, 7)
        expected = d2l.bleu(pred, label, k)
        assert bleu(pred, label, k) == pytest.approx(expected, abs=1e-12), (pred, label)


def test_book_examples_and_hand_computed_values():
    assert bleu("je suis chez moi .", "je suis chez moi .") == 1.0
    assert bleu("va !", "je suis chez moi .") == 0.0                     # no word in common
    # Too short: all n-grams match, brevity penalty exp(1 - 4/2).
    assert bleu("a b", "a b c d") == pytest.approx(math.exp(-1))
    # Clipping: "the" occurs once in the label, so 1 of 3 unigrams counts.
    assert bleu("the the the", "the cat", k=1) == pytest.approx((1 / 3) ** 0.5)
    assert clipped_precision("the the the".split(), "the cat".split(), 1) == pytest.approx(1 / 3)
    # Swapping two words keeps the unigrams but breaks 2 of 4 bigrams: (2/4) ** (1/4).
    assert bleu("suis je chez moi .", "je suis chez moi .") == pytest.approx(0.5 ** 0.25)


def test_a_prediction_shorter_than_k_uses_the_orders_it_has():
    assert bleu("bonjour", "bonjour", k=2) == 1.0                         # as d2l 1.0.3


def test_bad_input():
    assert bleu("", "va !") == 0.0                                        # nothing predicted
    with pytest.raises(ValueError, match="label is empty"):
        bleu("va !", "   ")
    with pytest.raises(ValueError, match="positive int"):
        bleu("va !", "va !", k=0)
    with pytest.raises(ValueError, match="strings of space-separated tokens"):
        bleu(["va", "!"], "va !")
    with pytest.raises(ValueError, match="no 2-grams"):
        clipped_precision(["va"], ["va"], 2)


def test_corpus_bleu_perfect_partial_and_multiple_references():
    refs = ["je suis chez moi .", "il est calme ."]
    assert corpus_bleu(refs, refs).score == pytest.approx(100.0)
    partial = corpus_bleu(["je suis chez toi .", "il est calme ."], refs).score
    assert 0 < partial < 100
    # A prediction matching its *second* reference scores as well as an exact match.
    multi = corpus_bleu(["je suis à la maison ."],
                        [["je suis chez moi .", "je suis à la maison ."]])
    assert multi.score == pytest.approx(100.0)
    # Sentences with one and with two references in one corpus.
    mixed = corpus_bleu(["va !", "je suis à la maison ."],
                        ["va !", ["je suis chez moi .", "je suis à la maison ."]])
    assert mixed.score == pytest.approx(100.0)


def test_corpus_bleu_bad_input():
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one sentence"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="at least one reference"):
        corpus_bleu(["a"], [[]])
