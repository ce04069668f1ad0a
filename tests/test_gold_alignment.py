"""The hand-aligned gold set (assets/alignment/gold.txt) and its loader (utils.gold_alignment)."""

import collections
import os
import re

import pytest
import torch

from utils.alignment import PUNCTUATION, is_word, score_maps, score_model
from utils.data import Vocab, preprocess, read_pairs
from utils.gold_alignment import GOLD_FILE, TAGS, GoldPair, load_gold, parse_gold
from utils.seq2seq import LESSON_BAHDANAU, BahdanauConfig, build_bahdanau
from utils.training import training_vocabs

MAX_TOKENS = 9          # the lesson's num_steps is 12 with <eos>: room to spare
MIN_PAIRS = 85
# Phenomena the set must show, each in several pairs.
REQUIRED_TAGS = ("adjective-after-noun", "negation", "elision", "one-to-many", "unlinked-article",
                 "est-ce-que", "monotone", "possessive", "pronoun-reordering")
ARTICLES = {"le", "la", "les", "un", "une", "des", "du", "de"}
OBJECT_PRONOUNS = {"him", "her", "it", "me", "us", "them", "you"}


@pytest.fixture(scope="module")
def gold() -> list:
    return load_gold()


@pytest.fixture(scope="module")
def course_pairs() -> list:
    """The course's (English, French) pairs, preprocessed, from the default data file."""
    return read_pairs()


@pytest.fixture(scope="module")
def lesson_vocabs():
    return training_vocabs(LESSON_BAHDANAU)


def sure_targets(pair: GoldPair, e: int) -> list:
    return sorted(f for ee, f in pair.sure if ee == e)


# ------------------------------------------------------------------------------ the gold set

def test_the_set_is_large_and_tagged(gold):
    assert GOLD_FILE.is_file()
    assert len(gold) >= MIN_PAIRS
    assert all(pair.tags for pair in gold), [pair.id for pair in gold if not pair.tags]
    counts = collections.Counter(tag for pair in gold for tag in pair.tags)
    for tag in REQUIRED_TAGS:
        assert counts[tag] >= 3, f"only {counts[tag]} pairs tagged {tag}"


def test_the_readme_counts_match_the_file(gold):
    readme = (GOLD_FILE.parent / "README.md").read_text(encoding="utf-8")
    table = {tag: int(n) for tag, n in re.findall(r"^\| `([a-z-]+)` \| (\d+) \|", readme, re.M)}
    assert table == collections.Counter(tag for pair in gold for tag in pair.tags)
    assert set(table) == set(TAGS)
    assert f"holds {len(gold)} short" in readme and f"more than {len(gold)}." in readme


def test_sentences_are_preprocessed_and_short(gold):
    for pair in gold:
        for tokens in (pair.english, pair.french):
            sentence = " ".join(tokens)
            assert preprocess(sentence) == sentence, pair.id
            assert len(tokens) <= MAX_TOKENS, (pair.id, sentence)


def test_no_sentence_is_in_the_course_data(gold, course_pairs):
    sentences = {s for english, french in course_pairs for s in (english, french)}
    found = [(pair.id, s) for pair in gold
             for s in (" ".join(pair.english), " ".join(pair.french)) if s in sentences]
    assert not found, f"gold sentences found in the course data: {found}"


def test_every_token_is_in_the_lesson_vocabularies(gold, lesson_vocabs):
    src_vocab, tgt_vocab = lesson_vocabs
    missing_en = {t for pair in gold for t in pair.english if t not in src_vocab.token_to_idx}
    missing_fr = {t for pair in gold for t in pair.french if t not in tgt_vocab.token_to_idx}
    assert not missing_en, f"English tokens outside the lesson's source vocabulary: {missing_en}"
    assert not missing_fr, f"French tokens outside the lesson's target vocabulary: {missing_fr}"


def test_sentences_are_distinct(gold):
    english = collections.Counter(pair.english for pair in gold)
    assert [s for s, n in english.items() if n > 1] == []


def test_punctuation_links_only_to_punctuation(gold):
    for pair in gold:
        if pair.english[-1] in PUNCTUATION and pair.french[-1] in PUNCTUATION:
            assert (len(pair.english) - 1, len(pair.french) - 1) in pair.sure, pair.id
        for e, f in pair.possible:
            assert (pair.english[e] in PUNCTUATION) == (pair.french[f] in PUNCTUATION), \
                (pair.id, pair.english[e], pair.french[f])


def test_ne_and_pas_link_sure_to_the_english_negation(gold):
    for pair in gold:
        for f, token in enumerate(pair.french):
            if token in ("ne", "pas") or token.startswith("n'"):
                linked = [pair.english[e] for e, ff in pair.sure if ff == f]
                assert any(w == "not" or w.endswith("n't") for w in linked), (pair.id, token)


def test_est_ce_que_links_are_possible_only(gold):
    for pair in gold:
        if "est-ce" in pair.french:
            f = pair.french.index("est-ce")
            assert not any(ff == f for _, ff in pair.sure), pair.id
            assert {e for e, ff in pair.possible if ff == f} == {0}, pair.id   # the auxiliary
            if pair.french[f + 1] == "que":
                assert not any(ff == f + 1 for _, ff in pair.sure), pair.id


def test_tags_match_the_sentences(gold):
    for pair in gold:
        tags, fr = set(pair.tags), pair.french
        elided = any("'" in t and t != "aujourd'hui" for t in fr)    # one word, not an elision
        assert ("elision" in tags) == elided, pair.id
        assert ("negation" in tags) == ("pas" in fr), pair.id
        assert ("est-ce-que" in tags) == ("est-ce" in fr), pair.id
        sure = sorted(pair.sure)
        crossing = any(e1 < e2 and f1 > f2 for e1, f1 in sure for e2, f2 in sure)
        if "monotone" in tags:
            assert not crossing, pair.id
        if "adjective-after-noun" in tags:
            assert crossing, pair.id
        if "one-to-many" in tags:
            assert any(len(sure_targets(pair, e)) >= 2 for e in range(len(pair.english))), pair.id
        if "many-to-one" in tags:
            sources = collections.Counter(f for _, f in pair.sure)
            assert max(sources.values()) >= 2, pair.id
        if "unlinked-article" in tags:
            assert any(t in ARTICLES for f, t in enumerate(fr) if f not in pair.linked_french), \
                pair.id
        if "pronoun-reordering" in tags:     # the pronoun's French comes before the verb's
            assert any(pair.english[e] in OBJECT_PRONOUNS and sure_targets(pair, e)
                       and sure_targets(pair, e - 1)
                       and min(sure_targets(pair, e)) <= min(sure_targets(pair, e - 1))
                       for e in range(1, len(pair.english))), pair.id


# ------------------------------------------------------------------------------ measures on the set

def one_link_maps(gold, shift: int = 0) -> list:
    """One-hot maps on one gold link per French word (a sure one if any), columns rolled by
    ``shift``; the <eos> step attends to <eos>."""
    maps = []
    for pair in gold:
        weights = torch.zeros(len(pair.french) + 1, len(pair.english) + 1)  # (French + 1, En + 1)
        weights[:, -1] = 1.0
        for f in pair.linked_french:
            candidates = sorted(e for e, ff in pair.sure if ff == f) or \
                sorted(e for e, ff in pair.possible if ff == f)
            weights[f] = 0.0
            weights[f, candidates[0]] = 1.0
        maps.append(torch.roll(weights, shifts=shift, dims=1))
    return maps


def test_gold_links_score_perfectly_and_shifted_ones_do_not(gold):
    perfect = score_maps(one_link_maps(gold), gold)
    # One link per French word cannot reach the second sure link of j'aime (i, like): AER > 0.
    assert perfect.top1 == 1.0 and 0 < perfect.aer < 0.05 and perfect.sharpness == 1.0
    assert perfect.words == sum(len([f for f in p.linked_french if is_word(p.french[f])])
                                for p in gold)
    shifted = score_maps(one_link_maps(gold, shift=1), gold)
    assert shifted.top1 <= 0.1 and shifted.aer >= 0.9
    assert score_maps(one_link_maps(gold, shift=1), gold, as_drawn=True).top1 <= 0.1


def test_an_untrained_model_scores_on_the_gold_set(gold):
    torch.manual_seed(0)
    src_vocab = Vocab([t for pair in gold for t in pair.english])
    tgt_vocab = Vocab([t for pair in gold for t in pair.french])
    model = build_bahdanau(BahdanauConfig(embed_size=8, num_hiddens=8, num_layers=1),
                           src_vocab, tgt_vocab)
    score = score_model(model, src_vocab, tgt_vocab, gold)
    assert score.pairs == len(gold) and score.words == score.predicted > 0
    assert 0 <= score.top1 <= 1 and 0 <= score.aer <= 1 and 0 < score.sharpness <= 1
    assert "top-1" in score.describe()


# ------------------------------------------------------------------------------ the loader

VALID = """# a comment
id: 1
tags: monotone
en: i see .
fr: je vois .
sure: 1-1 2-2 3-3
possible:

# another pair
id: 2
tags: elision unlinked-article
en: i like tea .
fr: j'aime le thé .
sure: 1-1 3-3 4-4
possible: 2-1
"""


def test_parse_valid_text():
    first, second = parse_gold(VALID)
    assert first == GoldPair(1, ("monotone",), ("i", "see", "."), ("je", "vois", "."),
                             frozenset({(0, 0), (1, 1), (2, 2)}),
                             frozenset({(0, 0), (1, 1), (2, 2)}))
    assert second.sure == {(0, 0), (2, 2), (3, 3)}
    assert second.possible == second.sure | {(1, 0)}
    assert second.linked_french == {0, 2, 3}           # "le" is unlinked


def test_load_gold_reads_a_file_and_rereads_it_when_changed(tmp_path):
    path = tmp_path / "gold.txt"
    path.write_text(VALID, encoding="utf-8")
    assert [p.id for p in load_gold(path)] == [1, 2]
    path.write_text(VALID.replace("id: 2", "id: 7"), encoding="utf-8")
    os.utime(path, ns=(1, 10**18))                     # a new mtime, whatever the clock says
    assert [p.id for p in load_gold(path)] == [1, 7]
    with pytest.raises(FileNotFoundError, match="not found"):
        load_gold(tmp_path / "missing.txt")


@pytest.mark.parametrize("old, new, line, message", [
    ("tags: monotone", "tag: monotone", 3, "unknown field 'tag'"),
    ("tags: monotone", "tags: monotnoe", 3, "unknown tag 'monotnoe'"),
    ("en: i see .\n", "", 2, "no 'en:' line"),
    ("fr: je vois .\n", "", 2, "no 'fr:' line"),
    ("sure: 1-1 2-2 3-3", "sure: 1-1 2:2 3-3", 6, "'2:2' is not english_position-"),
    ("sure: 1-1 2-2 3-3", "sure: 1-1 2-2 3-4", 6, "French position 4 is out of range "
                                                  r"\(the French sentence has 3 tokens"),
    ("sure: 1-1 2-2 3-3", "sure: 0-1 2-2 3-3", 6, "English position 0 is out of range"),
    ("sure: 1-1 2-2 3-3", "sure: 1-1 2-2 2-2", 6, "listed twice"),
    ("id: 2", "id: 1", 10, "duplicate id 1"),
    ("id: 2", "id: two", 10, "'two' is not a positive integer"),
    ("possible: 2-1", "possible: 1-1", 15, "link 1-1 is both sure and possible"),
    ("en: i see .", "en: i see.", 4, "not preprocessed; write it as 'i see .'"),
    ("fr: je vois .", "fr: Je vois .", 5, "not preprocessed; write it as 'je vois .'"),
    ("fr: je vois .", "fr: je  vois .", 5, "not preprocessed"),
    ("en: i see .", "en:", 4, "the en sentence is empty"),
    ("en: i see .", "en i see .", 4, "expected 'field: value'"),
    ("en: i see .", "en: i see .\nen: i look .", 5, "'en' appears twice"),
])
def test_malformed_files_are_rejected_with_file_and_line(tmp_path, old, new, line, message):
    assert old in VALID
    path = tmp_path / "gold.txt"
    path.write_text(VALID.replace(old, new, 1), encoding="utf-8")
    expected = f"^{re.escape(str(path))}, line {line}: .*{message}"
    with pytest.raises(ValueError, match=expected) as error:
        load_gold(path)
    assert "\n" not in str(error.value)


def test_every_tag_has_a_name_for_tables_in_each_language(monkeypatch):
    """English tables show the tag itself; the Chinese ones its translation with the tag beside
    it (so a reader can find it in the data file and the prose)."""
    from utils.gold_alignment import tag_name
    monkeypatch.setattr("utils.i18n._language", "en")
    assert [tag_name(tag) for tag in TAGS] == list(TAGS)
    monkeypatch.setattr("utils.i18n._language", "zh-CN")
    for tag in TAGS:
        name = tag_name(tag)
        assert name != tag and tag in name and re.search(r"[\u4e00-\u9fff]", name), (tag, name)
