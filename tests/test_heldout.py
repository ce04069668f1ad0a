"""Tests of utils.heldout: the held-out split is stable, per English sentence, and disjoint."""

import hashlib
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from utils import heldout
from utils.data import read_pairs
from utils.heldout import HELDOUT_FRACTION, is_held_out, normalise, split_pairs

TARGET = 0.10          # the documented share of held-out sentences (not read from the module)

# Sentences of the course file and the side the rule puts them on (SALT "attention-course/
# heldout/v1", 10 %). A change of the rule, the salt or the normalisation moves some of them.
# The book's four test sentences are training sentences; these four are held out.
KNOWN = {"go .": False, "i lost .": False, "he's calm .": False, "i'm home .": False,
         "i fell .": True, "thanks .": True, "i'm hit !": True, "abandon ship !": True}


@pytest.fixture(scope="module")
def course_pairs(course_pairs_file):
    return read_pairs(course_pairs_file, None)


# --------------------------------------------------------------------------- the rule

def test_the_rule_is_sha256_of_salt_and_normalised_sentence():
    sentence = "Go.\u202fNow!"
    digest = hashlib.sha256(f"{heldout.SALT}\ngo . now !".encode()).digest()
    assert HELDOUT_FRACTION == TARGET
    expected = int.from_bytes(digest[:8], "big") < TARGET * 2 ** 64
    assert heldout.heldout_hash(sentence) == int.from_bytes(digest[:8], "big")
    assert is_held_out(sentence) is expected


def test_known_sentences_keep_their_side():
    assert {sentence: is_held_out(sentence) for sentence in KNOWN} == KNOWN


def test_stable_across_processes_with_different_hash_seeds(course_pairs):
    """Python's hash() changes with PYTHONHASHSEED; the split must not."""
    sentences = sorted({english for english, _ in course_pairs})[:300]
    here = [is_held_out(s) for s in sentences]
    code = ("import sys, json; from utils.heldout import is_held_out; "
            "print(json.dumps([is_held_out(s) for s in json.load(sys.stdin)]))")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(sentences),
                             capture_output=True, text=True, check=True, cwd=REPO,
                             env={"PYTHONHASHSEED": seed, "PATH": ""})
        assert json.loads(out.stdout) == here
    assert any(here) and not all(here)        # the sample holds both sides


@pytest.mark.parametrize("raw, preprocessed", [
    ("Go.", "go ."),
    ("I'm home.", "i'm home ."),
    ("Really?\u00a0", "really ?"),
    ("Who  are   you?", "who are you ?"),
    ("Recule\u2009!", "recule !"),
])
def test_raw_and_preprocessed_forms_agree(raw, preprocessed):
    assert normalise(raw) == preprocessed
    assert is_held_out(raw) == is_held_out(preprocessed)
    assert heldout.heldout_hash(raw) == heldout.heldout_hash(preprocessed)


def test_different_sentences_get_different_hashes():
    assert heldout.heldout_hash("go .") != heldout.heldout_hash("go !")


# --------------------------------------------------------------------------- splitting pairs

def test_duplicates_with_another_translation_go_together():
    sentence = next(s for s in (f"sentence {i} ." for i in range(1000)) if is_held_out(s))
    kept = next(s for s in (f"sentence {i} ." for i in range(1000)) if not is_held_out(s))
    pairs = [(sentence, "a ."), (kept, "b ."), (sentence.upper(), "c ."), (sentence, "d .")]
    train, held = split_pairs(pairs)
    assert held == [(sentence, "a ."), (sentence.upper(), "c ."), (sentence, "d .")]
    assert train == [(kept, "b .")]


def test_split_of_the_course_file_is_disjoint_and_complete(course_pairs):
    train, held = split_pairs(course_pairs)
    assert len(train) + len(held) == len(course_pairs)
    assert sorted(train + held) == sorted(course_pairs)
    train_sentences = {normalise(e) for e, _ in train}
    held_sentences = {normalise(e) for e, _ in held}
    assert train_sentences and held_sentences
    assert not train_sentences & held_sentences
    # Each pair sits on the side of its English sentence.
    held_set = set(held)
    for english, french in course_pairs:
        assert ((english, french) in held_set) == is_held_out(english)


def test_the_course_file_has_duplicates_and_they_stay_on_one_side(course_pairs):
    by_sentence = {}
    for english, french in course_pairs:
        by_sentence.setdefault(english, []).append(french)
    duplicated = {e for e, fr in by_sentence.items() if len(fr) > 1}
    assert len(duplicated) > 1000                    # the file has many: the test means something
    _, held = split_pairs(course_pairs)
    held_duplicated = {e for e, _ in held} & duplicated
    assert held_duplicated
    for english in held_duplicated:
        assert sum(e == english for e, _ in held) == len(by_sentence[english])


@pytest.mark.parametrize("stop", [600, 3000, 9000])
def test_any_subset_trains_on_no_held_out_sentence(course_pairs, stop):
    _, held_all = split_pairs(course_pairs)
    held_sentences = {e for e, _ in held_all}
    train, held = split_pairs(course_pairs[:stop])
    assert not {e for e, _ in train} & held_sentences
    assert set(held) <= set(held_all)
    # A shuffled or reversed subset splits the same way.
    train_rev, held_rev = split_pairs(list(reversed(course_pairs[:stop])))
    assert sorted(train_rev) == sorted(train) and sorted(held_rev) == sorted(held)


def test_fraction_is_close_to_the_target(course_pairs):
    sentences = {normalise(e) for e, _ in course_pairs}
    share = sum(map(is_held_out, sentences)) / len(sentences)
    # ~11,000 distinct sentences: one standard deviation is ~0.003 around 0.10.
    assert abs(share - TARGET) < 0.015, share
    _, held = split_pairs(course_pairs)
    assert 0.07 < len(held) / len(course_pairs) < 0.13


def test_fraction_on_synthetic_sentences():
    sentences = [f"synthetic sentence number {i} ." for i in range(20000)]
    share = sum(map(is_held_out, sentences)) / len(sentences)
    assert abs(share - TARGET) < 0.01, share         # ~5 standard deviations


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad, message", [
    (None, "must be a str"),
    (b"go .", "must be a str"),
    ("", "has no words"),
    ("   \u202f", "has no words"),
])
def test_is_held_out_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        is_held_out(bad)


@pytest.mark.parametrize("bad, message", [
    ("go .\tva !", "iterable of \\(English, French\\) tuples"),
    (42, "iterable of \\(English, French\\) tuples"),
    ([("go .", "va !", "extra")], "pair 0 .* must be an \\(English, French\\) tuple"),
    ([("go .", "va !"), "go ."], "pair 1 .* must be an \\(English, French\\) tuple"),
    ([("go .", None)], "pair 0 holds str and NoneType; both sides must be str"),
    ([("", "va !")], "pair 0 has an empty English side"),
    ([("go .", "  ")], "pair 0 has an empty French side"),
])
def test_split_pairs_bad_input(bad, message):
    with pytest.raises(ValueError, match=message) as info:
        split_pairs(bad)
    assert "\n" not in str(info.value)                         # one line


def test_split_pairs_accepts_any_iterable_and_empty_input():
    assert split_pairs([]) == ([], [])
    pairs = [("go .", "va !"), ("i lost .", "j'ai perdu .")]
    assert split_pairs(iter(pairs)) == split_pairs(pairs)
