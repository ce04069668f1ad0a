"""One seeding helper for every lesson, exercise and test."""

import os
import random

import numpy as np
import torch


def set_seed(seed: int = 0, deterministic: bool = True) -> None:
    """Seed Python's ``random``, NumPy and PyTorch; switch on deterministic algorithms.

    Call it once at the top of a lesson, exercise or test. For a DataLoader or sampler that
    wants its own random stream, use ``seeded_generator``.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}; pass e.g. set_seed(0)")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Needed by some CUDA kernels under deterministic mode; harmless on CPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(deterministic)


def seeded_generator(seed: int = 0) -> torch.Generator:
    """A ``torch.Generator`` of its own, seeded with ``seed`` (for DataLoader shuffling)."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
