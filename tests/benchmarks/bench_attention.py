"""Benchmark 4 — attention kernels: forward time and peak memory on the CPU.

    .venv/bin/python -m tests.benchmarks.bench_attention [--repeats 15]

At d = 768, 12 heads, batch 2 and n = 128, 512, 1024 (self-attention, no mask, eval mode):
- ours, explicit: utils.multihead.MultiHeadAttention with weights kept (lesson-3 attention);
- ours, fast path: the same layer with need_weights=False (fused scaled_dot_product_attention);
- projections + SDPA: the four projections and one F.scaled_dot_product_attention call, written
  as tightly as possible — the floor any multi-head layer with these weights can reach;
- torch.nn.MultiheadAttention (batch_first, need_weights=False), our weights copied in;
- SDPA core: F.scaled_dot_product_attention alone on already-projected, already-split tensors.
Times are medians of interleaved runs. Goal: fast path <= 1.1x "projections + SDPA".
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from tests.benchmarks.common import git_revision, machine, print_table
from utils.costs import peak_memory_mib
from utils.multihead import MultiHeadAttention, to_torch_multihead

D, HEADS, BATCH = 768, 12, 2
GOAL = 1.1


def variants(mha, torch_mha, X):
    b, n, _ = X.shape
    q, k, v = (torch.randn(b, HEADS, n, D // HEADS) for _ in range(3))

    def projections_sdpa():
        split = lambda t: t.view(b, n, HEADS, -1).transpose(1, 2)          # (b, h, n, d/h)
        out = F.scaled_dot_product_attention(split(mha.W_q(X)), split(mha.W_k(X)), split(mha.W_v(X)))
        return mha.W_o(out.transpose(1, 2).reshape(b, n, D))

    return {
        "ours, explicit": lambda: mha(X, X, X, need_weights=True),
        "ours, fast path": lambda: mha(X, X, X, need_weights=False),
        "projections + SDPA": projections_sdpa,
        "torch.nn.MultiheadAttention": lambda: torch_mha(X, X, X, need_weights=False)[0],
        "SDPA core only": lambda: F.scaled_dot_product_attention(q, k, v),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 1024])
    args = parser.parse_args(argv)
    print(f"# Attention kernels, d={D}, {HEADS} heads, batch {BATCH}, forward only — "
          f"{machine()} — rev {git_revision()}")
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, HEADS).eval()
    torch_mha = to_torch_multihead(mha).eval()
    rows, verdicts = [], []
    for n in args.lengths:
        X = torch.randn(BATCH, n, D)
        fns = variants(mha, torch_mha, X)
        with torch.no_grad():
            reference = fns["projections + SDPA"]()
            for name in ("ours, explicit", "ours, fast path", "torch.nn.MultiheadAttention"):
                torch.testing.assert_close(fns[name](), reference, atol=1e-4, rtol=1e-4)
            times = {name: [] for name in fns}
            for fn in fns.values():
                fn()                                                   # warm-up
            for _ in range(args.repeats):                              # interleaved
                for name, fn in fns.items():
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
        floor = medians["projections + SDPA"]
        for name, fn in fns.items():
            rows.append([n, name, f"{medians[name]:.1f}", f"{medians[name] / floor:.2f}x",
                         f"{peak_memory_mib(fn):.1f}"])
        verdicts.append((n, medians["ours, fast path"] / floor))
    print_table(["n", "variant", "median ms", "vs projections+SDPA", "peak MiB"], rows)
    for n, ratio in verdicts:
        print(f"goal n={n}: fast path {ratio:.2f}x projections+SDPA (goal <= {GOAL}x) — "
              f"{'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
