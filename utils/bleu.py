"""BLEU: the book's one-sentence score, and sacrebleu's standard corpus score.

- ``bleu(pred, label, k=2)``: for one sentence, as *Dive into Deep Learning* defines it,
  exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ** (1 / 2**n), where p_n is the
  clipped n-gram precision (an n-gram of the prediction counts at most as often as it occurs in
  the label). Orders longer than the prediction are skipped, as in d2l 1.0.3's ``bleu``.
- ``corpus_bleu(predictions, references)``: the standard corpus BLEU (4-grams, brevity penalty
  over the corpus) computed by sacrebleu on already tokenized text, on its usual 0-100 scale.
"""

from __future__ import annotations

import collections
import math
from typing import Sequence

from utils.i18n import _


def _ngram_counts(tokens: list[str], n: int) -> collections.Counter:
    return collections.Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def clipped_precision(pred_tokens: list[str], label_tokens: list[str], n: int) -> float:
    """Share of the prediction's n-grams found in the label, each used at most as often as there."""
    pred_counts = _ngram_counts(pred_tokens, n)
    total = sum(pred_counts.values())
    if total == 0:
        raise ValueError(_("the prediction has {num_tokens} tokens: no {n}-grams to count; "
                           "use n <= {num_tokens}").format(num_tokens=len(pred_tokens), n=n))
    label_counts = _ngram_counts(label_tokens, n)
    matches = sum(min(count, label_counts[gram]) for gram, count in pred_counts.items())
    return matches / total


def check_bleu_inputs(pred, label, k) -> tuple[list[str], list[str]]:
    """The tokens of ``pred`` and ``label``; a one-line ValueError for a bad ``k``, non-strings
    or an empty label."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(_("k (the longest n-gram) must be a positive int, got {k!r}").format(
            k=k))
    if not isinstance(pred, str) or not isinstance(label, str):
        raise ValueError(_("pred and label must be strings of space-separated tokens, got "
                           "{pred_type} and {label_type}").format(
            pred_type=type(pred).__name__, label_type=type(label).__name__))
    if not label.split():
        raise ValueError(_("the label is empty; BLEU needs a reference translation with tokens"))
    return pred.split(), label.split()


def bleu(pred: str, label: str, k: int = 2) -> float:
    """The book's BLEU of one predicted sentence against one label (space-separated tokens).

    Returns a number in [0, 1]; 1 means identical. An empty prediction scores 0.
    """
    pred_tokens, label_tokens = check_bleu_inputs(pred, label, k)
    if not pred_tokens:
        return 0.0
    score = math.exp(min(0.0, 1 - len(label_tokens) / len(pred_tokens)))   # brevity penalty
    for n in range(1, min(k, len(pred_tokens)) + 1):
        score *= clipped_precision(pred_tokens, label_tokens, n) ** (0.5 ** n)
    return score


def corpus_bleu(predictions: Sequence[str], references: Sequence):
    """sacrebleu's corpus BLEU of tokenized predictions; returns its ``BLEUScore`` (0-100).

    ``references[i]`` is one reference string or a list of them (several correct translations
    of sentence i). The text is used as tokenized by ``utils.data`` (``tokenize="none"``).
    """
    from sacrebleu.metrics import BLEU

    if len(predictions) != len(references):
        raise ValueError(_("{num_predictions} predictions but {num_references} references; "
                           "pass one reference (or list of references) per prediction").format(
            num_predictions=len(predictions), num_references=len(references)))
    if not predictions:
        raise ValueError(_("no predictions: corpus BLEU needs at least one sentence"))
    ref_lists = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not refs for refs in ref_lists):
        raise ValueError(_("every prediction needs at least one reference string"))
    width = max(len(refs) for refs in ref_lists)
    # sacrebleu wants one stream per reference slot; None fills slots a sentence does not use.
    streams = [[refs[j] if j < len(refs) else None for refs in ref_lists] for j in range(width)]
    # force=True: the text is tokenized on purpose (sacrebleu would warn about the " ." endings).
    return BLEU(tokenize="none", force=True).corpus_score(list(predictions), streams)


def bleu_by_length(sources: Sequence[str], predictions: Sequence[str], references: Sequence,
                   edges: Sequence[int]) -> list[tuple[str, int, float]]:
    """Corpus BLEU per bucket of source length (words, punctuation included).

    ``edges`` (increasing) split lengths into buckets ``[edges[i], edges[i+1])``, the last one
    open-ended. Returns (label, sentences, BLEU 0-100) per non-empty bucket, e.g. ("4-5", 310,
    27.1) or ("8+", 40, 12.0).
    """
    if len(sources) != len(predictions):
        raise ValueError(_("{num_sources} sources but {num_predictions} predictions; pass one "
                           "source per prediction").format(num_sources=len(sources),
                                                           num_predictions=len(predictions)))
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(_("edges must be increasing lengths, e.g. [1, 4, 6, 8], got "
                           "{edges!r}").format(edges=edges))
    rows = []
    for i, low in enumerate(edges):
        high = edges[i + 1] if i + 1 < len(edges) else None
        chosen = [k for k, source in enumerate(sources)
                  if len(source.split()) >= low and (high is None or len(source.split()) < high)]
        if not chosen:
            continue
        label = f"{low}+" if high is None else (f"{low}" if high == low + 1 else f"{low}-{high - 1}")
        score = corpus_bleu([predictions[k] for k in chosen], [references[k] for k in chosen])
        rows.append((label, len(chosen), score.score))
    return rows
