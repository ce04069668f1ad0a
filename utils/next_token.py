"""What a language model sees before its next step (lesson 8's sampling explorer draws this).

    next_token_view(model, vocab, text)   -> NextTokenView(tokens, logits (V,), attention (L·h, n))
    next_token_table(logits, temperature, top_k, top_p, top=15)
                                          -> the top tokens, their probabilities, what is kept
    ContinuationCache(model, vocab).continuation(text, max_new_tokens, temperature=..., seed=...)
                                          -> continue_prompt's words, each prefix run once

Kept apart from ``utils.lm_training`` on purpose: a trained model's cache key includes the code of
``lm_training`` and what it imports, and these views do not change what training computes.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from utils.data import EOS, Vocab
from utils.i18n import _
from utils.language_model import (DecoderOnlyLM, check_temperature, check_top_k, check_top_p,
                                   filter_logits, next_token_distribution, sample)
from utils.lm_training import encode_prompt
from utils.validation import check_positive_int


@dataclasses.dataclass
class NextTokenView:
    """The model's view after a prompt (what lesson 8's sampling explorer draws).

    tokens: the prompt as read (``<bos>`` first); logits: (V,) for the next token;
    attention: (layers · heads, n), the last position's weights over the n prompt tokens,
    row ``l · heads + h`` for layer l, head h.
    """

    tokens: list
    logits: torch.Tensor
    attention: torch.Tensor


@torch.no_grad()
def next_token_view(model: DecoderOnlyLM, vocab: Vocab, text: str) -> NextTokenView:
    """Run ``model`` once over the prompt ``text``; raise a one-line ValueError if it is too
    long for the model."""
    prompt = encode_prompt(text, vocab)                                    # (1, n)
    if prompt.shape[1] > model.config.max_len:
        raise ValueError(_("the prompt has {num_words} words; the model reads at most "
                           "{most}: shorten it").format(
            num_words=prompt.shape[1] - 1, most=model.config.max_len - 1))
    was_training = model.training
    model.eval()
    try:
        logits, _state = model(prompt)                                        # (1, n, V)
    finally:
        model.train(was_training)
    last = torch.stack([w[0, :, -1] for w in model.attention_weights])     # (L, h, n)
    return NextTokenView(vocab.to_tokens(prompt[0].tolist()), logits[0, -1].clone(),
                         last.reshape(-1, last.shape[-1]))


def next_token_table(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None,
                     top: int = 15) -> dict:
    """The ``top`` most likely next tokens at ``temperature`` and what top-k/top-p keep.

    Returns {"ids": (top,) token ids, most likely first; "probs": (top,) their probabilities at
    ``temperature`` before filtering; "kept": (top,) bool; "num_kept": how many tokens of the
    whole vocabulary the filters keep; "kept_mass": the probability (at ``temperature``) those
    hold}. ``top_k=0`` means off, like None.
    """
    top_k = None if top_k == 0 else top_k
    check_positive_int("top", top)
    probs = next_token_distribution(logits, temperature)                   # (V,) unfiltered
    kept = filter_logits(logits / temperature, top_k, top_p) > -math.inf   # (V,)
    order = torch.sort(logits, descending=True, stable=True).indices[:top]
    return {"ids": order, "probs": probs[order], "kept": kept[order],
            "num_kept": int(kept.sum()), "kept_mass": float(probs[kept].sum())}


class ContinuationCache:
    """``continue_prompt(model, vocab, text, max_new_tokens, temperature=..., top_k=...,
    top_p=..., generator=torch.Generator().manual_seed(seed))`` (or ``greedy=True``), with the
    model's work kept.

    ``generate`` feeds the prompt, then one token per step through the key/value cache, and
    draws each token with ``sample`` from a generator seeded anew for every call. The logits
    after a prefix depend on the prefix alone, so they are kept per prefix (with the key/value
    state that extends it); the draws are made again, with the same generator and the same
    calls, so the words are exactly those ``continue_prompt`` returns; ``greedy`` takes the
    most likely token, as ``generate`` does. Sampling stops at the first ``<eos>``
    (``continue_prompt`` cuts the words there; later draws cannot change them).
    """

    def __init__(self, model, vocab, max_nodes: int = 50_000):
        self.model, self.vocab, self.max_nodes = model, vocab, max_nodes
        self.nodes = {}                          # (prompt ids..., new ids...) -> (logits, state)
        self.eos = vocab[EOS]

    @torch.no_grad()
    def _step(self, key: tuple, token: int):
        """The key ``key + (token,)``; its (logits (1, V), state) are computed at most once."""
        child = key + (token,)
        if child not in self.nodes:
            _logits, state = self.nodes[key]
            logits, state = self.model(torch.tensor([[token]]), state)       # (1, 1, V)
            self.nodes[child] = (logits[:, -1], state)
        return child

    @torch.no_grad()
    def continuation(self, text: str, max_new_tokens: int, *, temperature: float = 1.0,
                     top_k=None, top_p=None, seed: int = 0, greedy: bool = False) -> list:
        """The words ``continue_prompt`` adds to ``text`` with these settings and
        ``generator=torch.Generator().manual_seed(seed)``, cut after the first ``<eos>``."""
        prompt = encode_prompt(text, self.vocab)                             # (1, n0)
        room = self.model.config.max_len + 1 - prompt.shape[1]
        if room < 1:
            raise ValueError(_("the prompt has {num_words} words; the model reads at most "
                               "{most}: shorten it").format(
                num_words=prompt.shape[1] - 1, most=self.model.config.max_len - 1))
        if not greedy:                                                     # as generate checks
            check_temperature(temperature), check_top_k(top_k), check_top_p(top_p)
        if len(self.nodes) > self.max_nodes:
            self.nodes.clear()
        was_training = self.model.training
        self.model.eval()
        try:
            key = tuple(prompt[0].tolist())
            if key not in self.nodes:
                logits, state = self.model(prompt)                           # (1, n0, V)
                self.nodes[key] = (logits[:, -1], state)
            generator = torch.Generator().manual_seed(seed)
            words = []
            for step in range(min(max_new_tokens, room)):
                if step:
                    key = self._step(key, words[-1])
                logits = self.nodes[key][0]                                  # (1, V)
                token = int(logits.argmax(dim=-1) if greedy else
                            sample(logits, temperature, top_k, top_p, generator))
                words.append(token)
                if token == self.eos:
                    break
        finally:
            self.model.train(was_training)
        return self.vocab.to_tokens(words)
