"""Trained models on disk, so that running a lesson again loads instead of retraining.

A model is stored as ``<course cache>/models/<kind>-<key>.pt`` (``~/.cache/attention-course``
by default), where ``key`` hashes everything that decides its weights: the settings, the
training pairs, the code that trains it (``utils.code_fingerprint``: any edit to the model,
training or data code changes the key, so a stale model is never loaded) and torch's version. Tests never touch the user's
cache: every test session gets a folder of its own (``ATTENTION_COURSE_CACHE``, set by
``tests/conftest.py``), and the training tests train for real (``use_cache=False``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import warnings
from typing import Callable

import torch

from utils.data import Vocab, cache_dir, read_pairs
from utils.i18n import _
from utils.training import TrainResult


# Trained weights that ship with the course (regenerate with ``python -m utils.shipped_models``).
# A model is found here when its settings, data file, code and torch version give the same key.
SHIPPED_DIR = pathlib.Path(__file__).resolve().parents[1] / "assets" / "models"


def model_cache_dir() -> pathlib.Path:
    """``<course cache>/models`` (``~/.cache/attention-course/models`` by default)."""
    return cache_dir() / "models"


def settings_key(kind: str, config, path=None, versions: dict | None = None) -> str:
    """A hash of ``kind``, every field of the dataclass ``config`` (which must have
    ``num_examples``), the training pairs it reads and ``versions`` (the code's fingerprint)."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"model": kind, **(versions or {}),
                              "torch": torch.__version__.split("+")[0],
                              **dataclasses.asdict(config)}, sort_keys=True).encode())
    for english, french in read_pairs(path, config.num_examples):
        digest.update(f"{english}\t{french}\n".encode())
    return digest.hexdigest()[:20]


def train_or_load(kind: str, config, *, vocabs: Callable, build: Callable, train: Callable,
                  versions: dict, path=None, use_cache: bool = True, refresh: bool = False,
                  result_type=TrainResult, **train_kwargs):
    """Load the ``kind`` model trained with ``config`` if cached, else train and store it.

    ``vocabs(config, path) -> (vocab, ...)`` (a translation model has a source and a target
    vocabulary, a language model one), ``build(config, *vocabs) -> model`` and
    ``train(config, path, **train_kwargs) -> (model, *vocabs, result)`` describe the model;
    ``result_type`` is the dataclass of ``result``. Returns (model, *vocabs, result,
    cache_file, from_cache). A cached file that cannot be read or does not fit is ignored with
    a warning and the model is retrained; ``use_cache=False`` neither reads nor writes;
    ``refresh=True`` always trains and then writes (the tests train for real this way, and the
    lessons run after them load what they trained).
    """
    name = f"{kind}-{settings_key(kind, config, path, versions)}.pt"
    cache_file = model_cache_dir() / name
    if use_cache and not refresh:
        for candidate in (cache_file, SHIPPED_DIR / name):     # the user's cache, then shipped
            if not candidate.is_file():
                continue
            try:
                saved = torch.load(candidate, map_location="cpu", weights_only=True)
                vocab_list = (stored_vocabs(candidate, len(saved["vocab_sizes"]))
                              or tuple(vocabs(config, path)))
                if saved["vocab_sizes"] != [len(vocab) for vocab in vocab_list]:
                    raise ValueError(_("vocabulary sizes differ"))
                model = build(config, *vocab_list)
                model.load_state_dict(saved["state_dict"])
                model.eval()
                return (model, *vocab_list, result_type(**saved["result"]), candidate, True)
            except Exception as error:   # noqa: BLE001 - any unreadable file means: retrain
                warnings.warn(_("ignoring the stored model {candidate} ({error}); "
                                "retraining").format(candidate=candidate, error=error),
                              UserWarning, stacklevel=3)
    model, *vocab_list, result = train(config, path, **train_kwargs)
    if use_cache:
        save_model(cache_file, model, vocab_list, result, config)
    return (model, *vocab_list, result, cache_file, False)


def save_model(file: pathlib.Path, model, vocabs, result, config) -> pathlib.Path:
    """Write a trained model as ``train_or_load`` reads it (atomically: never half a file).
    ``vocabs``: the model's vocabularies, in ``train_or_load``'s order."""
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = file.with_suffix(f".{os.getpid()}.part")              # two writers never collide
    torch.save({"state_dict": model.state_dict(), "result": dataclasses.asdict(result),
                "vocab_sizes": [len(vocab) for vocab in vocabs],
                "config": dataclasses.asdict(config)}, partial)
    write_vocabs(file, vocabs)
    os.replace(partial, file)
    return file


# ----------------------------------------------------------------------------- vocabularies
# A model's vocabularies are decided by what its key hashes (the settings, the training pairs
# and the code), so they are stored beside it and read back instead of being built again:
# building them splits and tokenizes the whole data file, 0.3-0.4 s a model.

def vocab_file(model_file: pathlib.Path) -> pathlib.Path:
    """``<kind>-<key>.vocabs.json`` beside ``<kind>-<key>.pt``: its vocabularies."""
    return model_file.with_name(model_file.stem + ".vocabs.json")


def write_vocabs(model_file: pathlib.Path, vocabs) -> pathlib.Path:
    """Store ``vocabs`` (``utils.data.Vocab``s, in ``train_or_load``'s order) beside
    ``model_file``, atomically."""
    target = vocab_file(model_file)
    state = [{"idx_to_token": vocab.idx_to_token, "token_freqs": vocab.token_freqs}
             for vocab in vocabs]
    partial = target.with_suffix(f".{os.getpid()}.part")
    partial.write_text(json.dumps({"vocabs": state}, ensure_ascii=False, separators=(",", ":")),
                       encoding="utf-8")
    os.replace(partial, target)
    return target


def _vocab_from_state(state: dict) -> Vocab:
    vocab = Vocab.__new__(Vocab)
    vocab.idx_to_token = [str(token) for token in state["idx_to_token"]]
    vocab.token_to_idx = {token: index for index, token in enumerate(vocab.idx_to_token)}
    vocab._token_freqs = [(str(token), int(freq)) for token, freq in state["token_freqs"]]
    if (len(vocab.token_to_idx) != len(vocab.idx_to_token)
            or set(vars(vocab)) != set(vars(Vocab()))):
        raise ValueError("not the state of a utils.data.Vocab")
    return vocab


def stored_vocabs(model_file: pathlib.Path, count: int) -> tuple | None:
    """The ``count`` vocabularies stored beside ``model_file``, or None when there is no such
    file or it does not hold them (the caller then builds them from the data)."""
    try:
        state = json.loads(vocab_file(model_file).read_text(encoding="utf-8"))["vocabs"]
        vocabs = tuple(_vocab_from_state(item) for item in state)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return vocabs if len(vocabs) == count else None
