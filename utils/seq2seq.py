"""Bahdanau's model (lesson 4): a GRU encoder and a decoder that attends before every step.

- ``Seq2SeqEncoder``: embedding -> multi-layer GRU (batch first).
- ``Seq2SeqAttentionDecoder``: at each step, query = top-layer decoder state of the previous
  step, keys = values = encoder outputs, additive attention (``utils.attention``) masked by the
  source lengths; [context, embedded token] -> GRU -> dense layer to the vocabulary.
- ``Seq2SeqDecoder``: the same decoder without attention (the baseline).
- ``BahdanauConfig`` and ``train_or_load_bahdanau``: the lesson's model with the book's settings,
  cached on disk under ``<cache>/models/`` keyed by a hash of settings, data and code.

Training, greedy decoding and held-out BLEU are shared with lesson 7: ``utils.training``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from utils.attention import AdditiveAttention
from utils.data import Vocab
from utils.model_cache import settings_key, train_or_load
from utils.training import (EncoderDecoder, TranslationConfig, train_seq2seq, training_data,
                            training_vocabs)
from utils.code_fingerprint import code_fingerprint
from utils.validation import check_dropout, check_flag, check_positive_int


# ============================================================================ the model

def check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout) -> None:
    """The sizes every module of this file is built from: positive ints, dropout in [0, 1)."""
    for name, value in (("vocab_size", vocab_size), ("embed_size", embed_size),
                        ("num_hiddens", num_hiddens), ("num_layers", num_layers)):
        check_positive_int(name, value)
    check_dropout(dropout)


class Seq2SeqEncoder(nn.Module):
    """Embedding -> ``num_layers`` GRU layers. Returns (outputs, state), both batch first.

    Like the book, the GRU reads the padding too; ``valid_len`` is accepted for the interface
    (the decoder's attention masks the padded positions).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__()
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
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
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
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
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
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

# ============================================================================ the lesson's model

@dataclasses.dataclass(frozen=True)
class BahdanauConfig(TranslationConfig):
    """Settings of the lesson's model (shared ones: ``TranslationConfig``); the book's defaults."""

    num_epochs: int = 250
    embed_size: int = 32
    num_hiddens: int = 32
    num_layers: int = 2
    attention: bool = True              # False: the same model without attention (baseline)

    def __post_init__(self):
        super().__post_init__()
        for name in ("embed_size", "num_hiddens", "num_layers"):
            check_positive_int(name, getattr(self, name))
        check_flag("attention", self.attention)


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


def bahdanau_versions() -> dict:
    """The code part of the cache key: the fingerprint of this module and what it imports."""
    return {"code": code_fingerprint("utils.seq2seq")}


def model_cache_key(config: BahdanauConfig, path=None) -> str:
    """A hash of every setting, the training pairs and the code (``bahdanau_versions``)."""
    return settings_key("bahdanau", config, path, bahdanau_versions())


def train_or_load_bahdanau(config: BahdanauConfig = BahdanauConfig(), path=None, *,
                           use_cache: bool = True, refresh: bool = False, animate: bool = True,
                           show_progress: bool = True):
    """Like ``train_bahdanau``, but reuse a model trained earlier with the same settings and data
    (see ``utils.model_cache``). Returns (model, src_vocab, tgt_vocab, result, cache_file,
    from_cache)."""
    return train_or_load("bahdanau", config, vocabs=training_vocabs, build=build_bahdanau,
                         train=train_bahdanau, versions=bahdanau_versions(),
                         path=path, use_cache=use_cache, refresh=refresh, animate=animate,
                         show_progress=show_progress)

