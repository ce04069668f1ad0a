"""Benchmark 3 — training throughput against the book's reference loop (d2l as an oracle).

    .venv/bin/python -m tests.benchmarks.bench_training [--epochs N] [--models bahdanau transformer]

For the lesson-4 (Bahdanau) and lesson-7 (Transformer) models: the same model, data, seed and
CPU settings (one intra-op thread each), trained once by our `utils.seq2seq.train_seq2seq` and
once by `d2l.train_seq2seq` of d2l 0.17.6 (the Chinese edition's API the lessons follow). Each run
is a fresh process. Prints wall time, target tokens per second over the whole run, the final loss
and the BLEU of the four test sentences (decoded the same way for both). Goal: >= 1.2x d2l's
tokens/s at equal or better BLEU.

d2l 0.17.6 is installed on first use with `pip install --no-deps --target .venv/oracles/...`; its
torchvision import gets an empty stand-in (no torchvision build loads against this CPU torch).
"""

import argparse
import json
import pathlib
import subprocess
import sys

from tests.benchmarks.common import git_revision, machine, print_table

REPO = pathlib.Path(__file__).resolve().parents[2]
D2L_VERSION = "0.17.6"
D2L_DIR = REPO / ".venv" / "oracles" / f"d2l-{D2L_VERSION}"
SENTENCES = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")]
GOAL = 1.2

# One training run, in a fresh interpreter: prints one JSON line.
CHILD = r"""
import json, sys, time, types
model_name, loop, epochs, d2l_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
import torch
torch.set_num_threads(1)
from utils.bleu import bleu
from utils.reproducibility import set_seed
from utils.training import greedy_translate, train_seq2seq
if model_name == "bahdanau":
    from utils.seq2seq import BahdanauConfig as Config, build_bahdanau as build
    from utils.training import training_data as data
else:
    from utils.transformer import TransformerConfig as Config, build_transformer as build, transformer_data as data
config = Config(num_epochs=epochs) if epochs else Config()
set_seed(config.seed)
data_iter, src_vocab, tgt_vocab = data(config)
model = build(config, src_vocab, tgt_vocab)
tokens_per_epoch = sum(int(batch[3].sum()) for batch in data_iter)
start = time.perf_counter()
if loop == "ours":
    result = train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab, "cpu",
                           animate=False, show_progress=False, num_threads=1)   # as d2l's below
    loss = result.book_loss
else:
    for name in ("torchvision", "torchvision.transforms"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
    import matplotlib; matplotlib.use("Agg")
    sys.path.insert(0, d2l_dir)
    import io, contextlib
    from d2l import torch as d2l
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        d2l.train_seq2seq(model, data_iter, config.lr, config.num_epochs, tgt_vocab, "cpu")
    loss = float(out.getvalue().strip().splitlines()[-1].split(",")[0].split()[-1])
seconds = time.perf_counter() - start
model.eval()
scores = []
for eng, fra in json.loads(sys.argv[5]):
    scores.append(bleu(greedy_translate(model, eng, src_vocab, tgt_vocab, config.num_steps).text, fra))
print(json.dumps({"seconds": seconds, "tokens_per_sec": tokens_per_epoch * config.num_epochs / seconds,
                  "loss": loss, "bleu": scores, "epochs": config.num_epochs}))
"""


def ensure_d2l() -> None:
    if (D2L_DIR / "d2l" / "torch.py").is_file():
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(D2L_DIR), f"d2l=={D2L_VERSION}"], check=True)


def run(model: str, loop: str, epochs: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, model, loop, str(epochs), str(D2L_DIR),
                          json.dumps(SENTENCES)], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{model}/{loop} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=0, help="0: the lessons' settings")
    parser.add_argument("--models", nargs="+", default=["bahdanau", "transformer"])
    args = parser.parse_args(argv)
    ensure_d2l()
    print(f"# Training throughput, ours vs d2l {D2L_VERSION} train_seq2seq — {machine()} — "
          f"rev {git_revision()}")
    rows, verdicts = [], []
    for model in args.models:
        results = {loop: run(model, loop, args.epochs) for loop in ("d2l", "ours")}
        for loop, r in results.items():
            rows.append([model, loop, r["epochs"], f"{r['seconds']:.1f}", f"{r['tokens_per_sec']:.0f}",
                         f"{r['loss']:.3f}", " ".join(f"{b:.2f}" for b in r["bleu"]),
                         f"{sum(r['bleu']) / len(r['bleu']):.3f}"])
        ratio = results["ours"]["tokens_per_sec"] / results["d2l"]["tokens_per_sec"]
        bleu_ok = sum(results["ours"]["bleu"]) >= sum(results["d2l"]["bleu"])
        verdicts.append(f"{model}: {ratio:.2f}x d2l's tokens/s (goal >= {GOAL}x), mean BLEU "
                        f"{'equal or better' if bleu_ok else 'LOWER'} — "
                        f"{'met' if ratio >= GOAL and bleu_ok else 'NOT met'}")
    print_table(["model", "loop", "epochs", "wall s", "tokens/s", "loss (book's)",
                 "BLEU of the 4 sentences", "mean BLEU"], rows)
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
