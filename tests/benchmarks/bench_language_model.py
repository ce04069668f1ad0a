"""Benchmark — lesson 8's language model: training time and held-out perplexity, and the
key/value cache's speed-up in generation.

    .venv/bin/python -m tests.benchmarks.bench_language_model [--skip-training] [--repeats 5]

1. Trains ``LESSON_LM`` from scratch on one thread (as ``python -m utils.shipped_models
   language_model`` does) and prints the wall time, tokens/s, and the held-out perplexity beside
   the bigram baseline's.
2. Generates 32..511 tokens greedily on one thread with a model of the lesson's shape (random
   weights, room for 512 positions), with and without the cache, ``--repeats`` times each; prints
   the median time with the fastest and slowest run, the speed-up of the medians, and checks the
   tokens agree.
"""

import argparse
import dataclasses
import time

import torch

from tests.benchmarks.common import git_revision, machine, print_table
from utils.language_model import DecoderOnlyLM, generate
from utils.lm_training import LESSON_LM, lm_vocab, train_language_model


def generation_times(model, steps: int, use_cache: bool, repeats: int):
    start = torch.zeros(1, 1, dtype=torch.long)
    runs, tokens = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        tokens = generate(model, start, steps, greedy=True, use_cache=use_cache)
        runs.append(time.perf_counter() - began)
    runs.sort()
    return runs[len(runs) // 2], runs[0], runs[-1], tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"# Lesson 8's language model — {machine()} — rev {git_revision()}")
    if not args.skip_training:
        began = time.perf_counter()
        _, _, result = train_language_model(LESSON_LM, animate=False, show_progress=False,
                                            num_threads=1)
        wall = time.perf_counter() - began
        print_table(["epochs", "wall s (data and scoring included)", "training s", "tokens/s",
                     "held-out perplexity", "bigram perplexity"],
                    [[result.epochs, f"{wall:.1f}", f"{result.seconds:.1f}",
                      f"{result.tokens_per_sec:.0f}", f"{result.heldout_perplexity:.1f}",
                      f"{result.bigram_perplexity:.1f}"]])
    torch.manual_seed(0)
    torch.set_num_threads(1)                  # as the lesson measures it
    config = dataclasses.replace(LESSON_LM, max_len=512).model_config(len(lm_vocab(LESSON_LM)))
    model = DecoderOnlyLM(config).eval()
    rows = []
    for steps in (32, 64, 128, 256, 511):
        cached = generation_times(model, steps, True, args.repeats)
        uncached = generation_times(model, steps, False, args.repeats)
        rows.append([steps, f"{1000 * cached[0]:.1f} ({1000 * cached[1]:.1f}-{1000 * cached[2]:.1f})",
                     f"{1000 * uncached[0]:.1f} ({1000 * uncached[1]:.1f}-{1000 * uncached[2]:.1f})",
                     f"{uncached[0] / cached[0]:.1f}x", torch.equal(cached[3], uncached[3])])
    print(f"\ngreedy generation, one thread, median of {args.repeats} "
          f"(fastest-slowest), ms")
    print_table(["new tokens", "with the cache", "without", "speed-up", "same tokens"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
