"""Benchmark — does attention align words? Lesson 4's models and IBM Model 1 side by side.

    .venv/bin/python -m tests.benchmarks.bench_alignment [--retrain]

For each of lesson 4's translation models (same data, sizes and budget: ``LESSON_BAHDANAU``'s;
``LESSON_ALIGNED`` adds the guided-alignment loss)
prints, on the course's hand-aligned gold set (``assets/alignment/gold.txt``), the top-1 accuracy
and AER of its teacher-forced attention over English words, top-1 "as drawn" (punctuation and
<eos> counted), sharpness, its held-out corpus sacreBLEU on the README's split, and its training
time; then IBM Model 1 (10 EM iterations on the same training pairs, timed here).

Without ``--retrain`` the shipped models are loaded and their training time is the one recorded
when they were trained (one thread; the machine that made them). ``--retrain`` trains each model
from scratch here, in a fresh process, on one thread (about 5-8 minutes each on a 2-core machine).
"""

import argparse
import json
import subprocess
import sys
import time

from tests.benchmarks.common import git_revision, machine, print_table

MODELS = (("the book's model (one-directional encoder)", "LESSON_BOOK_DECODER"),
          ("paper's bidirectional annotations, book decoder", "LESSON_PAPER_ENCODER"),
          ("bidirectional, query reads y(t-1) first (main)", "LESSON_BAHDANAU"),
          ("main + guided alignment (the explorer's)", "LESSON_ALIGNED"),
          ("same encoder, no attention (baseline)", "LESSON_NO_ATTENTION"))

CHILD = r"""
import json, sys
from utils import seq2seq
from utils.alignment import score_model
from utils.gold_alignment import load_gold
from utils.training import heldout_bleu
config = getattr(seq2seq, sys.argv[1])
if sys.argv[2] == "retrain":
    model, src_vocab, tgt_vocab, result = seq2seq.train_bahdanau(config, animate=False,
                                                                 show_progress=False)
    origin = "trained here"
else:
    model, src_vocab, tgt_vocab, result, file, from_cache = seq2seq.train_or_load_bahdanau(
        config, animate=False, show_progress=False)
    origin = f"recorded ({file.name})" if from_cache else "trained here (nothing shipped)"
row = {"seconds": result.seconds, "origin": origin}
bleu, _ = heldout_bleu(model, src_vocab, tgt_vocab, config.num_steps)
row["bleu"] = bleu.score
if config.attention:
    gold = load_gold()
    words, drawn = score_model(model, src_vocab, tgt_vocab, gold), score_model(
        model, src_vocab, tgt_vocab, gold, as_drawn=True)
    row.update(top1=words.top1, aer=words.aer, drawn=drawn.top1, sharpness=words.sharpness,
               words=words.words, pairs=words.pairs)
print(json.dumps(row))
"""


def run_child(preset: str, retrain: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, preset, "retrain" if retrain else "load"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{preset}: failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def model1_row() -> dict:
    from utils.alignment import model1_maps, score_maps, train_model1_on
    from utils.gold_alignment import load_gold
    from utils.seq2seq import LESSON_BAHDANAU

    start = time.perf_counter()
    model1 = train_model1_on(LESSON_BAHDANAU)
    seconds = time.perf_counter() - start
    gold = load_gold()
    score = score_maps(model1_maps(model1, gold), gold)
    return {"top1": score.top1, "aer": score.aer, "sharpness": score.sharpness,
            "seconds": seconds, "origin": "trained here (10 EM iterations, data read included)",
            "words": score.words, "pairs": score.pairs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retrain", action="store_true",
                        help="train every model here instead of loading the shipped ones")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}\nrevision: {git_revision()}")
    rows, scored = [], None
    for label, preset in MODELS:
        row = run_child(preset, args.retrain)
        scored = scored or (row.get("words"), row.get("pairs"))
        fmt = (lambda key: f"{row[key]:.2f}" if key in row else "—")
        rows.append([label, fmt("top1"), fmt("aer"), fmt("drawn"), fmt("sharpness"),
                     f"{row['bleu']:.1f}", f"{row['seconds'] / 60:.1f} min ({row['origin']})"])
    ibm = model1_row()
    rows.append(["IBM Model 1 (Brown et al. 1993)", f"{ibm['top1']:.2f}", f"{ibm['aer']:.2f}",
                 "—", f"{ibm['sharpness']:.2f}", "—", f"{ibm['seconds']:.1f} s ({ibm['origin']})"])
    print(f"\ngold set: {scored[1]} pairs, {scored[0]} scored French words; held-out BLEU: corpus "
          f"sacreBLEU on the held-out split (utils.heldout)")
    print_table(["model", "top-1", "AER", "top-1 as drawn", "sharpness", "held-out BLEU",
                 "training time"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
