"""Training and decoding shared by every encoder–decoder of the course (lessons 4 and 7).

The encoder–decoder interface
-----------------------------
Any pair of modules that keeps these four promises can be trained by ``train_seq2seq`` and
decoded by ``greedy_translate``::

    enc_outputs = encoder(X, valid_len)            # X (batch, src_steps) token indices,
                                                   # valid_len (batch,) source lengths
    state = decoder.init_state(enc_outputs, valid_len)
    Y, state = decoder(dec_X, state)               # dec_X (batch, tgt_steps) token indices ->
                                                   # Y (batch, tgt_steps, tgt_vocab) logits
    decoder.attention_weights                      # what the last call attended to, for plots

``enc_outputs`` and ``state`` may be anything the decoder understands (tensors or tuples).
The decoder must accept ``tgt_steps == 1`` with the state it returned, so that greedy decoding
can feed it one token at a time. ``attention_weights`` should be a tensor (batch, tgt_steps,
src_steps) of the encoder–decoder attention of the last call (a decoder with several attention
layers chooses which one to expose, or a list of them; ``greedy_translate`` keeps whatever it
is, step by step). ``EncoderDecoder(encoder, decoder)`` glues the two together:
``model(enc_X, dec_X, enc_valid_len) -> (Y, state)``.

In this module
--------------
- ``TranslationConfig``: the settings every translation model shares (data, batches, training).
- ``masked_cross_entropy``, ``xavier_init``, ``train_seq2seq`` (Adam, teacher forcing with
  ``<bos>``, gradient clipping, progress bar, live loss curve) -> ``TrainResult``.
- ``greedy_translate`` -> ``Translation`` (stops at ``<eos>``, keeps attention per step);
  ``greedy_translate_many`` decodes a batch; ``heldout_bleu`` scores unseen sentences.
- ``resolve_device``: ``"auto"`` is CUDA, then Apple's MPS, then the CPU. Training takes
  ``device="auto"``; decoding runs where the model's weights are; attention maps come back on
  the CPU, ready to plot.

Bahdanau's model lives in ``utils.seq2seq``, the Transformer in ``utils.transformer``.
"""

from __future__ import annotations

import dataclasses
import time

import torch
from torch import nn
from torch.nn import functional as F

from utils.data import BOS, EOS, PAD, Vocab, pairs_loader, read_pairs, tokenize, tokenize_pairs
from utils.i18n import _, gettext
from utils.masking import length_mask
from utils.validation import check_dropout, check_flag, check_positive, check_positive_int



# ============================================================================ devices

def resolve_device(device="auto") -> torch.device:
    """``"auto"``: CUDA if present, then Apple's MPS, then the CPU; anything else as given."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_device(model: nn.Module) -> torch.device:
    """Where ``model``'s weights are (the CPU for a model without any)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


# ============================================================================ shared settings

@dataclasses.dataclass(frozen=True)
class TranslationConfig:
    """Settings every translation model of the course shares: data, batches and training.

    ``BahdanauConfig`` (``utils.seq2seq``) and ``TransformerConfig`` (``utils.transformer``) add
    their model's sizes; the defaults are the book's.
    """

    num_examples: int | None = 600      # the first pairs of the file; None: all of them
    num_steps: int = 10
    batch_size: int = 64
    dropout: float = 0.1
    lr: float = 0.005
    num_epochs: int = 200
    seed: int = 0
    min_freq: int = 2
    # True: train only on the training side of the held-out split (utils.heldout), in batches
    # trimmed to their longest sentence. False: the book's way (every pair read, padded batches).
    held_out: bool = False

    def __post_init__(self):
        for name in ("batch_size", "num_epochs"):
            check_positive_int(name, getattr(self, name))
        if self.num_examples is not None:
            check_positive_int("num_examples", self.num_examples)
        check_positive_int("num_steps", self.num_steps, minimum=2)
        check_positive_int("seed", self.seed, minimum=0)
        check_positive_int("min_freq", self.min_freq, minimum=0)
        check_dropout(self.dropout)
        check_flag("held_out", self.held_out)
        check_positive("lr", self.lr)


# ============================================================================ the interface

class EncoderDecoder(nn.Module):
    """Any encoder and decoder that follow the interface in this module's docstring."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, enc_valid_len):
        """enc_X (b, src_steps), dec_X (b, tgt_steps), enc_valid_len (b,) -> (logits, state)."""
        enc_outputs = self.encoder(enc_X, enc_valid_len)
        state = self.decoder.init_state(enc_outputs, enc_valid_len)
        return self.decoder(dec_X, state)



# ============================================================================ training

def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor,
                         valid_len: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each token, 0 at padded positions.

    logits (batch, steps, vocab), labels (batch, steps), valid_len (batch,) -> (batch, steps).
    """
    if logits.shape[:2] != labels.shape:
        raise ValueError(_("logits {logits_shape} and labels {labels_shape} must share (batch, "
                           "steps)").format(
            logits_shape=tuple(logits.shape), labels_shape=tuple(labels.shape)))
    token_losses = F.cross_entropy(logits.transpose(1, 2), labels.long(),
                                   reduction="none")                       # (batch, steps)
    return token_losses * length_mask(valid_len.to(labels.device), labels.shape[1])


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform weights for every ``nn.Linear`` and ``nn.GRU`` (use ``model.apply``)."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
    elif isinstance(module, nn.GRU):
        for name, param in module.named_parameters():
            if name.startswith("weight"):
                nn.init.xavier_uniform_(param)


@dataclasses.dataclass
class TrainResult:
    """What ``train_seq2seq`` measured.

    loss: cross-entropy per target token in the last epoch (padding excluded);
    book_loss: the figure the book prints for the same run, ``loss / num_steps`` (its loss
    averages each sentence's token losses over all ``num_steps`` positions, padding included,
    then divides the sum by the number of tokens); tokens_per_sec: target tokens over the whole
    run divided by its wall time; losses: per-token loss of every epoch.
    """

    loss: float
    book_loss: float
    tokens_per_sec: float
    seconds: float
    epochs: int
    losses: list

    def summary(self) -> str:
        return (f"loss {self.loss:.3f} per token (book's measure {self.book_loss:.3f}), "
                f"{self.tokens_per_sec:.0f} tokens/s, {self.seconds:.1f} s for "
                f"{self.epochs} epochs")


def teacher_forcing_input(Y: torch.Tensor, bos: int) -> torch.Tensor:
    """Decoder input (batch, steps): <bos> followed by the labels shifted right by one."""
    bos_column = torch.full((Y.shape[0], 1), bos, dtype=Y.dtype, device=Y.device)
    return torch.cat([bos_column, Y[:, :-1]], dim=1)


def train_seq2seq(model: nn.Module, data_iter, lr: float, num_epochs: int, tgt_vocab: Vocab,
                  device="auto", *, clip_norm: float = 1.0, init_weights: bool = True,
                  animate: bool = True, show_progress: bool = True,
                  num_threads: int | None = None, on_epoch=None,
                  extra_loss=None) -> TrainResult:
    """Train any encoder–decoder (see the module docstring) with teacher forcing.

    ``data_iter`` yields (X, X_valid_len, Y, Y_valid_len) batches as ``utils.data.load_data_nmt``
    makes them. Xavier initialisation (``init_weights``), Adam with learning rate ``lr``, masked
    cross-entropy, gradient norm clipped at ``clip_norm``. A tqdm bar counts epochs and, with
    ``animate``, an ``Animator`` draws the loss live in Jupyter (``result.losses`` holds it
    anyway). ``num_threads`` sets torch's intra-op threads for the run (restored afterwards).
    ``device``: where to train (``"auto"``: see ``resolve_device``); the model stays there.
    ``on_epoch(epoch, model)``, if given, runs after each epoch (1-based) outside the timed
    part, e.g. to score the model on held-out sentences; the model is back in training mode after.
    ``extra_loss(model, X, X_valid_len, Y, Y_valid_len)``, if given, returns a scalar added to
    each batch's objective after the forward pass (e.g. guided alignment); the reported losses
    stay the translation loss.
    """
    check_positive_int("num_epochs", num_epochs)
    check_positive("lr", lr)
    check_positive("clip_norm", clip_norm)
    from utils.plotting import Animator, progress

    device = resolve_device(device)
    if init_weights:
        model.apply(xavier_init)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    animator = Animator(xlabel="epoch", ylabel="loss per token", xlim=[1, num_epochs],
                        yscale="log") if animate else None
    bos = tgt_vocab[BOS]
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        check_positive_int("num_threads", num_threads)
        torch.set_num_threads(num_threads)
    losses, total_tokens, num_steps = [], 0, None
    model.train()
    start = time.perf_counter()
    try:
        bar_options = {} if show_progress else {"disable": True}
        bar = progress(range(num_epochs), desc="epochs", leave=False, **bar_options)
        for epoch in bar:
            loss_sum = torch.zeros((), device=device)      # summed on the device: no sync per batch
            token_sum = torch.zeros((), dtype=torch.long, device=device)
            for X, X_valid_len, Y, Y_valid_len in data_iter:
                X, X_valid_len, Y, Y_valid_len = (t.to(device) for t in (X, X_valid_len, Y,
                                                                         Y_valid_len))
                num_steps = Y.shape[1]
                logits, _ = model(X, teacher_forcing_input(Y, bos), X_valid_len)
                token_losses = masked_cross_entropy(logits, Y, Y_valid_len)   # (batch, steps)
                optimizer.zero_grad(set_to_none=True)
                # The book's objective: each sentence's token losses averaged over num_steps,
                # summed over the batch (the scale matters for the clipping below).
                objective = token_losses.sum() / num_steps
                if extra_loss is not None:
                    objective = objective + extra_loss(model, X, X_valid_len, Y, Y_valid_len)
                objective.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm, foreach=True)
                optimizer.step()
                loss_sum += token_losses.detach().sum()
                token_sum += Y_valid_len.sum()
            tokens = int(token_sum)
            if tokens == 0:
                raise ValueError(gettext("data_iter yielded no target tokens; check the data "
                                         "loader"))
            total_tokens += tokens
            losses.append(float(loss_sum) / tokens)
            if animator is not None:
                animator.add(epoch + 1, losses[-1])
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            if on_epoch is not None:
                paused = time.perf_counter()
                on_epoch(epoch + 1, model)
                model.train()
                start += time.perf_counter() - paused   # the hook's time is not training time
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(previous_threads)
    if animator is not None:
        animator.finish()
    model.eval()
    return TrainResult(loss=losses[-1], book_loss=losses[-1] / num_steps,
                       tokens_per_sec=total_tokens / seconds, seconds=seconds,
                       epochs=num_epochs, losses=losses)


# ============================================================================ greedy decoding

@dataclasses.dataclass
class Translation:
    """One greedy translation.

    source_tokens: what the encoder read, ending with ``<eos>`` (unknown words shown as typed);
    tokens: the output words (without ``<eos>``); text: them joined by spaces;
    attention: (output steps, source tokens) weights, one row per step *including* the step
    that produced ``<eos>`` (None if the decoder exposes no tensor); step_weights: the raw
    ``decoder.attention_weights`` of every step; unknown: source words not in the vocabulary;
    dropped: source words cut because they did not fit into ``num_steps``;
    ended: True if the decoder produced ``<eos>`` within ``num_steps``.
    """

    source_tokens: list
    tokens: list
    text: str
    attention: torch.Tensor | None
    step_weights: list
    unknown: list
    dropped: list
    ended: bool

    @property
    def output_tokens(self) -> list:
        """The rows of ``attention``: the output words, plus ``<eos>`` if it was produced."""
        return self.tokens + ([EOS] if self.ended else [])


def encode_source(sentence: str, src_vocab: Vocab, num_steps: int, truncate: bool = False):
    """Tokenize an English sentence for the encoder.

    Returns (indices (1, num_steps), valid_len (1,), source tokens with ``<eos>``, unknown words,
    dropped words). The text goes through the same preprocessing as the training pairs.
    Raises ValueError for an empty sentence, a sentence of unknown words only, or one longer
    than ``num_steps - 1`` words unless ``truncate`` (then the dropped words are reported).
    """
    from utils.data import preprocess

    check_positive_int("num_steps", num_steps, minimum=2)
    if not isinstance(sentence, str):
        raise ValueError(_("sentence must be a str, got {sentence_type}").format(
            sentence_type=type(sentence).__name__))
    words = tokenize(preprocess(sentence))
    if not words:
        raise ValueError(_('the sentence is empty; type an English sentence such as "i\'m home ."'))
    unknown = [w for w in words if w not in src_vocab.token_to_idx]
    if len(unknown) == len(words):
        raise ValueError(_("none of the words {words} is in the source vocabulary "
                           "({num_src_vocab} tokens); use words from the training pairs, e.g. "
                           '"i\'m home ."').format(words=words, num_src_vocab=len(src_vocab)))
    room = num_steps - 1                                      # one position for <eos>
    dropped = words[room:]
    if dropped and not truncate:
        raise ValueError(_("the sentence has {num_words} words but num_steps={num_steps} leaves "
                           "room for {room} (+ <eos>); shorten it, pass truncate=True, or train "
                           "with a larger num_steps").format(
            num_words=len(words), num_steps=num_steps, room=room))
    words = words[:room]
    indices = src_vocab[words] + [src_vocab[EOS]]
    valid_len = torch.tensor([len(indices)])
    indices = indices + [src_vocab[PAD]] * (num_steps - len(indices))
    return torch.tensor([indices]), valid_len, words + [EOS], unknown, dropped


@torch.no_grad()
def greedy_translate(model: EncoderDecoder, sentence: str, src_vocab: Vocab, tgt_vocab: Vocab,
                     num_steps: int, *, truncate: bool = False) -> Translation:
    """Translate with greedy search: feed back the most likely token until ``<eos>``.

    At most ``num_steps`` output tokens, decoded where the model's weights are. ``model``
    follows the interface of this module.
    Bad input (empty, only unknown words, too long without ``truncate``) raises ValueError.
    """
    X, valid_len, source_tokens, unknown, dropped = encode_source(sentence, src_vocab,
                                                                  num_steps, truncate)
    was_training = model.training
    model.eval()
    device = model_device(model)
    X, valid_len = X.to(device), valid_len.to(device)
    state = model.decoder.init_state(model.encoder(X, valid_len), valid_len)
    dec_X = torch.tensor([[tgt_vocab[BOS]]], device=device)             # (1, 1)
    eos = tgt_vocab[EOS]
    predicted, step_weights, ended = [], [], False
    for _ in range(num_steps):
        Y, state = model.decoder(dec_X, state)                          # (1, 1, vocab)
        dec_X = Y.argmax(dim=-1)                                        # (1, 1)
        step_weights.append(getattr(model.decoder, "attention_weights", None))
        token = int(dec_X)
        if token == eos:
            ended = True
            break
        predicted.append(token)
    model.train(was_training)
    return _make_translation(source_tokens, predicted, step_weights, unknown, dropped, ended,
                             tgt_vocab)


def _make_translation(source_tokens, predicted, step_weights, unknown, dropped, ended,
                      tgt_vocab) -> Translation:
    step_weights = [_on_cpu(w) for w in step_weights]          # maps are for plotting
    attention = None
    if step_weights and all(isinstance(w, torch.Tensor) and w.dim() == 3
                            and w.shape[:2] == (1, 1) for w in step_weights):
        # (steps, num_steps) -> keep the source tokens only (padding has weight 0)
        attention = torch.cat([w[0] for w in step_weights], dim=0)[:, :len(source_tokens)]
    tokens = tgt_vocab.to_tokens(predicted)
    return Translation(source_tokens, tokens, " ".join(tokens), attention, step_weights,
                       unknown, dropped, ended)


def _on_cpu(weights):
    """A tensor, or nested lists/tuples of them, moved to the CPU (anything else unchanged)."""
    if isinstance(weights, torch.Tensor):
        return weights.cpu()
    if isinstance(weights, (list, tuple)):
        return type(weights)(_on_cpu(w) for w in weights)
    return weights


def _row(weights, i: int):
    """Sentence ``i`` of a batch's ``attention_weights`` (a tensor or nested lists of them)."""
    if isinstance(weights, torch.Tensor):
        return weights[i:i + 1]
    if isinstance(weights, (list, tuple)):
        return type(weights)(_row(w, i) for w in weights)
    return weights


@torch.no_grad()
def greedy_translate_many(model: EncoderDecoder, sentences, src_vocab: Vocab, tgt_vocab: Vocab,
                          num_steps: int, batch_size: int = 256) -> list:
    """``greedy_translate`` of many sentences, decoded ``batch_size`` at a time.

    Returns one ``Translation`` per sentence (too long ones truncated), or None for a sentence
    without a known word. Same tokens as translating one sentence at a time (a test checks it);
    a batch stops when every sentence in it has produced ``<eos>``.
    """
    check_positive_int("batch_size", batch_size, minimum=1)
    encoded = {}
    for index, sentence in enumerate(sentences):
        try:
            encoded[index] = encode_source(sentence, src_vocab, num_steps, truncate=True)
        except ValueError:                  # no known word: nothing to translate
            pass
    results = [None] * len(sentences)
    device = model_device(model)
    was_training = model.training
    model.eval()
    order = list(encoded)
    eos = tgt_vocab[EOS]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        X = torch.cat([encoded[i][0] for i in chunk]).to(device)          # (b, num_steps)
        valid_len = torch.cat([encoded[i][1] for i in chunk]).to(device)  # (b,)
        state = model.decoder.init_state(model.encoder(X, valid_len), valid_len)
        dec_X = torch.full((len(chunk), 1), tgt_vocab[BOS], device=device)  # (b, 1)
        outputs, weights = [], []
        for _ in range(num_steps):
            Y, state = model.decoder(dec_X, state)                          # (b, 1, vocab)
            dec_X = Y.argmax(dim=-1)                                        # (b, 1)
            outputs.append(dec_X[:, 0])
            weights.append(getattr(model.decoder, "attention_weights", None))
            if bool((torch.stack(outputs, dim=1) == eos).any(dim=1).all()):
                break
        produced = torch.stack(outputs, dim=1).tolist()                     # (b, steps)
        for row, index in enumerate(chunk):
            tokens = produced[row]
            ended = eos in tokens
            length = tokens.index(eos) + 1 if ended else len(tokens)
            _, _, source_tokens, unknown, dropped = encoded[index]
            results[index] = _make_translation(
                source_tokens, tokens[:length - ended], [_row(w, row) for w in weights[:length]],
                unknown, dropped, ended, tgt_vocab)
    model.train(was_training)
    return results


# ============================================================================ held-out BLEU

def translate_pairs(model: EncoderDecoder, pairs, src_vocab: Vocab, tgt_vocab: Vocab,
                    num_steps: int) -> dict:
    """Greedy translations of the distinct English sentences of ``pairs``.

    Returns {"sources", "predictions", "references" (list of French lists), "unknown_only"
    (how many sentences had no known word: their prediction is empty), "truncated"}.
    Sentences longer than ``num_steps - 1`` words are cut (counted in ``truncated``).
    """
    references: dict[str, list[str]] = {}
    for english, french in pairs:
        references.setdefault(english, []).append(french)
    predictions, unknown_only, truncated = [], 0, 0
    for translation in greedy_translate_many(model, list(references), src_vocab, tgt_vocab,
                                             num_steps):
        if translation is None:             # no known word: nothing to translate
            unknown_only += 1
            predictions.append("")
            continue
        truncated += bool(translation.dropped)
        predictions.append(translation.text)
    return {"sources": list(references), "predictions": predictions,
            "references": list(references.values()), "unknown_only": unknown_only,
            "truncated": truncated}


def heldout_bleu(model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab, num_steps: int,
                 trained_on=(), path=None):
    """Corpus BLEU (sacrebleu, 0-100) on the held-out sentences (``utils.heldout``) that are not
    among ``trained_on`` (the English side of the model's training pairs); (score, details)."""
    from utils.bleu import corpus_bleu
    from utils.heldout import heldout_pairs

    english = [pair[0] if isinstance(pair, (tuple, list)) else pair for pair in trained_on]
    details = translate_pairs(model, heldout_pairs(path, exclude=english), src_vocab, tgt_vocab,
                              num_steps)
    return corpus_bleu(details["predictions"], details["references"]), details


def heldout_translations(model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab,
                         num_steps: int, trained_on=(), path=None) -> list:
    """Greedy ``Translation`` of every distinct held-out English sentence not in ``trained_on``
    (attention weights included); sentences without a known word are left out."""
    from utils.heldout import heldout_pairs

    english = [pair[0] if isinstance(pair, (tuple, list)) else pair for pair in trained_on]
    sentences = list(dict.fromkeys(e for e, _ in heldout_pairs(path, exclude=english)))
    return [t for t in greedy_translate_many(model, sentences, src_vocab, tgt_vocab, num_steps)
            if t is not None]


# ============================================================================ data

def training_pairs(config, path=None) -> list:
    """The (English, French) pairs a configuration trains on: the first ``num_examples`` pairs
    of the file, without the held-out sentences when ``config.held_out``."""
    from utils.heldout import split_pairs

    pairs = read_pairs(path, config.num_examples)
    return split_pairs(pairs)[0] if config.held_out else pairs


def training_data(config, path=None):
    """(data_iter, src_vocab, tgt_vocab) for ``config``; truncation is reported as a warning."""
    return pairs_loader(training_pairs(config, path), config.batch_size, config.num_steps,
                        config.seed, config.min_freq, trim=config.held_out)


def training_vocabs(config, path=None) -> tuple:
    """(src_vocab, tgt_vocab) of ``training_data(config, path)`` without building its batches:
    what loading a trained model needs."""
    source, target = tokenize_pairs(training_pairs(config, path))
    return Vocab(source, min_freq=config.min_freq), Vocab(target, min_freq=config.min_freq)
