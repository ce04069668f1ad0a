"""The seq2seq module: shapes, the attention decoder, the loss, the training loop, greedy
decoding, the lesson's config, held-out pairs and the model cache (tiny runs only; the full
seeded training run is in test_training_bahdanau.py)."""

import dataclasses

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from d2l_oracle import load_d2l
from utils.data import EOS, Vocab
from utils.masking import masked_softmax
from utils.seq2seq import (LESSON_BAHDANAU, LESSON_NO_ATTENTION, BahdanauConfig,
                           Seq2SeqAttentionDecoder, Seq2SeqDecoder, Seq2SeqEncoder, build_bahdanau,
                           model_cache_key, train_or_load_bahdanau)
from utils.training import (EncoderDecoder, encode_source, greedy_translate, masked_cross_entropy,
                            teacher_forcing_input, train_seq2seq, translate_pairs, xavier_init)


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
    assert isinstance(build_bahdanau(LESSON_BAHDANAU, SRC, TGT).decoder, Seq2SeqAttentionDecoder)
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
