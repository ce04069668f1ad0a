"""utils.costs: the exact counts checked against what PyTorch actually does.

FLOPs are counted by torch.utils.flop_counter.FlopCounterMode on the real layers (Conv1d, GRU,
the course's MultiHeadAttention on its explicit path); stored bytes against the tensors the
explicit path keeps; path lengths by which inputs an output actually depends on.
"""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from utils.costs import (attention_matrix_bytes, conv1d_flops, gru_flops, machine_line,
                         max_path_length, median_time, multihead_attention_flops,
                         self_attention_flops, sequential_steps)
from utils.multihead import MultiHeadAttention, peak_memory_mib


def counted_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("batch, n, d, k", [(1, 5, 4, 3), (2, 16, 8, 5), (4, 33, 32, 3)])
def test_conv1d_flops_match_the_counter(batch, n, d, k):
    conv = nn.Conv1d(d, d, kernel_size=k, padding=k // 2)
    X = torch.randn(batch, d, n)
    assert conv(X).shape == X.shape                        # a 'same' convolution
    assert conv1d_flops(batch, n, d, k) == counted_flops(lambda: conv(X))


@pytest.mark.parametrize("batch, n, d", [(1, 3, 4), (2, 10, 8), (4, 16, 32)])
def test_gru_flops_match_the_counter(batch, n, d):
    gru = nn.GRU(d, d, batch_first=True)
    X = torch.randn(batch, n, d)
    assert gru_flops(batch, n, d) == counted_flops(lambda: gru(X))


@pytest.mark.parametrize("batch, m, n, D, h", [(1, 5, 5, 8, 1), (2, 4, 7, 12, 3),
                                               (3, 16, 16, 32, 4), (1, 9, 2, 64, 8)])
def test_multihead_flops_match_the_counter_on_the_explicit_path(batch, m, n, D, h):
    mha = MultiHeadAttention(D, h).eval()
    Q, K = torch.randn(batch, m, D), torch.randn(batch, n, D)
    counted = counted_flops(lambda: mha(Q, K, K, need_weights=True))
    assert multihead_attention_flops(batch, m, n, D, h) == counted
    if m == n:
        assert self_attention_flops(batch, n, D, h) == counted_flops(
            lambda: mha(Q, Q, Q, need_weights=True))


@pytest.mark.parametrize("batch, h, m, n", [(1, 1, 3, 3), (2, 4, 5, 7), (3, 2, 16, 9)])
def test_stored_bytes_are_the_two_matrices_the_explicit_path_keeps(batch, h, m, n):
    mha = MultiHeadAttention(8 * h, h).eval()
    Q, K = torch.randn(batch, m, 8 * h), torch.randn(batch, n, 8 * h)
    with torch.no_grad():
        mha(Q, K, K, need_weights=True)
    weights = mha.attention_weights                       # (b, h, m, n); the scores have its size
    assert attention_matrix_bytes(batch, h, m, n) == 2 * weights.numel() * weights.element_size()
    assert attention_matrix_bytes(batch, h, m, n, need_weights=False) == 0
    assert attention_matrix_bytes(batch, h, m, n, element_size=8) == 4 * weights.numel() * 4


def test_measured_peak_memory_holds_the_counted_matrices():
    # Scores and weights coexist while the softmax runs, so the explicit path's measured peak is
    # at least their size; the fused path's stays well below it.
    mha = MultiHeadAttention(64, 4).eval()
    X = torch.randn(1, 512, 64)
    stored = attention_matrix_bytes(1, 4, 512, 512) / 2 ** 20     # 8 MiB
    assert peak_memory_mib(lambda: mha(X, X, X, need_weights=True)) >= stored
    assert peak_memory_mib(lambda: mha(X, X, X, need_weights=False)) < stored / 4


def _depends(outputs_fn, n, source, target) -> bool:
    """Does output position ``target`` change with input position ``source``? (by the gradient)"""
    X = torch.randn(1, n, 4, requires_grad=True)
    outputs_fn(X)[0, target].abs().sum().backward()
    return bool(X.grad[0, source].abs().sum() > 0)


@pytest.mark.parametrize("n, k", [(2, 3), (9, 3), (10, 5), (12, 7), (30, 5)])
def test_cnn_path_is_the_fewest_stacked_convolutions_that_connect_the_ends(n, k):
    torch.manual_seed(0)
    layers = [nn.Conv1d(4, 4, k, padding=k // 2) for _ in range(n)]

    def stack(depth):
        def run(X):                                        # (1, n, 4) -> (1, n, 4)
            H = X.transpose(1, 2)
            for layer in layers[:depth]:
                H = torch.tanh(layer(H))
            return H.transpose(1, 2)
        return run

    L = max_path_length("cnn", n, k)
    assert _depends(stack(L), n, source=0, target=n - 1)
    assert not _depends(stack(L - 1), n, source=0, target=n - 1)


def test_attention_and_gru_paths():
    torch.manual_seed(0)
    mha = MultiHeadAttention(4, 2).eval()
    assert max_path_length("self-attention", 10) == 1
    assert _depends(lambda X: mha(X, X, X), 10, source=0, target=9)   # one layer suffices
    gru = nn.GRU(4, 4, batch_first=True)
    run = lambda X: gru(X)[0]
    # Input 0 reaches output t through t hidden-to-hidden steps; it cannot reach backwards.
    assert max_path_length("gru", 10) == 9
    assert _depends(run, 10, source=0, target=9) and not _depends(run, 10, source=9, target=0)
    assert [sequential_steps(layer, 10) for layer in ("cnn", "gru", "self-attention")] == [1, 10, 1]


def test_growth_with_n():
    # Doubling n doubles the CNN's and the GRU's FLOPs and the GRU's steps; the score/weight
    # bytes quadruple; self-attention FLOPs more than double once n > 2d.
    assert conv1d_flops(1, 256, 32) == 2 * conv1d_flops(1, 128, 32)
    assert gru_flops(1, 256, 32) == 2 * gru_flops(1, 128, 32)
    assert attention_matrix_bytes(1, 4, 256, 256) == 4 * attention_matrix_bytes(1, 4, 128, 128)
    assert self_attention_flops(1, 256, 32, 4) > 3 * self_attention_flops(1, 128, 32, 4)


@pytest.mark.parametrize("call, message", [
    (lambda: conv1d_flops(1, 0, 4), r"n must be a positive integer, got 0"),
    (lambda: conv1d_flops(1, 8, 4, kernel_size=4), r"kernel_size must be odd .* use e\.g\. 3"),
    (lambda: gru_flops(1.5, 8, 4), r"batch must be a positive integer, got 1\.5"),
    (lambda: multihead_attention_flops(1, 4, 4, 10, 3), r"num_heads=3 does not divide num_hiddens=10"),
    (lambda: attention_matrix_bytes(1, True, 4, 4), r"num_heads must be a positive integer, got True"),
    (lambda: sequential_steps("lstm", 8), r"unknown layer 'lstm'; choose one of cnn, gru"),
    (lambda: max_path_length("cnn", 8, kernel_size=1), r"kernel_size must be odd and at least 3"),
    (lambda: median_time(lambda: None, repeats=0), r"repeats must be a positive integer"),
])
def test_bad_input_is_refused_with_one_line(call, message):
    with pytest.raises(ValueError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


def test_median_time_restores_threads_and_reports_spread():
    before = torch.get_num_threads()
    seen = []
    timing = median_time(lambda: seen.append(torch.get_num_threads()), repeats=7)
    assert torch.get_num_threads() == before
    assert seen == [1] * 8                                 # warm-up + 7 repeats, on one thread
    assert timing["min"] <= timing["median"] <= timing["max"] and timing["repeats"] == 7


def test_machine_line_names_cores_and_torch():
    line = machine_line()
    assert line.startswith("machine: ") and f"torch {torch.__version__}" in line and "cores" in line
