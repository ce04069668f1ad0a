"""Our Transformer blocks equal PyTorch's layers and d2l 1.0.3's blocks, with copied weights."""

import pytest
import torch
from torch import nn

from d2l_oracle import load_d2l
from utils.multihead import key_padding_mask
from utils.transformer import AddNorm, PositionWiseFFN, TransformerDecoderBlock, \
    TransformerEncoderBlock

D, F, HEADS = 24, 48, 8          # num_hiddens, ffn_num_hiddens, num_heads


def randomise(module: nn.Module, seed: int) -> nn.Module:
    """Fill every parameter (LayerNorm and biases included) with seeded random numbers."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    return module


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)


def copy_linear_and_norm(pairs) -> None:
    with torch.no_grad():
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)


def test_encoder_block_equals_torch_encoder_layer():
    ours = randomise(TransformerEncoderBlock(D, F, HEADS, dropout=0.0, use_bias=True), 0).eval()
    theirs = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=F, dropout=0.0,
                                        activation="relu", batch_first=True,
                                        norm_first=False).eval()
    copy_attention(ours.attention, theirs.self_attn)
    copy_linear_and_norm([(ours.ffn.widen, theirs.linear1), (ours.ffn.narrow, theirs.linear2),
                          (ours.addnorm1.norm, theirs.norm1), (ours.addnorm2.norm, theirs.norm2)])
    X = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(1))   # (b, n, d)
    valid_lens = torch.tensor([7, 3, 1])
    with torch.no_grad():
        expected = theirs(X, src_key_padding_mask=key_padding_mask(valid_lens, 7))
        got = ours(X, valid_lens)
        got_unmasked = ours(X)
        expected_unmasked = theirs(X)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got_unmasked, expected_unmasked, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(got, got_unmasked, atol=1e-3), "the mask must change the output"


def test_decoder_block_equals_torch_decoder_layer():
    ours = randomise(TransformerDecoderBlock(D, F, HEADS, dropout=0.0, i=0, use_bias=True), 2)
    ours.eval()
    theirs = nn.TransformerDecoderLayer(D, HEADS, dim_feedforward=F, dropout=0.0,
                                        activation="relu", batch_first=True,
                                        norm_first=False).eval()
    copy_attention(ours.attention1, theirs.self_attn)
    copy_attention(ours.attention2, theirs.multihead_attn)
    copy_linear_and_norm([(ours.ffn.widen, theirs.linear1), (ours.ffn.narrow, theirs.linear2),
                          (ours.addnorm1.norm, theirs.norm1), (ours.addnorm2.norm, theirs.norm2),
                          (ours.addnorm3.norm, theirs.norm3)])
    generator = torch.Generator().manual_seed(3)
    X = torch.randn(2, 6, D, generator=generator)                 # (b, n, d) target side
    memory = torch.randn(2, 9, D, generator=generator)            # (b, s, d) encoder outputs
    enc_valid_lens = torch.tensor([9, 4])
    with torch.no_grad():
        expected = theirs(X, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
                          tgt_is_causal=True,
                          memory_key_padding_mask=key_padding_mask(enc_valid_lens, 9))
        got, state = ours(X, [memory, enc_valid_lens, [None]])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert state[2][0].shape == (2, 6, D)


def test_decoder_block_step_by_step_equals_whole_sequence():
    """With the cache, decoding one position at a time gives what the causal full pass gives."""
    block = randomise(TransformerDecoderBlock(D, F, HEADS, dropout=0.0, i=0), 4).eval()
    generator = torch.Generator().manual_seed(5)
    X = torch.randn(2, 5, D, generator=generator)
    memory = torch.randn(2, 8, D, generator=generator)
    lens = torch.tensor([8, 3])
    with torch.no_grad():
        whole, _ = block(X, [memory, lens, [None]])
        state = [memory, lens, [None]]
        steps = [block(X[:, t:t + 1], state)[0] for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-4)


# ----------------------------------------------------------------------------- d2l 1.0.3

def test_ffn_and_addnorm_equal_d2l():
    d2l = load_d2l()
    ours = randomise(PositionWiseFFN(4, 16, 8), 6).eval()
    theirs = d2l.PositionWiseFFN(16, 8)
    X = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7))
    theirs(X)                                                     # materialise the lazy layers
    copy_linear_and_norm([(ours.widen, theirs.dense1), (ours.narrow, theirs.dense2)])
    with torch.no_grad():
        torch.testing.assert_close(ours(X), theirs(X))

    ours_norm = randomise(AddNorm(4, 0.5), 8).eval()
    theirs_norm = d2l.AddNorm(4, 0.5).eval()
    copy_linear_and_norm([(ours_norm.norm, theirs_norm.ln)])
    Y = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(ours_norm(X, Y), theirs_norm(X, Y))


@pytest.mark.parametrize("use_bias", [False, True])
def test_encoder_block_equals_d2l(use_bias):
    d2l = load_d2l()
    ours = randomise(TransformerEncoderBlock(D, F, HEADS, 0.5, use_bias=use_bias), 10).eval()
    theirs = d2l.TransformerEncoderBlock(D, F, HEADS, 0.5, use_bias).eval()
    X = torch.randn(2, 100, D, generator=torch.Generator().manual_seed(11))
    valid_lens = torch.tensor([3, 2])
    theirs(X, valid_lens)                                         # materialise the lazy layers
    pairs = [(ours.attention.W_q, theirs.attention.W_q), (ours.attention.W_k, theirs.attention.W_k),
             (ours.attention.W_v, theirs.attention.W_v), (ours.attention.W_o, theirs.attention.W_o),
             (ours.ffn.widen, theirs.ffn.dense1), (ours.ffn.narrow, theirs.ffn.dense2),
             (ours.addnorm1.norm, theirs.addnorm1.ln), (ours.addnorm2.norm, theirs.addnorm2.ln)]
    with torch.no_grad():
        for mine, book in pairs:
            book.weight.copy_(mine.weight)
            if mine.bias is not None:
                book.bias.copy_(mine.bias)
        torch.testing.assert_close(ours(X, valid_lens), theirs(X, valid_lens), atol=1e-5,
                                   rtol=1e-4)
        # Per-head weights: d2l folds heads into the batch, (b·h, n, n); ours keep (b, h, n, n).
        torch.testing.assert_close(ours.attention.attention_weights.reshape(2 * HEADS, 100, 100),
                                   theirs.attention.attention.attention_weights)
