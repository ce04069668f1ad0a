"""A stable held-out split of the English–French pairs, decided per English sentence.

The rule: normalise the English side as ``utils.data`` does (``preprocess``, then the words of
``tokenize`` joined by single spaces), hash it with SHA-256 and call the sentence held out when
the hash, read as a number, falls in the first ``HELDOUT_FRACTION`` of its range. The answer
depends on the sentence alone, never on its position in the file, the other pairs or the
subset a setting reads, so:

- a held-out English sentence is held out with every one of its translations (duplicates with
  another French side never reach the training pairs);
- ``split_pairs(pairs[:n])`` trains on a subset of ``split_pairs(pairs)``'s training pairs and
  never on a held-out sentence, for any ``n`` (or any other subset).

Raw lines ("Go.") and preprocessed ones ("go .") give the same answer. Changing ``SALT`` or
``HELDOUT_FRACTION`` changes the split of every trained model: do not, unless you retrain all.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from utils.data import preprocess, tokenize
from utils.i18n import _

HELDOUT_FRACTION = 0.10                    # share of distinct English sentences held out
SALT = "attention-course/heldout/v1"       # part of the hashed text; fixes the split
_BUCKETS = 1 << 64                         # the hash's first 8 bytes, read as an int, lie in [0, 2**64)
_THRESHOLD = int(HELDOUT_FRACTION * _BUCKETS)


def normalise(english: str) -> str:
    """The English sentence as the models read it: ``preprocess``, words joined by one space.

    "Go.\u202fNow!" -> "go . now !". Raises ValueError for a non-str or a sentence without words.
    """
    if not isinstance(english, str):
        raise ValueError(_("the English sentence must be a str, got {english_type}").format(
            english_type=type(english).__name__))
    words = tokenize(preprocess(english))
    if not words:
        raise ValueError(_("the English sentence {english!r} has no words; pass a sentence such "
                           "as \"i'm home .\"").format(english=english))
    return " ".join(words)


def heldout_hash(english: str) -> int:
    """The number in [0, 2**64) that decides ``english``: SHA-256 of SALT and the normalised text."""
    digest = hashlib.sha256(f"{SALT}\n{normalise(english)}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def is_held_out(english: str) -> bool:
    """True if the English sentence belongs to the held-out split (about 10 % of sentences).

    Stable across runs, machines and Python versions (hashlib, not ``hash()``); raw and
    preprocessed forms of a sentence agree. Raises ValueError for a non-str or empty sentence.
    """
    return heldout_hash(english) < _THRESHOLD


def split_pairs(pairs: Iterable[tuple[str, str]]
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training pairs, held-out pairs) of ``pairs``, each in the input order.

    ``pairs``: (English, French) tuples of str, e.g. ``utils.data.read_pairs(path, n)``. A pair
    is held out exactly when ``is_held_out(English)``, so every translation of a held-out
    sentence is held out with it. Raises ValueError for anything that is not a sequence of
    (str, str) pairs with words on the English side.
    """
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise ValueError(_("pairs must be an iterable of (English, French) tuples, got "
                           "{pairs_type}").format(pairs_type=type(pairs).__name__))
    train, heldout = [], []
    decided: dict[str, bool] = {}          # normalised English -> held out (hash each once)
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(_("pair {i} is {pair!r}; each item must be an (English, French) "
                               "tuple").format(i=i, pair=pair))
        english, french = pair
        if not isinstance(english, str) or not isinstance(french, str):
            raise ValueError(_("pair {i} holds {english_type} and {french_type}; both sides must "
                               "be str").format(i=i, english_type=type(english).__name__,
                                                french_type=type(french).__name__))
        if not french.strip():
            raise ValueError(_("pair {i} has an empty French side; remove it before "
                               "splitting").format(i=i))
        key = normalise(english) if english.strip() else None
        if key is None:
            raise ValueError(_("pair {i} has an empty English side; remove it before "
                               "splitting").format(i=i))
        if key not in decided:
            decided[key] = is_held_out(key)
        (heldout if decided[key] else train).append((english, french))
    return train, heldout


def heldout_pairs(path=None, exclude=()) -> list[tuple[str, str]]:
    """The held-out pairs of the data file (``utils.data.read_pairs(path)``), in file order.

    ``exclude``: English sentences a model was trained on (raw or preprocessed); their pairs
    are left out, so a model trained on another subset (the book's first 600 pairs, say) is
    also scored only on sentences it never saw.
    """
    from utils.data import read_pairs

    seen = {normalise(english) for english in exclude}
    _, held = split_pairs(read_pairs(path, None))
    return [(english, french) for english, french in held if normalise(english) not in seen]
