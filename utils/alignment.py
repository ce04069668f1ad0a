"""Does a translation model's attention align words? Statistics over many translations.

For one greedy translation (``utils.seq2seq.Translation``), ``attention`` has one row per
output step and one column per source token (the source ends with ``<eos>``). Two measures:

- **weight on the source <eos>**: how much of an output word's attention goes to the source's
  end marker rather than to a word (high values: the model reads a summary, not the words);
- **monotonicity**: Spearman's rank correlation between an output word's position and the
  position of the source token it attends to most. 1 means the most-attended source word moves
  steadily to the right as the output goes on; English→French is mostly monotone, with local
  swaps (adjective order, "ne ... pas").

Only steps that produce a word count (not the step that produces ``<eos>``).
"""

import dataclasses
import math

import torch

from utils.data import EOS


def ranks(values) -> list:
    """Ranks 1..n of ``values``; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            result[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(x, y) -> float | None:
    """Spearman's rank correlation of two equally long sequences; None if either is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs two sequences of one length, got {len(x)} and "
                         f"{len(y)}")
    if len(x) < 2:
        raise ValueError(f"spearman needs at least 2 pairs, got {len(x)}")
    rx, ry = ranks(list(x)), ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def word_rows(translation) -> torch.Tensor:
    """The attention rows of the steps that produced a word: (words, source tokens)."""
    if translation.attention is None:
        raise ValueError("this translation has no attention weights; translate with a model "
                         "whose decoder exposes them (e.g. the Bahdanau decoder)")
    return translation.attention[:len(translation.tokens)]


def eos_weight(translation) -> float | None:
    """Mean weight on the source ``<eos>`` over the output words (None: no output word)."""
    rows = word_rows(translation)                                  # (words, source tokens)
    if rows.shape[0] == 0:
        return None
    if translation.source_tokens[-1] != EOS:
        raise ValueError(f"the source should end with {EOS}, got {translation.source_tokens}")
    return rows[:, -1].mean().item()


def monotonicity(translation, min_words: int = 3) -> float | None:
    """Spearman correlation of output position vs most-attended source position (None for
    outputs shorter than ``min_words`` or a constant argmax)."""
    rows = word_rows(translation)
    if rows.shape[0] < min_words:
        return None
    attended = rows.argmax(dim=-1).tolist()                        # (words,)
    return spearman(list(range(len(attended))), attended)


@dataclasses.dataclass
class AlignmentSummary:
    """Means over a set of translations, with how many translations each mean covers."""

    mean_eos_weight: float
    eos_count: int
    mean_monotonicity: float
    monotonicity_count: int
    constant_argmax: int          # of those, outputs whose argmax never moved (counted as 0)

    def describe(self) -> str:
        return (f"weight on the source <eos>: {self.mean_eos_weight:.2f} (mean over "
                f"{self.eos_count} outputs) | Spearman(output position, most-attended source "
                f"position): {self.mean_monotonicity:.2f} (mean over {self.monotonicity_count} "
                f"outputs of >= 3 words, {self.constant_argmax} of which attend one source token "
                f"throughout and count as 0)")


def summarize(translations, min_words: int = 3) -> AlignmentSummary:
    """Alignment statistics over ``translations`` (an iterable of ``Translation``)."""
    eos, mono, constant = [], [], 0
    for translation in translations:
        weight = eos_weight(translation)
        if weight is not None:
            eos.append(weight)
        if word_rows(translation).shape[0] >= min_words:
            value = monotonicity(translation, min_words)
            constant += value is None
            mono.append(0.0 if value is None else value)   # no movement: no monotone order
    if not eos:
        raise ValueError("no translation produced a word; nothing to summarize")
    return AlignmentSummary(sum(eos) / len(eos), len(eos),
                            sum(mono) / len(mono) if mono else float("nan"), len(mono),
                            constant)
