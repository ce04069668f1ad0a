"""A preallocated ("static") key/value cache for lesson 8's decoder-only model.

``utils.language_model``'s cache is a list of ``KeyValueCache`` that grows by concatenation:
every step copies all cached keys and values into a new tensor, re-checks its arguments and
records the attention weights. Inference engines instead allocate the cache once, for every
position the generation can reach, and write each new key and value in place. This module
does that for a trained ``DecoderOnlyLM``, without changing it::

    StaticKVCache(model, batch, capacity)    keys, values (layers, b, h, capacity, d_h), length t
    decode_step(plan, token, cache)           logits (b, V) of one new token per sequence
    generate_static(model, prompt_tokens, max_new_tokens, *, greedy=False, temperature=1.0,
                    top_k=None, top_p=None, generator=None) -> (b, n0 + max_new_tokens)

Shapes: b = batch, t = cached positions, d = num_hiddens, h = heads, d_h = d / h, V = vocabulary.

Every argument is checked once, before the loop. The prompt goes through the model's own forward
(its checks, its cache), whose keys and values are then copied into the preallocated buffers; each
later step runs ``decode_step``: the layers' weights read directly (``StepPlan``), the new key and
value written at position t, one query attending over the cache's first t + 1 positions, no mask
(every cached position is in the past), no weights kept. The same tokens come out as with
``generate`` (tests/test_static_cache.py).
"""

import dataclasses
import math

import torch
from torch.nn import functional as F

from utils.i18n import _
from utils.language_model import (DecoderOnlyLM, _as_prompt, check_generator, check_temperature,
                                  check_top_k, check_top_p, filter_logits)
from utils.validation import check_positive_int


@dataclasses.dataclass
class StaticKVCache:
    """Keys and values of every layer, allocated once: (layers, b, h, capacity, d_h) each; the
    first ``length`` positions hold the sequence so far."""

    keys: torch.Tensor
    values: torch.Tensor
    length: int = 0

    @classmethod
    def for_model(cls, model: DecoderOnlyLM, batch: int, capacity: int):
        config = model.config
        if capacity > config.max_len:
            raise ValueError(_("a cache of {capacity} positions is past the model's "
                               "max_len={max_len}; generate fewer tokens or build a larger "
                               "max_len").format(capacity=capacity, max_len=config.max_len))
        head_size = config.num_hiddens // config.num_heads
        shape = (config.num_blks, batch, config.num_heads, capacity, head_size)
        weight = model.embedding.weight
        return cls(torch.empty(shape, dtype=weight.dtype, device=weight.device),
                   torch.empty(shape, dtype=weight.dtype, device=weight.device))

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]


@dataclasses.dataclass(frozen=True)
class LayerWeights:
    """One block's weights as plain tensors (read from the modules, not copied)."""

    W_q: tuple
    W_k: tuple
    W_v: tuple
    W_o: tuple
    norm1: tuple
    widen: tuple = None          # None: an attention-only block
    narrow: tuple = None
    norm2: tuple = None


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """What ``decode_step`` reads: embedding, encoding table and every layer's weights."""

    embedding: torch.Tensor      # (V, d)
    scale: float                 # √d
    positions: torch.Tensor      # (max_len, d)
    layers: tuple
    dense: tuple
    num_heads: int


def _linear(layer) -> tuple:
    return layer.weight, layer.bias


def _norm(addnorm) -> tuple:
    norm = addnorm.norm
    return norm.normalized_shape, norm.weight, norm.bias, norm.eps


def step_plan(model: DecoderOnlyLM) -> StepPlan:
    """The weights of ``model`` laid out for ``decode_step`` (eval mode: dropout is off)."""
    layers = []
    for blk in model.blks:
        mha = blk.attention
        ffn = () if blk.attention_only else (_linear(blk.ffn.widen), _linear(blk.ffn.narrow),
                                             _norm(blk.addnorm2))
        layers.append(LayerWeights(_linear(mha.W_q), _linear(mha.W_k), _linear(mha.W_v),
                                   _linear(mha.W_o), _norm(blk.addnorm1), *ffn))
    return StepPlan(model.embedding.weight, math.sqrt(model.config.num_hiddens),
                    model.pos_encoding.P[0].to(model.embedding.weight.dtype), tuple(layers),
                    _linear(model.dense), model.config.num_heads)


def decode_step(plan: StepPlan, token: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
    """token (b,) at position t = cache.length -> logits (b, V); writes the token's keys and
    values at position t of ``cache`` and advances it. Nothing is checked here."""
    t, h = cache.length, plan.num_heads
    b = token.shape[0]
    x = F.embedding(token, plan.embedding) * plan.scale + plan.positions[t]    # (b, d)
    for i, layer in enumerate(plan.layers):
        q = F.linear(x, *layer.W_q).view(b, h, 1, -1)                          # (b, h, 1, d_h)
        cache.keys[i, :, :, t] = F.linear(x, *layer.W_k).view(b, h, -1)        # (b, h, d_h)
        cache.values[i, :, :, t] = F.linear(x, *layer.W_v).view(b, h, -1)
        keys = cache.keys[i, :, :, :t + 1]                                     # (b, h, t+1, d_h)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])           # (b, h, 1, t+1)
        weights = torch.softmax(scores, dim=-1)
        heads = weights @ cache.values[i, :, :, :t + 1]                        # (b, h, 1, d_h)
        attended = F.linear(heads.reshape(b, -1), *layer.W_o)                  # (b, d)
        x = F.layer_norm(x + attended, *layer.norm1)                           # (b, d)
        if layer.widen is not None:
            hidden = torch.relu(F.linear(x, *layer.widen))                     # (b, ffn)
            x = F.layer_norm(x + F.linear(hidden, *layer.narrow), *layer.norm2)
    cache.length = t + 1
    return F.linear(x, *plan.dense)                                            # (b, V)


def prefill(model: DecoderOnlyLM, prompt: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
    """Read the prompt (b, n0) with the model's own forward, copy its keys and values into the
    cache's first n0 positions -> the logits (b, V) at the prompt's last position."""
    logits, state = model(prompt)                                              # (b, n0, V)
    n0 = prompt.shape[1]
    for i, layer_cache in enumerate(state):
        cache.keys[i, :, :, :n0] = layer_cache.keys                            # (b, h, n0, d_h)
        cache.values[i, :, :, :n0] = layer_cache.values
    cache.length = n0
    return logits[:, -1]


@torch.inference_mode()
def generate_static(model: DecoderOnlyLM, prompt_tokens, max_new_tokens: int, *,
                    greedy: bool = False, temperature: float = 1.0, top_k=None, top_p=None,
                    generator=None) -> torch.Tensor:
    """``utils.language_model.generate`` with the cache preallocated and written in place:
    the same arguments (no ``use_cache``), the same tokens (b, n0 + max_new_tokens)."""
    tokens = _as_prompt(prompt_tokens, model.config.vocab_size)                # (b, n0)
    check_positive_int("max_new_tokens", max_new_tokens, minimum=0)
    b, n0 = tokens.shape
    last_fed = n0 + max_new_tokens - 1                                         # not fed: the last
    if last_fed > model.config.max_len:
        raise ValueError(_("{n0} prompt tokens + {max_new_tokens} new ones need max_len >= "
                           "{last_fed}, the model has {max_len}; generate fewer tokens or build "
                           "a larger max_len").format(
            n0=n0, max_new_tokens=max_new_tokens, last_fed=last_fed, max_len=model.config.max_len))
    if not greedy:
        temperature = check_temperature(temperature)
        top_k, top_p = check_top_k(top_k), check_top_p(top_p)
        check_generator(generator)
    out = torch.empty(b, n0 + max_new_tokens, dtype=tokens.dtype, device=tokens.device)
    out[:, :n0] = tokens
    if max_new_tokens == 0:
        return out
    was_training = model.training
    model.eval()
    try:
        cache = StaticKVCache.for_model(model, b, max(last_fed, n0))
        plan = step_plan(model)
        last = prefill(model, tokens, cache)                                   # (b, V)
        for step in range(max_new_tokens):
            if greedy:
                token = last.argmax(dim=-1)                                    # (b,)
            else:
                probs = torch.softmax(filter_logits(last / temperature, top_k, top_p), dim=-1)
                token = torch.multinomial(probs, 1, generator=generator)[:, 0]
            out[:, n0 + step] = token
            if step + 1 < max_new_tokens:
                last = decode_step(plan, token, cache)                         # (b, V)
    finally:
        model.train(was_training)
    return out


def kv_cache_sweep(path=None) -> dict:
    """The figures ``tests/benchmarks/bench_kv_cache.py --write`` saved (lesson 8 shows them):
    {"machine", "repeats", "lengths", "rate_flops_per_s", "runs": {"<kind> <m>": {"median", "min",
    "max"}}, "flops", "batches", ...}; kinds: cached, uncached, bare, static, bare static."""
    import json
    import pathlib
    path = pathlib.Path(path) if path else (pathlib.Path(__file__).resolve().parents[1] / "assets"
                                            / "benchmarks" / "kv_cache.json")
    if not path.is_file():
        raise FileNotFoundError(_("no key/value-cache timings at {path}; make them with python "
                                  "-m tests.benchmarks.bench_kv_cache --write {path}").format(
            path=path))
    return json.loads(path.read_text(encoding="utf-8"))
