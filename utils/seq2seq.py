"""Sequence to sequence: a GRU encoder, Bahdanau's attention decoder, training, greedy decoding.

The encoder–decoder interface (lesson 4; the Transformer of lesson 7 follows it too)
-----------------------------------------------------------------------------------
Any pair of modules that keeps these four promises can be trained by ``train_seq2seq`` and
decoded by ``greedy_translate``::

    enc_outputs = encoder(X, valid_len)            # X (batch, src_steps) token indices,
                                                   # valid_len (batch,) source lengths
    state = decoder.init_state(enc_outputs, valid_len)
    Y, state = decoder(dec_X, state)               # dec_X (batch, tgt_steps) token indices ->
                                                   # Y (batch, tgt_steps, tgt_vocab) logits
    decoder.attention_weights                      # what the last call attended to, for plots

``enc_outputs`` and ``state`` may be anything the decoder understands (tensors, tuples, lists).
The decoder must accept ``tgt_steps == 1`` with the state it returned, so that greedy decoding
can feed it one token at a time. ``attention_weights`` should be a tensor (batch, tgt_steps,
src_steps) of the encoder–decoder attention of the last call (a decoder with several attention
layers chooses which one to expose, or a list of them; ``greedy_translate`` keeps whatever it
is, step by step). ``EncoderDecoder(encoder, decoder)`` glues the two together:
``model(enc_X, dec_X, enc_valid_len) -> (Y, state)``.

In this module
--------------
- ``Seq2SeqEncoder``: embedding -> multi-layer GRU (batch first).
- ``Seq2SeqAttentionDecoder``: at each step, query = top-layer decoder state of the previous
  step, keys = values = encoder outputs, additive attention (``utils.attention``) masked by the
  source lengths; [context, embedded token] -> GRU -> dense layer to the vocabulary.
- ``masked_cross_entropy``, ``xavier_init``, ``train_seq2seq`` (Adam, teacher forcing with
  ``<bos>``, gradient clipping, progress bar, live loss curve) -> ``TrainResult``.
- ``greedy_translate`` -> ``Translation`` (stops at ``<eos>``, keeps attention per step).
- ``BahdanauConfig`` and ``train_or_load_bahdanau``: the lesson's model with the book's settings,
  cached on disk under ``<cache>/models/`` keyed by a hash of settings, data and code version.

BLEU lives in ``utils.bleu``.
"""

from __future__ import annotations

import dataclasses
import time

import torch
from torch import nn
from torch.nn import functional as F

from utils.attention import AdditiveAttention
from utils.data import BOS, EOS, PAD, Vocab, pairs_loader, read_pairs, tokenize
from utils.model_cache import settings_key, train_or_load

# Bump when the model or training code changes in a way that changes trained weights: cached
# models of the old version are then ignored (see ``model_cache_key``).
MODEL_CODE_VERSION = 1


def require_int(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def require_dropout(dropout) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout is a probability in [0, 1), got {dropout}")


# ============================================================================ the model

class Seq2SeqEncoder(nn.Module):
    """Embedding -> ``num_layers`` GRU layers. Returns (outputs, state), both batch first.

    Like the book, the GRU reads the padding too; ``valid_len`` is accepted for the interface
    (the decoder's attention masks the padded positions).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("num_hiddens", num_hiddens), ("num_layers", num_layers)):
            require_int(name, value)
        require_dropout(dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)

    def forward(self, X: torch.Tensor, valid_len: torch.Tensor | None = None):
        """X (batch, steps) -> outputs (batch, steps, hiddens), state (layers, batch, hiddens)."""
        embedded = self.embedding(X.long())                  # (batch, steps, embed)
        outputs, state = self.rnn(embedded)                  # (b, steps, h), (layers, b, h)
        return outputs, state


class Seq2SeqAttentionDecoder(nn.Module):
    """Bahdanau's decoder: attend to the encoder outputs before every GRU step.

    Step t' uses the context c_t' = sum_t alpha(s_{t'-1}, h_t) h_t, where s_{t'-1} is the top
    GRU layer's state after the previous step and h_t are the encoder outputs (keys and values).
    ``attention_weights`` (batch, tgt_steps, src_steps) holds the weights of every step of the
    last call.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("num_hiddens", num_hiddens), ("num_layers", num_layers)):
            require_int(name, value)
        require_dropout(dropout)
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self._step_weights: list[torch.Tensor] = []

    def init_state(self, enc_outputs, enc_valid_len):
        """(encoder outputs (b, steps, h), final encoder state (layers, b, h), lengths (b,))."""
        outputs, hidden_state = enc_outputs
        return outputs, hidden_state, enc_valid_len

    def forward(self, X: torch.Tensor, state):
        """X (batch, tgt_steps) -> logits (batch, tgt_steps, vocab), new state."""
        enc_outputs, hidden_state, enc_valid_len = state
        embedded = self.embedding(X.long())                         # (b, tgt_steps, embed)
        outputs, self._step_weights = [], []
        for t in range(X.shape[1]):
            query = hidden_state[-1].unsqueeze(1)                   # (b, 1, h): top layer
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_len)  # (b, 1, h)
            step_input = torch.cat((context, embedded[:, t:t + 1]), dim=-1)  # (b, 1, h + embed)
            out, hidden_state = self.rnn(step_input, hidden_state)  # (b, 1, h), (layers, b, h)
            outputs.append(out)
            self._step_weights.append(self.attention.attention_weights)      # (b, 1, src_steps)
        logits = self.dense(torch.cat(outputs, dim=1))              # (b, tgt_steps, vocab)
        return logits, (enc_outputs, hidden_state, enc_valid_len)

    @property
    def attention_weights(self) -> torch.Tensor:
        """(batch, tgt_steps, src_steps): the weights of every step of the last call."""
        if not self._step_weights:
            raise RuntimeError("no attention weights yet: call the decoder first")
        return torch.cat(self._step_weights, dim=1)


class Seq2SeqDecoder(nn.Module):
    """The same decoder without attention, to measure what attention adds.

    Every step sees one fixed context, the top layer of the encoder's final state (the whole
    sentence squeezed into ``num_hiddens`` numbers), beside the previous output word. Same
    interface and sizes as ``Seq2SeqAttentionDecoder``; it has no ``attention_weights``.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("num_hiddens", num_hiddens), ("num_layers", num_layers)):
            require_int(name, value)
        require_dropout(dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_len):
        """(context (b, h): top layer of the final encoder state, that state (layers, b, h))."""
        _, hidden_state = enc_outputs
        return hidden_state[-1], hidden_state

    def forward(self, X: torch.Tensor, state):
        """X (batch, tgt_steps) -> logits (batch, tgt_steps, vocab), new state."""
        context, hidden_state = state
        embedded = self.embedding(X.long())                         # (b, tgt_steps, embed)
        repeated = context.unsqueeze(1).expand(-1, X.shape[1], -1)  # (b, tgt_steps, h)
        outputs, hidden_state = self.rnn(torch.cat((embedded, repeated), dim=-1), hidden_state)
        return self.dense(outputs), (context, hidden_state)         # (b, tgt_steps, vocab)


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
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} must "
                         f"share (batch, steps)")
    token_losses = F.cross_entropy(logits.transpose(1, 2), labels.long(),
                                   reduction="none")                       # (batch, steps)
    keep = torch.arange(labels.shape[1], device=labels.device)[None, :] < valid_len[:, None]
    return token_losses * keep


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
                  device="cpu", *, clip_norm: float = 1.0, init_weights: bool = True,
                  animate: bool = True, show_progress: bool = True,
                  num_threads: int | None = None, on_epoch=None) -> TrainResult:
    """Train any encoder–decoder (see the module docstring) with teacher forcing.

    ``data_iter`` yields (X, X_valid_len, Y, Y_valid_len) batches as ``utils.data.load_data_nmt``
    makes them. Xavier initialisation (``init_weights``), Adam with learning rate ``lr``, masked
    cross-entropy, gradient norm clipped at ``clip_norm``. A tqdm bar counts epochs and, with
    ``animate``, an ``Animator`` draws the loss live in Jupyter (``result.losses`` holds it
    anyway). ``num_threads`` sets torch's intra-op threads for the run (restored afterwards).
    ``on_epoch(epoch, model)``, if given, runs after each epoch (1-based) outside the timed
    part, e.g. to score the model on held-out sentences; the model is back in training mode after.
    """
    require_int("num_epochs", num_epochs)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    from utils.plotting import Animator, progress

    if init_weights:
        model.apply(xavier_init)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    animator = Animator(xlabel="epoch", ylabel="loss per token", xlim=[1, num_epochs],
                        yscale="log") if animate else None
    bos = tgt_vocab[BOS]
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        require_int("num_threads", num_threads)
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
                (token_losses.sum() / num_steps).backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm, foreach=True)
                optimizer.step()
                loss_sum += token_losses.detach().sum()
                token_sum += Y_valid_len.sum()
            tokens = int(token_sum)
            if tokens == 0:
                raise ValueError("data_iter yielded no target tokens; check the data loader")
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

    require_int("num_steps", num_steps, minimum=2)
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a str, got {type(sentence).__name__}")
    words = tokenize(preprocess(sentence))
    if not words:
        raise ValueError("the sentence is empty; type an English sentence such as \"i'm home .\"")
    unknown = [w for w in words if w not in src_vocab.token_to_idx]
    if len(unknown) == len(words):
        raise ValueError(f"none of the words {words} is in the source vocabulary "
                         f"({len(src_vocab)} tokens); use words from the training pairs, "
                         f"e.g. \"i'm home .\"")
    room = num_steps - 1                                      # one position for <eos>
    dropped = words[room:]
    if dropped and not truncate:
        raise ValueError(f"the sentence has {len(words)} words but num_steps={num_steps} leaves "
                         f"room for {room} (+ <eos>); shorten it, pass truncate=True, or train "
                         f"with a larger num_steps")
    words = words[:room]
    indices = src_vocab[words] + [src_vocab[EOS]]
    valid_len = torch.tensor([len(indices)])
    indices = indices + [src_vocab[PAD]] * (num_steps - len(indices))
    return torch.tensor([indices]), valid_len, words + [EOS], unknown, dropped


@torch.no_grad()
def greedy_translate(model: EncoderDecoder, sentence: str, src_vocab: Vocab, tgt_vocab: Vocab,
                     num_steps: int, device="cpu", *, truncate: bool = False) -> Translation:
    """Translate with greedy search: feed back the most likely token until ``<eos>``.

    At most ``num_steps`` output tokens. ``model`` follows the interface of this module.
    Bad input (empty, only unknown words, too long without ``truncate``) raises ValueError.
    """
    X, valid_len, source_tokens, unknown, dropped = encode_source(sentence, src_vocab,
                                                                  num_steps, truncate)
    was_training = model.training
    model.eval()
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
    attention = None
    if step_weights and all(isinstance(w, torch.Tensor) and w.dim() == 3
                            and w.shape[:2] == (1, 1) for w in step_weights):
        # (steps, num_steps) -> keep the source tokens only (padding has weight 0)
        attention = torch.cat([w[0] for w in step_weights], dim=0)[:, :len(source_tokens)]
    tokens = tgt_vocab.to_tokens(predicted)
    return Translation(source_tokens, tokens, " ".join(tokens), attention, step_weights,
                       unknown, dropped, ended)


def _row(weights, i: int):
    """Sentence ``i`` of a batch's ``attention_weights`` (a tensor or nested lists of them)."""
    if isinstance(weights, torch.Tensor):
        return weights[i:i + 1]
    if isinstance(weights, (list, tuple)):
        return type(weights)(_row(w, i) for w in weights)
    return weights


@torch.no_grad()
def greedy_translate_many(model: EncoderDecoder, sentences, src_vocab: Vocab, tgt_vocab: Vocab,
                          num_steps: int, device="cpu", batch_size: int = 256) -> list:
    """``greedy_translate`` of many sentences, decoded ``batch_size`` at a time.

    Returns one ``Translation`` per sentence (too long ones truncated), or None for a sentence
    without a known word. Same tokens as translating one sentence at a time (a test checks it);
    a batch stops when every sentence in it has produced ``<eos>``.
    """
    require_int("batch_size", batch_size, minimum=1)
    encoded = {}
    for index, sentence in enumerate(sentences):
        try:
            encoded[index] = encode_source(sentence, src_vocab, num_steps, truncate=True)
        except ValueError:                  # no known word: nothing to translate
            pass
    results = [None] * len(sentences)
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


# ============================================================================ the lesson's model

@dataclasses.dataclass(frozen=True)
class BahdanauConfig:
    """Settings of the lesson's model; the defaults are the book's."""

    num_examples: int | None = 600      # the first pairs of the file; None: all of them
    num_steps: int = 10
    batch_size: int = 64
    embed_size: int = 32
    num_hiddens: int = 32
    num_layers: int = 2
    dropout: float = 0.1
    lr: float = 0.005
    num_epochs: int = 250
    seed: int = 0
    min_freq: int = 2
    # True: train only on the training side of the held-out split (utils.heldout), in batches
    # trimmed to their longest sentence. False: the book's way (every pair read, padded batches).
    held_out: bool = False
    attention: bool = True              # False: the same model without attention (baseline)

    def __post_init__(self):
        for name in ("batch_size", "embed_size", "num_hiddens", "num_layers", "num_epochs"):
            require_int(name, getattr(self, name))
        if self.num_examples is not None:
            require_int("num_examples", self.num_examples)
        require_int("num_steps", self.num_steps, minimum=2)
        require_int("seed", self.seed, minimum=0)
        require_int("min_freq", self.min_freq, minimum=0)
        require_dropout(self.dropout)
        for name in ("held_out", "attention"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


# The lesson's main model: all training pairs of the shared file, wider and trained briefly
# (settings chosen on held-out BLEU of several runs; see the README's "Translation models").
LESSON_BAHDANAU = BahdanauConfig(num_examples=None, held_out=True, num_steps=12, batch_size=128,
                                 embed_size=128, num_hiddens=128, num_layers=1, dropout=0.2,
                                 lr=0.005, num_epochs=15, seed=0)
# The same model, data and budget without attention: what does attention add?
LESSON_NO_ATTENTION = dataclasses.replace(LESSON_BAHDANAU, attention=False)


def build_bahdanau(config: BahdanauConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> EncoderDecoder:
    """An untrained ``EncoderDecoder`` of ``Seq2SeqEncoder`` and ``Seq2SeqAttentionDecoder``."""
    encoder = Seq2SeqEncoder(len(src_vocab), config.embed_size, config.num_hiddens,
                             config.num_layers, config.dropout)
    decoder_class = Seq2SeqAttentionDecoder if config.attention else Seq2SeqDecoder
    decoder = decoder_class(len(tgt_vocab), config.embed_size, config.num_hiddens,
                            config.num_layers, config.dropout)
    return EncoderDecoder(encoder, decoder)


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


def train_bahdanau(config: BahdanauConfig = BahdanauConfig(), path=None, *,
                   animate: bool = True, show_progress: bool = True,
                   num_threads: int | None = 1):
    """Seed, load the data, build and train the model: (model, src_vocab, tgt_vocab, result).

    One intra-op thread is the default: these tensors are so small that a second thread costs
    more in synchronisation than it saves (measured on 2 cores; pass None to keep torch's).
    """
    from utils.reproducibility import set_seed

    set_seed(config.seed)
    data_iter, src_vocab, tgt_vocab = training_data(config, path)
    model = build_bahdanau(config, src_vocab, tgt_vocab)
    result = train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab,
                           animate=animate, show_progress=show_progress, num_threads=num_threads)
    return model, src_vocab, tgt_vocab, result


def model_cache_key(config: BahdanauConfig, path=None) -> str:
    """A hash of every setting, the training pairs and ``MODEL_CODE_VERSION``."""
    return settings_key("bahdanau", config, path, {"code_version": MODEL_CODE_VERSION})


def train_or_load_bahdanau(config: BahdanauConfig = BahdanauConfig(), path=None, *,
                           use_cache: bool = True, refresh: bool = False, animate: bool = True,
                           show_progress: bool = True):
    """Like ``train_bahdanau``, but reuse a model trained earlier with the same settings and data
    (see ``utils.model_cache``). Returns (model, src_vocab, tgt_vocab, result, cache_file,
    from_cache)."""
    return train_or_load("bahdanau", config, data=training_data, build=build_bahdanau,
                         train=train_bahdanau, versions={"code_version": MODEL_CODE_VERSION},
                         path=path, use_cache=use_cache, refresh=refresh, animate=animate,
                         show_progress=show_progress)
