"""Bahdanau's model (lesson 4): a GRU encoder and a decoder that attends at every step.

Encoders (``BahdanauConfig.encoder``):

- ``Seq2SeqEncoder`` ("book"): embedding -> multi-layer GRU (batch first) that reads the padding.
- ``BidirectionalEncoder`` ("bidirectional", the paper's): a bidirectional GRU over the packed
  batch; annotations h_j = [forward; backward] (2 * num_hiddens), padding never read.

Decoders (``BahdanauConfig.decoder``):

- ``Seq2SeqAttentionDecoder`` ("book", the book's decoder): at step t the query is the state
  s_{t-1} from before reading y_{t-1} (the paper's order too, section 3.1); [context, embedded
  y_{t-1}] -> GRU -> dense layer (the book leaves out the paper's deep output layer).
- ``ReadFirstAttentionDecoder`` ("read_first"): s_t = GRU(embedded y_{t-1}, s_{t-1}) first,
  then the query s_t attends; logits = dense(tanh(W [c_t; s_t])) (Luong et al. 2015).
- ``Seq2SeqDecoder`` / ``SummaryDecoder``: without attention (the baseline), over the book's or
  the bidirectional encoder.

``BahdanauConfig``, the presets and ``train_or_load_bahdanau``: the lesson's models, cached on
disk under ``<cache>/models/`` keyed by a hash of settings, data and code.

Training, greedy decoding and held-out BLEU are shared with lesson 7: ``utils.training``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from utils.attention import AdditiveAttention
from utils.data import Vocab
from utils.i18n import _, gettext
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


class BidirectionalEncoder(nn.Module):
    """The paper's encoder: a bidirectional GRU that reads only the real tokens.

    The batch is packed, so the backward direction starts at each sentence's last real token
    (``<eos>``) and neither direction reads padding. Annotation h_j = [forward h_j; backward h_j]
    (2 * num_hiddens); padded positions are 0. The decoder's initial state is made here, as in
    the paper (appendix A): s_0 = tanh(W_s backward h_1), the backward state after reading the
    first token (it has read the whole sentence); decoder layer l starts from encoder layer l's.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__()
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, batch_first=True,
                          bidirectional=True, dropout=dropout if num_layers > 1 else 0.0)
        self.init_bridge = nn.ModuleList(nn.Linear(num_hiddens, num_hiddens)
                                         for _ in range(num_layers))

    def forward(self, X: torch.Tensor, valid_len: torch.Tensor | None = None):
        """X (batch, steps), valid_len (batch,) -> annotations (batch, steps, 2 * hiddens),
        decoder initial state (layers, batch, hiddens)."""
        if valid_len is None:
            raise ValueError(gettext("the bidirectional encoder needs valid_len (the source "
                                     "lengths)"))
        embedded = self.embedding(X.long())                              # (b, steps, embed)
        packed = pack_padded_sequence(embedded, valid_len.to("cpu", torch.long),
                                      batch_first=True, enforce_sorted=False)
        packed_outputs, final = self.rnn(packed)                         # final (2 * layers, b, h)
        annotations, _ = pad_packed_sequence(packed_outputs, batch_first=True,
                                             total_length=X.shape[1])    # (b, steps, 2h)
        backward_first = final[1::2]                                     # (layers, b, h)
        state = torch.stack([torch.tanh(bridge(h))
                             for bridge, h in zip(self.init_bridge, backward_first)])
        return annotations, state                                        # (layers, b, h)


class Seq2SeqAttentionDecoder(nn.Module):
    """The book's Bahdanau decoder: attend to the encoder outputs before every GRU step.

    Step t' uses the context c_t' = sum_t alpha(s_{t'-1}, h_t) h_t, where s_{t'-1} is the top
    GRU layer's state after the previous step and h_t are the encoder outputs (keys and values,
    of size ``key_size``: ``num_hiddens`` by default, 2 * num_hiddens over the bidirectional
    encoder). ``attention_weights`` (batch, tgt_steps, src_steps) holds the weights of every step
    of the last call.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0, key_size: int | None = None):
        super().__init__()
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        key_size = num_hiddens if key_size is None else check_positive_int("key_size", key_size)
        self.attention = AdditiveAttention(key_size, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + key_size, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self._step_weights: list[torch.Tensor] = []

    def init_state(self, enc_outputs, enc_valid_len):
        """(encoder outputs (b, steps, key), initial state (layers, b, h), lengths (b,))."""
        outputs, hidden_state = enc_outputs
        return outputs, hidden_state, enc_valid_len

    def forward(self, X: torch.Tensor, state):
        """X (batch, tgt_steps) -> logits (batch, tgt_steps, vocab), new state."""
        enc_outputs, hidden_state, enc_valid_len = state
        embedded = self.embedding(X.long())                         # (b, tgt_steps, embed)
        outputs, self._step_weights = [], []
        for t in range(X.shape[1]):
            query = hidden_state[-1].unsqueeze(1)                   # (b, 1, h): top layer
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_len)  # (b, 1, key)
            step_input = torch.cat((context, embedded[:, t:t + 1]), dim=-1)  # (b, 1, key + embed)
            out, hidden_state = self.rnn(step_input, hidden_state)  # (b, 1, h), (layers, b, h)
            outputs.append(out)
            self._step_weights.append(self.attention.attention_weights)      # (b, 1, src_steps)
        logits = self.dense(torch.cat(outputs, dim=1))              # (b, tgt_steps, vocab)
        return logits, (enc_outputs, hidden_state, enc_valid_len)

    @property
    def attention_weights(self) -> torch.Tensor:
        """(batch, tgt_steps, src_steps): the weights of every step of the last call."""
        if not self._step_weights:
            raise RuntimeError(_("no attention weights yet: call the decoder first"))
        return torch.cat(self._step_weights, dim=1)


class ReadFirstAttentionDecoder(nn.Module):
    """A decoder whose query has read the previous output word (Luong et al. 2015's order and
    output layer; in Bahdanau et al. 2015 the query is s_{t-1}, as in the book's decoder).

    Step t: s_t = GRU(embedded y_{t-1}, s_{t-1}); c_t = additive attention(s_t, annotations)
    masked by the source lengths; logits = dense(tanh(W_c [c_t; s_t])). The context does not
    feed back into the GRU, so a teacher-forced call runs the GRU over all steps at once.
    ``attention_weights`` (batch, tgt_steps, src_steps): row t produced output token t.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0, key_size: int | None = None):
        super().__init__()
        check_gru_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        key_size = num_hiddens if key_size is None else check_positive_int("key_size", key_size)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.attention = AdditiveAttention(key_size, num_hiddens, num_hiddens, dropout)
        self.attentional = nn.Linear(key_size + num_hiddens, num_hiddens)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_len):
        """(annotations (b, src_steps, key), initial state (layers, b, h), lengths (b,))."""
        annotations, hidden_state = enc_outputs
        return annotations, hidden_state, enc_valid_len

    def forward(self, X: torch.Tensor, state):
        """X (batch, tgt_steps) -> logits (batch, tgt_steps, vocab), new state."""
        annotations, hidden_state, enc_valid_len = state
        embedded = self.embedding(X.long())                              # (b, tgt_steps, embed)
        queries, hidden_state = self.rnn(embedded, hidden_state)         # (b, tgt_steps, h)
        context = self.attention(queries, annotations, annotations,
                                 enc_valid_len)                          # (b, tgt_steps, key)
        attentional = torch.tanh(self.attentional(torch.cat((context, queries), dim=-1)))
        return self.dense(attentional), (annotations, hidden_state, enc_valid_len)

    @property
    def attention_weights(self) -> torch.Tensor:
        """(batch, tgt_steps, src_steps): the weights of every step of the last call."""
        if self.attention.attention_weights is None:
            raise RuntimeError(_("no attention weights yet: call the decoder first"))
        return self.attention.attention_weights


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


class SummaryDecoder(Seq2SeqDecoder):
    """The baseline over the bidirectional encoder: ``Seq2SeqDecoder`` whose fixed context is
    tanh(W [forward state at the last real token; backward state at the first token]) of the
    top layer (both directions have read the whole sentence). Same sizes otherwise."""

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
                 dropout: float = 0.0):
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.summary = nn.Linear(2 * num_hiddens, num_hiddens)

    def init_state(self, enc_outputs, enc_valid_len):
        """(context (b, h), initial state (layers, b, h)) from the annotations (b, steps, 2h)."""
        if enc_valid_len is None:
            raise ValueError(_("SummaryDecoder needs enc_valid_len (the source lengths)"))
        annotations, hidden_state = enc_outputs
        h = annotations.shape[-1] // 2
        rows = torch.arange(annotations.shape[0], device=annotations.device)
        last = enc_valid_len.to(annotations.device).long() - 1                  # (b,)
        forward_last = annotations[rows, last, :h]                              # (b, h)
        backward_first = annotations[:, 0, h:]                                  # (b, h)
        context = torch.tanh(self.summary(torch.cat((forward_last, backward_first), dim=-1)))
        return context, hidden_state

# ============================================================================ the lesson's model

ENCODERS = ("book", "bidirectional")
DECODERS = ("book", "read_first")


@dataclasses.dataclass(frozen=True)
class BahdanauConfig(TranslationConfig):
    """Settings of the lesson's model (shared ones: ``TranslationConfig``); the book's defaults.

    encoder: "book" (``Seq2SeqEncoder``) or "bidirectional" (``BidirectionalEncoder``, the
    paper's); decoder: "book" (``Seq2SeqAttentionDecoder``) or "read_first"
    (``ReadFirstAttentionDecoder``); ignored when ``attention`` is False.
    """

    num_epochs: int = 250
    embed_size: int = 32
    num_hiddens: int = 32
    num_layers: int = 2
    attention: bool = True              # False: the same model without attention (baseline)
    encoder: str = "book"
    decoder: str = "book"
    # Weight of the guided-alignment loss (utils.guided_alignment): 0 lets attention learn alone.
    guided_alignment: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        for name in ("embed_size", "num_hiddens", "num_layers"):
            check_positive_int(name, getattr(self, name))
        check_flag("attention", self.attention)
        if not (isinstance(self.guided_alignment, (int, float))
                and not isinstance(self.guided_alignment, bool) and self.guided_alignment >= 0):
            raise ValueError(_("guided_alignment must be a number >= 0 (0: no guidance), got "
                               "{guided_alignment!r}").format(
                guided_alignment=self.guided_alignment))
        if self.guided_alignment and not self.attention:
            raise ValueError(_("guided_alignment needs attention to guide: set attention=True or "
                               "guided_alignment=0"))
        for name, choices in (("encoder", ENCODERS), ("decoder", DECODERS)):
            if getattr(self, name) not in choices:
                raise ValueError(_("{name} must be one of {choices}, got "
                                   "{value!r}").format(
                    name=name, choices=', '.join(map(repr, choices)),
                    value=getattr(self, name)))


# The lesson's models: all training pairs of the shared file, wider and trained briefly
# (settings chosen on held-out BLEU of several runs; see the README's "Translation models").
# The book's model: one-directional encoder, query from before the previous word.
LESSON_BOOK_DECODER = BahdanauConfig(num_examples=None, held_out=True, num_steps=12,
                                     batch_size=128, embed_size=128, num_hiddens=128,
                                     num_layers=1, dropout=0.2, lr=0.005, num_epochs=15, seed=0)
# The paper's bidirectional encoder under the book's decoder.
LESSON_PAPER_ENCODER = dataclasses.replace(LESSON_BOOK_DECODER, encoder="bidirectional")
# The lesson's main model: the paper's encoder, a query that has read the previous word.
LESSON_BAHDANAU = dataclasses.replace(LESSON_BOOK_DECODER, encoder="bidirectional",
                                      decoder="read_first")
# The same encoder, data and budget without attention: what does attention add?
LESSON_NO_ATTENTION = dataclasses.replace(LESSON_BAHDANAU, attention=False)
# The explorer's model: the main model trained with a second loss that pulls its attention
# towards IBM Model 1's word links (guided alignment, weight 1; utils.guided_alignment).
LESSON_ALIGNED = dataclasses.replace(LESSON_BAHDANAU, guided_alignment=1.0)


def build_bahdanau(config: BahdanauConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> EncoderDecoder:
    """An untrained ``EncoderDecoder`` with the encoder and decoder ``config`` names."""
    sizes = (config.embed_size, config.num_hiddens, config.num_layers, config.dropout)
    bidirectional = config.encoder == "bidirectional"
    encoder_class = BidirectionalEncoder if bidirectional else Seq2SeqEncoder
    encoder = encoder_class(len(src_vocab), *sizes)
    if not config.attention:
        decoder_class = SummaryDecoder if bidirectional else Seq2SeqDecoder
        return EncoderDecoder(encoder, decoder_class(len(tgt_vocab), *sizes))
    decoder_class = (ReadFirstAttentionDecoder if config.decoder == "read_first"
                     else Seq2SeqAttentionDecoder)
    key_size = 2 * config.num_hiddens if bidirectional else config.num_hiddens
    return EncoderDecoder(encoder, decoder_class(len(tgt_vocab), *sizes, key_size=key_size))


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
    extra_loss = guided_alignment_objective(config, src_vocab, tgt_vocab, path)
    result = train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab,
                           animate=animate, show_progress=show_progress, num_threads=num_threads,
                           extra_loss=extra_loss)
    return model, src_vocab, tgt_vocab, result


def guided_alignment_objective(config: BahdanauConfig, src_vocab: Vocab, tgt_vocab: Vocab,
                               path=None):
    """None without guidance; else the per-batch term ``train_seq2seq`` adds to its objective:
    ``config.guided_alignment`` times the attention's cross-entropy against IBM Model 1's links
    (trained on the same pairs), scaled like the translation loss (summed, / num_steps)."""
    if not config.guided_alignment:
        return None
    from utils.alignment import train_model1_on
    from utils.guided_alignment import guided_alignment_loss, model1_prior

    prior = model1_prior(train_model1_on(config, path), src_vocab, tgt_vocab)

    def objective(model, X, X_valid_len, Y, Y_valid_len):
        per_token = guided_alignment_loss(model.decoder.attention_weights, prior.to(X.device),
                                          X, X_valid_len, Y, Y_valid_len)    # (b, tgt_steps)
        return config.guided_alignment * per_token.sum() / Y.shape[1]

    return objective


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

