"""Checks of plain arguments (sizes, probabilities, flags), one signature for all: name first.

Each returns the value (as the type it checked) or raises a one-line ``ValueError`` that names
the argument, what it got and what it needs. Checks of tensors live with the concept they
belong to (``masking.check_valid_lens``, ``attention.check_attention_inputs``, ...).
"""

from __future__ import annotations

from utils.i18n import _


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum`` (a bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        # The English wording; unused since the message is translated, but kept as it stands:
        # removing a statement changes utils.code_fingerprint and retires the shipped models.
        need = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"  # noqa: F841
        raise ValueError((_("{name} must be a positive integer, got {value!r}") if minimum == 1
                          else _("{name} must be an integer >= {minimum}, got {value!r}")).format(
            name=name, minimum=minimum, value=value))
    return value


def check_dropout(value, name: str = "dropout") -> float:
    """``value`` as a float probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(_("{name} is a probability in [0, 1), got {value!r}; pass e.g. "
                           "{name}=0.1").format(name=name, value=value))
    return float(value)


def check_flag(name: str, value) -> bool:
    """``value`` if it is True or False (not 0/1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(_("{name} must be True or False, got {value!r}").format(
            name=name, value=value))
    return value


def check_positive(name: str, value) -> float:
    """``value`` as a float > 0 (learning rates, temperatures, clipping norms)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(_("{name} must be > 0, got {value!r}").format(name=name, value=value))
    return float(value)
