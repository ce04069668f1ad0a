"""The training tests' two modes: the shipped model (the default) or a run from scratch.

The book-sized models (``BahdanauConfig()``, ``TransformerConfig()``, lesson 7's causal-mask
demo runs) ship in ``assets/models``, under a key that hashes their settings, the data and the
code that trains them (``utils.code_fingerprint``): a shipped file exists only for the current
training code, and ``python -m utils.shipped_models NAME`` makes it again after a change.

- Default (``make test``): the tests' assertions on quality (loss, BLEU, attention) run on the
  shipped model, and ``assert_training_follows_the_shipped_curve`` trains the first
  ``CURVE_EPOCHS`` epochs here, from the same seed, and compares them with the shipped run's
  losses: training on this machine follows the run that made the file.
- ``ATTENTION_COURSE_FULL_TRAINING=1`` (``make test-training``): every model is trained from
  scratch for all its epochs (minutes), the same assertions run on it, and its first epochs are
  compared with the shipped run's.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

import pytest
import torch

from utils.shipped_models import presets, shipped_file

FULL_TRAINING = os.environ.get("ATTENTION_COURSE_FULL_TRAINING") == "1"

# Ten epochs take 4-8 s of CPU per model. Over them, the losses this machine's kernels give equal
# the shipped runs' exactly; torch's generic kernels (ATEN_CPU_CAPABILITY=default, another
# machine's round-off) differ by at most 9e-8 (Bahdanau) and 1.8e-3 (the Transformers) relative.
CURVE_EPOCHS = 10
CURVE_RTOL = 1e-2


def require_shipped(preset: str, path) -> "os.PathLike":
    """The shipped file of ``preset``; fails with the command that makes it when it is missing."""
    file = shipped_file(preset, path)
    if not file.is_file():
        pytest.fail(f"no shipped model {file.name} for preset {preset!r} and the current code; "
                    f"make it with 'python -m utils.shipped_models {preset}'")
    return file


def shipped_losses(preset: str, path) -> list[float]:
    """The per-epoch losses of the run that made the shipped file of ``preset``."""
    saved = torch.load(require_shipped(preset, path), map_location="cpu", weights_only=True)
    return saved["result"]["losses"]


def load_shipped(preset: str, train_or_load, path):
    """(model, *vocabs, result) of the shipped file, read with an empty model cache (so that
    nothing but the shipped file can answer) and never trained."""
    file = require_shipped(preset, path)
    _, config, *_ = presets()[preset]
    with tempfile.TemporaryDirectory(prefix="shipped-only-") as empty, \
            pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_COURSE_CACHE", empty)
        model, *vocabs, result, cache_file, from_cache = train_or_load(
            config, path, animate=False, show_progress=False)
    assert from_cache and cache_file == file, f"{preset}: read {cache_file}, not {file}"
    return (model, *vocabs, result)


def shipped_or_trained(preset: str, train_or_load, path):
    """(model, *vocabs, result) of ``preset``: the shipped model, or in full mode one trained
    here from scratch (neither reading nor writing the model cache)."""
    if not FULL_TRAINING:
        return load_shipped(preset, train_or_load, path)
    _, config, *_ = presets()[preset]
    model, *vocabs, result, _, from_cache = train_or_load(
        config, path, use_cache=False, animate=False, show_progress=False)
    assert not from_cache
    return (model, *vocabs, result)


def assert_training_follows_the_shipped_curve(preset: str, train_or_load, path,
                                              result=None) -> list[float]:
    """The first ``CURVE_EPOCHS`` losses of a run here equal the shipped run's within
    ``CURVE_RTOL``. ``result``: a full run made here (full mode); else the epochs are trained
    now. Returns the losses compared."""
    if result is not None and FULL_TRAINING:
        here = result.losses[:CURVE_EPOCHS]
    else:
        _, config, *_ = presets()[preset]
        short = dataclasses.replace(config, num_epochs=CURVE_EPOCHS)
        *_, run, _, from_cache = train_or_load(short, path, use_cache=False, animate=False,
                                               show_progress=False)
        assert not from_cache
        here = run.losses
    assert_losses_follow_the_shipped_run(preset, here, path)
    return here


def assert_losses_follow_the_shipped_run(preset: str, here: list[float], path) -> None:
    """``here`` (``CURVE_EPOCHS`` losses) equal the first losses of ``preset``'s shipped run
    within ``CURVE_RTOL``."""
    shipped = shipped_losses(preset, path)[:CURVE_EPOCHS]
    assert len(here) == len(shipped) == CURVE_EPOCHS
    worst = max(abs(a - b) / abs(b) for a, b in zip(here, shipped))
    assert worst <= CURVE_RTOL, (f"{preset}: epoch losses here {here} differ from the shipped "
                                 f"run's {shipped} by {worst:.2e} relative (> {CURVE_RTOL})")
