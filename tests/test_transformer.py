"""Unit tests of utils.transformer: the book's shape checks, masks, caching, weights, bad input."""

import math

import pytest
import torch

from utils.data import Vocab
from utils.training import greedy_translate
from utils.transformer import (AddNorm, PositionWiseFFN, Transformer, TransformerConfig,
                               TransformerDecoder, TransformerDecoderBlock, TransformerEncoder,
                               TransformerEncoderBlock, attention_maps, count_parameters,
                               future_attention_share, teacher_forced_attention)


# ----------------------------------------------------------------------------- the book's shapes

def test_ffn_shape_and_positions_do_not_mix():
    ffn = PositionWiseFFN(4, 4, 8).eval()
    assert ffn(torch.ones((2, 3, 4))).shape == (2, 3, 8)
    X = torch.randn(2, 3, 4)
    changed = X.clone()
    changed[:, 2] += 1.0                                      # only position 2 changes
    same = ffn(X)[:, :2], ffn(changed)[:, :2]
    torch.testing.assert_close(*same)
    assert not torch.allclose(ffn(X)[:, 2], ffn(changed)[:, 2])


def test_addnorm_shape_and_value():
    add_norm = AddNorm(4, 0.5).eval()
    X, Y = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    out = add_norm(X, Y)
    assert out.shape == (2, 3, 4)
    S = X + Y                                                 # no dropout in eval mode
    expected = (S - S.mean(-1, keepdim=True)) / torch.sqrt(S.var(-1, unbiased=False,
                                                                 keepdim=True) + 1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_encoder_block_encoder_and_decoder_block_shapes():
    X, valid_lens = torch.ones((2, 100, 24)), torch.tensor([3, 2])
    block = TransformerEncoderBlock(24, 48, 8, 0.5).eval()
    assert block(X, valid_lens).shape == (2, 100, 24)
    encoder = TransformerEncoder(200, 24, 48, 8, 2, 0.5).eval()
    enc_outputs = encoder(torch.ones((2, 100), dtype=torch.long), valid_lens)
    assert enc_outputs.shape == (2, 100, 24)
    assert [tuple(w.shape) for w in encoder.attention_weights] == [(2, 8, 100, 100)] * 2
    decoder_block = TransformerDecoderBlock(24, 48, 8, 0.5, 0).eval()
    out, state = decoder_block(X, [enc_outputs, valid_lens, [None]])
    assert out.shape == (2, 100, 24) and state[2][0].shape == (2, 100, 24)


def test_encoder_masks_padding_keys_per_head():
    encoder = TransformerEncoder(50, 16, 32, 4, 2, 0.0).eval()
    encoder(torch.randint(0, 50, (2, 7)), torch.tensor([7, 3]))
    for weights in encoder.attention_weights:                 # (2, 4, 7, 7)
        assert weights[1, :, :, 3:].abs().sum() == 0
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 7))
        assert not torch.allclose(weights[:, 0], weights[:, 1])   # heads differ


def test_encoder_scales_embedding_by_sqrt_d():
    encoder = TransformerEncoder(10, 16, 32, 4, 1, 0.0).eval()
    tokens = torch.tensor([[1, 2, 3]])
    seen = {}
    encoder.blks[0].register_forward_pre_hook(lambda module, args: seen.update(x=args[0]))
    encoder(tokens)
    expected = encoder.embedding(tokens) * math.sqrt(16) + encoder.pos_encoding.P[:, :3]
    torch.testing.assert_close(seen["x"], expected)


# ----------------------------------------------------------------------------- decoder and cache

def tiny_model(causal=True, seed=0):
    torch.manual_seed(seed)
    return Transformer(20, 30, 16, 32, 4, 2, dropout=0.0, causal=causal).eval()


def test_step_by_step_decoding_equals_one_pass_with_the_mask():
    model = tiny_model()
    source, lens = torch.randint(0, 20, (2, 6)), torch.tensor([6, 4])
    target = torch.randint(0, 30, (2, 5))
    with torch.no_grad():
        whole, _ = model(source, target, lens)                  # (2, 5, 30)
        state = model.decoder.init_state(model.encoder(source, lens), lens)
        steps = [model.decoder(target[:, t:t + 1], state)[0] for t in range(5)]
    assert whole.shape == (2, 5, 30)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-4)


def test_without_the_mask_early_positions_see_the_future():
    model = tiny_model(causal=False)
    source, lens = torch.randint(0, 20, (1, 6)), torch.tensor([6])
    target = torch.randint(0, 30, (1, 5))
    changed = target.clone()
    changed[0, 4] = (target[0, 4] + 1) % 30                     # change the last token only
    with torch.no_grad():
        a, _ = model(source, target, lens)
        b, _ = model(source, changed, lens)
        assert not torch.allclose(a[:, 0], b[:, 0])             # position 0 read position 4
        causal = tiny_model(causal=True)
        a, _ = causal(source, target, lens)
        b, _ = causal(source, changed, lens)
        torch.testing.assert_close(a[:, :4], b[:, :4])          # the mask hides the future


def test_decoder_weights_per_layer_and_head_and_a_fresh_list_per_call():
    model = tiny_model()
    source, lens = torch.randint(0, 20, (1, 6)), torch.tensor([4])
    state = model.decoder.init_state(model.encoder(source, lens), lens)
    with torch.no_grad():
        model.decoder(torch.tensor([[2, 5, 7]]), state)
        first = model.decoder.attention_weights
        model.decoder(torch.tensor([[9]]), state)               # one more step, cached
        second = model.decoder.attention_weights
    self_w, cross_w = first
    assert [tuple(w.shape) for w in self_w] == [(1, 4, 3, 3)] * 2
    assert [tuple(w.shape) for w in cross_w] == [(1, 4, 3, 6)] * 2
    assert torch.triu(self_w[0][0], diagonal=1).abs().sum() == 0
    assert cross_w[1][..., 4:].abs().sum() == 0                 # source padding masked
    assert tuple(second[0][0].shape) == (1, 4, 1, 4)            # the new token sees 4 keys
    assert first[0][0].shape != second[0][0].shape              # the first list was not overwritten


def test_decoder_positions_continue_after_the_cache():
    decoder = TransformerDecoder(30, 16, 32, 4, 1, 0.0).eval()
    seen = []
    decoder.blks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    state = decoder.init_state(torch.zeros(1, 3, 16), None)
    with torch.no_grad():
        decoder(torch.tensor([[4, 5]]), state)
        decoder(torch.tensor([[6]]), state)
    expected = decoder.embedding(torch.tensor([[6]])) * 4.0 + decoder.pos_encoding.P[:, 2:3]
    torch.testing.assert_close(seen[1], expected)


def test_training_mode_records_no_weights_and_eval_mode_does():
    model = tiny_model()
    source, lens, target = torch.randint(0, 20, (2, 6)), torch.tensor([6, 3]), torch.randint(0, 30, (2, 5))
    model.train()
    model(source, target, lens)
    assert model.encoder.attention_weights[0] is None
    model.eval()
    model(source, target, lens)
    assert model.encoder.attention_weights[0].shape == (2, 4, 6, 6)


def test_count_parameters_of_an_encoder_block():
    d, f = 24, 48
    block = TransformerEncoderBlock(d, f, 8, 0.5)
    # attention: 4 d×d matrices; FFN: d·f + f + f·d + d; two layer norms: 2·2d.
    assert count_parameters(block) == 4 * d * d + (2 * d * f + f + d) + 4 * d == 4776
    with_bias = TransformerEncoderBlock(d, f, 8, 0.5, use_bias=True)
    assert count_parameters(with_bias) == 4776 + 4 * d


def test_future_attention_share():
    causal = torch.tril(torch.ones(3, 3)) / torch.arange(1, 4)[:, None]
    assert future_attention_share(causal).item() == 0
    peeking = torch.roll(torch.eye(3), 1, dims=1)            # row i looks at i+1 (row 2 at 0)
    assert future_attention_share(peeking).item() == pytest.approx(2 / 3)


# ----------------------------------------------------------------------------- attention maps

def toy_vocabs():
    src = Vocab([["go", ".", "i", "lost", "he's", "calm"]] * 2)
    tgt = Vocab([["va", "!", "j'ai", "perdu", ".", "il", "est", "calme"]] * 2)
    return src, tgt


def test_attention_maps_shapes_and_masks():
    src_vocab, tgt_vocab = toy_vocabs()
    torch.manual_seed(0)
    model = Transformer(len(src_vocab), len(tgt_vocab), 16, 32, 4, 2, 0.0).eval()
    maps = attention_maps(model, "he's calm .", src_vocab, tgt_vocab, num_steps=6)
    T = len(maps.output_tokens)
    assert maps.source_tokens == ["he's", "calm", ".", "<eos>", "<pad>", "<pad>"]
    assert maps.source_valid_len == 4 and maps.decoder_inputs[0] == "<bos>"
    assert maps.encoder.shape == (2, 4, 6, 6) and maps.encoder[..., 4:].abs().sum() == 0
    assert maps.decoder_self.shape == (2, 4, T, T)
    assert torch.triu(maps.decoder_self, diagonal=1).abs().sum() == 0
    assert maps.cross.shape == (2, 4, T, 6) and maps.cross[..., 4:].abs().sum() == 0
    # The one-pass weights equal those gathered step by step by the greedy decoder.
    for t, (self_w, cross_w) in enumerate(maps.translation.step_weights):
        for layer in range(2):
            torch.testing.assert_close(self_w[layer][0, :, 0], maps.decoder_self[layer, :, t, :t + 1])
            torch.testing.assert_close(cross_w[layer][0, :, 0], maps.cross[layer, :, t])


def test_teacher_forced_attention_reads_the_reference():
    src_vocab, tgt_vocab = toy_vocabs()
    model = Transformer(len(src_vocab), len(tgt_vocab), 16, 32, 4, 2, 0.0).eval()
    weights, inputs = teacher_forced_attention(model, "he's calm .", "il est calme .", src_vocab,
                                               tgt_vocab, 10)
    assert inputs == ["<bos>", "il", "est", "calme", "."]
    assert weights.shape == (2, 4, 5, 5)
    with pytest.raises(ValueError, match="the target must have 1 to 9 words"):
        teacher_forced_attention(model, "go .", "", src_vocab, tgt_vocab, 10)


# ----------------------------------------------------------------------------- bad input

def test_bad_input_gives_one_line_errors():
    with pytest.raises(ValueError, match=r"num_heads=5 does not divide num_hiddens=24; choose"):
        TransformerEncoderBlock(24, 48, 5, 0.5)
    with pytest.raises(ValueError, match=r"num_heads=3 does not divide"):
        Transformer(10, 10, num_hiddens=32, num_heads=3)
    with pytest.raises(ValueError, match=r"num_heads=3 does not divide"):
        TransformerConfig(num_heads=3)
    with pytest.raises(ValueError, match=r"dropout is a probability in \[0, 1\)"):
        AddNorm(4, 1.5)
    with pytest.raises(ValueError, match="AddNorm adds X and Y, so they need one shape"):
        AddNorm(4)(torch.ones(2, 3, 4), torch.ones(2, 3, 8))
    with pytest.raises(ValueError, match="expects 4 input features"):
        PositionWiseFFN(4, 4, 8)(torch.ones(2, 3, 5))
    encoder = TransformerEncoder(10, 16, 32, 4, 1)
    with pytest.raises(ValueError, match=r"source tokens must be an integer tensor \(batch, steps\)"):
        encoder(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="source has 0 steps"):
        encoder(torch.ones((1, 0), dtype=torch.long))
    with pytest.raises(ValueError, match="token index 12 is outside the vocabulary of 10"):
        encoder(torch.tensor([[1, 12]]))
    with pytest.raises(ValueError, match="longer than max_len=8"):
        TransformerEncoder(10, 16, 32, 4, 1, max_len=8)(torch.ones((1, 9), dtype=torch.long))
    decoder = TransformerDecoder(10, 16, 32, 4, 1, max_len=4)
    state = decoder.init_state(torch.zeros(1, 2, 16))
    decoder(torch.ones((1, 3), dtype=torch.long), state)
    with pytest.raises(ValueError, match="decoding position 5 is past max_len=4"):
        decoder(torch.ones((1, 2), dtype=torch.long), state)


def test_translation_of_bad_sentences():
    src_vocab, tgt_vocab = toy_vocabs()
    model = Transformer(len(src_vocab), len(tgt_vocab), 16, 32, 4, 1, 0.0)
    with pytest.raises(ValueError, match="the sentence is empty"):
        greedy_translate(model, "  ", src_vocab, tgt_vocab, 10)
    with pytest.raises(ValueError, match="num_steps=4 leaves room for 3"):
        attention_maps(model, "go go go go go .", src_vocab, tgt_vocab, 4)
    maps = attention_maps(model, "go go go go go .", src_vocab, tgt_vocab, 4, truncate=True)
    assert maps.translation.dropped == ["go", "go", "."] and maps.encoder.shape[-1] == 4
