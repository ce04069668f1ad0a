"""The preallocated key/value cache (utils.static_cache, issue 35): the same tokens as the plain
cache and as no cache, greedy and sampled, for batches, attention-only models and the lesson's
shipped model; the cache written in place; bad arguments rejected before the loop."""

import pytest
import torch

from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, generate
from utils.static_cache import StaticKVCache, decode_step, generate_static, prefill, step_plan

ONE_INTRA_OP_THREAD = True


def tiny_model(seed=0, **overrides) -> DecoderOnlyLM:
    settings = dict(vocab_size=13, num_hiddens=16, num_heads=4, num_blks=2, ffn_num_hiddens=24,
                    max_len=40)
    settings.update(overrides)
    torch.manual_seed(seed)
    return DecoderOnlyLM(DecoderOnlyConfig(**settings)).eval()


def prompt_of(shape, seed=1, vocab=13):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("overrides", [{}, {"attention_only": True, "num_heads": 1},
                                       {"use_bias": True, "num_blks": 3}])
def test_same_tokens_as_the_plain_cache_and_no_cache(overrides):
    model = tiny_model(**overrides)
    for shape in [(1, 1), (2, 3), (3, 7)]:
        prompt = prompt_of(shape)
        steps = 40 - shape[1] + 1                                   # up to max_len
        static = generate_static(model, prompt, steps, greedy=True)
        assert static.shape == (shape[0], shape[1] + steps)
        assert torch.equal(static, generate(model, prompt, steps, greedy=True))
        assert torch.equal(static, generate(model, prompt, steps, greedy=True, use_cache=False))
        sampled = [fn(model, prompt, 20, temperature=1.3, top_k=9, top_p=0.9,
                      generator=torch.Generator().manual_seed(5))
                   for fn in (generate, generate_static)]
        assert torch.equal(*sampled)


def test_decode_step_logits_equal_the_full_pass_and_the_cache_is_written_in_place():
    model = tiny_model()
    tokens = prompt_of((2, 9))
    full = model(tokens)[0]                                         # (2, 9, V)
    cache = StaticKVCache.for_model(model, 2, 9)
    keys, values = cache.keys.data_ptr(), cache.values.data_ptr()
    with torch.no_grad():
        logits = [prefill(model, tokens[:, :4], cache)]
        plan = step_plan(model)
        logits += [decode_step(plan, tokens[:, i], cache) for i in range(4, 9)]
    assert cache.length == 9 and cache.keys.data_ptr() == keys and cache.values.data_ptr() == values
    assert torch.allclose(torch.stack(logits, 1), full[:, 3:], atol=1e-5)
    _, state = model(tokens)
    for layer, layer_cache in enumerate(state):
        assert torch.allclose(cache.keys[layer], layer_cache.keys, atol=1e-6)
        assert torch.allclose(cache.values[layer], layer_cache.values, atol=1e-6)


def test_the_lessons_model_gives_the_same_tokens():
    from utils.lm_training import LESSON_LM, train_or_load_language_model
    model, vocab, *_, from_cache = train_or_load_language_model(LESSON_LM, animate=False)
    assert from_cache, "the shipped language model should load, not train"
    for seed in range(8):
        prompt = prompt_of((1, 1 + seed % 4), seed=seed, vocab=len(vocab))
        greedy = generate_static(model, prompt, 20, greedy=True)
        assert torch.equal(greedy, generate(model, prompt, 20, greedy=True, use_cache=False))
        sampled = [fn(model, prompt, 20, temperature=0.8, top_k=20, top_p=0.9,
                      generator=torch.Generator().manual_seed(seed))
                   for fn in (generate, generate_static)]
        assert torch.equal(*sampled)


def test_training_mode_restored_and_no_new_tokens():
    model = tiny_model().train()
    assert torch.equal(generate_static(model, torch.tensor([1, 2]), 0), torch.tensor([[1, 2]]))
    assert generate_static(model, torch.tensor([1, 2]), 3, greedy=True).shape == (1, 5)
    assert model.training


@pytest.mark.parametrize("kwargs, fix", [
    (dict(max_new_tokens=-1), ">= 0"),
    (dict(max_new_tokens=40), "max_len >= 41"),
    (dict(max_new_tokens=3, temperature=0), "greedy=True"),
    (dict(max_new_tokens=3, top_p=1.5), "top_p must be None or lie in (0, 1]"),
    (dict(max_new_tokens=3, generator=7), "seeded_generator"),
])
def test_bad_arguments_raise_one_line_before_the_loop(kwargs, fix):
    with pytest.raises(ValueError) as error:
        generate_static(tiny_model(), torch.tensor([[1, 2]]), **kwargs)
    assert fix in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match="past the model's max_len=40"):
        StaticKVCache.for_model(tiny_model(), 1, 41)
