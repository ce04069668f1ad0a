"""Guided alignment: a second training loss that pulls attention towards a statistical aligner.

Left alone, lesson 4's attention learns whatever helps the next word most, and that is often
the English word one step ahead. Guided alignment (Chen et al. 2016, "Guided Alignment Training
for Topic-Aware Neural Machine Translation"; Garg et al. 2019 do the same for one Transformer
head) adds, for every French target token, the cross-entropy between the attention row and the
word links of IBM Model 1 (``utils.ibm_model1``) trained on the same pairs:

    loss = translation loss + weight * sum over target tokens of  -sum_j p_M1(j | e, f) log a_tj

where p_M1(j | e, f) is Model 1's posterior that French token t comes from English position j
(NULL left out, renormalised over the sentence's real tokens) and a_tj the attention weight.
The target ``<eos>`` is linked to the source ``<eos>``. Tokens Model 1 cannot link (unknown
words) add nothing.
"""

import torch

from utils.data import EOS, Vocab
from utils.i18n import _


def model1_prior(model1, src_vocab: Vocab, tgt_vocab: Vocab) -> torch.Tensor:
    """t(f | e) laid out by vocabulary ids: (len(tgt_vocab), len(src_vocab)), float32.

    Words Model 1 never saw (``<unk>``, ``<pad>``, ``<bos>``) get 0; target ``<eos>`` has all
    its mass on source ``<eos>``."""
    prior = torch.zeros(len(tgt_vocab), len(src_vocab))
    src_ids = [(e, src_vocab[e]) for e in model1.english_words
               if e in src_vocab.token_to_idx]
    rows = torch.tensor([model1.english_index[e] for e, _ in src_ids], dtype=torch.long)
    cols = torch.tensor([i for _, i in src_ids], dtype=torch.long)
    for f, column in model1.french_index.items():
        if f in tgt_vocab.token_to_idx:
            prior[tgt_vocab[f], cols] = model1.table[rows, column]
    prior[tgt_vocab[EOS]] = 0.0
    prior[tgt_vocab[EOS], src_vocab[EOS]] = 1.0
    return prior


def alignment_targets(prior: torch.Tensor, X: torch.Tensor, X_valid_len: torch.Tensor,
                      Y: torch.Tensor):
    """Model 1's posterior for a batch: (targets (b, tgt_steps, src_steps) whose rows sum to 1,
    has_target (b, tgt_steps) False where no real source token can produce the word)."""
    tgt_steps = Y.shape[1]
    scores = prior[Y.long()]                                              # (b, tgt, |src vocab|)
    scores = torch.gather(scores, 2, X.long()[:, None, :].expand(-1, tgt_steps, -1))  # (b,tgt,src)
    real = torch.arange(X.shape[1], device=X.device)[None, :] < X_valid_len[:, None]   # (b, src)
    scores = scores * real[:, None, :]
    mass = scores.sum(dim=-1)                                             # (b, tgt)
    return scores / mass.clamp_min(1e-12)[..., None], mass > 0


def guided_alignment_loss(weights: torch.Tensor, prior: torch.Tensor, X: torch.Tensor,
                          X_valid_len: torch.Tensor, Y: torch.Tensor,
                          Y_valid_len: torch.Tensor) -> torch.Tensor:
    """Per target token (b, tgt_steps): cross-entropy of the attention ``weights``
    (b, tgt_steps, src_steps) against Model 1's posterior; 0 for padding and unlinkable words."""
    if weights.shape != (Y.shape[0], Y.shape[1], X.shape[1]):
        raise ValueError(_("attention weights must have shape (batch, target steps, source "
                           "steps) = {expected}, got {shape}").format(
            expected=(Y.shape[0], Y.shape[1], X.shape[1]), shape=tuple(weights.shape)))
    targets, has_target = alignment_targets(prior, X, X_valid_len, Y)
    real = torch.arange(Y.shape[1], device=Y.device)[None, :] < Y_valid_len[:, None]  # (b, tgt)
    cross_entropy = -(targets * torch.log(weights.clamp_min(1e-9))).sum(dim=-1)       # (b, tgt)
    return cross_entropy * (real & has_target)
