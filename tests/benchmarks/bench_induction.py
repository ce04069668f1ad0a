"""Benchmark — lesson 8's induction run: training time, and how the result depends on the seed.

    .venv/bin/python -m tests.benchmarks.bench_induction [--seeds 0 1 2]

Trains ``utils.induction.LESSON_INDUCTION`` (the lesson ships the seed-0 run) once per seed on
one thread and prints, per seed: the wall time, the first checkpoint step at which the loss on
the second copy is below half the first copy's, and the final copy losses, best layer-1
previous-token score and best layer-2 induction score. The lesson quotes this spread.
"""

import argparse
import time

from tests.benchmarks.common import git_revision, machine, print_table
from utils.induction import LESSON_INDUCTION, run_settings, train_run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    print(f"# Induction run ({LESSON_INDUCTION.steps} steps, one thread) — {machine()} — "
          f"rev {git_revision()}")
    rows = []
    for seed in args.seeds:
        start = time.perf_counter()
        run = train_run(run_settings(LESSON_INDUCTION, seed=seed))
        seconds = time.perf_counter() - start
        formed = next((c.step for c in run.checkpoints
                       if c.second_copy_loss < c.first_copy_loss / 2), None)
        last = run.checkpoints[-1]
        rows.append([seed, f"{seconds:.1f}", "never" if formed is None else formed,
                     f"{last.first_copy_loss:.2f}", f"{last.second_copy_loss:.2f}",
                     f"{float(last.previous_token[0].max()):.2f}",
                     f"{float(last.induction[1].max()):.2f}"])
    print_table(["seed", "train s", "2nd copy < half of 1st at step", "1st-copy loss",
                 "2nd-copy loss", "layer-1 previous-token", "layer-2 induction"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
