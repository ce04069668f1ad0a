"""Evaluations of the shipped models, computed once and stored beside them (lessons 4 and 7).

Lesson 4 scores five shipped translation models on the held-out sentences (corpus BLEU of 1,061
greedy translations each) and on the hand-aligned gold set (teacher-forced attention maps, and
IBM Model 1's maps after 10 EM iterations); lesson 7 scores its Transformer on the same held-out
sentences, beside lesson 4's main model. The results depend only on the shipped weights, the
data and the code, so they are computed once and stored as ``assets/evaluations/<kind>-<key>.json.gz``;
a lesson reads them instead of computing them again::

    heldout_bleu(model, src_vocab, tgt_vocab, num_steps, trained_on=(), path=None)
        -> (score, details), as utils.training.heldout_bleu
    gold_maps(model, src_vocab, tgt_vocab, gold_pairs)
        -> [utils.alignment.teacher_forced_attention of each pair]
    model1_gold_maps(config, gold_pairs, path=None, iterations=10)
        -> utils.alignment.model1_maps(train_model1_on(config, path, iterations), gold_pairs)

``key`` hashes everything the result depends on: the model's weights and vocabularies (not its
file name: a model trained elsewhere has weights of its own), the settings, the data pairs, the
gold pairs' tokens, torch's version and the code (``utils.code_fingerprint`` of the model,
training, data, held-out, BLEU and alignment modules, and this module's own source). Any change
to one of them misses the stored file, and the result is computed (and kept in
``<course cache>/evaluations``, so a second run reads it); a stored number is never served for
other code or other weights. BLEU itself is always computed from the stored translations.

``python -m utils.stored_evaluations`` recomputes the lesson's evaluations from the shipped models
and rewrites ``assets/evaluations`` (after ``python -m utils.shipped_models``);
``tests/test_stored_evaluations.py`` recomputes every stored file and compares.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import warnings

import torch

from utils.i18n import _

STORED_DIR = pathlib.Path(__file__).resolve().parents[1] / "assets" / "evaluations"
FORMAT = 1                      # the layout of a stored file; bump it to retire every one


def evaluation_cache_dir() -> pathlib.Path:
    """``<course cache>/evaluations`` (``~/.cache/attention-course/evaluations`` by default)."""
    from utils.data import cache_dir

    return cache_dir() / "evaluations"


# ============================================================================ keys

def _digest(*chunks) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk if isinstance(chunk, bytes) else str(chunk).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def weights_digest(model: torch.nn.Module) -> str:
    """A hash of every tensor of ``model.state_dict()``: names, dtypes, shapes and values."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(_("model must be a torch.nn.Module, got {model_type}; pass a trained "
                           "model such as train_or_load_bahdanau's first result").format(
            model_type=type(model).__name__))
    chunks = []
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu().contiguous()
        chunks += [name, tensor.dtype, tuple(tensor.shape), tensor.numpy().tobytes()]
    return _digest(*chunks)


def _vocab_tokens(name: str, vocab) -> list:
    tokens = getattr(vocab, "idx_to_token", None)
    if not isinstance(tokens, list):
        raise ValueError(_("{name} must be a utils.data.Vocab, got {vocab_type}; pass the "
                           "vocabularies returned with the model").format(
            name=name, vocab_type=type(vocab).__name__))
    return tokens


def _gold_tokens(gold_pairs) -> list:
    gold_pairs = list(gold_pairs)
    if not gold_pairs or not all(hasattr(pair, "english") and hasattr(pair, "french")
                                 for pair in gold_pairs):
        raise ValueError(_("gold_pairs must be a non-empty list of GoldPair; pass "
                           "utils.gold_alignment.load_gold()"))
    return [[list(pair.english), list(pair.french)] for pair in gold_pairs]


def _data_digest(path=None) -> str:
    from utils.data import read_pairs

    return _digest(*(f"{english}\t{french}" for english, french in read_pairs(path, None)))


def code_versions() -> dict:
    """The code part of every key: the models' fingerprints (they cover ``utils.training``,
    ``utils.heldout``, ``utils.bleu``, ``utils.alignment``, ``utils.ibm_model1`` and
    ``utils.data``), this module's own and torch's version."""
    from utils.code_fingerprint import code_fingerprint, source_fingerprint

    return {"code": code_fingerprint("utils.seq2seq"),
            "transformer_code": code_fingerprint("utils.transformer"), "format": FORMAT,
            "evaluations": source_fingerprint([pathlib.Path(__file__)]),
            "torch": torch.__version__.split("+")[0]}


def evaluation_key(kind: str, inputs: dict) -> str:
    """``kind`` and a hash of ``inputs`` (JSON-able) and ``code_versions()``: a file name stem."""
    text = json.dumps({"kind": kind, **code_versions(), **inputs}, sort_keys=True)
    return f"{kind}-{_digest(text)}"


# ============================================================================ files

def _read(stem: str):
    """The stored result named ``stem`` (assets first, then the user's cache), or None."""
    for folder in (STORED_DIR, evaluation_cache_dir()):
        file = folder / f"{stem}.json.gz"
        if not file.is_file():
            continue
        try:
            with gzip.open(file, "rt", encoding="utf-8") as f:
                saved = json.load(f)
            if saved.get("key") != stem:
                raise ValueError(_("it holds {key}").format(key=saved.get("key")))
            return saved["result"]
        except Exception as error:   # noqa: BLE001 - any unreadable file means: compute again
            warnings.warn(_("ignoring the stored evaluation {file} ({error}); computing it "
                            "again").format(file=file, error=error), UserWarning, stacklevel=3)
    return None


def _write(folder: pathlib.Path, stem: str, description: dict, result) -> pathlib.Path:
    """Write ``result`` as ``folder/stem.json.gz`` (atomically); gzip's header holds no time,
    so the same result gives the same bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{stem}.json.gz"
    partial = file.with_suffix(f".{os.getpid()}.part")
    text = json.dumps({"key": stem, "inputs": description, "result": result}, sort_keys=True,
                      ensure_ascii=False)
    with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="",
                                                   mtime=0) as f:
        f.write(text.encode("utf-8"))
    os.replace(partial, file)
    return file


def _stored_or_computed(stem: str, description: dict, compute, store: bool):
    """(result, from_store): the stored result, or ``compute()`` kept in the user's cache."""
    result = _read(stem) if store else None
    if result is not None:
        return result, True
    result = compute()
    if store:
        _write(evaluation_cache_dir(), stem, description, result)
    return result, False


def _maps_to_json(maps) -> dict:
    dtypes = {str(weights.dtype) for weights in maps}
    if len(dtypes) != 1:
        raise ValueError(_("the maps have dtypes {dtypes}; expected one").format(dtypes=sorted(dtypes)))
    return {"dtype": dtypes.pop().replace("torch.", ""), "maps": [weights.tolist() for weights in maps]}


def _maps_from_json(stored: dict) -> list:
    dtype = getattr(torch, stored["dtype"])
    return [torch.tensor(weights, dtype=dtype) for weights in stored["maps"]]


# ============================================================================ evaluations

def heldout_key(model, src_vocab, tgt_vocab, num_steps: int, trained_on=(), path=None) -> str:
    """The file name stem of ``heldout_bleu``'s stored translations for these arguments."""
    english = [pair[0] if isinstance(pair, (tuple, list)) else pair for pair in trained_on]
    return evaluation_key("heldout", {
        "weights": weights_digest(model), "num_steps": num_steps,
        "vocabs": _digest(json.dumps([_vocab_tokens("src_vocab", src_vocab),
                                      _vocab_tokens("tgt_vocab", tgt_vocab)])),
        "trained_on": _digest(json.dumps(english)), "data": _data_digest(path)})


def heldout_bleu(model, src_vocab, tgt_vocab, num_steps: int, trained_on=(), path=None, *,
                 store: bool = True):
    """``utils.training.heldout_bleu``: (corpus BLEU, details), the translations read from a
    stored evaluation when there is one for these weights, settings, data and code.

    ``store=False`` neither reads nor writes (always translates).
    """
    from utils.bleu import corpus_bleu
    from utils.training import heldout_bleu as compute_heldout_bleu

    stem = heldout_key(model, src_vocab, tgt_vocab, num_steps, trained_on, path)
    details, _stored = _stored_or_computed(
        stem, {"evaluation": "utils.training.heldout_bleu", "num_steps": num_steps},
        lambda: compute_heldout_bleu(model, src_vocab, tgt_vocab, num_steps, trained_on, path)[1],
        store)
    return corpus_bleu(details["predictions"], details["references"]), details


def gold_maps_key(model, src_vocab, tgt_vocab, gold_pairs) -> str:
    """The file name stem of ``gold_maps``' stored maps for these arguments."""
    return evaluation_key("gold-maps", {
        "weights": weights_digest(model),
        "vocabs": _digest(json.dumps([_vocab_tokens("src_vocab", src_vocab),
                                      _vocab_tokens("tgt_vocab", tgt_vocab)])),
        "gold": _digest(json.dumps(_gold_tokens(gold_pairs)))})


def gold_maps(model, src_vocab, tgt_vocab, gold_pairs, *, store: bool = True) -> list:
    """``teacher_forced_attention`` of ``model`` on every gold pair (a list of CPU tensors
    (French + 1, English + 1)), read from a stored evaluation when there is one."""
    from utils.alignment import teacher_forced_attention

    gold_pairs = list(gold_pairs)
    stem = gold_maps_key(model, src_vocab, tgt_vocab, gold_pairs)
    stored, _stored = _stored_or_computed(
        stem, {"evaluation": "utils.alignment.teacher_forced_attention", "pairs": len(gold_pairs)},
        lambda: _maps_to_json([teacher_forced_attention(model, src_vocab, tgt_vocab, pair.english,
                                                        pair.french) for pair in gold_pairs]),
        store)
    return _maps_from_json(stored)


def model1_key(config, gold_pairs, path=None, iterations: int = 10) -> str:
    """The file name stem of ``model1_gold_maps``' stored maps for these arguments."""
    from utils.model_cache import settings_key

    return evaluation_key("model1-gold-maps", {
        "settings": settings_key("ibm-model1", config, path), "iterations": iterations,
        "data": _data_digest(path), "gold": _digest(json.dumps(_gold_tokens(gold_pairs)))})


def model1_gold_maps(config, gold_pairs, path=None, iterations: int = 10, *,
                     store: bool = True) -> list:
    """``model1_maps(train_model1_on(config, path, iterations), gold_pairs)``: IBM Model 1
    trained on the pairs ``config`` trains on, its map of every gold pair; read from a stored
    evaluation when there is one."""
    from utils.alignment import model1_maps, train_model1_on

    gold_pairs = list(gold_pairs)
    stem = model1_key(config, gold_pairs, path, iterations)
    stored, _stored = _stored_or_computed(
        stem, {"evaluation": "utils.alignment.model1_maps", "iterations": iterations,
               "pairs": len(gold_pairs)},
        lambda: _maps_to_json(model1_maps(train_model1_on(config, path, iterations), gold_pairs)),
        store)
    return _maps_from_json(stored)


# ============================================================================ the lesson's set

def lesson_evaluations():
    """Yield (description, stem, compute) for every evaluation lessons 4 and 7 read:
    ``compute()`` gives the result as stored, computed afresh from the shipped models."""
    from utils.alignment import model1_maps, teacher_forced_attention, train_model1_on
    from utils.gold_alignment import load_gold
    from utils.seq2seq import (LESSON_ALIGNED, LESSON_BAHDANAU, LESSON_BOOK_DECODER,
                               LESSON_NO_ATTENTION, LESSON_PAPER_ENCODER, train_or_load_bahdanau)
    from utils.training import heldout_bleu as compute_heldout_bleu
    from utils.transformer import LESSON_TRANSFORMER, train_or_load_transformer

    gold = load_gold()
    lesson = (("LESSON_BOOK_DECODER", LESSON_BOOK_DECODER, True),       # (name, config, maps)
              ("LESSON_PAPER_ENCODER", LESSON_PAPER_ENCODER, True),
              ("LESSON_BAHDANAU", LESSON_BAHDANAU, True),
              ("LESSON_NO_ATTENTION", LESSON_NO_ATTENTION, False),
              ("LESSON_ALIGNED", LESSON_ALIGNED, True))
    for name, config, has_maps in lesson:
        model, src, tgt, _result, model_file, loaded = train_or_load_bahdanau(
            config, animate=False, show_progress=False)
        if not loaded:
            raise RuntimeError(_("no shipped model for {name}; run python -m utils.shipped_models "
                                 "first").format(name=name))
        yield ({"evaluation": "heldout", "config": name, "model": model_file.name},
               heldout_key(model, src, tgt, config.num_steps),
               lambda m=model, s=src, t=tgt, n=config.num_steps: compute_heldout_bleu(m, s, t, n)[1])
        if has_maps:
            yield ({"evaluation": "gold-maps", "config": name, "model": model_file.name},
                   gold_maps_key(model, src, tgt, gold),
                   lambda m=model, s=src, t=tgt: _maps_to_json(
                       [teacher_forced_attention(m, s, t, pair.english, pair.french)
                        for pair in gold]))
    model, src, tgt, _result, model_file, loaded = train_or_load_transformer(
        LESSON_TRANSFORMER, animate=False, show_progress=False)
    if not loaded:
        raise RuntimeError(_("no shipped model for {name}; run python -m utils.shipped_models "
                             "first").format(name="LESSON_TRANSFORMER"))
    yield ({"evaluation": "heldout", "config": "LESSON_TRANSFORMER", "model": model_file.name},
           heldout_key(model, src, tgt, LESSON_TRANSFORMER.num_steps),
           lambda: compute_heldout_bleu(model, src, tgt, LESSON_TRANSFORMER.num_steps)[1])
    yield ({"evaluation": "model1-gold-maps", "config": "LESSON_BAHDANAU", "iterations": 10},
           model1_key(LESSON_BAHDANAU, gold),
           lambda: _maps_to_json(model1_maps(train_model1_on(LESSON_BAHDANAU), gold)))


def write_shipped(folder: pathlib.Path = STORED_DIR) -> list:
    """Compute every evaluation of ``lesson_evaluations`` and write it to ``folder``; files
    there that no longer match are removed. Returns the files written."""
    written = []
    for description, stem, compute in lesson_evaluations():
        written.append(_write(folder, stem, description, compute()))
        print(f"{written[-1].name}: {description}")
    for stale in folder.glob("*.json.gz"):
        if stale not in written:
            stale.unlink()
            print(f"removed {stale.name}")
    return written


if __name__ == "__main__":
    torch.set_num_threads(1)
    write_shipped()
