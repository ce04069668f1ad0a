"""What a layer costs, counted exactly (machine-independent), and a careful timer for support.

Counts are FLOPs of the matrix products, 2 per multiply-add, the convention of
``torch.utils.flop_counter.FlopCounterMode``; biases, softmax, gates and scaling are left out
(they grow no faster than the products they follow). Asymptotic forms: Vaswani et al. (2017),
"Attention Is All You Need", Table 1.

- ``multihead_attention_flops(batch, num_queries, num_keys, num_hiddens, num_heads)``
- ``attention_matrix_bytes(batch, num_heads, num_queries, num_keys, need_weights)``
- ``conv1d_flops``, ``gru_flops``, ``self_attention_flops``: one layer, n tokens of size d
- ``sequential_steps(layer, n)``, ``max_path_length(layer, n, kernel_size)``
- ``decoder_position_flops``: one position through a decoder-only language model, attention aside
- ``generation_schedule(prompt_len, new_tokens, use_cache)``: (queries, keys) of every step
- ``generation_flops(...)``: generating with or without the key/value cache, counted step by step
- ``count_operators(fn)``: the PyTorch operators a call dispatches (a fixed cost, counted)
- ``peak_memory_mib(fn)``: the peak of what PyTorch allocates during a call (measured)
- ``median_time(fn, repeats)``, ``median_times(fns, repeats)``, ``machine_line()``: timings,
  only as support
"""

import contextlib
import itertools
import os
import platform
import statistics
import time

import torch

from utils.i18n import _

LAYERS = ("cnn", "gru", "self-attention")


def _count(name: str, value) -> int:
    """``value`` as an int, or a one-line ValueError unless it is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(_("{name} must be a positive integer, got {value!r}; pass e.g. "
                           "{name}=1").format(name=name, value=value))
    return value


def _flag(name: str, value) -> bool:
    """``value`` if it is a bool, else a one-line ValueError."""
    if not isinstance(value, bool):
        raise ValueError(_("{name} must be True or False, got {value!r}").format(
            name=name, value=value))
    return value


def _kernel(kernel_size) -> int:
    _count("kernel_size", kernel_size)
    if kernel_size < 3 or kernel_size % 2 == 0:
        raise ValueError(_("kernel_size must be odd and at least 3 (a 'same' convolution that "
                           "reaches its neighbours), got {kernel_size!r}; use e.g. 3").format(
            kernel_size=kernel_size))
    return kernel_size


def _layer(layer) -> str:
    if layer not in LAYERS:
        raise ValueError(_("unknown layer {layer!r}; choose one of {choices}").format(
            layer=layer, choices=', '.join(LAYERS)))
    return layer


def multihead_attention_flops(batch: int, num_queries: int, num_keys: int, num_hiddens: int,
                              num_heads: int) -> int:
    """FLOPs of one multi-head attention call, the same for the explicit and the fused path.

    Projections: W_q, W_o on m rows and W_k, W_v on n rows, each D x D: 2·b·(2m + 2n)·D².
    Attention: scores (b·h, m, d)@(b·h, d, n) and weights@values, d = D/h: 2 · 2·b·m·n·D.
    """
    b, m, n = _count("batch", batch), _count("num_queries", num_queries), _count("num_keys", num_keys)
    D, h = _count("num_hiddens", num_hiddens), _count("num_heads", num_heads)
    if D % h:
        raise ValueError(_("num_heads={h} does not divide num_hiddens={D}; choose a divisor of "
                           "{D}").format(h=h, D=D))
    projections = 2 * b * (2 * m + 2 * n) * D * D
    attention = 2 * 2 * b * m * n * D                     # h heads x 2·b·m·n·(D/h), twice
    return projections + attention


def attention_matrix_bytes(batch: int, num_heads: int, num_queries: int, num_keys: int,
                           need_weights: bool = True, element_size: int = 4) -> int:
    """Bytes of the score and weight matrices, each (b·h, m, n), that the explicit path stores.

    The fused path (need_weights=False) works through the keys block by block and stores none.
    """
    entries = (_count("batch", batch) * _count("num_heads", num_heads)
               * _count("num_queries", num_queries) * _count("num_keys", num_keys))
    _count("element_size", element_size)
    return 2 * entries * element_size if need_weights else 0


def conv1d_flops(batch: int, n: int, d: int, kernel_size: int = 3) -> int:
    """Conv1d(d, d, k, padding=k//2) on (b, d, n): a k·d x d kernel at n positions, 2·b·n·k·d²."""
    b, n, d, k = _count("batch", batch), _count("n", n), _count("d", d), _kernel(kernel_size)
    return 2 * b * n * k * d * d


def gru_flops(batch: int, n: int, d: int) -> int:
    """GRU(d, d) on (b, n, d): per step W_ih (3d x d) and W_hh (3d x d), 2·b·n·6d²."""
    b, n, d = _count("batch", batch), _count("n", n), _count("d", d)
    return 2 * b * n * 6 * d * d


def self_attention_flops(batch: int, n: int, d: int, num_heads: int = 1) -> int:
    """MultiHeadAttention(d, h)(X, X, X) on (b, n, d), projections included: 8·b·n·d² + 4·b·n²·d."""
    return multihead_attention_flops(batch, n, n, d, num_heads)


def sequential_steps(layer: str, n: int) -> int:
    """Operations that must wait for the previous one: n for the GRU (step i needs step i-1), else 1."""
    n = _count("n", n)
    return n if _layer(layer) == "gru" else 1


def max_path_length(layer: str, n: int, kernel_size: int = 3) -> int:
    """Links a signal crosses from the first to the last of n tokens.

    Self-attention: 1 (every pair meets in one layer). GRU: n - 1 hidden-to-hidden steps.
    CNN: stacked 'same' convolutions, each reaching (k-1)/2 positions: ceil((n-1) / ((k-1)/2)).
    """
    n, layer = _count("n", n), _layer(layer)
    if layer == "self-attention":
        return 1 if n > 1 else 0
    if layer == "gru":
        return n - 1
    reach = (_kernel(kernel_size) - 1) // 2
    return -(-(n - 1) // reach)                           # ceil division


def decoder_position_flops(num_hiddens: int, ffn_num_hiddens: int, num_blks: int,
                           vocab_size: int, attention_only: bool = False) -> int:
    """FLOPs of one position of ``utils.language_model.DecoderOnlyLM`` outside the attention scores.

    Per layer W_q, W_k, W_v, W_o (4·d² multiply-adds) and, unless ``attention_only``, the FFN
    d -> f -> d (2·d·f); then the output layer d -> V: 2·(L·(4·d² + 2·d·f) + d·V).
    """
    d, f = _count("num_hiddens", num_hiddens), _count("ffn_num_hiddens", ffn_num_hiddens)
    L, V = _count("num_blks", num_blks), _count("vocab_size", vocab_size)
    per_layer = 4 * d * d + (0 if _flag("attention_only", attention_only) else 2 * d * f)
    return 2 * (L * per_layer + d * V)


def generation_schedule(prompt_len: int, new_tokens: int, use_cache: bool) -> list:
    """(queries, keys) of each model call when ``utils.language_model.generate`` writes
    ``new_tokens`` tokens after a prompt of ``prompt_len``: one call per new token.

    Without the cache call i (from 0) rereads all n0 + i tokens: n0 + i queries against as many
    keys (the causal mask hides half of the scores but they are computed). With it, call 0 reads
    the prompt (n0 against n0) and call i >= 1 one token against the n0 + i cached keys.
    """
    n0, m = _count("prompt_len", prompt_len), _count("new_tokens", new_tokens)
    if _flag("use_cache", use_cache):
        return [(n0, n0)] + [(1, n0 + i) for i in range(1, m)]
    return [(n0 + i, n0 + i) for i in range(m)]


def generation_flops(prompt_len: int, new_tokens: int, num_hiddens: int, ffn_num_hiddens: int,
                     num_blks: int, vocab_size: int, use_cache: bool, batch: int = 1,
                     attention_only: bool = False) -> dict:
    """FLOPs of generating ``new_tokens`` after ``prompt_len`` for ``batch`` sequences at once.

    Each call of ``generation_schedule`` costs queries · ``decoder_position_flops`` (the positions
    it reads) plus, per layer, scores and weights @ values: 2 · 2·queries·keys·d (all heads).
    Returns {"positions", "pairs", "outside", "attention", "total", "steps"}: positions read and
    (query, key) pairs scored per sequence and layer, the FLOPs of both parts and their sum.
    Without the cache the pairs grow as m³/3 and the positions as m²/2; with it as m²/2 and m.
    """
    b = _count("batch", batch)
    schedule = generation_schedule(prompt_len, new_tokens, use_cache)
    per_position = decoder_position_flops(num_hiddens, ffn_num_hiddens, num_blks, vocab_size,
                                          attention_only)
    positions = sum(q for q, _ in schedule)
    pairs = sum(q * k for q, k in schedule)
    outside = b * positions * per_position
    attention = b * 2 * 2 * num_blks * num_hiddens * pairs
    return {"positions": positions, "pairs": pairs, "outside": outside, "attention": attention,
            "total": outside + attention, "steps": len(schedule)}


def median_time(fn, repeats: int = 7, threads: int = 1) -> dict:
    """Seconds of ``fn()``: one warm-up, then ``repeats`` runs on ``threads`` threads (restored after).

    Returns {"median", "min", "max", "repeats"}; without autograd.
    """
    _count("repeats", repeats)
    _count("threads", threads)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            fn()                                          # warm-up
            times = []
            for _repeat in range(repeats):   # (not `_`: the translation function)
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(saved)
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "repeats": repeats}


def median_times(fns: dict, repeats: int = 5, threads: int = 1) -> dict:
    """``median_time`` for several functions at once, run in turns: one warm-up each, then
    ``repeats`` rounds in which every function runs once, so that a change in the machine's load
    falls on all of them alike. {name: {"median", "min", "max", "repeats"}}; without autograd."""
    _count("repeats", repeats)
    _count("threads", threads)
    if not isinstance(fns, dict) or not fns or not all(callable(f) for f in fns.values()):
        raise ValueError(_("fns must be a non-empty dict of name -> function to time; pass e.g. "
                           "{'cached': lambda: ...}"))
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    times = {name: [] for name in fns}
    try:
        with torch.no_grad():
            for fn in fns.values():
                fn()                                      # warm-up
            for _repeat in range(repeats):
                for name, fn in fns.items():
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(saved)
    return {name: {"median": statistics.median(t), "min": min(t), "max": max(t),
                   "repeats": repeats} for name, t in times.items()}


def machine_line() -> str:
    """One line naming the machine: CPU model, core count, torch version."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"machine: {model}, {os.cpu_count()} cores, torch {torch.__version__}"


def count_operators(fn) -> dict:
    """Run ``fn()`` once (without autograd) and count the PyTorch operators it dispatches:
    {"total": n, "by_name": {aten op name: count}}. The same code gives the same counts on any
    machine: what a step's fixed cost is made of, counted instead of timed."""
    if not callable(fn):
        raise ValueError(_("fn must be a function to run, got {fn_type}; pass e.g. lambda: "
                           "model(tokens)").format(fn_type=type(fn).__name__))
    from torch.utils._python_dispatch import TorchDispatchMode

    by_name = {}

    class _Counter(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):
            # Nothing here is compiled: without this, torch wraps __torch_dispatch__ in
            # torch._dynamo.disable, whose first call imports torch._dynamo (about 2.5 s).
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            by_name[name] = by_name.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), _Counter():
        fn()
    return {"total": sum(by_name.values()), "by_name": dict(sorted(by_name.items()))}


@contextlib.contextmanager
def _stderr_to_devnull():
    """File descriptor 2 points at /dev/null inside the block (C++ log lines go nowhere)."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        for fd in (saved, devnull):
            os.close(fd)


def peak_memory_mib(fn) -> float:
    """Peak extra CPU memory (MiB) that PyTorch allocates while running ``fn()`` without autograd.

    PyTorch's profiler records every allocation and free; this replays them in time order and
    returns the highest running total. It drives the profiler through ``torch.autograd.profiler``,
    the layer under ``torch.profiler.profile`` (which would import torch's compiler, about 2 s,
    the first time it starts), so the figures are those of ``utils.multihead.peak_memory_mib``,
    which it replaces. The profiler's C++ start/stop log lines go to /dev/null.
    """
    from torch.autograd.profiler import profile

    with _stderr_to_devnull(), torch.no_grad(), profile(use_cpu=True, profile_memory=True) as prof:
        fn()
    totals = itertools.accumulate(event.self_cpu_memory_usage for event in
                                  sorted(prof.function_events, key=lambda e: e.time_range.start))
    return max(itertools.chain([0], totals)) / 2 ** 20                   # never below 0
