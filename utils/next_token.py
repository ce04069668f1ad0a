"""What a language model sees before its next step (lesson 8's sampling explorer draws this).

    next_token_view(model, vocab, text)   -> NextTokenView(tokens, logits (V,), attention (L·h, n))
    next_token_table(logits, temperature, top_k, top_p, top=15)
                                          -> the top tokens, their probabilities, what is kept

Kept apart from ``utils.lm_training`` on purpose: a trained model's cache key includes the code of
``lm_training`` and what it imports, and these views do not change what training computes.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from utils.data import Vocab
from utils.i18n import _
from utils.language_model import DecoderOnlyLM, filter_logits, next_token_distribution
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
