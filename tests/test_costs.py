"""utils.costs: the exact counts checked against what PyTorch actually does.

FLOPs are counted by torch.utils.flop_counter.FlopCounterMode on the real layers (Conv1d, GRU,
the course's MultiHeadAttention on its explicit path); stored bytes against the tensors the
explicit path keeps; path lengths by which inputs an output actually depends on.
"""

import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from utils.costs import (attention_matrix_bytes, conv1d_flops, decoder_position_flops,
                         generation_flops, generation_schedule, gru_flops, machine_line,
                         max_path_length, median_time, median_times, multihead_attention_flops,
                         peak_memory_mib, self_attention_flops, sequential_steps)
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, generate
from utils.multihead import MultiHeadAttention

from conftest import REPO


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


def test_peak_memory_is_that_of_torch_profiler_without_importing_the_compiler():
    # utils.costs.peak_memory_mib drives the profiler one layer down; its figures are those of
    # utils.multihead's (torch.profiler.profile), which it replaced. A fresh process, to see
    # that torch._dynamo stays unimported.
    script = """if True:
        import sys, torch
        from utils.costs import peak_memory_mib
        from utils.multihead import MultiHeadAttention
        mha = MultiHeadAttention(64, 4).eval()
        calls = [lambda n=n, w=w, X=torch.randn(2, n, 64): mha(X, X, X, need_weights=w)
                 for n in (16, 128, 512) for w in (True, False)]
        ours = [peak_memory_mib(call) for call in calls]
        print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo")
        from utils.multihead import peak_memory_mib as with_torch_profiler
        [with_torch_profiler(call) for call in calls]
        # The first round holds one-time allocations of a few KiB (the profiler's, the
        # layer's); from the second on both give the same figures.
        ours = [peak_memory_mib(call) for call in calls]
        print(ours == [with_torch_profiler(call) for call in calls], ours[4] > 8 * ours[5] > 0)
    """
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["no", "dynamo", "True", "True"], result.stdout


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


def test_generation_counted_by_hand():
    # A prompt of 2 tokens, 3 new ones. Without the cache the calls read 2, 3, 4 tokens, each
    # scored against itself; with it the prompt (2 against 2), then one token against 3, then 4.
    assert generation_schedule(2, 3, use_cache=False) == [(2, 2), (3, 3), (4, 4)]
    assert generation_schedule(2, 3, use_cache=True) == [(2, 2), (1, 3), (1, 4)]
    # d = 4, FFN 8, one layer, 5 words: per position W_q, W_k, W_v, W_o 4·16 = 64 multiply-adds,
    # the FFN 4·8 + 8·4 = 64, the output layer 4·5 = 20: 148 multiply-adds, 296 FLOPs.
    assert decoder_position_flops(4, 8, 1, 5) == 296
    assert decoder_position_flops(4, 8, 1, 5, attention_only=True) == 2 * (64 + 20)
    # Each (query, key) pair: q·k and weight·v, 4 + 4 multiply-adds = 16 FLOPs per layer.
    uncached = generation_flops(2, 3, 4, 8, 1, 5, use_cache=False)
    assert uncached == {"positions": 2 + 3 + 4, "pairs": 4 + 9 + 16, "steps": 3,
                        "outside": 9 * 296, "attention": 29 * 16, "total": 9 * 296 + 29 * 16}
    cached = generation_flops(2, 3, 4, 8, 1, 5, use_cache=True, batch=3)
    assert cached == {"positions": 2 + 1 + 1, "pairs": 4 + 3 + 4, "steps": 3,
                      "outside": 3 * 4 * 296, "attention": 3 * 11 * 16,
                      "total": 3 * (4 * 296 + 11 * 16)}


@pytest.mark.parametrize("n0, m, batch, attention_only", [(1, 6, 1, False), (3, 5, 2, False),
                                                          (2, 4, 1, True)])
def test_generation_flops_match_the_counter_on_generate(n0, m, batch, attention_only):
    torch.manual_seed(0)
    shape = dict(num_hiddens=16, ffn_num_hiddens=24, num_blks=2, vocab_size=30)
    model = DecoderOnlyLM(DecoderOnlyConfig(num_heads=4, max_len=16, attention_only=attention_only,
                                            **shape)).eval()
    prompt = torch.randint(0, 30, (batch, n0))
    for use_cache in (True, False):
        counted = counted_flops(lambda: generate(model, prompt, m, greedy=True, use_cache=use_cache))
        assert counted == generation_flops(n0, m, **shape, use_cache=use_cache, batch=batch,
                                           attention_only=attention_only)["total"]


@pytest.mark.parametrize("m", [1, 2, 32, 511])
def test_generation_laws(m):
    # After a one-token prompt: without the cache the calls read 1..m tokens, m(m+1)/2 positions
    # and 1² + .. + m² = m(m+1)(2m+1)/6 pairs (~m³/3); with it m positions and 1 + .. + m pairs.
    uncached = generation_flops(1, m, 64, 128, 2, 1703, use_cache=False)
    cached = generation_flops(1, m, 64, 128, 2, 1703, use_cache=True)
    assert uncached["positions"] == m * (m + 1) // 2 and cached["positions"] == m
    assert uncached["pairs"] == m * (m + 1) * (2 * m + 1) // 6
    assert cached["pairs"] == m * (m + 1) // 2
    if m == 1:
        assert uncached == cached                           # one call, the same either way


def test_generation_figures_of_lesson_8():
    # The lesson's model (d = 64, 2 layers, FFN 128, 1,703 words): 174,528 multiply-adds per
    # position; ideal speed-ups about 17x at 32 new tokens and 279x at 511, where the attention
    # is a third of the uncached work.
    shape = dict(num_hiddens=64, ffn_num_hiddens=128, num_blks=2, vocab_size=1703)
    assert decoder_position_flops(**shape) == 2 * 174_528
    ratio = lambda m: (generation_flops(1, m, **shape, use_cache=False)["total"]
                       / generation_flops(1, m, **shape, use_cache=True)["total"])
    assert 16.5 < ratio(32) < 16.7 and 279 < ratio(511) < 280
    uncached = generation_flops(1, 511, **shape, use_cache=False)
    assert 0.333 < uncached["attention"] / uncached["total"] < 0.334


@pytest.mark.parametrize("call, message", [
    (lambda: conv1d_flops(1, 0, 4), r"n must be a positive integer, got 0"),
    (lambda: conv1d_flops(1, 8, 4, kernel_size=4), r"kernel_size must be odd .* use e\.g\. 3"),
    (lambda: gru_flops(1.5, 8, 4), r"batch must be a positive integer, got 1\.5"),
    (lambda: multihead_attention_flops(1, 4, 4, 10, 3), r"num_heads=3 does not divide num_hiddens=10"),
    (lambda: attention_matrix_bytes(1, True, 4, 4), r"num_heads must be a positive integer, got True"),
    (lambda: sequential_steps("lstm", 8), r"unknown layer 'lstm'; choose one of cnn, gru"),
    (lambda: max_path_length("cnn", 8, kernel_size=1), r"kernel_size must be odd and at least 3"),
    (lambda: median_time(lambda: None, repeats=0), r"repeats must be a positive integer"),
    (lambda: generation_schedule(0, 4, True), r"prompt_len must be a positive integer, got 0"),
    (lambda: generation_schedule(1, 4, 1), r"use_cache must be True or False, got 1"),
    (lambda: generation_flops(1, 4, 64, 128, 2, 100, use_cache=True, batch=0),
     r"batch must be a positive integer"),
    (lambda: decoder_position_flops(64, 128, 2, 100, attention_only="no"),
     r"attention_only must be True or False"),
    (lambda: median_times({}), r"fns must be a non-empty dict"),
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


def test_median_times_runs_in_turns_on_one_thread():
    before = torch.get_num_threads()
    calls = []
    timing = median_times({"a": lambda: calls.append(("a", torch.get_num_threads())),
                           "b": lambda: calls.append(("b", torch.get_num_threads()))}, repeats=3)
    assert torch.get_num_threads() == before
    assert calls == [("a", 1), ("b", 1)] * 4               # warm-up, then 3 rounds, in turns
    assert set(timing) == {"a", "b"}
    assert all(t["min"] <= t["median"] <= t["max"] and t["repeats"] == 3 for t in timing.values())


def test_machine_line_names_cores_and_torch():
    line = machine_line()
    assert line.startswith("machine: ") and f"torch {torch.__version__}" in line and "cores" in line


def test_count_operators_counts_each_dispatched_operator():
    import torch

    from utils.costs import count_operators
    x = torch.ones(3)
    counted = count_operators(lambda: (x + 1) * 2 + x)
    assert counted["by_name"] == {"add": 2, "mul": 1} and counted["total"] == 3
    assert count_operators(lambda: None)["total"] == 0
    with pytest.raises(ValueError, match="pass e.g. lambda"):
        count_operators(3)
