"""Benchmark — lesson 8's key/value cache: measured generation time against the ideal one.

    .venv/bin/python -m tests.benchmarks.bench_kv_cache [--repeats 7] [--batches 1 8 64]
                                                         [--write assets/benchmarks/kv_cache.json]

With a model of lesson 8's shape (random weights, room for 512 positions), on one thread:

1. the exact counts (``utils.costs.generation_flops``) of greedy generation of 32..511 tokens
   after ``<bos>``, with and without the cache, and their ratio, the ideal speed-up;
2. the arithmetic rate: one forward pass over 64 x 32 tokens, counted and timed; a
   generation's ideal time is its count divided by this rate;
3. the fixed cost of a step, on its own: the same generation with a bare model (same two blocks
   and four heads, every width 4, a vocabulary of 4), whose arithmetic is negligible;
4. measured times with and without the cache, beside the ideal ones, the measured and the ideal
   speed-up, and the speed-up predicted by m fixed costs plus the ideal cached time;
5. the same for the static cache (``utils.static_cache``: preallocated, written in place, no
   checks inside the loop): its fixed cost per step (the bare model again), its times and its
   speed-up, and whether it gives the same tokens as the plain cache and no cache;
6. 511 tokens with the cache for batches of prompts: time per sequence and the speed-up per
   sequence against one uncached sequence.

Every time is the median of ``--repeats`` runs taken in turns after a warm-up
(``utils.costs.median_times``), with the fastest and slowest. ``--write`` also saves every
measured time (median, fastest, slowest), the counts and the machine as JSON: lesson 8 shows that
file's sweep beside a quick cell that re-measures one length on the student's machine.
"""

import argparse
import dataclasses
import datetime
import json
import pathlib

import torch

from tests.benchmarks.common import git_revision, machine, print_table
from utils.costs import generation_flops, median_times
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, generate
from utils.lm_training import LESSON_LM, lm_vocab
from utils.static_cache import generate_static

LENGTHS = (32, 64, 128, 256, 511)


def spread(run: dict) -> str:
    return f"{1e3 * run['median']:.1f} ({1e3 * run['min']:.1f}-{1e3 * run['max']:.1f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--write", type=pathlib.Path, help="also save the figures as JSON here")
    args = parser.parse_args(argv)
    print(f"# Key/value cache — {machine()} — rev {git_revision()}")
    vocab_size = len(lm_vocab(LESSON_LM))
    shape = dict(num_hiddens=LESSON_LM.num_hiddens, ffn_num_hiddens=LESSON_LM.ffn_num_hiddens,
                 num_blks=LESSON_LM.num_blks, vocab_size=vocab_size)
    torch.manual_seed(0)
    model = DecoderOnlyLM(dataclasses.replace(LESSON_LM, max_len=512).model_config(vocab_size)).eval()
    bare = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=4, num_hiddens=4, num_heads=4, num_blks=2,
                                           ffn_num_hiddens=4, max_len=512)).eval()
    start = torch.zeros(1, 1, dtype=torch.long)
    block = torch.randint(vocab_size, (64, 32), generator=torch.Generator().manual_seed(0))

    counts = {(kind, m): generation_flops(1, m, **shape, use_cache=kind == "cached")
              for kind in ("cached", "uncached") for m in LENGTHS}
    print_table(["new tokens", "uncached GFLOP", "attention share", "cached GFLOP", "ideal speed-up"],
                [[m, f"{counts['uncached', m]['total'] / 1e9:.2f}",
                  f"{counts['uncached', m]['attention'] / counts['uncached', m]['total']:.0%}",
                  f"{counts['cached', m]['total'] / 1e9:.3f}",
                  f"{counts['uncached', m]['total'] / counts['cached', m]['total']:.0f}x"]
                 for m in LENGTHS])

    jobs = {"block": lambda: model(block)}
    for m in LENGTHS:
        jobs["cached", m] = lambda m=m: generate(model, start, m, greedy=True)
        jobs["uncached", m] = lambda m=m: generate(model, start, m, greedy=True, use_cache=False)
        jobs["bare", m] = lambda m=m: generate(bare, start, m, greedy=True)
        jobs["static", m] = lambda m=m: generate_static(model, start, m, greedy=True)
        jobs["bare static", m] = lambda m=m: generate_static(bare, start, m, greedy=True)
    runs = median_times(jobs, repeats=args.repeats)
    rate = (generation_flops(32, 1, **shape, use_cache=True, batch=64)["total"]
            / runs["block"]["median"])
    overhead = runs["bare", 511]["median"] / 511
    static_overhead = runs["bare static", 511]["median"] / 511
    ideal = {key: count["total"] / rate for key, count in counts.items()}
    print(f"\nmedians of {args.repeats} runs in turns, one thread, ms (fastest-slowest)")
    print(f"arithmetic rate: {rate / 1e9:.1f} GFLOP/s (64 x 32 forward pass: "
          f"{spread(runs['block'])} ms)")
    print(f"fixed cost of a step, bare model: {1e3 * overhead:.2f} ms at 511 steps; per step at "
          + ", ".join(f"{m}: {1e3 * runs['bare', m]['median'] / m:.2f}" for m in LENGTHS))
    rows, previous = [], None
    for m in LENGTHS:
        cached, uncached = runs["cached", m], runs["uncached", m]
        predicted = m * overhead + ideal["cached", m]
        rows.append([m, spread(cached), f"{1e3 * ideal['cached', m]:.1f}", spread(uncached),
                     f"{1e3 * ideal['uncached', m]:.0f}",
                     f"{uncached['median'] / ideal['uncached', m]:.2f}",
                     f"{uncached['median'] / cached['median']:.1f}x",
                     f"{ideal['uncached', m] / ideal['cached', m]:.0f}x",
                     f"{uncached['median'] / predicted:.1f}x",
                     "-" if previous is None else f"{uncached['median'] / previous:.2f}x"])
        previous = uncached["median"]
    print_table(["m", "cached ms", "ideal", "uncached ms", "ideal", "uncached / ideal",
                 "speed-up", "ideal", "m x fixed + ideal", "uncached / previous m"], rows)

    print(f"\nstatic cache (preallocated, written in place): fixed cost of a step, bare model: "
          f"{1e3 * static_overhead:.2f} ms at 511 steps ({static_overhead / overhead:.2f} of the "
          f"plain cache's {1e3 * overhead:.2f} ms); per step at "
          + ", ".join(f"{m}: {1e3 * runs['bare static', m]['median'] / m:.2f}" for m in LENGTHS))
    same = all(torch.equal(generate_static(model, start, m, greedy=True),
                           generate(model, start, m, greedy=True)) and
               torch.equal(generate_static(model, start, m, greedy=True),
                           generate(model, start, m, greedy=True, use_cache=False))
               for m in (32, 511))
    print(f"same tokens as the plain cache and as no cache (32 and 511 tokens): {same}")
    print_table(["m", "static ms", "plain cache ms", "uncached ms", "static speed-up",
                 "plain speed-up", "ideal", "m x fixed + ideal"],
                [[m, spread(runs["static", m]), spread(runs["cached", m]),
                  spread(runs["uncached", m]),
                  f"{runs['uncached', m]['median'] / runs['static', m]['median']:.1f}x",
                  f"{runs['uncached', m]['median'] / runs['cached', m]['median']:.1f}x",
                  f"{ideal['uncached', m] / ideal['cached', m]:.0f}x",
                  f"{runs['uncached', m]['median'] / (m * static_overhead + ideal['cached', m]):.1f}x"]
                 for m in LENGTHS])

    batch_runs = median_times({b: lambda b=b: generate(model, start.repeat(b, 1), 511, greedy=True)
                               for b in args.batches}, repeats=args.repeats)
    alone = runs["uncached", 511]["median"]
    print(f"\n511 new tokens with the cache for b sequences at once; ideal per sequence "
          f"{1e3 * ideal['cached', 511]:.1f} ms; uncached fixed cost "
          f"{511 * overhead / alone:.0%} of its time")
    print_table(["b", "ms for the batch", "ms per sequence", "speed-up per sequence vs one uncached"],
                [[b, spread(batch_runs[b]), f"{1e3 * batch_runs[b]['median'] / b:.1f}",
                  f"{alone / (batch_runs[b]['median'] / b):.0f}x"] for b in args.batches])
    if args.write:
        record = {
            "machine": machine(), "revision": git_revision(), "repeats": args.repeats,
            "date": datetime.date.today().isoformat(), "threads": 1, "lengths": list(LENGTHS),
            "rate_flops_per_s": rate, "same_tokens": same,
            "runs": {f"{kind} {m}": runs[kind, m] for kind in
                     ("cached", "uncached", "bare", "static", "bare static") for m in LENGTHS},
            "block": runs["block"],
            "flops": {f"{kind} {m}": counts[kind, m]["total"] for kind, m in counts},
            "batches": {str(b): batch_runs[b] for b in args.batches}}
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"\nwritten: {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
