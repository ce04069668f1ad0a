"""Lesson 8's language model (utils.lm_training) and the shipped induction run (utils.induction):
the data split, batches, the bigram baseline, perplexity, the cache, the shipped files."""

import math

import pytest
import torch

from utils.data import BOS, EOS, PAD, Vocab
from utils.heldout import is_held_out
from utils.induction import (LESSON_INDUCTION, load_run, repeated_block_batch, run_settings,
                             save_run, train_or_load_induction, train_run)
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM
from utils.lm_training import (LESSON_LM, BigramModel, LMConfig, continue_prompt,
                               encode_prompt, encode_sentences, lm_batches, lm_sentences,
                               perplexity, prompt_tokens, token_losses, train_language_model,
                               train_or_load_language_model)
from utils.model_cache import SHIPPED_DIR


@pytest.fixture(autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def sentences(course_pairs_file):
    return lm_sentences(LESSON_LM, course_pairs_file)


def test_sentences_are_distinct_and_split_by_the_heldout_rule(sentences):
    train = [" ".join(s) for s in sentences.train]
    heldout = [" ".join(s) for s in sentences.heldout]
    assert len(set(train)) == len(train) and len(set(heldout)) == len(heldout)
    assert not set(train) & set(heldout)
    assert not any(is_held_out(s) for s in train)
    assert all(is_held_out(s) for s in heldout)
    assert len(train) > 9000 and len(heldout) > 1000


def test_encoding_and_batches(sentences):
    vocab = Vocab(sentences.train[:200], min_freq=1)
    encoded = encode_sentences(sentences.train[:10], vocab)
    assert encoded[0][0] == vocab[BOS] and encoded[0][-1] == vocab[EOS]
    assert len(encoded[0]) == len(sentences.train[0]) + 2
    batches = list(lm_batches(encoded, 4, vocab[PAD]))
    assert [len(b[2]) for b in batches] == [4, 4, 2]
    inputs, targets, lens = batches[0]
    assert inputs.shape == targets.shape
    assert torch.equal(targets[0, :lens[0]], encoded[0][1:])            # shifted by one
    assert torch.equal(inputs[0, :lens[0]], encoded[0][:-1])
    assert (targets[lens[1]:] == vocab[PAD]).all() or lens.max() == targets.shape[1]
    shuffled = list(lm_batches(encoded, 4, vocab[PAD], torch.Generator().manual_seed(0)))
    assert sorted(int(l) for b in shuffled for l in b[2]) == sorted(int(l) for b in batches
                                                                    for l in b[2])


def test_bigram_baseline_is_a_distribution_and_beats_uniform(sentences):
    vocab = Vocab(sentences.train, min_freq=2)
    train = encode_sentences(sentences.train, vocab)
    heldout = encode_sentences(sentences.heldout, vocab)
    bigram = BigramModel(train, len(vocab))
    assert bigram.lam in BigramModel.LAMBDAS
    for previous in (vocab[BOS], vocab["i"], vocab.unk):
        torch.testing.assert_close(bigram.next_token_probs(previous).sum().item(), 1.0)
    assert bigram.perplexity(heldout) < 0.1 * len(vocab)
    assert bigram.perplexity(train) < bigram.perplexity(heldout)      # seen pairs are easier


def test_perplexity_of_a_model_that_knows_nothing_is_the_vocabulary_size():
    vocab = Vocab([["a", "b", "c"]], min_freq=1)
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=len(vocab), num_hiddens=8, num_heads=2,
                                            num_blks=1, ffn_num_hiddens=8, max_len=8)).eval()
    with torch.no_grad():
        model.dense.weight.zero_()
        model.dense.bias.zero_()                                       # uniform predictions
    encoded = encode_sentences([["a", "b"], ["c"]], vocab)
    total, count = token_losses(model, encoded, vocab[PAD])
    assert count == 3 + 2                                              # words and <eos>
    assert perplexity(model, encoded, vocab[PAD]) == pytest.approx(len(vocab), rel=1e-5)


def test_bad_settings_and_prompts_get_one_line_errors():
    with pytest.raises(ValueError, match="num_heads"):
        LMConfig(num_hiddens=64, num_heads=5)
    with pytest.raises(ValueError, match="dropout"):
        LMConfig(dropout=1.5)
    with pytest.raises(ValueError, match="max_len must be an integer >= 2"):
        LMConfig(max_len=1)
    vocab = Vocab([["a"]], min_freq=1)
    with pytest.raises(ValueError, match="the prompt must be a str"):
        encode_prompt(3, vocab)
    assert prompt_tokens("a zzz", vocab) == [BOS, "a", "<unk>"]
    assert encode_prompt("", vocab).tolist() == [[vocab[BOS]]]
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=len(vocab), num_hiddens=8, num_heads=2,
                                            num_blks=1, ffn_num_hiddens=8, max_len=4))
    with pytest.raises(ValueError, match="shorten it"):
        continue_prompt(model, vocab, "a a a a a", greedy=True)


def test_quick_training_is_seeded_cached_and_reloaded(course_pairs_file, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path))
    config = LMConfig(num_hiddens=16, num_heads=2, ffn_num_hiddens=16, num_epochs=2,
                      num_examples=2000)
    model, vocab, result, file, loaded = train_or_load_language_model(
        config, course_pairs_file, animate=False, show_progress=False)
    assert not loaded and file.is_file() and file.parent == tmp_path / "models"
    assert len(result.losses) == len(result.heldout_losses) == 2
    assert result.losses[1] < result.losses[0]
    assert result.heldout_perplexity == pytest.approx(math.exp(result.heldout_losses[-1]))
    again, vocab2, result2, _, loaded2 = train_or_load_language_model(
        config, course_pairs_file, animate=False, show_progress=False)
    assert loaded2 and len(vocab2) == len(vocab) and result2 == result
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    same, _, same_result = train_language_model(config, course_pairs_file, animate=False,
                                                show_progress=False)
    assert same_result.losses == result.losses                         # seeded


@pytest.mark.slow
def test_shipped_language_model_beats_the_bigram_on_heldout_sentences(course_pairs_file, sentences):
    model, vocab, result, file, loaded = train_or_load_language_model(
        LESSON_LM, course_pairs_file, animate=False)
    assert loaded and file.parent == SHIPPED_DIR
    heldout = encode_sentences(sentences.heldout, vocab)
    ppl = perplexity(model, heldout, vocab[PAD])
    assert ppl == pytest.approx(result.heldout_perplexity, rel=1e-3)   # the stored figure holds
    bigram = BigramModel(encode_sentences(sentences.train, vocab), len(vocab))
    assert bigram.perplexity(heldout) == pytest.approx(result.bigram_perplexity, rel=1e-6)
    assert ppl < 0.8 * result.bigram_perplexity
    words = continue_prompt(model, vocab, "i am", greedy=True)
    assert words[-1] == EOS and len(words) > 1


# ----------------------------------------------------------------------------- the induction run

def test_tokens_with_replacement_keep_the_repeat():
    tokens = repeated_block_batch(200, 6, 5, torch.Generator().manual_seed(0), distinct=False)
    assert torch.equal(tokens[:, :6], tokens[:, 6:])
    assert any(len(set(row[:6].tolist())) < 6 for row in tokens)      # some block repeats a token
    with pytest.raises(ValueError, match="distinct must be True or False"):
        repeated_block_batch(2, 6, 64, distinct=1)


def test_run_save_and_load_round_trip(tmp_path):
    settings = run_settings(LESSON_INDUCTION, steps=4, num_checkpoints=3, eval_batch_size=4)
    run = train_run(settings)
    file = save_run(run, settings, tmp_path)
    assert file.name == settings.file_name() != LESSON_INDUCTION.file_name()
    back = load_run(file, settings)
    assert back.losses == run.losses and [c.step for c in back.checkpoints] == [0, 2, 4]
    assert torch.equal(back.checkpoints[-1].attention, run.checkpoints[-1].attention)
    assert torch.equal(back.eval_tokens, run.eval_tokens)


def test_shipped_induction_run_shows_the_two_heads_forming():
    run, file, loaded = train_or_load_induction(LESSON_INDUCTION)
    assert loaded and file.parent == SHIPPED_DIR
    first, last = run.checkpoints[0], run.checkpoints[-1]
    assert len(run.checkpoints) == LESSON_INDUCTION.num_checkpoints
    assert abs(first.second_copy_loss - first.first_copy_loss) < 0.3
    assert last.second_copy_loss < 1.0 < 4.0 < last.first_copy_loss
    assert float(last.previous_token[0].max()) > 0.4 > float(first.previous_token[0].max())
    assert float(last.induction[1].max()) > 0.6 > float(first.induction[1].max())
    # the stored scores are what the stored model does
    from utils.induction import head_scores
    scores = head_scores(run.model, run.eval_tokens)
    torch.testing.assert_close(scores["induction"], last.induction, atol=1e-4, rtol=0)
