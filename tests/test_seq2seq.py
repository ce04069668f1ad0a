"""The seq2seq module: shapes, the attention decoders (the book's and the read-first one), the
paper's bidirectional encoder, the loss, the training loop, greedy decoding, the lesson's config
and presets, held-out pairs and the model cache (tiny runs only; the full
seeded training run is in test_training_bahdanau.py)."""

import dataclasses

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from d2l_oracle import load_d2l
from utils.data import EOS, Vocab
from utils.masking import masked_softmax
from utils.seq2seq import (LESSON_ALIGNED, LESSON_BAHDANAU, LESSON_BOOK_DECODER,
                           LESSON_NO_ATTENTION,
                           LESSON_PAPER_ENCODER, BahdanauConfig, BidirectionalEncoder,
                           ReadFirstAttentionDecoder, Seq2SeqAttentionDecoder, Seq2SeqDecoder,
                           Seq2SeqEncoder, SummaryDecoder, build_bahdanau, model_cache_key,
                           train_or_load_bahdanau)
from utils.training import (EncoderDecoder, encode_source, greedy_translate, greedy_translate_many,
                            masked_cross_entropy, teacher_forcing_input, train_seq2seq,
                            translate_pairs, xavier_init)


def _shape_check_model():
    torch.manual_seed(0)
    encoder = Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2).eval()
    decoder = Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16,
                                      num_layers=2).eval()
    return encoder, decoder


# ----------------------------------------------------------------------------- the model

def test_shapes_from_the_notes():
    encoder, decoder = _shape_check_model()
    X = torch.zeros((4, 7), dtype=torch.long)
    valid_len = torch.tensor([7, 7, 5, 3])
    state = decoder.init_state(encoder(X, valid_len), valid_len)
    output, (enc_outputs, hidden_state, lens) = decoder(X, state)
    assert tuple(output.shape) == (4, 7, 10)
    assert tuple(enc_outputs.shape) == (4, 7, 16)
    assert tuple(hidden_state.shape) == (2, 4, 16)
    weights = decoder.attention_weights
    assert tuple(weights.shape) == (4, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 7))
    assert weights[2, :, 5:].abs().sum() == 0 and weights[3, :, 3:].abs().sum() == 0


def test_each_step_queries_with_the_previous_top_layer_state():
    encoder, decoder = _shape_check_model()
    g = torch.Generator().manual_seed(1)
    X = torch.randint(0, 10, (3, 6), generator=g)
    valid_len = torch.tensor([6, 4, 2])
    with torch.no_grad():
        enc_outputs, enc_state = encoder(X, valid_len)
        state = decoder.init_state((enc_outputs, enc_state), valid_len)
        decoder(X[:, :2], state)
        # Step 0: the query is the encoder's final top-layer state.
        scores = decoder.attention.score(enc_state[-1][:, None], enc_outputs)     # (3, 1, 6)
        expected = masked_softmax(scores, valid_len)
    torch.testing.assert_close(decoder.attention_weights[:, :1], expected)


def test_one_token_at_a_time_equals_teacher_forced_forward():
    """Greedy decoding feeds tokens one by one: it must see the same logits and weights."""
    encoder, decoder = _shape_check_model()
    g = torch.Generator().manual_seed(2)
    src, tgt = torch.randint(0, 10, (2, 5), generator=g), torch.randint(0, 10, (2, 4), generator=g)
    valid_len = torch.tensor([5, 3])
    with torch.no_grad():
        state = decoder.init_state(encoder(src, valid_len), valid_len)
        all_at_once, _ = decoder(tgt, state)
        weights_at_once = decoder.attention_weights
        steps, step_weights = [], []
        for t in range(tgt.shape[1]):
            logits, state = decoder(tgt[:, t:t + 1], state)
            steps.append(logits)
            step_weights.append(decoder.attention_weights)
    torch.testing.assert_close(torch.cat(steps, 1), all_at_once)
    torch.testing.assert_close(torch.cat(step_weights, 1), weights_at_once)


def test_decoder_without_attention_sees_one_fixed_context():
    """Seq2SeqDecoder: the context is the encoder's final top-layer state at every step, and
    feeding one token at a time gives the teacher-forced logits."""
    torch.manual_seed(0)
    encoder = Seq2SeqEncoder(10, 8, 16, 2).eval()
    decoder = Seq2SeqDecoder(10, 8, 16, 2).eval()
    g = torch.Generator().manual_seed(3)
    src, tgt = torch.randint(0, 10, (2, 5), generator=g), torch.randint(0, 10, (2, 4), generator=g)
    with torch.no_grad():
        enc_outputs = encoder(src, torch.tensor([5, 3]))
        state = decoder.init_state(enc_outputs, torch.tensor([5, 3]))
        torch.testing.assert_close(state[0], enc_outputs[1][-1])            # (b, h)
        all_at_once, _ = decoder(tgt, state)                                # (2, 4, 10)
        steps = []
        for t in range(tgt.shape[1]):
            logits, state = decoder(tgt[:, t:t + 1], state)
            steps.append(logits)
            torch.testing.assert_close(state[0], enc_outputs[1][-1])        # never changes
    assert all_at_once.shape == (2, 4, 10)
    torch.testing.assert_close(torch.cat(steps, 1), all_at_once)
    assert not hasattr(decoder, "attention_weights")
    with pytest.raises(ValueError, match="num_hiddens must be a positive integer"):
        Seq2SeqDecoder(10, 8, 0, 2)


def test_encoder_matches_d2l_with_copied_weights():
    d2l = load_d2l()
    torch.manual_seed(3)
    ours = Seq2SeqEncoder(12, 8, 16, 2).eval()
    book = d2l.Seq2SeqEncoder(12, 8, 16, 2).eval()
    with torch.no_grad():
        book.embedding.weight.copy_(ours.embedding.weight)
        for name, param in ours.rnn.named_parameters():
            getattr(book.rnn.rnn, name).copy_(param)
    X = torch.randint(0, 12, (3, 5), generator=torch.Generator().manual_seed(4))
    outputs, state = ours(X)
    book_outputs, book_state = book(X)
    torch.testing.assert_close(outputs, book_outputs.transpose(0, 1))
    torch.testing.assert_close(state, book_state)


def test_no_attention_weights_before_a_call_and_bad_sizes():
    _, decoder = _shape_check_model()
    with pytest.raises(RuntimeError, match="call the decoder first"):
        decoder.attention_weights
    with pytest.raises(ValueError, match="num_hiddens must be a positive integer"):
        Seq2SeqEncoder(10, 8, 0, 2)
    with pytest.raises(ValueError, match="dropout is a probability"):
        Seq2SeqAttentionDecoder(10, 8, 16, 2, dropout=1.0)


# ----------------------------------------------------------------------------- loss and loop

def test_masked_cross_entropy_zeroes_padding_and_matches_d2l():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 4, 6, generator=g)
    labels = torch.randint(0, 6, (3, 4), generator=g)
    valid_len = torch.tensor([4, 2, 1])
    losses = masked_cross_entropy(logits, labels, valid_len)
    assert losses[1, 2:].abs().sum() == 0 and losses[2, 1:].abs().sum() == 0
    torch.testing.assert_close(losses[0, 1], F.cross_entropy(logits[0, 1:2], labels[0, 1:2]))
    # The book's MaskedSoftmaxCELoss averages each row over all steps.
    book = load_d2l().MaskedSoftmaxCELoss()(logits, labels, valid_len)
    torch.testing.assert_close(losses.sum(1) / 4, book)
    with pytest.raises(ValueError, match="share \\(batch, steps\\)"):
        masked_cross_entropy(logits, labels[:, :3], valid_len)


def test_teacher_forcing_shifts_right_behind_bos():
    Y = torch.tensor([[5, 6, 7], [8, 3, 1]])
    assert teacher_forcing_input(Y, bos=2).tolist() == [[2, 5, 6], [2, 8, 3]]


def test_xavier_init_bounds_weights_and_leaves_biases():
    torch.manual_seed(0)
    layer, gru = nn.Linear(20, 30), nn.GRU(8, 16, 2)
    bias_before = gru.bias_hh_l1.detach().clone()
    layer.apply(xavier_init)
    gru.apply(xavier_init)
    assert layer.weight.abs().max() <= (6 / 50) ** 0.5
    assert gru.weight_ih_l0.abs().max() <= (6 / (8 + 48)) ** 0.5
    assert gru.weight_hh_l1.abs().max() <= (6 / (16 + 48)) ** 0.5
    assert torch.equal(gru.bias_hh_l1, bias_before)


def _copy_task(n=96, steps=6, vocab=8, seed=0):
    """Batches where the target is the source (a task any encoder–decoder can learn fast)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, steps, (n,), generator=g)                  # words + <eos>
    X = torch.randint(4, vocab, (n, steps), generator=g)
    keep = torch.arange(steps)[None] < (lengths - 1)[:, None]
    X = torch.where(keep, X, torch.ones_like(X))                          # pad = 1
    X[torch.arange(n), lengths - 1] = 3                                   # <eos> = 3
    batches = [(X[i:i + 32], lengths[i:i + 32], X[i:i + 32], lengths[i:i + 32])
               for i in range(0, n, 32)]
    return batches, Vocab([["w4", "w5", "w6", "w7"]])


@pytest.mark.parametrize("attention", [True, False], ids=["bahdanau", "no-attention"])
def test_training_loop_lowers_the_loss_of_any_encoder_decoder(attention):
    torch.manual_seed(0)
    batches, vocab = _copy_task()
    decoder = Seq2SeqAttentionDecoder(8, 16, 32, 1) if attention else Seq2SeqDecoder(8, 16, 32, 1)
    model = EncoderDecoder(Seq2SeqEncoder(8, 16, 32, 1), decoder)
    result = train_seq2seq(model, batches, lr=0.01, num_epochs=15, tgt_vocab=vocab,
                           animate=False, show_progress=False)
    assert len(result.losses) == 15 and result.epochs == 15
    assert result.losses[-1] < 0.5 * result.losses[0]
    assert result.book_loss == pytest.approx(result.loss / 6)
    assert result.tokens_per_sec > 0 and result.seconds > 0
    assert not model.training
    assert "tokens/s" in result.summary()


def test_training_loop_bad_input_and_thread_count_restored():
    batches, vocab = _copy_task(n=32)
    model = EncoderDecoder(Seq2SeqEncoder(8, 4, 8, 1), Seq2SeqDecoder(8, 4, 8, 1))
    for kwargs, message in [({"num_epochs": 0, "lr": 0.01}, "num_epochs must be a positive integer"),
                            ({"num_epochs": 1, "lr": 0.0}, "lr must be > 0"),
                            ({"num_epochs": 1, "lr": 0.01, "clip_norm": 0},
                             "clip_norm must be > 0")]:
        with pytest.raises(ValueError, match=message):
            train_seq2seq(model, batches, tgt_vocab=vocab, animate=False, **kwargs)
    threads = torch.get_num_threads()
    train_seq2seq(model, batches, 0.01, 1, vocab, animate=False, show_progress=False,
                  num_threads=1)
    assert torch.get_num_threads() == threads


def test_on_epoch_hook_sees_each_epoch_and_its_time_is_not_training_time(monkeypatch):
    import time as clock_module

    now = [0.0]

    def fake_clock():                                    # 1 ms per reading; the hook adds 100 s
        now[0] += 0.001
        return now[0]

    batches, vocab = _copy_task(n=32)
    torch.manual_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(8, 4, 8, 1), Seq2SeqDecoder(8, 4, 8, 1))
    seen = []

    def slow_hook(epoch, hooked):
        assert hooked is model
        hooked.eval()                                    # the loop puts it back in training
        seen.append(epoch)
        now[0] += 100.0

    monkeypatch.setattr(clock_module, "perf_counter", fake_clock)
    result = train_seq2seq(model, batches, 0.01, 3, vocab, animate=False, show_progress=False,
                           on_epoch=slow_hook)
    monkeypatch.undo()
    assert seen == [1, 2, 3]
    assert 0 < result.seconds < 1                        # the hook's 300 s are left out
    torch.manual_seed(0)
    twin = EncoderDecoder(Seq2SeqEncoder(8, 4, 8, 1), Seq2SeqDecoder(8, 4, 8, 1))
    plain = train_seq2seq(twin, batches, 0.01, 3, vocab, animate=False, show_progress=False)
    assert plain.losses == result.losses                 # the hook does not change training


# ----------------------------------------------------------------------------- greedy decoding

SRC = Vocab([["i'm", "home", ".", "go", "i'm", "home", ".", "go"]])
TGT = Vocab([["je", "suis", "chez", "moi", "."]])


class ScriptedDecoder(nn.Module):
    """Emits a fixed token sequence, one per call, and uniform attention over the valid keys."""

    def __init__(self, script, vocab_size):
        super().__init__()
        self.script, self.vocab_size = script, vocab_size
        self.calls = 0

    def init_state(self, enc_outputs, valid_len):
        self.valid_len = valid_len
        return enc_outputs

    def forward(self, X, state):
        token = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        logits = torch.zeros(X.shape[0], X.shape[1], self.vocab_size)
        logits[..., token] = 1.0
        steps = state.shape[1]
        self.attention_weights = masked_softmax(torch.zeros(X.shape[0], 1, steps), self.valid_len)
        return logits, state


class EmbedOnly(nn.Module):
    def forward(self, X, valid_len):
        return X.float()[..., None]


def _scripted(words, vocab=TGT):
    script = [vocab[w] for w in words]
    return EncoderDecoder(EmbedOnly(), ScriptedDecoder(script, len(vocab)))


def test_greedy_translate_stops_at_eos_and_keeps_attention_per_step():
    model = _scripted(["je", "suis", EOS, "moi"])
    t = greedy_translate(model, "I'm home.", SRC, TGT, num_steps=6)
    assert t.tokens == ["je", "suis"] and t.text == "je suis" and t.ended
    assert t.source_tokens == ["i'm", "home", ".", EOS]
    assert t.output_tokens == ["je", "suis", EOS]
    assert model.decoder.calls == 3                       # nothing decoded after <eos>
    assert tuple(t.attention.shape) == (3, 4)             # steps incl. <eos> x source tokens
    torch.testing.assert_close(t.attention, torch.full((3, 4), 0.25))
    assert len(t.step_weights) == 3 and t.unknown == [] and t.dropped == []


def test_greedy_translate_without_eos_stops_after_num_steps():
    t = greedy_translate(_scripted(["moi"]), "go .", SRC, TGT, num_steps=4)
    assert t.tokens == ["moi"] * 4 and not t.ended and t.output_tokens == ["moi"] * 4


def test_greedy_translate_reports_unknown_and_dropped_words():
    t = greedy_translate(_scripted([EOS]), "i'm home now .", SRC, TGT, num_steps=4,
                         truncate=True)
    assert t.unknown == ["now"]
    assert t.source_tokens == ["i'm", "home", "now", EOS] and t.dropped == ["."]
    assert t.text == "" and t.ended


@pytest.mark.parametrize("sentence, num_steps, message", [
    ("", 5, "the sentence is empty"),
    ("   ", 5, "the sentence is empty"),
    ("xyzzy plugh", 5, "none of the words"),
    ("i'm home . go go .", 5, "has 6 words but num_steps=5 leaves room for 4"),
    ("go .", 1, "num_steps must be an integer >= 2"),
])
def test_encode_source_bad_input(sentence, num_steps, message):
    with pytest.raises(ValueError, match=message):
        encode_source(sentence, SRC, num_steps)


def test_encode_source_pads_and_counts_eos():
    X, valid_len, tokens, unknown, dropped = encode_source("go .", SRC, 5)
    assert X.tolist() == [[SRC["go"], SRC["."], SRC[EOS], SRC["<pad>"], SRC["<pad>"]]]
    assert valid_len.tolist() == [3] and tokens == ["go", ".", EOS]


# ------------------------------------------------------------------ lesson config, data, cache

def test_config_validation():
    assert BahdanauConfig().num_epochs == 250 and BahdanauConfig().lr == 0.005
    with pytest.raises(ValueError, match="num_steps must be an integer >= 2"):
        BahdanauConfig(num_steps=1)
    with pytest.raises(ValueError, match="num_examples must be a positive integer"):
        BahdanauConfig(num_examples=0)
    with pytest.raises(ValueError, match="held_out must be True or False"):
        BahdanauConfig(held_out="yes")
    with pytest.raises(ValueError, match="dropout"):
        BahdanauConfig(dropout=-0.1)


def test_build_bahdanau_sizes():
    model = build_bahdanau(BahdanauConfig(), SRC, TGT)
    assert model.encoder.embedding.num_embeddings == len(SRC)
    assert model.decoder.dense.out_features == len(TGT)


def test_no_attention_preset_differs_only_in_attention():
    model = build_bahdanau(LESSON_NO_ATTENTION, SRC, TGT)
    assert isinstance(model.decoder, Seq2SeqDecoder)
    assert isinstance(model.encoder, BidirectionalEncoder)         # the same encoder as the main
    assert isinstance(build_bahdanau(LESSON_BAHDANAU, SRC, TGT).decoder, ReadFirstAttentionDecoder)
    assert isinstance(build_bahdanau(LESSON_BOOK_DECODER, SRC, TGT).decoder,
                      Seq2SeqAttentionDecoder)
    assert dataclasses.replace(LESSON_NO_ATTENTION, attention=True) == LESSON_BAHDANAU


def test_training_pairs_never_hold_a_heldout_sentence(course_pairs_file):
    from utils.heldout import heldout_pairs, is_held_out
    from utils.training import training_pairs
    train = training_pairs(LESSON_BAHDANAU, course_pairs_file)
    held = heldout_pairs(course_pairs_file)
    assert len(train) > 15000 and len(held) > 1000
    assert not any(is_held_out(english) for english, _ in train)
    assert not {e for e, _ in train} & {e for e, _ in held}
    book = training_pairs(BahdanauConfig(), course_pairs_file)        # the book's 600, as read
    assert len(book) == 600 and any(is_held_out(english) for english, _ in book)
    unseen = heldout_pairs(course_pairs_file, exclude=[e for e, _ in book])
    assert not {e for e, _ in book} & {e for e, _ in unseen} and len(unseen) < len(held)


def test_translate_pairs_groups_references_by_source():
    pairs = [("i'm home .", "je suis chez moi ."), ("i'm home .", "je suis à la maison ."),
             ("xyzzy", "?")]
    out = translate_pairs(_scripted(["je", EOS]), pairs, SRC, TGT, num_steps=5)
    assert out["sources"] == ["i'm home .", "xyzzy"]
    assert out["references"] == [["je suis chez moi .", "je suis à la maison ."], ["?"]]
    assert out["unknown_only"] == 1 and out["predictions"][1] == ""


def _write_pairs(path, n, extra=""):
    lines = [f"go {i} .\tva {i} !{extra}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cache_key_changes_with_settings_and_data(tmp_path):
    a = _write_pairs(tmp_path / "a.txt", 40)
    b = _write_pairs(tmp_path / "b.txt", 40, extra=" .")
    config = BahdanauConfig(num_examples=40)
    key = model_cache_key(config, a)
    assert key == model_cache_key(config, a)
    assert key != model_cache_key(dataclasses.replace(config, num_epochs=7), a)
    assert key != model_cache_key(config, b)


def test_model_cache_trains_once_then_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))
    pairs = _write_pairs(tmp_path / "pairs.txt", 40)
    config = BahdanauConfig(num_examples=40, num_epochs=2, batch_size=16, embed_size=8,
                            num_hiddens=8, num_layers=1)
    first = train_or_load_bahdanau(config, pairs, animate=False)
    model, _, _, result, cache_file, from_cache = first
    assert not from_cache and cache_file.is_file()
    assert cache_file.parent == tmp_path / "cache" / "models"
    again = train_or_load_bahdanau(config, pairs, animate=False)
    assert again[5] is True and again[3] == result
    for name, tensor in model.state_dict().items():
        assert torch.equal(again[0].state_dict()[name], tensor), name
    # A corrupt file is ignored with a warning, and the model is retrained and saved again.
    cache_file.write_bytes(b"not a model")
    with pytest.warns(UserWarning, match="ignoring the stored model"):
        retrained = train_or_load_bahdanau(config, pairs, animate=False)
    assert retrained[5] is False and cache_file.stat().st_size > 100
    # use_cache=False neither reads nor writes.
    cache_file.unlink()
    assert train_or_load_bahdanau(config, pairs, use_cache=False, animate=False)[5] is False
    assert not cache_file.exists()


def test_shipped_models_load_when_the_cache_is_empty(tmp_path, monkeypatch):
    from utils import model_cache
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))
    pairs = _write_pairs(tmp_path / "pairs.txt", 40)
    config = BahdanauConfig(num_examples=40, num_epochs=1, batch_size=16, embed_size=8,
                            num_hiddens=8, num_layers=1)
    model, sv, tv, result, trained_file, _ = train_or_load_bahdanau(config, pairs, animate=False)
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(model_cache, "SHIPPED_DIR", shipped)
    model_cache.save_model(shipped / trained_file.name, model, (sv, tv), result, config)
    trained_file.unlink()                                            # empty user cache
    loaded = train_or_load_bahdanau(config, pairs, animate=False)
    assert loaded[5] is True and loaded[4] == shipped / trained_file.name
    assert not trained_file.exists()                                 # nothing trained or copied


@pytest.mark.parametrize("held_out", [False, True])
def test_loading_builds_the_same_vocabularies_as_training(held_out, course_pairs_file):
    from utils.training import training_data, training_vocabs
    config = BahdanauConfig(num_examples=2000, held_out=held_out)
    _, src_vocab, tgt_vocab = training_data(config, course_pairs_file)
    src_only, tgt_only = training_vocabs(config, course_pairs_file)
    assert src_only.idx_to_token == src_vocab.idx_to_token
    assert tgt_only.idx_to_token == tgt_vocab.idx_to_token and len(tgt_vocab) > 100


def test_auto_device_is_cuda_then_mps_then_cpu(monkeypatch):
    from utils.training import model_device, resolve_device
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device() == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert model_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(torch.nn.ReLU()) == torch.device("cpu")        # no weights at all


# ------------------------------------------------- the paper's encoder and the read-first decoder

# Every model BahdanauConfig can build: (encoder, decoder, attention); without attention the
# decoder setting is not used.
COMBINATIONS = [("book", "book", True), ("book", "read_first", True),
                ("bidirectional", "book", True), ("bidirectional", "read_first", True),
                ("book", "book", False), ("bidirectional", "book", False)]
COMBINATION_IDS = [f"{e}-{d}" if a else f"{e}-no-attention" for e, d, a in COMBINATIONS]
ATTENTION_COMBINATIONS = [c for c in COMBINATIONS if c[2]]
ATTENTION_IDS = [i for i, c in zip(COMBINATION_IDS, COMBINATIONS) if c[2]]


def _combination(encoder, decoder, attention, num_layers=2, seed=0):
    config = BahdanauConfig(embed_size=8, num_hiddens=16, num_layers=num_layers, encoder=encoder,
                            decoder=decoder, attention=attention)
    torch.manual_seed(seed)
    model = build_bahdanau(config, SRC, TGT)
    model.apply(xavier_init)                       # as training starts
    return model.eval()


def _batch(seed=0, lengths=(6, 4, 1), tgt_steps=5):
    """Sources (b, max length) padded with <pad>, their lengths, decoder inputs (b, tgt_steps)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.full((len(lengths), max(lengths)), SRC["<pad>"])
    for row, length in enumerate(lengths):
        X[row, :length] = torch.randint(4, len(SRC), (length,), generator=g)
    dec_X = torch.randint(0, len(TGT), (len(lengths), tgt_steps), generator=g)
    return X, torch.tensor(lengths), dec_X


# What BahdanauConfig() built before the encoder/decoder options (written down from that code,
# with SRC of 8 and TGT of 9 tokens): the book's model must stay exactly this.
BOOK_PARAMETERS = [
    ("encoder.embedding.weight", (8, 32)), ("encoder.rnn.weight_ih_l0", (96, 32)),
    ("encoder.rnn.weight_hh_l0", (96, 32)), ("encoder.rnn.bias_ih_l0", (96,)),
    ("encoder.rnn.bias_hh_l0", (96,)), ("encoder.rnn.weight_ih_l1", (96, 32)),
    ("encoder.rnn.weight_hh_l1", (96, 32)), ("encoder.rnn.bias_ih_l1", (96,)),
    ("encoder.rnn.bias_hh_l1", (96,)), ("decoder.attention.W_k.weight", (32, 32)),
    ("decoder.attention.W_q.weight", (32, 32)), ("decoder.attention.w_v.weight", (1, 32)),
    ("decoder.embedding.weight", (9, 32)), ("decoder.rnn.weight_ih_l0", (96, 64)),
    ("decoder.rnn.weight_hh_l0", (96, 32)), ("decoder.rnn.bias_ih_l0", (96,)),
    ("decoder.rnn.bias_hh_l0", (96,)), ("decoder.rnn.weight_ih_l1", (96, 32)),
    ("decoder.rnn.weight_hh_l1", (96, 32)), ("decoder.rnn.bias_ih_l1", (96,)),
    ("decoder.rnn.bias_hh_l1", (96,)), ("decoder.dense.weight", (9, 32)),
    ("decoder.dense.bias", (9,))]
BOOK_BASELINE_PARAMETERS = [(n, s) for n, s in BOOK_PARAMETERS if ".attention." not in n]


def test_default_config_builds_the_same_book_model_as_before():
    assert BahdanauConfig().encoder == "book" and BahdanauConfig().decoder == "book"
    for config, expected in ((BahdanauConfig(), BOOK_PARAMETERS),
                             (BahdanauConfig(attention=False), BOOK_BASELINE_PARAMETERS)):
        model = build_bahdanau(config, SRC, TGT)
        assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == expected
    model = build_bahdanau(BahdanauConfig(), SRC, TGT)
    assert type(model.encoder) is Seq2SeqEncoder and type(model.decoder) is Seq2SeqAttentionDecoder
    baseline = build_bahdanau(BahdanauConfig(attention=False), SRC, TGT)
    assert type(baseline.decoder) is Seq2SeqDecoder


def test_presets_share_data_sizes_and_budget():
    book = dict(num_examples=None, held_out=True, num_steps=12, batch_size=128, embed_size=128,
                num_hiddens=128, num_layers=1, dropout=0.2, lr=0.005, num_epochs=15, seed=0,
                min_freq=2, attention=True, guided_alignment=0.0)
    for preset, encoder, decoder, attention, guided in (
            (LESSON_BOOK_DECODER, "book", "book", True, 0.0),
            (LESSON_PAPER_ENCODER, "bidirectional", "book", True, 0.0),
            (LESSON_BAHDANAU, "bidirectional", "read_first", True, 0.0),
            (LESSON_ALIGNED, "bidirectional", "read_first", True, 1.0),
            (LESSON_NO_ATTENTION, "bidirectional", "read_first", False, 0.0)):
        assert dataclasses.asdict(preset) == dict(book, encoder=encoder, decoder=decoder,
                                                  attention=attention, guided_alignment=guided)
    for preset, encoder_class, decoder_class in (
            (LESSON_BOOK_DECODER, Seq2SeqEncoder, Seq2SeqAttentionDecoder),
            (LESSON_PAPER_ENCODER, BidirectionalEncoder, Seq2SeqAttentionDecoder),
            (LESSON_BAHDANAU, BidirectionalEncoder, ReadFirstAttentionDecoder),
            (LESSON_NO_ATTENTION, BidirectionalEncoder, SummaryDecoder)):
        model = build_bahdanau(preset, SRC, TGT)
        assert type(model.encoder) is encoder_class and type(model.decoder) is decoder_class


@pytest.mark.parametrize("field, value, choices", [
    ("encoder", "paper", "'book', 'bidirectional'"),
    ("encoder", None, "'book', 'bidirectional'"),
    ("decoder", "Read_First", "'book', 'read_first'"),
    ("decoder", ["book"], "'book', 'read_first'"),
])
def test_bad_encoder_or_decoder_is_a_one_line_error(field, value, choices):
    with pytest.raises(ValueError) as error:
        BahdanauConfig(**{field: value})
    assert str(error.value) == f"{field} must be one of {choices}, got {value!r}"
    assert "\n" not in str(error.value)


def test_bidirectional_encoder_needs_lengths():
    model = _combination("bidirectional", "read_first", True)
    X, _, _ = _batch()
    with pytest.raises(ValueError, match="needs valid_len") as error:
        model.encoder(X)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="needs enc_valid_len"):
        _combination("bidirectional", "book", False).decoder.init_state(model.encoder(
            X, torch.tensor([6, 4, 1])), None)


@pytest.mark.parametrize("encoder, decoder, attention", COMBINATIONS, ids=COMBINATION_IDS)
def test_shapes_of_every_combination(encoder, decoder, attention):
    model = _combination(encoder, decoder, attention)
    X, valid_len, dec_X = _batch()
    with torch.no_grad():
        annotations, enc_state = model.encoder(X, valid_len)
        logits, _ = model(X, dec_X, valid_len)
    key_size = 32 if encoder == "bidirectional" else 16
    assert tuple(annotations.shape) == (3, 6, key_size)
    assert tuple(enc_state.shape) == (2, 3, 16)                      # (layers, batch, hiddens)
    assert tuple(logits.shape) == (3, 5, len(TGT))
    if attention:
        assert model.decoder.attention.W_k.in_features == key_size
        assert tuple(model.decoder.attention_weights.shape) == (3, 5, 6)
    else:
        assert not hasattr(model.decoder, "attention_weights")


@pytest.mark.parametrize("encoder, decoder, attention", ATTENTION_COMBINATIONS, ids=ATTENTION_IDS)
def test_attention_rows_sum_to_one_and_skip_padding(encoder, decoder, attention):
    model = _combination(encoder, decoder, attention)
    X, valid_len, dec_X = _batch(seed=1)
    with torch.no_grad():
        model(X, dec_X, valid_len)
    weights = model.decoder.attention_weights                         # (3, 5, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    for row, length in enumerate(valid_len.tolist()):
        assert weights[row, :, length:].abs().sum() == 0
        assert (weights[row, :, :length] > 0).all()


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("encoder, decoder, attention", COMBINATIONS, ids=COMBINATION_IDS)
def test_step_by_step_equals_teacher_forced_for_every_combination(encoder, decoder, attention,
                                                                  num_layers):
    """What greedy decoding does (one token at a time, carrying the state) gives the logits and
    weights of one teacher-forced call."""
    model = _combination(encoder, decoder, attention, num_layers=num_layers)
    X, valid_len, dec_X = _batch(seed=2)
    with torch.no_grad():
        teacher_forced, _ = model(X, dec_X, valid_len)                  # (3, 5, vocab)
        weights = model.decoder.attention_weights if attention else None
        state = model.decoder.init_state(model.encoder(X, valid_len), valid_len)
        steps, step_weights = [], []
        for t in range(dec_X.shape[1]):
            logits, state = model.decoder(dec_X[:, t:t + 1], state)     # (3, 1, vocab)
            steps.append(logits)
            if attention:
                step_weights.append(model.decoder.attention_weights)  # (3, 1, 6)
    torch.testing.assert_close(torch.cat(steps, 1), teacher_forced, atol=1e-5, rtol=0)
    if attention:
        torch.testing.assert_close(torch.cat(step_weights, 1), weights, atol=1e-5, rtol=0)


def _with_more_padding(X, extra, seed):
    """X with ``extra`` columns appended: padding, and arbitrary tokens in the last one."""
    pad = torch.full((X.shape[0], extra), SRC["<pad>"])
    g = torch.Generator().manual_seed(seed)
    pad[:, -1] = torch.randint(0, len(SRC), (X.shape[0],), generator=g)
    return torch.cat([X, pad], dim=1)


@pytest.mark.parametrize("decoder, attention", [("book", True), ("read_first", True),
                                                ("book", False)],
                         ids=["book-decoder", "read-first", "no-attention"])
def test_bidirectional_encoder_never_reads_padding(decoder, attention):
    """A sentence's annotations, the decoder's initial state and its logits do not change when
    the batch gets more padding, or when the sentence is encoded alone."""
    model = _combination("bidirectional", decoder, attention)
    X, valid_len, dec_X = _batch(seed=3)
    with torch.no_grad():
        annotations, enc_state = model.encoder(X, valid_len)
        logits, _ = model(X, dec_X, valid_len)
        for extra in (1, 4):
            wider = _with_more_padding(X, extra, seed=extra)
            wide_annotations, wide_state = model.encoder(wider, valid_len)
            torch.testing.assert_close(wide_annotations[:, :X.shape[1]], annotations,
                                       atol=1e-6, rtol=0)
            assert wide_annotations[:, X.shape[1]:].abs().sum() == 0
            torch.testing.assert_close(wide_state, enc_state, atol=1e-6, rtol=0)
            torch.testing.assert_close(model(wider, dec_X, valid_len)[0], logits,
                                       atol=1e-6, rtol=0)
        for row, length in enumerate(valid_len.tolist()):           # alone, without padding
            alone = X[row:row + 1, :length]
            one_length = valid_len[row:row + 1]
            torch.testing.assert_close(model.encoder(alone, one_length)[0],
                                       annotations[row:row + 1, :length], atol=1e-6, rtol=0)
            torch.testing.assert_close(model(alone, dec_X[row:row + 1], one_length)[0],
                                       logits[row:row + 1], atol=1e-6, rtol=0)
    # The same check catches an encoder that reads the padding: the book's final state moves.
    book = _combination("book", "book", True)
    with torch.no_grad():
        _, book_state = book.encoder(X, valid_len)
        _, wide_book_state = book.encoder(_with_more_padding(X, 4, seed=4), valid_len)
    assert not torch.allclose(wide_book_state, book_state, atol=1e-6)


def test_bidirectional_annotations_and_initial_state_follow_the_paper():
    """h_j = [forward h_j; backward h_j] of a GRU run on the sentence alone; decoder layer l
    starts from tanh(W_s^l backward h_1 of encoder layer l)."""
    model = _combination("bidirectional", "read_first", True)
    encoder = model.encoder
    X, valid_len, _ = _batch(seed=5)
    with torch.no_grad():
        annotations, state = encoder(X, valid_len)
        for row, length in enumerate(valid_len.tolist()):
            outputs, final = encoder.rnn(encoder.embedding(X[row:row + 1, :length]))
            torch.testing.assert_close(annotations[row, :length], outputs[0])
            forward_out = outputs[0, :, :16]
            backward_out = outputs[0, :, 16:]
            # The forward half at j has read tokens 1..j, the backward half tokens j..end.
            torch.testing.assert_close(forward_out[-1], final[-2, 0])
            torch.testing.assert_close(backward_out[0], final[-1, 0])
            for layer, bridge in enumerate(encoder.init_bridge):
                torch.testing.assert_close(state[layer, row],
                                           torch.tanh(bridge(final[2 * layer + 1, 0])))


def test_read_first_query_has_read_the_previous_word():
    """The read-first decoder's row t attends with s_t = GRU(y_{t-1}, s_{t-1}): changing the
    previous word changes row t. The book's row t uses s_{t-1}: the same change leaves it alone."""
    X, valid_len, dec_X = _batch(seed=6)
    changed = dec_X.clone()
    changed[:, 2] = (changed[:, 2] + 1) % len(TGT)                    # y_2, the input of step 3
    for decoder, moves in (("read_first", True), ("book", False)):
        model = _combination("bidirectional", decoder, True)
        with torch.no_grad():
            model(X, dec_X, valid_len)
            before = model.decoder.attention_weights
            model(X, changed, valid_len)
            after = model.decoder.attention_weights
        torch.testing.assert_close(after[:, :2], before[:, :2])        # earlier rows: the same
        assert (not torch.allclose(after[:, 2], before[:, 2])) == moves, decoder
        assert not torch.allclose(after[:, 3], before[:, 3])          # later rows: both move
    # Row t of the read-first decoder is the additive attention of the GRU output at step t.
    model = _combination("book", "read_first", True, num_layers=1)
    with torch.no_grad():
        annotations, enc_state = model.encoder(X, valid_len)
        model(X, dec_X, valid_len)
        queries, _ = model.decoder.rnn(model.decoder.embedding(dec_X), enc_state)
        expected = masked_softmax(model.decoder.attention.score(queries, annotations), valid_len)
    torch.testing.assert_close(model.decoder.attention_weights, expected)


def test_baseline_over_the_bidirectional_encoder_sees_one_summary():
    """SummaryDecoder's context: tanh(W [forward h at the last token; backward h_1]), fixed."""
    model = _combination("bidirectional", "book", False)
    X, valid_len, dec_X = _batch(seed=7)
    with torch.no_grad():
        annotations, enc_state = model.encoder(X, valid_len)
        context, hidden = model.decoder.init_state((annotations, enc_state), valid_len)
        for row, length in enumerate(valid_len.tolist()):
            summary = torch.cat((annotations[row, length - 1, :16], annotations[row, 0, 16:]))
            torch.testing.assert_close(context[row], torch.tanh(model.decoder.summary(summary)))
        assert torch.equal(hidden, enc_state)
        _, (after, _) = model.decoder(dec_X, (context, hidden))
    assert torch.equal(after, context)
    with pytest.raises(RuntimeError, match="call the decoder first"):
        _combination("bidirectional", "read_first", True).decoder.attention_weights


@pytest.mark.parametrize("encoder, decoder, attention", COMBINATIONS, ids=COMBINATION_IDS)
def test_greedy_decoding_works_with_every_combination(encoder, decoder, attention):
    model = _combination(encoder, decoder, attention, num_layers=1)
    sentences = ["i'm home .", "go .", "go home i'm ."]
    one_by_one = [greedy_translate(model, s, SRC, TGT, num_steps=6) for s in sentences]
    many = greedy_translate_many(model, sentences, SRC, TGT, num_steps=6, batch_size=2)
    for single, batched in zip(one_by_one, many):
        assert single.tokens == batched.tokens
        if attention:
            shape = (len(single.output_tokens), len(single.source_tokens))
            assert tuple(single.attention.shape) == shape
            torch.testing.assert_close(batched.attention, single.attention, atol=1e-5, rtol=0)
            torch.testing.assert_close(single.attention.sum(-1), torch.ones(shape[0]))
        else:
            assert single.attention is None
    out = translate_pairs(model, [("i'm home .", "je suis chez moi .")], SRC, TGT, num_steps=6)
    assert out["predictions"] == [one_by_one[0].text]


@pytest.mark.parametrize("encoder, decoder, attention", [
    ("bidirectional", "read_first", True), ("bidirectional", "book", True),
    ("book", "read_first", True), ("bidirectional", "book", False)],
    ids=["bidirectional-read_first", "bidirectional-book", "book-read_first",
         "bidirectional-no-attention"])
def test_training_loop_lowers_the_loss_of_the_new_combinations(encoder, decoder, attention):
    torch.manual_seed(0)
    batches, vocab = _copy_task()
    config = BahdanauConfig(embed_size=16, num_hiddens=32, num_layers=1, dropout=0.0,
                            encoder=encoder, decoder=decoder, attention=attention)
    model = build_bahdanau(config, Vocab([["w%d" % i for i in range(4, 8)]]), vocab)
    result = train_seq2seq(model, batches, lr=0.01, num_epochs=15, tgt_vocab=vocab,
                           animate=False, show_progress=False)
    assert result.losses[-1] < 0.5 * result.losses[0]
