"""Lesson 8's language model: English sentences, a bigram baseline, training and the cache.

The data: the English side of the course's sentence pairs, each distinct sentence once, split by
``utils.heldout`` (a held-out English sentence is never trained on, so the model is judged on
sentences it never saw, as the translation models are). A sentence becomes
``<bos> w1 .. wn <eos>``; the model reads ``<bos> w1 .. wn`` and predicts ``w1 .. wn <eos>``.

    LMConfig(...)                          sizes, epochs, data subset (validated)
    LESSON_LM                              the lesson's model
    lm_sentences(config, path=None)        -> LMSentences(train, heldout) token lists
    lm_vocab(config, path=None)            -> Vocab of the training sentences
    encode_sentences(sentences, vocab)     -> list of (n + 2,) tensors <bos> .. <eos>
    lm_batches(encoded, batch_size, pad, generator=None)
                                           -> (inputs (b, n), targets (b, n), lens (b,)) ...
    token_losses(model, encoded, pad)      -> (summed loss, number of predicted tokens)
    perplexity(model, encoded, pad)        -> exp(mean loss per predicted token)
    BigramModel(encoded, vocab_size)       interpolated bigram/unigram counts, the baseline
    train_language_model(config, path)     -> (model, vocab, LMTrainResult)
    train_or_load_language_model(config)   -> (model, vocab, result, cache_file, from_cache)
    encode_prompt(text, vocab)             -> (1, n) tokens, <bos> first
    continue_prompt(model, vocab, text, ...) -> the generated words, stopped at <eos>

Perplexity counts every predicted token, ``<eos>`` included and ``<bos>`` excluded; an unknown
word is the token ``<unk>`` for both the model and the baseline.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from utils.code_fingerprint import code_fingerprint
from utils.data import BOS, EOS, PAD, Vocab, preprocess, read_pairs, tokenize
from utils.i18n import _, gettext
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, generate
from utils.masking import length_mask
from utils.validation import check_dropout, check_positive, check_positive_int



# ============================================================================ settings

@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Everything that decides the lesson's language model; validated on construction."""

    num_hiddens: int = 64
    num_heads: int = 4
    num_blks: int = 2
    ffn_num_hiddens: int = 128
    dropout: float = 0.2
    max_len: int = 32                  # longest input: <bos> + 31 words
    num_epochs: int = 12
    batch_size: int = 64
    lr: float = 0.003
    clip_norm: float = 1.0
    min_freq: int = 2                  # rarer training words become <unk>
    seed: int = 0
    num_examples: int | None = None    # None: every pair of the data file

    def __post_init__(self):
        for name in ("num_hiddens", "num_heads", "num_blks", "ffn_num_hiddens", "num_epochs",
                     "batch_size", "seed"):
            check_positive_int(name, getattr(self, name), minimum=0 if name == "seed" else 1)
        check_positive_int("max_len", self.max_len, minimum=2)
        check_positive_int("min_freq", self.min_freq, minimum=0)
        if self.num_examples is not None:
            check_positive_int("num_examples", self.num_examples)
        check_dropout(self.dropout)
        check_positive("lr", self.lr)
        check_positive("clip_norm", self.clip_norm)
        self.model_config(8)                          # heads dividing num_hiddens, etc.

    def model_config(self, vocab_size: int) -> DecoderOnlyConfig:
        return DecoderOnlyConfig(vocab_size=vocab_size, num_hiddens=self.num_hiddens,
                                 num_heads=self.num_heads, num_blks=self.num_blks,
                                 ffn_num_hiddens=self.ffn_num_hiddens, dropout=self.dropout,
                                 max_len=self.max_len)


LESSON_LM = LMConfig()


# ============================================================================ data

@dataclasses.dataclass
class LMSentences:
    """Distinct English sentences as word lists, in file order: trained on / held out."""

    train: list
    heldout: list


def lm_sentences(config: LMConfig = LESSON_LM, path=None) -> LMSentences:
    """The training and held-out English sentences of ``config``'s pairs (each once).

    Sentences longer than ``max_len - 1`` words do not fit the model; they are left out with a
    warning that counts them (none in the course's shared file)."""
    from utils.heldout import is_held_out

    seen, train, heldout, too_long = set(), [], [], 0
    for english, _ in read_pairs(path, config.num_examples):
        words = tokenize(english)
        key = " ".join(words)
        if not words or key in seen:
            continue
        seen.add(key)
        if len(words) > config.max_len - 1:
            too_long += 1
            continue
        (heldout if is_held_out(key) else train).append(words)
    if too_long:
        warnings.warn(gettext("{count} sentences longer than max_len - 1 = {limit} words were "
                              "left out; build LMConfig(max_len=...) larger to keep them").format(
                                  count=too_long, limit=config.max_len - 1),
                      UserWarning, stacklevel=2)
    if not train:
        raise ValueError(gettext("no training sentences: the data holds no English sentence "
                                 "that is not held out; use more pairs (num_examples=None)"))
    return LMSentences(train, heldout)


def lm_vocab(config: LMConfig = LESSON_LM, path=None) -> Vocab:
    """``<unk> <pad> <bos> <eos>`` and every training word seen ``min_freq`` times or more."""
    return Vocab(lm_sentences(config, path).train, min_freq=config.min_freq)


def encode_sentences(sentences, vocab: Vocab) -> list:
    """Word lists -> one (n + 2,) tensor per sentence: ``<bos>`` w1 .. wn ``<eos>``."""
    bos, eos = vocab[BOS], vocab[EOS]
    return [torch.tensor([bos, *vocab[list(words)], eos]) for words in sentences]


def lm_batches(encoded: list, batch_size: int, pad: int, generator=None):
    """Padded batches of ``encode_sentences``' output, shuffled by ``generator`` (None: in
    order). Yields inputs (b, n) = ``<bos>`` .. wn, targets (b, n) = w1 .. ``<eos>`` (the
    inputs shifted by one) and lens (b,), the number of real targets per row."""
    check_positive_int("batch_size", batch_size)
    order = (torch.randperm(len(encoded), generator=generator).tolist() if generator is not None
             else range(len(encoded)))
    order = list(order)
    for start in range(0, len(order), batch_size):
        rows = [encoded[i] for i in order[start:start + batch_size]]
        lens = torch.tensor([len(row) - 1 for row in rows])                # (b,)
        padded = nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad)
        yield padded[:, :-1], padded[:, 1:], lens                          # (b, n) each


def _masked_token_losses(model, inputs, targets, lens) -> torch.Tensor:
    logits, _ = model(inputs)                                              # (b, n, V)
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")   # (b, n)
    return losses * length_mask(lens, targets.shape[1])


@torch.no_grad()
def token_losses(model: DecoderOnlyLM, encoded: list, pad: int,
                 batch_size: int = 256) -> tuple[float, int]:
    """(summed cross-entropy in nats, number of predicted tokens) over ``encoded`` sentences,
    in eval mode (the model's mode is restored)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for inputs, targets, lens in lm_batches(encoded, batch_size, pad):
            total += float(_masked_token_losses(model, inputs, targets, lens).sum())
            count += int(lens.sum())
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError(_("no sentences to score; pass a non-empty list from encode_sentences"))
    return total, count


def perplexity(model: DecoderOnlyLM, encoded: list, pad: int) -> float:
    """exp(mean cross-entropy per predicted token) of ``model`` on ``encoded`` sentences."""
    total, count = token_losses(model, encoded, pad)
    return math.exp(total / count)


# ============================================================================ the baseline

class BigramModel:
    """P(next | previous) from counts: λ·bigram + (1 − λ)·unigram, the unigram add-one smoothed.

    The counts come from ``encoded`` training sentences (``encode_sentences``); λ is chosen
    from a grid on the last ``tune_fraction`` of them, counted without that part, so the
    held-out sentences never influence it. ``perplexity(encoded)`` scores other sentences.
    """

    LAMBDAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)

    def __init__(self, encoded: list, vocab_size: int, tune_fraction: float = 0.1):
        check_positive_int("vocab_size", vocab_size)
        if not encoded:
            raise ValueError(_("BigramModel needs training sentences; pass encode_sentences(...)"))
        self.vocab_size = vocab_size
        split = len(encoded) - max(1, int(len(encoded) * tune_fraction))
        if split >= 1:
            pair_counts, unigram = self._counts(encoded[:split])
            self.lam = min(self.LAMBDAS, key=lambda lam: self._nll(encoded[split:], pair_counts,
                                                                   unigram, lam)[0])
        else:
            self.lam = 0.8
        self.pair_counts, self.unigram = self._counts(encoded)

    def _counts(self, encoded):
        V = self.vocab_size
        pairs = torch.cat([torch.stack((row[:-1], row[1:]), dim=1) for row in encoded])  # (N, 2)
        pair_counts = torch.zeros(V, V, dtype=torch.float64)
        pair_counts.index_put_((pairs[:, 0], pairs[:, 1]),
                               torch.ones(len(pairs), dtype=torch.float64), accumulate=True)
        unigram = (pair_counts.sum(dim=0) + 1) / (pair_counts.sum() + V)          # (V,)
        return pair_counts, unigram

    def _nll(self, encoded, pair_counts, unigram, lam):
        pairs = torch.cat([torch.stack((row[:-1], row[1:]), dim=1) for row in encoded])
        rows = pair_counts[pairs[:, 0]]                                            # (N, V)
        totals = rows.sum(dim=1)                                                   # (N,)
        bigram = torch.where(totals > 0, rows[torch.arange(len(pairs)), pairs[:, 1]]
                             / totals.clamp(min=1), unigram[pairs[:, 1]])
        probs = lam * bigram + (1 - lam) * unigram[pairs[:, 1]]
        return float(-probs.log().sum()), len(pairs)

    def next_token_probs(self, previous: int) -> torch.Tensor:
        """P(next | previous) over the vocabulary, (V,); sums to 1."""
        row = self.pair_counts[previous]
        bigram = row / row.sum() if row.sum() > 0 else self.unigram
        return self.lam * bigram + (1 - self.lam) * self.unigram

    def perplexity(self, encoded: list) -> float:
        total, count = self._nll(encoded, self.pair_counts, self.unigram, self.lam)
        return math.exp(total / count)


# ============================================================================ training

@dataclasses.dataclass
class LMTrainResult:
    """What ``train_language_model`` measured (perplexities on the held-out sentences).

    losses / heldout_losses: training and held-out loss per token, one per epoch (nats);
    seconds: training time (held-out scoring excluded); tokens_per_sec: predicted training
    tokens per second; bigram_perplexity: the baseline on the same held-out sentences.
    """

    losses: list
    heldout_losses: list
    seconds: float
    tokens_per_sec: float
    epochs: int
    heldout_perplexity: float
    bigram_perplexity: float
    num_train_sentences: int
    num_heldout_sentences: int

    def summary(self) -> str:
        return (f"held-out perplexity {self.heldout_perplexity:.1f} (bigram baseline "
                f"{self.bigram_perplexity:.1f}), {self.tokens_per_sec:.0f} tokens/s, "
                f"{self.seconds:.0f} s for {self.epochs} epochs")


def build_language_model(config: LMConfig, vocab: Vocab) -> DecoderOnlyLM:
    return DecoderOnlyLM(config.model_config(len(vocab)))


def train_language_model(config: LMConfig = LESSON_LM, path=None, *, animate: bool = True,
                         show_progress: bool = True, num_threads: int | None = 1):
    """Train ``config``'s model on its training sentences (Adam, gradient clipping, dropout),
    scoring the held-out sentences after each epoch (untimed). Returns (model, vocab, result).
    Seeded: the same config, data and machine give the same model; the global random state is
    left as it was. ``animate`` draws the two loss curves live in Jupyter. ``num_threads``:
    torch's intra-op threads for the run (restored after; None keeps the current setting)."""
    from utils.plotting import Animator, progress

    sentences = lm_sentences(config, path)
    vocab = Vocab(sentences.train, min_freq=config.min_freq)
    pad = vocab[PAD]
    train_set = encode_sentences(sentences.train, vocab)
    heldout_set = encode_sentences(sentences.heldout, vocab)
    baseline = BigramModel(train_set, len(vocab))
    animator = Animator(xlabel="epoch", ylabel="loss per token", legend=["train", "held out"],
                        xlim=[1, config.num_epochs]) if animate else None
    saved_threads = torch.get_num_threads()
    losses, heldout_losses, seconds, tokens = [], [], 0.0, 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        if num_threads is not None:
            torch.set_num_threads(check_positive_int("num_threads", num_threads))
        try:
            model = build_language_model(config, vocab)
            optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
            order = torch.Generator().manual_seed(config.seed)
            bar = progress(range(config.num_epochs), desc="epochs", leave=False,
                           **({} if show_progress else {"disable": True}))
            for epoch in bar:
                start = time.perf_counter()
                model.train()
                loss_sum, count = 0.0, 0
                for inputs, targets, lens in lm_batches(train_set, config.batch_size, pad, order):
                    token_loss = _masked_token_losses(model, inputs, targets, lens)   # (b, n)
                    n_tokens = int(lens.sum())
                    optimizer.zero_grad(set_to_none=True)
                    (token_loss.sum() / n_tokens).backward()
                    nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
                    optimizer.step()
                    loss_sum += float(token_loss.detach().sum())
                    count += n_tokens
                seconds += time.perf_counter() - start
                tokens += count
                losses.append(loss_sum / count)
                total, held_count = token_losses(model, heldout_set, pad)
                heldout_losses.append(total / held_count)
                if animator is not None:
                    animator.add(epoch + 1, (losses[-1], heldout_losses[-1]))
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(heldout=f"{heldout_losses[-1]:.3f}", refresh=False)
        finally:
            torch.set_num_threads(saved_threads)
    if animator is not None:
        animator.finish()
    model.eval()
    result = LMTrainResult(losses=losses, heldout_losses=heldout_losses, seconds=seconds,
                           tokens_per_sec=tokens / seconds, epochs=config.num_epochs,
                           heldout_perplexity=math.exp(heldout_losses[-1]),
                           bigram_perplexity=baseline.perplexity(heldout_set),
                           num_train_sentences=len(train_set),
                           num_heldout_sentences=len(heldout_set))
    return model, vocab, result


def lm_versions() -> dict:
    """The code part of the cache key: the fingerprint of this module and what it imports."""
    return {"code": code_fingerprint("utils.lm_training")}


def _vocab_tuple(config, path=None):
    return (lm_vocab(config, path),)


def train_or_load_language_model(config: LMConfig = LESSON_LM, path=None, *,
                                 use_cache: bool = True, refresh: bool = False,
                                 animate: bool = True, show_progress: bool = True):
    """Like ``train_language_model``, but load a model trained with the same settings and data
    (the user's cache, then the weights shipped in ``assets/models``; see
    ``utils.model_cache``). Returns (model, vocab, result, cache_file, from_cache)."""
    from utils.model_cache import train_or_load

    return train_or_load("language_model", config, vocabs=_vocab_tuple,
                         build=build_language_model, train=train_language_model,
                         versions=lm_versions(), path=path,
                         use_cache=use_cache, refresh=refresh, result_type=LMTrainResult,
                         animate=animate, show_progress=show_progress)


# ============================================================================ prompts

def encode_prompt(text: str, vocab: Vocab) -> torch.Tensor:
    """A prompt as the model reads it: (1, n) tokens, ``<bos>`` then the prompt's words (an
    empty prompt is ``<bos>`` alone: the start of a sentence)."""
    if not isinstance(text, str):
        raise ValueError(_("the prompt must be a str, got {text_type}").format(
            text_type=type(text).__name__))
    words = tokenize(preprocess(text))
    return torch.tensor([[vocab[BOS], *vocab[words]]])


def prompt_tokens(text: str, vocab: Vocab) -> list:
    """The tokens the model reads for ``text`` (unknown words shown as ``<unk>``)."""
    return vocab.to_tokens(encode_prompt(text, vocab)[0].tolist())


def continue_prompt(model: DecoderOnlyLM, vocab: Vocab, text: str, max_new_tokens: int = 12,
                    **sampling) -> list:
    """The words ``generate`` adds to ``text`` (``sampling``: temperature, top_k, top_p,
    generator, greedy), cut after the first ``<eos>``."""
    prompt = encode_prompt(text, vocab)                                    # (1, n0)
    room = model.config.max_len + 1 - prompt.shape[1]
    if room < 1:
        raise ValueError(_("the prompt has {num_words} words; the model reads at most "
                           "{most}: shorten it").format(
            num_words=prompt.shape[1] - 1, most=model.config.max_len - 1))
    tokens = generate(model, prompt, min(max_new_tokens, room), **sampling)[0, prompt.shape[1]:]
    words = vocab.to_tokens(tokens.tolist())
    return words[:words.index(EOS) + 1] if EOS in words else words
