"""utils.stored_evaluations: lesson 4's stored evaluations are current, and equal a fresh run.

The first test recomputes every evaluation lesson 4 reads from assets/evaluations/ (held-out
translations of five shipped models, their teacher-forced maps of the gold set, IBM Model 1's
maps) and compares; the lesson itself then reads them twice in CI (English and Chinese) without
recomputing. The others check the mechanism on a small untrained model: what the key sees, that
a stored result is read back, and that a damaged file is computed again.
"""

import gzip
import json
import warnings

import pytest
import torch

from utils import stored_evaluations as stored
from utils.data import Vocab
from utils.gold_alignment import load_gold
from utils.seq2seq import BahdanauConfig, build_bahdanau
from utils.training import heldout_bleu as computed_heldout_bleu


def _same(stored_result, fresh, description):
    if "maps" in fresh:
        assert stored_result["dtype"] == fresh["dtype"], description
        assert len(stored_result["maps"]) == len(fresh["maps"]), description
        for kept, new in zip(stored_result["maps"], fresh["maps"]):
            kept, new = torch.tensor(kept), torch.tensor(new)
            assert kept.shape == new.shape, description
            # a few ulps apart at most (kernels differ); the argmax, which the scores read, agrees
            assert torch.allclose(kept, new, rtol=0, atol=1e-6), description
            assert torch.equal(kept.argmax(dim=-1), new.argmax(dim=-1)), description
    else:
        assert stored_result == fresh, description


def test_the_stored_evaluations_are_current_and_equal_a_fresh_run():
    stems = set()
    for description, stem, compute in stored.lesson_evaluations():
        file = stored.STORED_DIR / f"{stem}.json.gz"
        assert file.is_file(), (f"no stored evaluation {file.name} for {description}: the code, "
                                f"data or models changed; run python -m utils.stored_evaluations")
        stems.add(stem)
        with gzip.open(file, "rt", encoding="utf-8") as f:
            saved = json.load(f)
        assert saved["key"] == stem
        _same(saved["result"], compute(), description)
    stale = {file.name for file in stored.STORED_DIR.glob("*.json.gz")} - {f"{s}.json.gz"
                                                                          for s in stems}
    assert not stale, f"files no lesson reads: {sorted(stale)}; run python -m utils.stored_evaluations"


@pytest.fixture
def small(tmp_path, monkeypatch):
    """A small untrained model, its vocabularies, six gold pairs, and empty stores."""
    monkeypatch.setattr(stored, "STORED_DIR", tmp_path / "assets")
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))
    gold = load_gold()[:6]
    src = Vocab([token for pair in gold for token in pair.english])
    tgt = Vocab([token for pair in gold for token in pair.french])
    torch.manual_seed(0)
    model = build_bahdanau(BahdanauConfig(embed_size=8, num_hiddens=8, num_layers=1), src, tgt)
    return model.eval(), src, tgt, gold


def test_weights_digest_sees_every_weight(small):
    model, *_ = small
    before = stored.weights_digest(model)
    assert stored.weights_digest(model) == before
    with torch.no_grad():
        model.decoder.dense.bias[3] += 1e-6
    assert stored.weights_digest(model) != before


def test_gold_maps_are_computed_once_then_read(small, monkeypatch):
    from utils.alignment import teacher_forced_attention

    model, src, tgt, gold = small
    expected = [teacher_forced_attention(model, src, tgt, pair.english, pair.french)
                for pair in gold]
    first = stored.gold_maps(model, src, tgt, gold)
    assert all(torch.equal(a, b) for a, b in zip(first, expected))
    assert len(list(stored.evaluation_cache_dir().glob("gold-maps-*.json.gz"))) == 1

    def fail(*args, **kwargs):
        raise AssertionError("computed again")

    monkeypatch.setattr("utils.alignment.teacher_forced_attention", fail)
    again = stored.gold_maps(model, src, tgt, gold)                  # read, not computed
    assert all(torch.equal(a, b) for a, b in zip(again, expected))
    with torch.no_grad():
        model.decoder.dense.bias[3] += 1.0                           # other weights: other key
    with pytest.raises(AssertionError, match="computed again"):
        stored.gold_maps(model, src, tgt, gold)
    with pytest.raises(AssertionError, match="computed again"):
        stored.gold_maps(model, src, tgt, gold[:5])                  # other pairs: other key


def test_heldout_bleu_equals_the_library_and_keeps_the_translations(small, tmp_path):
    from utils.heldout import is_held_out

    model, src, tgt, _gold = small
    data = tmp_path / "pairs.txt"
    pairs = [("go .", "va !"), ("i'm home .", "je suis chez moi ."), ("i fell .", "je suis tombé ."),
             ("thanks .", "merci !"), ("we're not angry .", "nous ne sommes pas en colère ."),
             ("she has a black cat .", "elle a un chat noir .")]
    assert any(is_held_out(e) for e, _ in pairs), "the test needs a held-out sentence"
    data.write_text("".join(f"{e}\t{f}\n" for e, f in pairs), encoding="utf-8")
    expected_score, expected = computed_heldout_bleu(model, src, tgt, 8, path=data)
    score, details = stored.heldout_bleu(model, src, tgt, 8, path=data)
    assert details == expected and score.score == expected_score.score
    files = list(stored.evaluation_cache_dir().glob("heldout-*.json.gz"))
    assert len(files) == 1
    again_score, again = stored.heldout_bleu(model, src, tgt, 8, path=data)
    assert again == expected and again_score.score == expected_score.score
    # another num_steps or another data file is another evaluation
    stored.heldout_bleu(model, src, tgt, 9, path=data)
    data.write_text("".join(f"{e}\t{f}\n" for e, f in pairs[:-1]), encoding="utf-8")
    stored.heldout_bleu(model, src, tgt, 8, path=data)
    assert len(list(stored.evaluation_cache_dir().glob("heldout-*.json.gz"))) == 3


def test_a_damaged_stored_file_is_computed_again_with_a_warning(small):
    model, src, tgt, gold = small
    expected = stored.gold_maps(model, src, tgt, gold)
    (file,) = stored.evaluation_cache_dir().glob("gold-maps-*.json.gz")
    file.write_bytes(b"not gzip")
    with pytest.warns(UserWarning, match="ignoring the stored evaluation"):
        again = stored.gold_maps(model, src, tgt, gold)
    assert all(torch.equal(a, b) for a, b in zip(again, expected))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                               # rewritten: read cleanly
        stored.gold_maps(model, src, tgt, gold)


def test_store_false_neither_reads_nor_writes(small):
    model, src, tgt, gold = small
    stored.gold_maps(model, src, tgt, gold, store=False)
    assert not stored.evaluation_cache_dir().exists() or not list(
        stored.evaluation_cache_dir().glob("*.json.gz"))


def test_bad_inputs_get_one_line_errors(small):
    model, src, tgt, gold = small
    with pytest.raises(ValueError, match="model must be a torch.nn.Module, got str"):
        stored.gold_maps("model", src, tgt, gold)
    with pytest.raises(ValueError, match="src_vocab must be a utils.data.Vocab, got dict"):
        stored.gold_maps(model, {}, tgt, gold)
    with pytest.raises(ValueError, match="gold_pairs must be a non-empty list of GoldPair"):
        stored.gold_maps(model, src, tgt, [])
    with pytest.raises(ValueError, match="gold_pairs must be a non-empty list of GoldPair"):
        stored.model1_gold_maps(BahdanauConfig(), [("i", "je")])
