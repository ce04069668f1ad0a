"""Benchmark 7 — the lessons' main translation models: speed and minutes to a held-out BLEU.

    .venv/bin/python -m tests.benchmarks.bench_heldout [--models bahdanau transformer] [--seed 0]
                                                       [--epochs N]

Trains each preset of lessons 4 and 7 (``LESSON_BAHDANAU``, ``LESSON_TRANSFORMER``) from scratch
on the course's data file, the way ``python -m utils.shipped_models`` does (one intra-op thread,
the preset's seed), and scores the model on the held-out sentences after every epoch. Scoring is
not counted as training time. Prints, per model, target tokens per second and the training
minutes after which the held-out corpus sacreBLEU first reaches 10, 15, 20 and 25. Each model is
trained in a fresh process; about 5 minutes each on one core of a 2-core machine.
"""

import argparse
import json
import subprocess
import sys

from tests.benchmarks.common import git_revision, machine, print_table

THRESHOLDS = (10, 15, 20, 25)

CHILD = r"""
import dataclasses, json, sys, time
model_name, seed, num_epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import torch
from utils.reproducibility import set_seed
from utils.training import heldout_bleu, train_seq2seq
if model_name == "bahdanau":
    from utils.seq2seq import LESSON_BAHDANAU as preset, build_bahdanau as build
    from utils.training import training_data as data
else:
    from utils.transformer import LESSON_TRANSFORMER as preset, build_transformer as build, transformer_data as data
config = dataclasses.replace(preset, seed=seed, num_epochs=num_epochs or preset.num_epochs)
set_seed(config.seed)
data_iter, src_vocab, tgt_vocab = data(config)
model = build(config, src_vocab, tgt_vocab)
epochs, clock = [], {"start": time.perf_counter(), "scoring": 0.0}
def score(epoch, model):
    trained = time.perf_counter() - clock["start"] - clock["scoring"]
    began = time.perf_counter()
    bleu, _ = heldout_bleu(model, src_vocab, tgt_vocab, config.num_steps)
    clock["scoring"] += time.perf_counter() - began
    epochs.append({"epoch": epoch, "seconds": trained, "bleu": bleu.score})
result = train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab, animate=False,
                       show_progress=False, num_threads=1, on_epoch=score)
print(json.dumps({"tokens_per_sec": result.tokens_per_sec, "seconds": result.seconds,
                  "epochs": epochs, "num_epochs": config.num_epochs}))
"""


def run(model: str, seed: int, epochs: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, model, str(seed), str(epochs)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"{model}: training failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def minutes_to(epochs: list, threshold: float) -> str:
    for row in epochs:
        if row["bleu"] >= threshold:
            return f"{row['seconds'] / 60:.1f} (epoch {row['epoch']})"
    return "not reached"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bahdanau", "transformer"],
                        choices=["bahdanau", "transformer"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=0, help="fewer epochs (0: the preset's)")
    args = parser.parse_args()
    print(f"machine: {machine()}; revision {git_revision()}; seed {args.seed}")
    rows = []
    for model in args.models:
        figures = run(model, args.seed, args.epochs)
        print(f"{model}: held-out BLEU by epoch "
              + ", ".join(f"{row['epoch']}: {row['bleu']:.1f}" for row in figures["epochs"]),
              flush=True)
        rows.append([model, f"{figures['tokens_per_sec']:.0f}",
                     f"{figures['seconds'] / 60:.1f} ({figures['num_epochs']} epochs)",
                     f"{figures['epochs'][-1]['bleu']:.1f}"]
                    + [minutes_to(figures["epochs"], t) for t in THRESHOLDS])
    print_table(["model", "target tokens/s", "training minutes", "final held-out BLEU"]
                + [f"minutes to BLEU {t}" for t in THRESHOLDS], rows)


if __name__ == "__main__":
    main()
