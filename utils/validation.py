"""Checks of plain arguments (sizes, probabilities, flags), one signature for all: name first.

Each returns the value (as the type it checked) or raises a one-line ``ValueError`` that names
the argument, what it got and what it needs. Checks of tensors live with the concept they
belong to (``masking.check_valid_lens``, ``attention.check_attention_inputs``, ...).
"""

from __future__ import annotations


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum`` (a bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        need = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {need}, got {value!r}")
    return value


def check_dropout(value, name: str = "dropout") -> float:
    """``value`` as a float probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} is a probability in [0, 1), got {value!r}; pass e.g. "
                         f"{name}=0.1")
    return float(value)


def check_flag(name: str, value) -> bool:
    """``value`` if it is True or False (not 0/1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_positive(name: str, value) -> float:
    """``value`` as a float > 0 (learning rates, temperatures, clipping norms)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)
