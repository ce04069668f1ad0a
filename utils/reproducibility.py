"""One seeding helper for every lesson, exercise and test."""

import os
import random

import numpy as np
import torch


def set_seed(seed: int = 0, deterministic: bool = True) -> torch.Generator:
    """Seed Python's ``random``, NumPy and PyTorch; switch on deterministic algorithms.

    Returns a ``torch.Generator`` seeded with ``seed`` for DataLoaders and samplers that
    want their own stream.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}; pass e.g. set_seed(0)")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Needed by some CUDA kernels under deterministic mode; harmless on CPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(deterministic)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
