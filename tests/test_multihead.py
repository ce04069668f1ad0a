"""Unit tests of utils.multihead: reshaping helpers, MultiHeadAttention, costs, bad input."""

import pytest
import torch

from utils.attention import ScaledDotProductAttention
from utils.multihead import (MultiHeadAttention, check_merge, check_multihead_inputs,
                             check_num_heads, check_sequence_lens, check_split,
                             check_torch_compatible, divisors, key_padding_mask, merge_heads,
                             multihead_cost, repeat_valid_lens, split_heads)


def test_divisors_and_head_check():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(100) == [1, 2, 4, 5, 10, 20, 25, 50, 100]
    assert check_num_heads(100, 5) == 20
    with pytest.raises(ValueError, match=r"num_heads=3 does not divide num_hiddens=100; choose "
                                         r"one of its divisors: \[1, 2, 4, 5, 10, 20, 25, 50, 100\]"):
        check_num_heads(100, 3)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        check_num_heads(12, 0)


def test_split_heads_puts_each_heads_features_together():
    X = torch.arange(2 * 3 * 6).reshape(2, 3, 6)          # (b=2, n=3, h·d=6), h=3, d=2
    folded = split_heads(X, 3)                              # (b·h=6, n=3, d=2)
    assert folded.shape == (6, 3, 2)
    # row i·h + j is head j of sequence i: features 2j, 2j+1 of every step of sequence i
    for i in range(2):
        for j in range(3):
            assert torch.equal(folded[i * 3 + j], X[i, :, 2 * j: 2 * j + 2])
    unfolded = split_heads(X, 3, fold=False)                # (b, h, n, d)
    assert unfolded.shape == (2, 3, 3, 2)
    assert torch.equal(unfolded[1, 2], X[1, :, 4:6])


@pytest.mark.parametrize("fold", [True, False])
def test_merge_heads_undoes_split_heads(fold):
    X = torch.randn(4, 5, 12)
    assert torch.equal(merge_heads(split_heads(X, 4, fold=fold), 4), X)


def test_reshaping_bad_input():
    with pytest.raises(ValueError, match="choose one of its divisors"):
        split_heads(torch.randn(2, 3, 10), 4)
    with pytest.raises(ValueError, match=r"split_heads expects \(batch, steps, features\)"):
        split_heads(torch.randn(3, 10), 2)
    with pytest.raises(ValueError, match="is not batch·num_heads"):
        merge_heads(torch.randn(5, 3, 2), 2)
    with pytest.raises(ValueError, match=r"merge_heads expects .* with h=2, got \(1, 3, 4, 2\)"):
        merge_heads(torch.randn(1, 3, 4, 2), 2)
    with pytest.raises(ValueError, match=r"merge_heads expects .*got \(6, 2\)"):
        merge_heads(torch.randn(6, 2), 2)
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        merge_heads(torch.randn(4, 3, 2), 0)


# The lesson cells show split_heads, merge_heads, MultiHeadAttention, key_padding_mask and
# to_torch_multihead with each check as one call; the checks live in the library.
@pytest.mark.parametrize("call, message", [
    (lambda: check_split(torch.randn(2, 3, 4, 5), 2), r"got \(2, 3, 4, 5\); give it three axes"),
    (lambda: check_split(torch.randn(2, 3, 10), 4), r"choose one of its divisors: \[1, 2, 5, 10\]"),
    (lambda: check_merge(torch.randn(5, 3, 2), 2), "pass the output of split_heads"),
    (lambda: check_merge(torch.randn(1, 3, 4, 2), 2), "merge_heads expects"),
    (lambda: check_sequence_lens(torch.tensor([[1, 2]]), 4), "one length per sequence"),
    (lambda: check_sequence_lens(torch.tensor([5]), 4), "longer than the key axis"),
    (lambda: check_multihead_inputs(MultiHeadAttention(12, 3), torch.randn(2, 4, 10),
                                    torch.randn(2, 6, 12), torch.randn(2, 6, 12)),
     "build it with query_size=10"),
    (lambda: check_multihead_inputs(MultiHeadAttention(12, 3), torch.randn(2, 4, 12),
                                    torch.randn(2, 6, 12), torch.randn(2, 6, 12),
                                    torch.tensor([7, 2])),
     "valid_lens 7 is longer"),
    (lambda: check_torch_compatible(MultiHeadAttention(10, 2, query_size=7)),
     "build ours without query_size"),
])
def test_checks_give_one_line_errors(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_checks_pass_good_input_through():
    assert check_split(torch.randn(2, 3, 12), 4) == 3                       # head size
    check_merge(torch.randn(8, 3, 3), 4)
    check_merge(torch.randn(2, 4, 3, 3), 4)
    assert check_sequence_lens([3, 0], 4).tolist() == [3, 0]
    mha = MultiHeadAttention(12, 3)
    q, k = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    assert check_multihead_inputs(mha, q, k, k) is None
    assert check_multihead_inputs(mha, q, k, k, torch.tensor([6, 2])).tolist() == [[6] * 4, [2] * 4]
    check_torch_compatible(mha)


def test_repeat_valid_lens_matches_split_heads_order():
    assert repeat_valid_lens(torch.tensor([3, 2]), 2).tolist() == [3, 3, 2, 2]
    assert repeat_valid_lens(torch.tensor([[1, 2], [3, 4]]), 2).tolist() == [[1, 2], [1, 2],
                                                                           [3, 4], [3, 4]]
    assert repeat_valid_lens(None, 3) is None


def test_notes_check_shape():
    torch.manual_seed(0)
    attention = MultiHeadAttention(100, 5, 0.5).eval()
    X, Y = torch.ones(2, 4, 100), torch.ones(2, 6, 100)
    out = attention(X, Y, Y, torch.tensor([3, 2]))
    assert out.shape == (2, 4, 100)
    w = attention.attention_weights
    assert w.shape == (2, 5, 4, 6)
    # all keys equal -> uniform weights over the valid keys, zero past them, in every head
    torch.testing.assert_close(w[0, :, :, :3], torch.full((5, 4, 3), 1 / 3))
    torch.testing.assert_close(w[1, :, :, :2], torch.full((5, 4, 2), 1 / 2))
    assert w[0, :, :, 3:].abs().sum() == 0 and w[1, :, :, 2:].abs().sum() == 0


def test_heads_by_hand():
    """Head j of our layer equals softmax(q_j k_jᵀ/√d) v_j computed from the weight slices."""
    torch.manual_seed(1)
    h, d, D = 3, 2, 6
    mha = MultiHeadAttention(D, h).eval()
    q, k = torch.randn(1, 4, D), torch.randn(1, 5, D)
    out = mha(q, k, k)
    heads = []
    for j in range(h):
        rows = slice(j * d, (j + 1) * d)
        qj = q[0] @ mha.W_q.weight[rows].T                 # (4, d)
        kj = k[0] @ mha.W_k.weight[rows].T                 # (5, d)
        vj = k[0] @ mha.W_v.weight[rows].T                 # (5, d)
        weights = torch.softmax(qj @ kj.T / d ** 0.5, dim=-1)
        torch.testing.assert_close(mha.attention_weights[0, j], weights)
        heads.append(weights @ vj)
    expected = torch.cat(heads, dim=-1) @ mha.W_o.weight.T
    torch.testing.assert_close(out[0], expected)


@pytest.mark.parametrize("lens", [None, torch.tensor([3, 6]), torch.tensor([[1, 2, 3], [6, 0, 4]])],
                         ids=["none", "per-sequence", "per-query"])
def test_fast_path_matches_explicit_path(lens):
    torch.manual_seed(2)
    mha = MultiHeadAttention(8, 4, bias=True, key_size=5, value_size=7).eval()
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 6, 5), torch.randn(2, 6, 7)
    explicit = mha(q, k, v, lens)
    assert mha.attention_weights.shape == (2, 4, 3, 6)
    fused = mha(q, k, v, lens, need_weights=False)
    assert mha.attention_weights is None
    torch.testing.assert_close(fused, explicit)
    assert not hasattr(mha, "need_weights")                 # one switch: the argument


def test_dropout_only_in_training():
    torch.manual_seed(3)
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    q = torch.randn(2, 4, 8)
    mha.train()
    assert not torch.equal(mha(q, q, q), mha(q, q, q))
    mha.eval()
    assert torch.equal(mha(q, q, q), mha(q, q, q))
    torch.testing.assert_close(mha(q, q, q, need_weights=False), mha(q, q, q))


def test_gradients_flow_through_both_paths():
    mha = MultiHeadAttention(8, 2)
    q = torch.randn(1, 3, 8, requires_grad=True)
    for need in (True, False):
        mha.zero_grad()
        mha(q, q, q, need_weights=need).sum().backward()
        assert mha.W_q.weight.grad.abs().sum() > 0


def test_key_padding_mask():
    assert key_padding_mask(torch.tensor([3, 1]), 4).tolist() == [[False, False, False, True],
                                                                  [False, True, True, True]]
    with pytest.raises(ValueError, match="longer than the key axis"):
        key_padding_mask(torch.tensor([5]), 4)
    with pytest.raises(ValueError, match="one length per sequence"):
        key_padding_mask(torch.tensor([[1, 2]]), 4)


def test_cost_is_independent_of_heads():
    costs = [multihead_cost(64, h, 10, 12) for h in divisors(64)]
    assert {c["parameters"] for c in costs} == {4 * 64 * 64}
    assert {c["attention_macs"] for c in costs} == {2 * 10 * 12 * 64}
    assert [c["score_entries"] for c in costs] == [h * 10 * 12 for h in divisors(64)]
    # the parameter count equals what the module really holds
    assert sum(p.numel() for p in MultiHeadAttention(64, 8).parameters()) == 4 * 64 * 64
    assert (sum(p.numel() for p in MultiHeadAttention(64, 8, bias=True).parameters())
            == multihead_cost(64, 8, 1, 1, bias=True)["parameters"])


def test_bad_input_one_line_errors():
    mha = MultiHeadAttention(12, 3)
    q, k = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    with pytest.raises(ValueError, match=r"expects query size 12 \(last dimension\), got 10; "
                                         r"build it with query_size=10"):
        mha(torch.randn(2, 4, 10), k, k)
    with pytest.raises(ValueError, match="expects value size 12.*value_size=5"):
        mha(q, k, torch.randn(2, 6, 5))
    with pytest.raises(ValueError, match=r"valid_lens 7 is longer than the key axis \(6 keys"):
        mha(q, k, k, torch.tensor([7, 2]))
    with pytest.raises(ValueError, match=r"valid_lens 7 is longer"):
        mha(q, k, k, torch.tensor([7, 2]), need_weights=False)
    with pytest.raises(ValueError, match=r"pass shape \(2,\) for one length per sequence"):
        mha(q, k, k, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="queries must be a 3-D tensor"):
        mha(torch.randn(4, 12), k, k)
    with pytest.raises(ValueError, match="choose one of its divisors: \\[1, 2, 3, 4, 6, 12\\]"):
        MultiHeadAttention(12, 5)
    for call in (lambda: MultiHeadAttention(12, 5), lambda: mha(q, k, k, torch.tensor([7, 2]))):
        with pytest.raises(ValueError) as info:
            call()
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("lens", [torch.tensor([2, 4]), torch.tensor([[1, 2, 3], [4, 4, 1]])])
def test_valid_lens_are_checked_once_per_call(monkeypatch, need_weights, lens):
    import utils.attention
    import utils.masking
    import utils.multihead
    calls = []

    def counting(check):
        def wrapper(*args, **kwargs):
            calls.append(args[1:])
            return check(*args, **kwargs)
        return wrapper

    for module in (utils.attention, utils.masking, utils.multihead):   # wherever it is called
        if hasattr(module, "check_valid_lens"):
            monkeypatch.setattr(module, "check_valid_lens", counting(module.check_valid_lens))
    mha = MultiHeadAttention(8, 2).eval()
    queries, keys = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    out = mha(queries, keys, keys, lens, need_weights=need_weights)
    assert out.shape == (2, 3, 8)
    assert calls == [(2, 3, 4)]


def test_attend_without_checks_equals_forward_with_them():
    torch.manual_seed(0)
    attention = ScaledDotProductAttention().eval()
    queries, keys, values = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    lens = torch.tensor([2, 5])
    checked = lens[:, None].expand(2, 3)                                   # (b, m)
    torch.testing.assert_close(attention(queries, keys, values, lens),
                               attention.attend(queries, keys, values, checked),
                               rtol=0, atol=0)
