"""set_seed makes torch, numpy and random repeat themselves."""

import random

import numpy as np
import pytest
import torch

from utils.reproducibility import seeded_generator, set_seed


def _draw():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_same_seed_same_numbers_other_seed_other_numbers():
    set_seed(3)
    first = _draw()
    set_seed(3)
    assert _draw() == first
    set_seed(4)
    assert _draw() != first


def test_deterministic_algorithms_switched_on():
    set_seed(0)
    assert torch.are_deterministic_algorithms_enabled()


def test_seeded_generator_is_independent_and_repeatable():
    a = torch.rand(3, generator=seeded_generator(7))
    b = torch.rand(3, generator=seeded_generator(7))
    assert torch.equal(a, b)


@pytest.mark.parametrize("bad", [-1, 1.5, "0"])
def test_rejects_bad_seed(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        set_seed(bad)
