"""Unit tests of utils.language_model and utils.induction (lesson 8, issue 16): shapes, bad
input, causality, the key/value cache, top-k/top-p filtering, sampling, the induction task."""

import math

import pytest
import torch

from utils.induction import (copy_masks, copy_losses, head_scores, induction_score,
                             induction_targets, per_position_loss, previous_token_score,
                             repeated_block_batch, second_copy_loss, train_induction)
from utils.language_model import (DecoderOnlyConfig, DecoderOnlyLM, KeyValueCache,
                                  cached_self_attention, causal_lens_after, filter_logits,
                                  generate, next_token_distribution, sample, stepwise_logits)

INF = -math.inf


@pytest.fixture(autouse=True)
def one_thread():
    """Tensors this small run fastest on one thread, above all on busy cores."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def tiny_model(seed=0, **overrides) -> DecoderOnlyLM:
    settings = dict(vocab_size=13, num_hiddens=16, num_heads=4, num_blks=2, ffn_num_hiddens=24,
                    max_len=40)
    settings.update(overrides)
    torch.manual_seed(seed)
    return DecoderOnlyLM(DecoderOnlyConfig(**settings)).eval()


def tokens_of(shape, vocab=13, seed=1):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- model and shapes

@pytest.mark.parametrize("attention_only", [False, True])
def test_shapes_state_and_attention_weights(attention_only):
    model = tiny_model(attention_only=attention_only)
    tokens = tokens_of((3, 7))
    logits, state = model(tokens)
    assert logits.shape == (3, 7, 13)
    assert len(state) == 2 and all(isinstance(c, KeyValueCache) for c in state)
    assert state[0].keys.shape == state[0].values.shape == (3, 4, 7, 4)      # (b, h, t, d_h)
    assert [tuple(w.shape) for w in model.attention_weights] == [(3, 4, 7, 7)] * 2
    more, state = model(tokens_of((3, 2), seed=2), state)
    assert more.shape == (3, 2, 13) and state[1].length == 9
    assert [tuple(w.shape) for w in model.attention_weights] == [(3, 4, 2, 9)] * 2
    assert hasattr(model.blks[0], "ffn") != attention_only


def test_attention_weights_are_causal_rows_summing_to_one():
    model = tiny_model()
    model(tokens_of((2, 6)))
    for weights in model.attention_weights:
        future = torch.ones(6, 6, dtype=torch.bool).triu(1)
        assert torch.all(weights[..., future] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))


def test_cached_attention_is_the_course_layer_with_a_causal_mask():
    model = tiny_model()
    mha = model.blks[0].attention
    X = torch.randn(2, 5, 16)
    out, cache = cached_self_attention(mha, X)
    expected = mha(X, X, X, causal_lens_after(0, 5, 2))
    torch.testing.assert_close(out, expected)
    assert cache.length == 5


@pytest.mark.parametrize("overrides, fix", [
    (dict(num_heads=3), "choose one of its divisors"),
    (dict(num_hiddens=15, num_heads=5), "even"),
    (dict(vocab_size=0), "vocab_size must be a positive integer"),
    (dict(dropout=1.0), "[0, 1)"),
    (dict(max_len=0), "max_len must be a positive integer"),
    (dict(attention_only="yes"), "True or False"),
])
def test_bad_config_raises_one_line(overrides, fix):
    settings = dict(vocab_size=13, num_hiddens=16, num_heads=4)
    settings.update(overrides)
    with pytest.raises(ValueError) as error:
        DecoderOnlyConfig(**settings)
    assert fix in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("make_call, fix", [
    (lambda m: m(torch.tensor([1, 2, 3])), "tokens[None]"),
    (lambda m: m(torch.rand(2, 3)), "tokens[None]"),
    (lambda m: m(torch.tensor([[1, 13]])), "vocabulary"),
    (lambda m: m(torch.zeros(1, 41, dtype=torch.long)), "larger max_len"),
    (lambda m: m(torch.zeros(1, 30, dtype=torch.long), m(torch.zeros(1, 30,
                                                                  dtype=torch.long))[1]),
     "larger max_len"),
    (lambda m: m(torch.zeros(2, 1, dtype=torch.long), m(torch.zeros(1, 3,
                                                                 dtype=torch.long))[1]),
     "same batch"),
    (lambda m: m(torch.zeros(1, 1, dtype=torch.long), ["not a cache"] * 2), "state=None"),
    (lambda m: DecoderOnlyLM(dict(vocab_size=3)), "DecoderOnlyConfig(vocab_size=...)"),
])
def test_bad_model_input_raises_one_line(make_call, fix):
    with pytest.raises(ValueError) as error:
        make_call(tiny_model())
    assert fix in str(error.value) and "\n" not in str(error.value)


# ----------------------------------------------------------------------------- causality and cache

@pytest.mark.parametrize("changed", [0, 3, 6])
def test_a_future_token_cannot_change_a_past_output(changed):
    model = tiny_model(dropout=0.0)
    tokens = tokens_of((2, 7))
    other = tokens.clone()
    other[:, changed] = (other[:, changed] + 5) % 13
    before, _ = model(tokens)
    after, _ = model(other)
    torch.testing.assert_close(before[:, :changed], after[:, :changed], rtol=0, atol=0)
    assert not torch.allclose(before[:, changed:], after[:, changed:])


def test_cached_logits_equal_full_pass_logits():
    model = tiny_model()
    tokens = tokens_of((3, 9))
    full, _ = model(tokens)
    torch.testing.assert_close(stepwise_logits(model, tokens), full, atol=1e-5, rtol=1e-5)
    # prompt in one call, then two chunks: the same logits too
    state, parts = None, []
    for chunk in (tokens[:, :4], tokens[:, 4:5], tokens[:, 5:]):
        logits, state = model(chunk, state)
        parts.append(logits)
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)


def test_cached_and_uncached_generation_give_identical_tokens():
    model = tiny_model()
    prompt = tokens_of((2, 3))
    greedy = [generate(model, prompt, 12, greedy=True, use_cache=c) for c in (True, False)]
    assert greedy[0].shape == (2, 15) and torch.equal(*greedy)
    assert torch.equal(greedy[0][:, :3], prompt)
    sampled = [generate(model, prompt, 12, use_cache=c, temperature=1.5, top_k=8, top_p=0.95,
                        generator=torch.Generator().manual_seed(7)) for c in (True, False)]
    assert torch.equal(*sampled)


def test_generate_restores_training_mode_and_accepts_a_1d_prompt():
    model = tiny_model().train()
    out = generate(model, torch.tensor([1, 2]), 3, greedy=True)
    assert out.shape == (1, 5) and model.training
    assert torch.equal(generate(model, torch.tensor([[1, 2]]), 0), torch.tensor([[1, 2]]))


@pytest.mark.parametrize("kwargs, fix", [
    (dict(max_new_tokens=-1), ">= 0"),
    (dict(max_new_tokens=40), "max_len >= 41"),
    (dict(max_new_tokens=3, temperature=0), "greedy=True"),
    (dict(max_new_tokens=3, top_k=0), "top_k must be None or an integer >= 1"),
    (dict(max_new_tokens=3, generator=7), "seeded_generator"),
])
def test_bad_generate_arguments_raise_one_line(kwargs, fix):
    with pytest.raises(ValueError) as error:
        generate(tiny_model(), torch.tensor([[1, 2]]), **kwargs)
    assert fix in str(error.value) and "\n" not in str(error.value)


# ----------------------------------------------------------------------------- sampling

def test_top_k_keeps_the_k_largest_and_breaks_ties_by_index():
    logits = torch.tensor([1.0, 3.0, 3.0, 0.0, 2.0])
    assert filter_logits(logits, top_k=2).tolist() == [INF, 3.0, 3.0, INF, INF]
    assert filter_logits(logits, top_k=1).tolist() == [INF, 3.0, INF, INF, INF]   # lower index
    assert filter_logits(logits, top_k=3).tolist() == [INF, 3.0, 3.0, INF, 2.0]
    batch = torch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
    assert filter_logits(batch, top_k=1).tolist() == [[INF, INF, 2.0], [2.0, INF, INF]]


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    assert filter_logits(logits, top_p=0.5).isfinite().tolist() == [True, False, False, False]
    assert filter_logits(logits, top_p=0.7).isfinite().tolist() == [True, True, False, False]
    assert filter_logits(logits, top_p=0.9).isfinite().tolist() == [True, True, True, False]
    assert filter_logits(logits, top_p=0.01).isfinite().tolist() == [True, False, False, False]
    tied = torch.zeros(4)                                    # 0.25 each: 0.6 needs three
    assert filter_logits(tied, top_p=0.6).isfinite().tolist() == [True, True, True, False]


def test_top_k_then_top_p_and_the_no_op_cases():
    logits = torch.tensor([0.4, 0.3, 0.2, 0.1]).log()
    # top-k=2 renormalises to 4/7, 3/7: p=0.5 then keeps only the best
    assert filter_logits(logits, top_k=2, top_p=0.5).isfinite().tolist() == [True, False, False,
                                                                              False]
    assert filter_logits(logits, top_k=3, top_p=0.6).isfinite().tolist() == [True, True, False,
                                                                              False]
    for kwargs in (dict(), dict(top_p=1.0), dict(top_k=4), dict(top_k=100),
                   dict(top_k=100, top_p=1)):
        torch.testing.assert_close(filter_logits(logits, **kwargs), logits)


@pytest.mark.parametrize("kwargs, fix", [
    (dict(top_k=0), "integer >= 1"), (dict(top_k=-2), "integer >= 1"),
    (dict(top_k=2.5), "integer >= 1"), (dict(top_k=True), "integer >= 1"),
    (dict(top_p=0.0), "(0, 1]"), (dict(top_p=1.5), "(0, 1]"), (dict(top_p=-0.1), "(0, 1]"),
    (dict(top_p=float("nan")), "(0, 1]"),
])
def test_bad_filter_arguments_raise_one_line(kwargs, fix):
    with pytest.raises(ValueError) as error:
        filter_logits(torch.zeros(5), **kwargs)
    assert fix in str(error.value) and "\n" not in str(error.value)


def test_bad_logits_and_temperature_raise():
    with pytest.raises(ValueError, match="float tensor"):
        filter_logits(torch.tensor([1, 2]))
    for temperature in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
            next_token_distribution(torch.zeros(3), temperature)


def test_next_token_distribution_temperature():
    logits = torch.tensor([2.0, 1.0, 0.0])
    torch.testing.assert_close(next_token_distribution(logits), logits.softmax(-1))
    cold = next_token_distribution(logits, 0.01)
    hot = next_token_distribution(logits, 100.0)
    assert cold[0] > 0.999 and (hot - 1 / 3).abs().max() < 0.01
    probs = next_token_distribution(logits, 1.0, top_k=2)
    torch.testing.assert_close(probs, torch.tensor([math.e / (math.e + 1), 1 / (math.e + 1),
                                                    0.0]))


def test_sampling_is_reproducible_and_respects_the_filter():
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    draw = lambda seed, **kw: sample(logits, generator=torch.Generator().manual_seed(seed), **kw)
    assert draw(3).shape == (4,)
    assert torch.equal(draw(3), draw(3))
    assert not all(torch.equal(draw(3), draw(s)) for s in range(4, 10))
    allowed = filter_logits(logits, top_k=2).isfinite()                     # (4, 10)
    for seed in range(20):
        tokens = draw(seed, top_k=2)
        assert allowed[torch.arange(4), tokens].all()
    many = sample(torch.zeros(2000, 3), generator=torch.Generator().manual_seed(1))
    counts = torch.bincount(many, minlength=3) / 2000                       # about 1/3 each
    assert (counts - 1 / 3).abs().max() < 0.05


# ----------------------------------------------------------------------------- induction task

def test_repeated_block_batch_structure():
    tokens = repeated_block_batch(5, 6, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (5, 12) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :6], tokens[:, 6:])
    assert all(len(set(row[:6].tolist())) == 6 for row in tokens)          # distinct in a block
    again = repeated_block_batch(5, 6, 20, torch.Generator().manual_seed(0))
    assert torch.equal(tokens, again)
    with pytest.raises(ValueError, match="vocab_size"):
        repeated_block_batch(2, 8, 5)


def test_repeated_block_batch_with_varying_block_lengths():
    tokens = repeated_block_batch(64, 6, 20, torch.Generator().manual_seed(0), min_block_len=2)
    assert tokens.shape == (64, 12)
    first, second = copy_masks(tokens)
    lengths = set()
    for row, f, s in zip(tokens, first, second):
        assert len(set(row.tolist())) == 12 - int(s.sum()) - 1                # one repeat each
        block_len = int(s.sum()) + 1
        lengths.add(block_len)
        assert torch.equal(row[12 - 2 * block_len:12 - block_len], row[12 - block_len:])
        assert int(f.sum()) == block_len - 1
    assert lengths == {2, 3, 4, 5, 6}


def test_copy_masks_and_induction_targets_of_a_fixed_block():
    tokens = torch.tensor([[4, 7, 1, 4, 7, 1]])
    first, second = copy_masks(tokens)
    assert first.tolist() == [[True, True, False, False, False]]           # predict 7, 1
    assert second.tolist() == [[False, False, False, True, True]]          # predict 7, 1 again
    assert induction_targets(tokens).tolist() == [[-1, -1, -1, 1, 2, 3]]


def test_head_scores_of_hand_made_attention():
    tokens = torch.tensor([[4, 7, 1, 4, 7, 1]])
    n = 6
    previous = torch.zeros(n, n)
    previous[0, 0] = 1
    previous[torch.arange(1, n), torch.arange(n - 1)] = 1                 # weight on i - 1
    induction = torch.eye(n)
    for query, key in ((3, 1), (4, 2), (5, 3)):
        induction[query] = 0
        induction[query, key] = 1
    weights = torch.stack([previous, induction])[None]                    # (1, 2 heads, n, n)
    torch.testing.assert_close(previous_token_score(weights), torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(induction_score(weights, tokens), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="no token occurs twice"):
        induction_score(weights, torch.arange(6)[None])


def test_losses_and_scores_of_an_untrained_model():
    model = tiny_model(attention_only=True)
    tokens = repeated_block_batch(4, 5, 13, torch.Generator().manual_seed(0))
    assert per_position_loss(model, tokens).shape == (9,)
    losses = copy_losses(model, tokens)
    assert set(losses) == {"first", "second"}
    assert abs(losses["first"] - math.log(13)) < 1.0                       # about uniform
    loss = second_copy_loss(model, tokens)
    assert loss.requires_grad and abs(loss.item() - losses["second"]) < 1e-5
    scores = head_scores(model, tokens)
    assert scores["previous_token"].shape == scores["induction"].shape == (2, 4)


def test_a_short_induction_run_learns_to_copy():
    """A few seconds of training: the second copy becomes far easier than the first.

    With one block length the earlier copy is a fixed distance back, which even a positional
    head finds, and that is quick to learn: this run checks the training loop and the losses,
    not that real induction heads formed (that needs varying block lengths and a longer run)."""
    config = DecoderOnlyConfig(vocab_size=24, num_hiddens=32, num_heads=2, num_blks=2,
                               attention_only=True, max_len=16)
    run = train_induction(config, steps=150, block_len=6, min_block_len=None, batch_size=32,
                          lr=1e-2, seed=0, num_checkpoints=3, eval_batch_size=64,
                          num_threads=1)
    assert len(run.losses) == 150 and [c.step for c in run.checkpoints] == [0, 75, 150]
    start, end = run.checkpoints[0], run.checkpoints[-1]
    assert abs(start.second_copy_loss - start.first_copy_loss) < 0.3
    assert end.second_copy_loss < end.first_copy_loss - 0.5                  # 1.5 at seed 0
    assert end.attention.shape == (2, 2, 12, 12)
    again = train_induction(config, steps=3, block_len=6, min_block_len=None, seed=0,
                            lr=1e-2, num_checkpoints=2, num_threads=1)
    assert again.losses == run.losses[:3]                                   # seeded
