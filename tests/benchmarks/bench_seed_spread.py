"""Benchmark 8 — how much the book-sized models of lessons 4 and 7 depend on the seed.

    .venv/bin/python -m tests.benchmarks.bench_seed_spread [--models bahdanau transformer]
                                                           [--seeds 0 1 2 3 4]

Trains the book's 600-pair setting (``BahdanauConfig()``, ``TransformerConfig()``) once per seed
(models already in the model cache are loaded, not trained again) and prints, per seed, the
book's BLEU of the four test sentences of the lessons and the corpus sacreBLEU on the held-out
sentences the model never saw, then the median and range over the seeds. The lessons quote
this table for the seeds they do not train themselves.
"""

import argparse
import dataclasses
import statistics

from tests.benchmarks.common import git_revision, machine, print_table

SENTENCES = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")]


def score(name: str, seed: int) -> tuple[float, float, str]:
    from utils.bleu import bleu
    from utils.seq2seq import BahdanauConfig, train_or_load_bahdanau
    from utils.training import greedy_translate, heldout_bleu, training_pairs
    from utils.transformer import TransformerConfig, train_or_load_transformer

    if name == "bahdanau":
        config = dataclasses.replace(BahdanauConfig(), seed=seed)
        model, src, tgt, *_ = train_or_load_bahdanau(config, animate=False, show_progress=False)
    else:
        config = dataclasses.replace(TransformerConfig(), seed=seed)
        model, src, tgt, *_ = train_or_load_transformer(config, animate=False,
                                                        show_progress=False)
    texts = [greedy_translate(model, english, src, tgt, config.num_steps).text
             for english, _ in SENTENCES]
    four = statistics.mean(bleu(text, french) for text, (_, french) in zip(texts, SENTENCES))
    heldout, _ = heldout_bleu(model, src, tgt, config.num_steps,
                              trained_on=training_pairs(config))
    return four, heldout.score, " | ".join(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bahdanau", "transformer"],
                        choices=["bahdanau", "transformer"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    print(f"machine: {machine()}; revision {git_revision()}")
    for name in args.models:
        rows, fours, heldouts = [], [], []
        for seed in args.seeds:
            four, heldout, texts = score(name, seed)
            fours.append(four)
            heldouts.append(heldout)
            rows.append([seed, f"{four:.3f}", f"{heldout:.1f}", texts])
            print(f"{name} seed {seed} done", flush=True)
        rows.append(["median", f"{statistics.median(fours):.3f}",
                     f"{statistics.median(heldouts):.1f}",
                     f"range {min(fours):.3f}-{max(fours):.3f}, "
                     f"held-out {min(heldouts):.1f}-{max(heldouts):.1f}"])
        print(f"\n{name}, book setting (600 pairs)")
        print_table(["seed", "mean BLEU of the 4 sentences (book's)", "held-out corpus BLEU",
                     "translations"], rows)


if __name__ == "__main__":
    main()
