"""set_seed makes torch, numpy and random repeat themselves."""

import pathlib
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


def test_set_seed_does_not_import_the_compiler():
    """set_seed switches deterministic mode without torch._inductor (seconds per process)."""
    import subprocess
    import sys
    code = ("import sys, torch; from utils.reproducibility import set_seed; set_seed(0); "
            "print(torch.are_deterministic_algorithms_enabled(), "
            "'torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=pathlib.Path(__file__).resolve().parents[1]).stdout
    assert out.split() == ["True", "False"]


def test_switch_deterministic_off_and_on():
    from utils.reproducibility import switch_deterministic
    switch_deterministic(False)
    assert not torch.are_deterministic_algorithms_enabled()
    switch_deterministic(True)
    assert torch.are_deterministic_algorithms_enabled()
