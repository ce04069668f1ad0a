"""Guided alignment (utils.guided_alignment): Model 1's links as attention targets, the loss
that pulls attention towards them, and the config that switches it on."""

import dataclasses

import pytest
import torch

from utils.data import EOS, PAD, Vocab
from utils.guided_alignment import alignment_targets, guided_alignment_loss, model1_prior
from utils.ibm_model1 import train_model1
from utils.seq2seq import (LESSON_ALIGNED, LESSON_BAHDANAU, LESSON_NO_ATTENTION,
                           guided_alignment_objective)

PAIRS = [("the cat".split(), "le chat".split()), ("the dog".split(), "le chien".split()),
         ("a cat".split(), "un chat".split()), ("a dog".split(), "un chien".split())]


@pytest.fixture(scope="module")
def setup():
    model1 = train_model1(PAIRS, iterations=20)
    src = Vocab([w for e, _ in PAIRS for w in e])
    tgt = Vocab([w for _, f in PAIRS for w in f])
    return model1, src, tgt, model1_prior(model1, src, tgt)


def batch(src, tgt, english, french, src_steps=4, tgt_steps=4):
    """One sentence pair as ids, with <eos> and padding: X (1, src_steps), Y (1, tgt_steps)."""
    x = src[english + [EOS]] + [src[PAD]] * (src_steps - len(english) - 1)
    y = tgt[french + [EOS]] + [tgt[PAD]] * (tgt_steps - len(french) - 1)
    return (torch.tensor([x]), torch.tensor([len(english) + 1]), torch.tensor([y]),
            torch.tensor([len(french) + 1]))


def test_prior_holds_model1_table_by_vocabulary_id_and_links_eos_to_eos(setup):
    model1, src, tgt, prior = setup
    assert prior.shape == (len(tgt), len(src))
    for f, e in (("chat", "cat"), ("le", "the"), ("chien", "a")):
        assert prior[tgt[f], src[e]].item() == pytest.approx(model1.translation_probability(f, e))
    assert prior[tgt[EOS]].tolist() == [1.0 if i == src[EOS] else 0.0 for i in range(len(src))]
    assert prior[tgt["<unk>"]].sum().item() == 0


def test_targets_follow_the_links_and_skip_padding_and_unknown_words(setup):
    _, src, tgt, prior = setup
    X, X_len, Y, _ = batch(src, tgt, ["the", "cat"], ["le", "chat"])
    targets, has_target = alignment_targets(prior, X, X_len, Y)          # (1, 4, 4), (1, 4)
    assert torch.allclose(targets[0, :3].sum(-1), torch.ones(3))
    assert targets[0, :, 3].abs().max().item() == 0                      # padding: no mass
    assert targets[0, 0].argmax().item() == 0 and targets[0, 1].argmax().item() == 1
    assert targets[0, 2].argmax().item() == 2                            # <eos> -> <eos>
    assert has_target[0].tolist() == [True, True, True, False]           # pad row: no target
    Y_unknown = Y.clone()
    Y_unknown[0, 0] = tgt["<unk>"]
    assert not alignment_targets(prior, X, X_len, Y_unknown)[1][0, 0]


def test_loss_is_smallest_on_the_links_and_larger_for_a_map_shifted_right(setup):
    _, src, tgt, prior = setup
    X, X_len, Y, Y_len = batch(src, tgt, ["the", "cat"], ["le", "chat"])
    targets, _ = alignment_targets(prior, X, X_len, Y)
    aligned = targets.clone()
    aligned[0, 3] = torch.tensor([0.25] * 4)                             # a padding row
    shifted = torch.roll(aligned, shifts=1, dims=-1) * 0.9 + 0.1 / 4     # one word ahead
    on_links = guided_alignment_loss(aligned, prior, X, X_len, Y, Y_len)  # (1, 4)
    ahead = guided_alignment_loss(shifted, prior, X, X_len, Y, Y_len)
    assert on_links.shape == (1, 4) and on_links[0, 3].item() == 0      # padding adds nothing
    assert ahead.sum().item() > on_links.sum().item() + 1.0
    with pytest.raises(ValueError, match="target steps, source steps"):
        guided_alignment_loss(aligned.transpose(1, 2)[:, :3], prior, X, X_len, Y, Y_len)


def test_config_switches_guidance_on_only_with_attention():
    assert LESSON_ALIGNED.guided_alignment == 1.0
    assert dataclasses.replace(LESSON_ALIGNED, guided_alignment=0.0) == LESSON_BAHDANAU
    assert guided_alignment_objective(LESSON_BAHDANAU, None, None) is None
    with pytest.raises(ValueError, match="needs attention"):
        dataclasses.replace(LESSON_NO_ATTENTION, guided_alignment=0.5)
    for bad in (-1.0, True, "1"):
        with pytest.raises(ValueError, match="guided_alignment must be a number >= 0"):
            dataclasses.replace(LESSON_BAHDANAU, guided_alignment=bad)
