"""English–French sentence pairs: preprocess, build vocabularies, batch.

Which file is read is decided by ``utils.data_files.find_data_file`` (imported here): an explicit
``path``, then ``$ATTENTION_COURSE_DATA``, then the course's own pairs ``assets/data/fra-eng.txt``
(checked by sha256; *Dive into Deep Learning*'s larger file only when asked for by name,
``dataset="d2l-full"``).

File format: one pair a line, ``English<TAB>French``; further tab-separated columns (the
attribution column of the Anki files) are ignored. The sentences come from the Tatoeba Project
(tatoeba.org), licence CC-BY 2.0 (France).

Importing this module reads no file and touches no network.
"""

from __future__ import annotations

import collections
import pathlib
import re
import warnings
from typing import Iterable, Sequence

import torch
from torch.utils import data as torch_data

from utils.data_files import (DATA_ENV_VAR, DATASET_ENV_VAR, URL_ENV_VAR,  # noqa: F401
                              cache_dir, find_data_file)
from utils.i18n import _

UNK, PAD, BOS, EOS = "<unk>", "<pad>", "<bos>", "<eos>"

# Every Unicode space separator (category Zs) becomes a plain space. The book names the two
# that matter most (narrow no-break space U+202F before "!" and "?", no-break space U+00A0);
# the data also has thin spaces (U+2009, e.g. "Recule !"), which would otherwise end up glued
# to the word before them ("recule\u2009" as a token).
_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
          "\u202f\u205f\u3000"
_TO_PLAIN_SPACE = str.maketrans({ch: " " for ch in _SPACES})
_PUNCTUATION = frozenset(",.!?")
# A punctuation mark right after a character that is not a space (the book's rule, as a regex).
_GLUED_PUNCTUATION = re.compile(r"(?<=[^ ])([,.!?])")


# --------------------------------------------------------------------------- reading and preprocessing

def preprocess(text: str) -> str:
    """Book-style normalisation: Unicode spaces -> " ", lower-case, and a space before each of
    , . ! ? that follows a non-space character.  "Go.\u202fNow!" -> "go . now !"."""
    return _GLUED_PUNCTUATION.sub(r" \1", text.translate(_TO_PLAIN_SPACE).lower())


def tokenize(sentence: str) -> list[str]:
    """Words of a (preprocessed) sentence: split on spaces, dropping the empty strings that runs
    of spaces would give (the book's ``split(' ')`` keeps them as tokens)."""
    return [token for token in sentence.split(" ") if token]


def _check_num_examples(num_examples) -> None:
    if num_examples is None:
        return
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples <= 0:
        raise ValueError(_("num_examples must be a positive int (or None for every pair), got "
                           "{num_examples!r}").format(num_examples=num_examples))


def read_pairs(path=None, num_examples: int | None = None, *,
               preprocess_text: bool = True) -> list[tuple[str, str]]:
    """The first ``num_examples`` (English, French) pairs of the file (all of them for None).

    ``path`` as in ``find_data_file``. With ``preprocess_text`` (the default) each sentence goes
    through ``preprocess``; otherwise it is returned as written. A line without a tab, with an
    empty side, or an empty line raises ValueError naming the file and line number.
    """
    _check_num_examples(num_examples)
    file = find_data_file(path)
    stat = file.stat()           # a changed file is read again; an unchanged one once per process
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns, num_examples, preprocess_text)
    if key not in _PAIRS_READ:
        if len(_PAIRS_READ) >= 4:                            # a few readings kept, no more
            _PAIRS_READ.pop(next(iter(_PAIRS_READ)))
        _PAIRS_READ[key] = tuple(_read_pairs(file, num_examples, preprocess_text))
    return list(_PAIRS_READ[key])


_PAIRS_READ: dict = {}


def _read_pairs(file: pathlib.Path, num_examples, preprocess_text: bool) -> list:
    pairs: list[tuple[str, str]] = []
    with open(file, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if num_examples is not None and len(pairs) == num_examples:
                break
            line = line.rstrip("\n")
            if line_no == 1:
                line = line.lstrip("\ufeff")  # a byte-order mark is not part of the text
            if not line.strip():
                raise ValueError(_("{file}, line {line_no}: the line is empty; each line must be "
                                   "'English<TAB>French' (remove blank lines)").format(
                    file=file, line_no=line_no))
            columns = line.split("\t")
            if len(columns) < 2:
                raise ValueError(_("{file}, line {line_no}: no tab found in {line!r}; each line "
                                   "must be 'English<TAB>French'").format(
                    file=file, line_no=line_no, line=line[:60]))
            english, french = columns[0], columns[1]
            if preprocess_text:
                english, french = preprocess(english), preprocess(french)
            for side, sentence in (("English", english), ("French", french)):
                if not sentence.strip():
                    raise ValueError(_("{file}, line {line_no}: the {side} sentence is empty; "
                                       "each line must be 'English<TAB>French' with both "
                                       "filled").format(file=file, line_no=line_no, side=side))
            pairs.append((english, french))
    if num_examples is not None and len(pairs) < num_examples:
        raise ValueError(_("num_examples={num_examples} but {file} holds only {num_pairs} pairs; "
                           "ask for at most {num_pairs}").format(
            num_examples=num_examples, file=file, num_pairs=len(pairs)))
    return pairs


def tokenize_pairs(pairs: Iterable[tuple[str, str]]) -> tuple[list[list[str]], list[list[str]]]:
    """Split preprocessed pairs into (source token lists, target token lists)."""
    source, target = [], []
    for english, french in pairs:
        source.append(tokenize(english))
        target.append(tokenize(french))
    return source, target


# --------------------------------------------------------------------------- vocabulary

class Vocab:
    """Token <-> index table.

    Index 0 is ``<unk>``, then ``reserved_tokens`` (by default ``<pad> <bos> <eos>``, so pad=1,
    bos=2, eos=3), then every token seen at least ``min_freq`` times, most frequent first; ties
    keep the order of first appearance in ``tokens`` (as the Chinese d2l book's ``Vocab``).
    ``tokens`` is a list of tokens or a list of token lists.
    """

    def __init__(self, tokens: Sequence = (), min_freq: int = 0,
                 reserved_tokens: Sequence[str] = (PAD, BOS, EOS)):
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 0:
            raise ValueError(_("min_freq must be a non-negative int, got {min_freq!r}").format(
                min_freq=min_freq))
        if UNK in reserved_tokens or len(set(reserved_tokens)) != len(reserved_tokens):
            raise ValueError(_("reserved_tokens must be distinct and exclude {UNK!r} (it is "
                               "always index 0), got {reserved_tokens}").format(
                UNK=UNK, reserved_tokens=list(reserved_tokens)))
        flat = [tok for line in tokens for tok in line] if tokens and isinstance(
            tokens[0], (list, tuple)) else list(tokens)
        counts = collections.Counter(flat)       # insertion order = first appearance
        self._token_freqs = sorted(counts.items(), key=lambda item: item[1], reverse=True)
        self.idx_to_token = [UNK, *reserved_tokens]
        self.token_to_idx = {tok: idx for idx, tok in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq >= min_freq and token not in self.token_to_idx:
                self.token_to_idx[token] = len(self.idx_to_token)
                self.idx_to_token.append(token)

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """Index of a token (``unk`` if unknown), or a list of indices for a list/tuple."""
        if isinstance(tokens, (list, tuple)):
            return [self[token] for token in tokens]
        if not isinstance(tokens, str):
            raise TypeError(_("look up a token (str) or a list/tuple of tokens, got "
                              "{tokens_type}").format(tokens_type=type(tokens).__name__))
        return self.token_to_idx.get(tokens, self.unk)

    def to_tokens(self, indices):
        """Token of an index, or a list of tokens for a list/tuple/tensor of indices."""
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(index) for index in indices]
        if isinstance(indices, bool) or not isinstance(indices, int):
            raise TypeError(_("indices must be ints, got {indices_type}").format(
                indices_type=type(indices).__name__))
        if not 0 <= indices < len(self):
            raise IndexError(_("index {indices} is outside this vocabulary of {size} tokens "
                               "(valid: 0..{last})").format(
                indices=indices, size=len(self), last=len(self) - 1))
        return self.idx_to_token[indices]

    @property
    def unk(self) -> int:
        return 0

    @property
    def pad(self) -> int:
        if PAD not in self.token_to_idx:
            raise AttributeError(_("this vocabulary has no {PAD!r}; build it with {PAD!r} among "
                                   "reserved_tokens").format(PAD=PAD))
        return self.token_to_idx[PAD]

    @property
    def token_freqs(self) -> list[tuple[str, int]]:
        """(token, count) of every token seen, most frequent first (before ``min_freq``)."""
        return list(self._token_freqs)


# --------------------------------------------------------------------------- arrays and batches

def truncate_pad(line: Sequence, num_steps: int, padding_token) -> list:
    """``line`` cut to its first ``num_steps`` items, or padded with ``padding_token`` to that length.

    Cutting is the book's behaviour and loses the end of long sentences (including ``<eos>``);
    ``build_array`` counts how many lines it cut.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps <= 0:
        raise ValueError(_("num_steps must be a positive int, got {num_steps!r}").format(
            num_steps=num_steps))
    if len(line) > num_steps:
        return list(line[:num_steps])
    return list(line) + [padding_token] * (num_steps - len(line))


def build_array(lines: Sequence[Sequence[str]], vocab: Vocab, num_steps: int
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Token lists -> (indices (n, num_steps), valid_len (n,), number of truncated lines).

    Each line gets ``<eos>`` appended, then is truncated/padded to ``num_steps``; ``valid_len``
    counts its non-pad positions. A line longer than ``num_steps - 1`` tokens is truncated (it
    then has no ``<eos>``). An empty line raises ValueError.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps <= 0:
        raise ValueError(_("num_steps must be a positive int, got {num_steps!r}").format(
            num_steps=num_steps))
    rows, truncated = [], 0
    for i, line in enumerate(lines):
        if len(line) == 0:
            raise ValueError(_("sentence {i} is empty; remove empty sentences before "
                               "batching").format(i=i))
        indices = vocab[list(line)] + [vocab[EOS]]
        truncated += len(indices) > num_steps
        rows.append(truncate_pad(indices, num_steps, vocab.pad))
    array = torch.tensor(rows, dtype=torch.long).reshape(len(rows), num_steps)  # (n, num_steps)
    valid_len = (array != vocab.pad).sum(dim=1)                                  # (n,)
    return array, valid_len, truncated


def trim_padding(batch):
    """A DataLoader ``collate_fn``: stack a batch, then drop the padding columns that no sentence
    of the batch uses (short sentences train in short tensors; the values are unchanged)."""
    src, src_valid_len, tgt, tgt_valid_len = (torch.stack(column) for column in zip(*batch))
    return (src[:, :int(src_valid_len.max())], src_valid_len,      # (b, longest source)
            tgt[:, :int(tgt_valid_len.max())], tgt_valid_len)      # (b, longest target)


def pairs_loader(pairs, batch_size: int, num_steps: int, seed: int = 0, min_freq: int = 2,
                 trim: bool = False):
    """(data_iter, src_vocab, tgt_vocab) for explicit preprocessed (English, French) pairs.

    ``data_iter`` is a DataLoader, shuffled by a ``torch.Generator`` seeded with ``seed``, whose
    batches are (src (batch, steps), src_valid_len (batch,), tgt (batch, steps), tgt_valid_len
    (batch,)), ``steps = num_steps`` (or, with ``trim``, the longest sentence of the batch).
    Sentences longer than ``num_steps - 1`` words are truncated as in the book; the counts are in
    ``data_iter.num_truncated`` ({"source": n, "target": m}) and a UserWarning says so.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(_("batch_size must be a positive int, got {batch_size!r}").format(
            batch_size=batch_size))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(_("seed must be a non-negative int, got {seed!r}").format(seed=seed))
    pairs = list(pairs)
    if not pairs:
        raise ValueError(_("no sentence pairs to train on; pass at least one (English, French) "
                           "pair"))
    source, target = tokenize_pairs(pairs)
    src_vocab = Vocab(source, min_freq=min_freq)
    tgt_vocab = Vocab(target, min_freq=min_freq)
    src_array, src_valid_len, src_cut = build_array(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len, tgt_cut = build_array(target, tgt_vocab, num_steps)
    if src_cut or tgt_cut:
        warnings.warn(_("num_steps={num_steps} truncated {src_cut} of {num_pairs} source and "
                        "{tgt_cut} target sentences (their ends and <eos> are dropped); raise "
                        "num_steps to keep them whole").format(
                          num_steps=num_steps, src_cut=src_cut, num_pairs=len(pairs),
                          tgt_cut=tgt_cut), UserWarning, stacklevel=3)
    dataset = torch_data.TensorDataset(src_array, src_valid_len, tgt_array, tgt_valid_len)
    generator = torch.Generator()
    generator.manual_seed(seed)
    data_iter = torch_data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                      generator=generator,
                                      collate_fn=trim_padding if trim else None)
    data_iter.num_truncated = {"source": src_cut, "target": tgt_cut}
    return data_iter, src_vocab, tgt_vocab


def load_data_nmt(batch_size: int, num_steps: int, num_examples: int | None = 600, path=None,
                  seed: int = 0, min_freq: int = 2):
    """(data_iter, src_vocab, tgt_vocab) for the first ``num_examples`` pairs of the file, as
    in the book (every batch padded to ``num_steps``); see ``pairs_loader``."""
    return pairs_loader(read_pairs(path, num_examples), batch_size, num_steps, seed, min_freq)
