"""Import d2l 1.0.3 as a reference oracle for parity tests, never as a course dependency.

d2l is installed with ``pip install --no-deps`` (the Makefile does it) because its pins (numpy
1.23.5, ...) clash with ours. Its ``torch`` module imports torchvision at import time, and no
torchvision build loads against the CPU torch here, so we hand it an empty stand-in module: the
functions we compare against (masking, attention, positional encoding) never touch torchvision.
"""

import sys
import types

import pytest


def load_d2l():
    """Return ``d2l.torch``, or fail the test with a message saying how to install it."""
    for name in ("torchvision", "torchvision.transforms"):
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
    try:
        from d2l import torch as d2l
    except ImportError as exc:  # pragma: no cover - only when the env is incomplete
        pytest.fail(f"d2l oracle unavailable ({exc}); run 'make setup' (installs d2l==1.0.3 --no-deps)")
    return d2l
