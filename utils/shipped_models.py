"""The trained models that ship under ``assets/models/``, and how to make them again.

    python -m utils.shipped_models all            # retrain all ten (about 35 minutes)
    python -m utils.shipped_models transformer    # or one of them (see ``presets()``)

Each model is trained on one CPU thread from its preset (``LESSON_BAHDANAU``,
``LESSON_NO_ATTENTION``, lesson 4's two comparison models ``LESSON_BOOK_DECODER`` and
``LESSON_PAPER_ENCODER``, ``LESSON_TRANSFORMER``, about 5 minutes each; the book's settings
``BahdanauConfig()`` and ``TransformerConfig()``, about 2 minutes each; lesson 7's two
causal-mask demo runs, seconds; lesson 8's language model, about a minute) and the data file
``utils.data`` finds (the course's own assets/data/fra-eng.txt by default), then written as
``<kind>-<key>.pt``: ``key`` hashes the settings, the data, the code that trains the model
(``utils.code_fingerprint``) and torch's version, so a lesson loads a shipped model only when
all of them match, and trains its own otherwise: after any change to the model, training or data
code, run this command again. Beside each model, ``<kind>-<key>.vocabs.json`` holds its
vocabularies, so that loading it need not build them from the data file again
(``--vocabularies`` writes them for the shipped models without training). ``SHA256SUMS`` lists
the files' checksums.
``--epochs N`` trains N epochs instead, ``--num-examples N`` on the first N pairs only (quick
checks that the command works; such files have another key, so lessons never mistake them for
the real ones).
"""

import argparse
import dataclasses
import hashlib
import pathlib
import sys

from utils.model_cache import SHIPPED_DIR, save_model, settings_key, write_vocabs

CHECKSUMS = "SHA256SUMS"


def presets() -> dict:
    """name -> (cache kind, config, train function, versions).

    The lessons' main models (with lesson 4's guided-alignment model and its two comparison models: the book's decoder, the
    paper's encoder with the book's decoder), and the book-sized ones (600 pairs) that lessons 4 and 7 show
    first, with the two 30-epoch runs of lesson 7's causal-mask demo: shipped too, so that every
    machine shows the same translations (a model trained elsewhere differs by round-off); and
    lesson 8's English language model. (Lesson 8's induction run, which reads no data, ships
    by ``python -m utils.induction``.)
    """
    from utils import lm_training, seq2seq, transformer

    bahdanau = ("bahdanau", seq2seq.train_bahdanau, seq2seq.bahdanau_versions())
    tf = ("transformer", transformer.train_transformer, transformer.transformer_versions())
    table = {
        "bahdanau": (bahdanau, seq2seq.LESSON_BAHDANAU),
        "no_attention": (bahdanau, seq2seq.LESSON_NO_ATTENTION),
        "aligned": (bahdanau, seq2seq.LESSON_ALIGNED),
        "book_decoder": (bahdanau, seq2seq.LESSON_BOOK_DECODER),
        "paper_encoder": (bahdanau, seq2seq.LESSON_PAPER_ENCODER),
        "transformer": (tf, transformer.LESSON_TRANSFORMER),
        "book_bahdanau": (bahdanau, seq2seq.BahdanauConfig()),
        "book_transformer": (tf, transformer.TransformerConfig()),
        "causal_demo": (tf, dataclasses.replace(transformer.DEMO_CONFIG, causal=True)),
        "no_causal_demo": (tf, dataclasses.replace(transformer.DEMO_CONFIG, causal=False)),
        "language_model": (("language_model", lm_training.train_language_model,
                            lm_training.lm_versions()), lm_training.LESSON_LM),
    }
    return {name: (kind, config, train, versions)
            for name, ((kind, train, versions), config) in table.items()}


def shipped_file(name: str, path=None, folder: pathlib.Path = SHIPPED_DIR) -> pathlib.Path:
    """Where the shipped model ``name`` (a key of ``presets()``) lives for this data file."""
    kind, config, _, versions = presets()[name]
    return folder / f"{kind}-{settings_key(kind, config, path, versions)}.pt"


def sha256(file: pathlib.Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def write_checksums(folder: pathlib.Path) -> pathlib.Path:
    """``SHA256SUMS`` for every ``.pt`` and ``.vocabs.json`` file of ``folder`` (``sha256sum
    -c`` reads it)."""
    files = sorted([*folder.glob("*.pt"), *folder.glob("*.vocabs.json")])
    lines = [f"{sha256(file)}  {file.name}\n" for file in files]
    target = folder / CHECKSUMS
    target.write_text("".join(lines))
    return target


def make(name: str, epochs: int | None = None, folder: pathlib.Path = SHIPPED_DIR,
         path=None, show_progress: bool = True, num_examples: int | None = None) -> pathlib.Path:
    """Train the preset ``name`` (``epochs`` and ``num_examples`` override its own) and write
    it to ``folder``."""
    table = presets()
    if name not in table:
        raise ValueError(f"no shipped model {name!r}; choose one of {sorted(table)} or 'all'")
    kind, config, train, versions = table[name]
    if epochs is not None:
        config = dataclasses.replace(config, num_epochs=epochs)
    if num_examples is not None:
        config = dataclasses.replace(config, num_examples=num_examples)
    model, *vocabs, result = train(config, path, animate=False, show_progress=show_progress)
    file = folder / f"{kind}-{settings_key(kind, config, path, versions)}.pt"
    save_model(file, model, vocabs, result, config)
    print(f"{name}: {result.summary()} -> {file}")
    return file


def write_shipped_vocabs(name: str, folder: pathlib.Path = SHIPPED_DIR, path=None) -> pathlib.Path:
    """Write the vocabularies of the shipped model ``name`` beside it, built from the data as
    loading it would (no training). Raises FileNotFoundError if the model is not there."""
    kind, config, _, versions = presets()[name]
    file = shipped_file(name, path, folder)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing; train it with: python -m utils.shipped_models {name}")
    from utils import lm_training, training
    if kind == "language_model":
        vocabs = (lm_training.lm_vocab(config, path),)
    else:
        vocabs = training.training_vocabs(config, path)           # (source, target)
    return write_vocabs(file, vocabs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=[*presets(), "all"])
    parser.add_argument("--vocabularies", action="store_true",
                        help="only write the vocabularies beside the shipped models (no training)")
    parser.add_argument("--epochs", type=int, help="train this many epochs instead (a check)")
    parser.add_argument("--num-examples", type=int,
                        help="train on the first N pairs of the file instead (a check)")
    parser.add_argument("--out", type=pathlib.Path, default=SHIPPED_DIR,
                        help=f"folder to write to (default {SHIPPED_DIR})")
    args = parser.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    if args.num_examples is not None and args.num_examples < 1:
        parser.error(f"--num-examples must be >= 1, got {args.num_examples}")
    names = list(presets()) if args.name == "all" else [args.name]
    for name in names:
        if args.vocabularies:
            print(f"{name}: {write_shipped_vocabs(name, args.out)}")
        else:
            make(name, args.epochs, args.out, num_examples=args.num_examples)
    print(f"checksums: {write_checksums(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
