"""The translation models of lessons 4 and 7, judged on sentences they never saw.

The lesson models (and the book-sized ones the lessons show first) ship under ``assets/models/`` (``python -m utils.shipped_models``). These
tests check the shipped files (checksums, and that an empty cache loads them instead of
training), their quality on the held-out split of the course data (corpus sacreBLEU, alignment
of Bahdanau's attention), and that the regeneration command runs (one epoch each).
"""

import dataclasses
import subprocess
import sys

import pytest
import torch

from utils import shipped_models
from utils.alignment import score_model
from utils.bleu import bleu_by_length
from utils.gold_alignment import load_gold
from utils.model_cache import SHIPPED_DIR, stored_vocabs, vocab_file
from utils.seq2seq import (LESSON_ALIGNED, LESSON_BAHDANAU, LESSON_BOOK_DECODER,
                           LESSON_NO_ATTENTION, LESSON_PAPER_ENCODER, train_or_load_bahdanau)
from utils.training import heldout_bleu, training_pairs
from utils.transformer import LESSON_TRANSFORMER, train_or_load_transformer

from conftest import REPO


@pytest.fixture(autouse=True)
def empty_user_cache(tmp_path, monkeypatch):
    """A cache of our own: the models must come from assets/, not from an earlier run."""
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def bahdanau(course_pairs_file):
    return train_or_load_bahdanau(LESSON_BAHDANAU, course_pairs_file, animate=False)


def test_shipped_files_are_the_presets_with_their_checksums(course_pairs_file):
    from utils.induction import LESSON_INDUCTION
    models = {shipped_models.shipped_file(name, course_pairs_file) for name in shipped_models.presets()}
    expected = ({file.name for file in models} | {vocab_file(file).name for file in models}
                | {LESSON_INDUCTION.file_name()})
    listed = {}
    for line in (SHIPPED_DIR / shipped_models.CHECKSUMS).read_text().splitlines():
        digest, name = line.split()
        listed[name] = digest
    assert set(listed) == expected, "assets/models does not match the presets: regenerate it"
    for name, digest in listed.items():
        file = SHIPPED_DIR / name
        assert file.stat().st_size <= 10 * 2 ** 20, f"{name} is over 10 MB"
        assert shipped_models.sha256(file) == digest, f"{name} does not match SHA256SUMS"


def test_stored_vocabularies_are_those_built_from_the_data(course_pairs_file):
    # Loading a shipped model reads its vocabularies from <kind>-<key>.vocabs.json instead of
    # building them: they must be exactly what building them from the data gives.
    from utils.lm_training import lm_vocab
    from utils.training import training_vocabs
    for name, (kind, config, _, _) in shipped_models.presets().items():
        file = shipped_models.shipped_file(name, course_pairs_file)
        stored = stored_vocabs(file, 1 if kind == "language_model" else 2)
        built = ((lm_vocab(config, course_pairs_file),) if kind == "language_model"
                 else training_vocabs(config, course_pairs_file))
        assert stored is not None, f"{vocab_file(file).name} is missing or unreadable"
        for have, want in zip(stored, built, strict=True):
            assert vars(have) == vars(want), f"{vocab_file(file).name} differs from {name}'s data"


def test_a_model_without_readable_vocabularies_builds_them(tmp_path, monkeypatch, course_pairs_file):
    # A cached model whose .vocabs.json is missing or damaged still loads, with the same
    # vocabularies (built from the data, as before the files existed).
    from utils import model_cache
    from utils.seq2seq import BahdanauConfig
    config = BahdanauConfig()
    shipped = shipped_models.shipped_file("book_bahdanau", course_pairs_file)
    expected = train_or_load_bahdanau(config, course_pairs_file, animate=False)
    assert expected[-1] and expected[-2] == shipped
    for damage in ("missing", "damaged"):
        cache = tmp_path / damage / "models"
        cache.mkdir(parents=True)
        copy = cache / shipped.name
        copy.write_bytes(shipped.read_bytes())
        if damage == "damaged":
            vocab_file(copy).write_text('{"vocabs": [{"idx_to_token": 3}]}')
        assert model_cache.stored_vocabs(copy, 2) is None
        monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / damage))
        model, src, tgt, _, file, from_cache = train_or_load_bahdanau(config, course_pairs_file,
                                                                      animate=False)
        assert from_cache and file == copy
        assert vars(src) == vars(expected[1]) and vars(tgt) == vars(expected[2])
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                     expected[0].state_dict().values()))


@pytest.mark.slow
def test_bahdanau_loads_from_assets_and_generalises(bahdanau, course_pairs_file):
    model, src_vocab, tgt_vocab, result, file, from_cache = bahdanau
    assert from_cache and file.parent == SHIPPED_DIR
    score, details = heldout_bleu(model, src_vocab, tgt_vocab, LESSON_BAHDANAU.num_steps,
                                  path=course_pairs_file)
    assert len(details["sources"]) > 1000
    assert score.score >= 20, f"held-out corpus BLEU {score.score:.1f} < 20"


@pytest.mark.slow
def test_guided_model_meets_the_alignment_target(course_pairs_file):
    """The explorer's model (guided alignment): the course's target (issue 26) is top-1 >= 0.80
    and AER <= 0.25 on the gold set with held-out BLEU >= 28."""
    model, src_vocab, tgt_vocab, _, file, from_cache = train_or_load_bahdanau(
        LESSON_ALIGNED, course_pairs_file, animate=False)
    assert from_cache and file.parent == SHIPPED_DIR
    score = score_model(model, src_vocab, tgt_vocab, load_gold())
    bleu, _ = heldout_bleu(model, src_vocab, tgt_vocab, LESSON_ALIGNED.num_steps,
                           path=course_pairs_file)
    assert bleu.score >= 28, f"held-out corpus BLEU {bleu.score:.1f} < 28"
    assert score.top1 >= 0.80 and score.aer <= 0.25, score.describe()


@pytest.mark.slow
def test_bahdanau_attention_aligns_words_of_the_gold_set(bahdanau, course_pairs_file):
    """The shipped main model's alignment on the hand-aligned gold set, and its held-out BLEU.

    Its attention learns alone (no guidance) and reaches 0.68 and 0.34 (README, "Does attention
    align words?"), below the course's target that the guided model meets; these bars guard
    what it does: a retrained or changed model that aligns worse fails here.
    """
    model, src_vocab, tgt_vocab, *_ = bahdanau
    gold = load_gold()
    score = score_model(model, src_vocab, tgt_vocab, gold)
    assert score.words > 400
    bleu, _ = heldout_bleu(model, src_vocab, tgt_vocab, LESSON_BAHDANAU.num_steps,
                           path=course_pairs_file)
    assert bleu.score >= 28, f"held-out corpus BLEU {bleu.score:.1f} < 28"
    assert score.top1 >= 0.65 and score.aer <= 0.37, score.describe()


@pytest.mark.slow
def test_bahdanau_aligns_better_than_the_books_architecture(bahdanau, course_pairs_file):
    """The main model's maps beat the book's architecture and the paper's encoder alone."""
    model, src_vocab, tgt_vocab, *_ = bahdanau
    gold = load_gold()
    main = score_model(model, src_vocab, tgt_vocab, gold)
    for config in (LESSON_BOOK_DECODER, LESSON_PAPER_ENCODER):
        other, other_src, other_tgt, _, file, from_cache = train_or_load_bahdanau(
            config, course_pairs_file, animate=False)
        assert from_cache and file.parent == SHIPPED_DIR
        score = score_model(other, other_src, other_tgt, gold)
        assert main.top1 > score.top1 + 0.1 and main.aer < score.aer - 0.1, (
            f"main {main.describe()} vs {score.describe()}")


@pytest.mark.slow
def test_transformer_loads_from_assets_and_generalises(course_pairs_file):
    model, src_vocab, tgt_vocab, _, file, from_cache = train_or_load_transformer(
        LESSON_TRANSFORMER, course_pairs_file, animate=False)
    assert from_cache and file.parent == SHIPPED_DIR
    score, _ = heldout_bleu(model, src_vocab, tgt_vocab, LESSON_TRANSFORMER.num_steps,
                            path=course_pairs_file)
    assert score.score >= 25, f"held-out corpus BLEU {score.score:.1f} < 25"


@pytest.mark.slow
def test_no_attention_baseline_is_scored_by_source_length(course_pairs_file):
    model, src_vocab, tgt_vocab, _, file, from_cache = train_or_load_bahdanau(
        LESSON_NO_ATTENTION, course_pairs_file, animate=False)
    assert from_cache and file.parent == SHIPPED_DIR
    _, details = heldout_bleu(model, src_vocab, tgt_vocab, LESSON_NO_ATTENTION.num_steps,
                              path=course_pairs_file)
    rows = bleu_by_length(details["sources"], details["predictions"], details["references"],
                          [1, 4, 5, 6, 7])
    assert [label for label, _, _ in rows][:2] == ["1-3", "4"]
    assert sum(count for _, count, _ in rows) == len(details["sources"])


def test_training_pairs_hold_no_heldout_sentence(course_pairs_file):
    from utils.heldout import is_held_out
    for config in (LESSON_BAHDANAU, LESSON_TRANSFORMER):
        assert not any(is_held_out(english) for english, _ in training_pairs(config,
                                                                             course_pairs_file))


@pytest.mark.slow
def test_regeneration_command_runs_for_one_epoch(tmp_path):
    # One epoch on the first 100 pairs: the command's whole path, every preset trained and
    # written with its checksum, in seconds.
    result = subprocess.run([sys.executable, "-m", "utils.shipped_models", "all", "--epochs", "1",
                             "--num-examples", "100", "--out", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(tmp_path.glob("*.pt"))
    # With one epoch, two presets can coincide (the book-sized Transformer and the causal demo
    # differ only in their epochs): one file per distinct one-epoch setting.
    from utils.model_cache import settings_key
    quick = {"num_epochs": 1, "num_examples": 100}
    expected = {f"{kind}-{settings_key(kind, dataclasses.replace(config, **quick), None, versions)}.pt"
                for kind, config, _, versions in shipped_models.presets().values()}
    assert {file.name for file in files} == expected
    sums = (tmp_path / shipped_models.CHECKSUMS).read_text()
    for file in files:
        assert f"{shipped_models.sha256(file)}  {file.name}" in sums
    assert "for 1 epochs" in result.stdout


def test_bleu_by_length_buckets_and_bad_edges():
    rows = bleu_by_length(["a b", "a b c d", "a b c d e f g h"], ["w x y z", "p q r s", "u"],
                          ["w x y z", "p q r s t", "v"], [1, 4, 8])
    assert [(label, count) for label, count, _ in rows] == [("1-3", 1), ("4-7", 1), ("8+", 1)]
    assert rows[0][2] == pytest.approx(100.0) and rows[2][2] == pytest.approx(0.0)
    assert 0 < rows[1][2] < 100                      # one word short: the brevity penalty
    with pytest.raises(ValueError, match="increasing"):
        bleu_by_length(["a"], ["a"], ["a"], [4, 2])


@pytest.mark.parametrize("which", ["bahdanau", "no_attention", "transformer"])
def test_batched_decoding_equals_one_sentence_at_a_time(which, course_pairs_file):
    from utils.heldout import heldout_pairs
    from utils.training import greedy_translate, greedy_translate_many

    if which == "transformer":
        config = LESSON_TRANSFORMER
        model, src_vocab, tgt_vocab, *_ = train_or_load_transformer(config, course_pairs_file,
                                                                    animate=False)
    else:
        config = LESSON_BAHDANAU if which == "bahdanau" else LESSON_NO_ATTENTION
        model, src_vocab, tgt_vocab, *_ = train_or_load_bahdanau(config, course_pairs_file,
                                                                 animate=False)
    sentences = list(dict.fromkeys(e for e, _ in heldout_pairs(course_pairs_file)))[:60]
    sentences += ["xyzzy plugh", "i think that we should all go home now , don't you ?"]
    batched = greedy_translate_many(model, sentences, src_vocab, tgt_vocab, config.num_steps,
                                    batch_size=16)
    assert batched[-2] is None                              # no known word
    assert batched[-1].dropped                              # cut to num_steps - 1 words
    for sentence, many in zip(sentences[:-2] + sentences[-1:], batched[:-2] + batched[-1:]):
        one = greedy_translate(model, sentence, src_vocab, tgt_vocab, config.num_steps,
                               truncate=True)
        assert (many.tokens, many.ended, many.source_tokens) == (one.tokens, one.ended,
                                                                 one.source_tokens), sentence
        assert len(many.step_weights) == len(one.step_weights)
        if one.attention is None:
            assert many.attention is None
        else:
            torch.testing.assert_close(many.attention, one.attention, atol=1e-5, rtol=1e-4)
    assert any(t.ended for t in batched[:-2]) and len({len(t.tokens) for t in batched[:-2]}) > 2
