"""IBM Model 1: the classical statistical word aligner, a reference for attention maps.

Model 1 (Brown et al. 1993, "The Mathematics of Statistical Machine Translation: Parameter
Estimation", section 4) explains a French sentence f_1..f_m given an English sentence
e_1..e_l plus an empty word NULL (e_0 in the paper; here it comes last). Each French word picks
one English position, every position equally likely, and is then drawn from a translation
table t(f | e). Its only parameters are that table, estimated by EM from sentence pairs:

- E-step: for each French token, the posterior over the English positions (NULL included)
  is p(a_i = j | e, f) = t(f_i | e_j) / sum_k t(f_i | e_k);
- M-step: t(f | e) = expected count of (e, f) links / expected count of links from e.

The posterior p(a_i = j | e, f) is what ``alignment_matrix`` returns: one row per French word,
a distribution over the English words, just like a row of an attention map. Unlike attention
it knows nothing about word positions or context, only word identities.

Training is vectorised: every (English position, French position) pair of every sentence is
listed once as flat index arrays, and an EM iteration is a few ``index_add_`` calls over them.
Only word pairs that occur together in some sentence can get t > 0 after the first M-step,
so the table is estimated on those pairs and written into a dense (|E|+1, |F|) tensor at the end.
Training is deterministic; the vocabularies are sorted, so the order of the pairs does not matter.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import torch

from utils.i18n import _

NULL = "<null>"


# --------------------------------------------------------------------------- input checks

def _check_tokens(tokens, what: str) -> list[str]:
    """A non-empty list of string tokens, or a one-line ValueError."""
    if isinstance(tokens, str):
        raise ValueError(_("{what} is a str; pass a list of tokens (e.g. "
                           "utils.data.tokenize(s))").format(what=what))
    try:
        tokens = list(tokens)
    except TypeError:
        raise ValueError(_("{what} is a {tokens_type}; pass a list of str tokens").format(
            what=what, tokens_type=type(tokens).__name__)) from None
    if not tokens:
        raise ValueError(_("{what} is empty; pass at least one token").format(what=what))
    if not all(isinstance(token, str) for token in tokens):
        raise ValueError(_("{what} has a token that is not a str; pass a list of str "
                           "tokens").format(what=what))
    return tokens


def _check_pairs(pairs) -> list[tuple[list[str], list[str]]]:
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise ValueError(_("pairs must be a list of (english_tokens, french_tokens), "
                           "got {pairs_type}").format(pairs_type=type(pairs).__name__))
    if len(pairs) == 0:
        raise ValueError(_("pairs is empty; pass at least one (english_tokens, french_tokens) "
                           "pair"))
    checked = []
    for k, pair in enumerate(pairs):
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(_("pair {k} is not an (english_tokens, french_tokens) pair").format(
                k=k))
        english = _check_tokens(pair[0], f"the English sentence of pair {k}")
        french = _check_tokens(pair[1], f"the French sentence of pair {k}")
        if NULL in english:
            raise ValueError(_("the English sentence of pair {k} contains the reserved token "
                               "{null!r}; rename or drop that token").format(k=k, null=NULL))
        checked.append((english, french))
    return checked


def _check_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(_("iterations must be an int >= 1, got {iterations!r}").format(
            iterations=iterations))
    return iterations


# --------------------------------------------------------------------------- the model

@dataclasses.dataclass
class Model1:
    """A trained IBM Model 1.

    ``english_words`` is the sorted English vocabulary followed by ``NULL`` (so row
    ``english_index[e]`` of ``table`` is t(. | e), and the NULL row is the last);
    ``french_words`` is the sorted French vocabulary. ``table`` has shape (|E|+1, |F|),
    float32, each row summing to 1. ``log_likelihoods[k]`` is the mean, over all French
    tokens of the training pairs, of log( sum_j t(f | e_j) / (l + 1) ) under the table after
    EM iteration k+1 (l English words plus NULL; Brown et al.'s constant epsilon dropped).
    """

    english_words: list[str]
    french_words: list[str]
    english_index: dict[str, int]
    french_index: dict[str, int]
    table: torch.Tensor                 # (|E|+1, |F|), t(f | e), NULL row last
    iterations: int
    log_likelihoods: list[float]

    def _english_row(self, e: str) -> int:
        if e not in self.english_index:
            raise ValueError(_("unknown English word {e!r}: it is not in the training "
                               "pairs").format(e=e))
        return self.english_index[e]

    def _french_column(self, f: str) -> int:
        if f not in self.french_index:
            raise ValueError(_("unknown French word {f!r}: it is not in the training "
                               "pairs").format(f=f))
        return self.french_index[f]

    def translation_probability(self, f: str, e: str) -> float:
        """t(f | e); ``e`` may be ``NULL``. Words not seen in training raise a ValueError."""
        return float(self.table[self._english_row(e), self._french_column(f)])

    def table_heatmap_data(self, english_words, french_words) -> torch.Tensor:
        """t(f | e) for the given words, shape (len(french_words), len(english_words)), laid out
        like an attention map (rows: French, columns: English). Unknown words raise a ValueError."""
        english_words = _check_tokens(english_words, "english_words")
        french_words = _check_tokens(french_words, "french_words")
        rows = torch.tensor([self._english_row(e) for e in english_words])      # (n_e,)
        cols = torch.tensor([self._french_column(f) for f in french_words])     # (n_f,)
        return self.table[rows][:, cols].T.clone()                              # (n_f, n_e)

    def alignment_matrix(self, english_tokens, french_tokens, null: bool = False) -> torch.Tensor:
        """Posterior p(a_i = j | e, f) for French token i and English position j.

        Shape (len(french), len(english)), or (len(french), len(english) + 1) with the NULL
        column LAST when ``null=True``. Each row sums to 1 over the columns returned (with
        ``null=False`` it is renormalised over the English words only). An English word unseen
        in training gets t = 1 / |F| (the uniform starting value of EM); a French word unseen in
        training, or one whose t is 0 for every column, gets a uniform row.
        """
        english = _check_tokens(english_tokens, "english_tokens")
        french = _check_tokens(french_tokens, "french_tokens")
        if null:
            english = english + [NULL]
        floor = 1.0 / len(self.french_words)
        known_e = torch.tensor([e in self.english_index for e in english])      # (n_e,)
        known_f = torch.tensor([f in self.french_index for f in french])        # (n_f,)
        rows = torch.tensor([self.english_index.get(e, 0) for e in english])    # (n_e,)
        cols = torch.tensor([self.french_index.get(f, 0) for f in french])      # (n_f,)
        scores = self.table[rows][:, cols].T.to(torch.float64)                 # (n_f, n_e)
        scores[:, ~known_e] = floor
        scores[~known_f] = 1.0
        totals = scores.sum(dim=1, keepdim=True)                                # (n_f, 1)
        scores[totals.squeeze(1) == 0] = 1.0
        return (scores / scores.sum(dim=1, keepdim=True)).to(torch.float32)

    def align(self, english_tokens, french_tokens) -> set[tuple[int, int]]:
        """The Viterbi alignment: 0-based (english_index, french_index) links, one per French
        token at its most probable English position. A French token whose best position is
        NULL, or that is unknown to the model, gets no link. Ties go to the leftmost English
        position (Model 1 cannot tell repeated words apart)."""
        french = _check_tokens(french_tokens, "french_tokens")
        posterior = self.alignment_matrix(english_tokens, french, null=True)    # (n_f, n_e+1)
        best = posterior.argmax(dim=1)                                          # (n_f,)
        null_column = posterior.shape[1] - 1
        return {(int(j), i) for i, j in enumerate(best.tolist())
                if j != null_column and french[i] in self.french_index}


# --------------------------------------------------------------------------- training

def train_model1(pairs, iterations: int = 10) -> Model1:
    """Estimate t(f | e) by EM from (english_tokens, french_tokens) pairs, starting uniform."""
    pairs = _check_pairs(pairs)
    iterations = _check_iterations(iterations)

    english_words = sorted({e for english, _ in pairs for e in english}) + [NULL]
    french_words = sorted({f for _, french in pairs for f in french})
    english_index = {e: i for i, e in enumerate(english_words)}
    french_index = {f: i for i, f in enumerate(french_words)}
    null_row = english_index[NULL]

    # Flat index arrays over every (English position incl. NULL, French position) of every pair.
    e_ids, f_ids, token_ids, sizes = [], [], [], []
    token = 0
    for english, french in pairs:
        e_sentence = [english_index[e] for e in english] + [null_row]
        for f in french:
            f_id = french_index[f]
            e_ids.extend(e_sentence)
            f_ids.extend([f_id] * len(e_sentence))
            token_ids.extend([token] * len(e_sentence))
            sizes.append(len(e_sentence))
            token += 1
    e_ids = torch.tensor(e_ids)                                  # (P,) P = sum over pairs (l+1)*m
    f_ids = torch.tensor(f_ids)                                  # (P,)
    token_ids = torch.tensor(token_ids)                          # (P,) French token of each entry
    num_tokens = token
    log_positions = torch.tensor(sizes, dtype=torch.float64).log()   # (T,) log(l+1) per token

    # Distinct co-occurring (e, f) word pairs: the only table entries EM can make non-zero.
    keys, entry_pair = torch.unique(e_ids * len(french_words) + f_ids, return_inverse=True)
    pair_e = keys // len(french_words)                           # (U,)
    pair_f = keys % len(french_words)                            # (U,)
    t = torch.full((len(keys),), 1.0 / len(french_words), dtype=torch.float64)   # (U,) uniform

    def token_totals(t: torch.Tensor) -> torch.Tensor:
        """sum_j t(f | e_j) over the English positions of each French token, shape (T,)."""
        return torch.zeros(num_tokens, dtype=torch.float64).index_add_(0, token_ids, t[entry_pair])

    def mean_log_likelihood(totals: torch.Tensor) -> float:
        return float((totals.log() - log_positions).sum()) / num_tokens

    log_likelihoods = []
    totals = token_totals(t)
    for _ in range(iterations):
        posterior = t[entry_pair] / totals[token_ids]            # (P,) E-step
        counts = torch.zeros(len(keys), dtype=torch.float64).index_add_(0, entry_pair, posterior)
        per_english = torch.zeros(len(english_words), dtype=torch.float64).index_add_(
            0, pair_e, counts)                                   # (|E|+1,)
        t = counts / per_english[pair_e]                         # (U,) M-step
        totals = token_totals(t)
        log_likelihoods.append(mean_log_likelihood(totals))

    table = torch.zeros(len(english_words), len(french_words), dtype=torch.float32)
    table[pair_e, pair_f] = t.to(torch.float32)                  # (|E|+1, |F|)
    return Model1(english_words, french_words, english_index, french_index, table,
                  iterations, log_likelihoods)
