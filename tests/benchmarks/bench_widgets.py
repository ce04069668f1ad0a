"""Benchmark 2a — widget latency in the kernel, for every control of every lesson's explorer.

    .venv/bin/python -m tests.benchmarks.bench_widgets [--changes 30] [--no-busy-core]
                                                       [--lessons 06 07 08] [--cpu]

For each control, sets >= 30 different values one after another and times each assignment: the
observer recomputes, updates the artists and renders the new picture before the assignment
returns, so this is "value set -> figure redrawn". Budgets: median <= 50 ms, p95 <= 100 ms,
the first visit of every value included (each explorer is built fresh, as a lesson builds it).

By default the budget is checked with the other core busy, as on a student's 2-core laptop with
something else running: a child process spins one core for the whole run and is stopped at the
end (``--no-busy-core`` measures an idle machine). (The browser side, key press -> visible
change, is bench_browser.py.)
"""

import argparse
import contextlib
import io
import itertools
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import numpy as np  # noqa: E402

from tests.benchmarks.common import git_revision, machine, print_table, summary_ms  # noqa: E402

MEDIAN_BUDGET_MS, P95_BUDGET_MS = 50.0, 100.0
# Typed into sentence boxes (lessons 4 and 7; lesson 8's prompt): the first time each is
# translated (read), then cached.
SENTENCES = ("go .", "i lost .", "he's calm .", "i'm home .", "i am cold .", "we won .")


def explorers():
    """(lesson, name, factory) for every explorer the lessons show, built as the lessons build them."""
    from utils.widgets.attention_cues import AttentionCuesExplorer
    from utils.widgets.attention_pooling import AttentionPoolingExplorer
    from utils.widgets.scoring_functions import MaskExplorer, ScaleExplorer
    yield "01", "AttentionCuesExplorer", AttentionCuesExplorer
    yield "02", "AttentionPoolingExplorer", AttentionPoolingExplorer
    yield "03", "MaskExplorer", MaskExplorer
    yield "03", "ScaleExplorer", ScaleExplorer
    yield from _later_lessons()


def _later_lessons():
    """The explorers of lessons 4-7, with the lessons' models (shipped, or from the model cache)."""
    from utils.seq2seq import BahdanauConfig, train_or_load_bahdanau
    from utils.transformer import TransformerConfig, causal_demo_runs, train_or_load_transformer
    from utils.widgets.bahdanau import AlignmentExplorer
    from utils.widgets.multihead import HeadsExplorer
    from utils.widgets.positional_encoding import PositionalEncodingExplorer
    from utils.widgets.transformer import CausalMaskExplorer, TransformerAttentionExplorer

    def alignment():
        config = BahdanauConfig()
        model, src_vocab, tgt_vocab, *_ = train_or_load_bahdanau(config, animate=False)
        return AlignmentExplorer(model, src_vocab, tgt_vocab, config.num_steps)

    def transformer_attention():
        config = TransformerConfig()
        model, src_vocab, tgt_vocab, *_ = train_or_load_transformer(config, animate=False,
                                                                    show_progress=False)
        return TransformerAttentionExplorer(model, src_vocab, tgt_vocab, config.num_steps)

    yield "04", "AlignmentExplorer", alignment
    yield "05", "HeadsExplorer", HeadsExplorer
    yield "06", "PositionalEncodingExplorer", PositionalEncodingExplorer
    yield "07", "TransformerAttentionExplorer", transformer_attention
    yield "07", "CausalMaskExplorer", lambda: CausalMaskExplorer(causal_demo_runs())
    yield from _lesson_8()


def _lesson_8():
    """Lesson 8's explorers, with its shipped language model and induction run."""
    from utils.induction import train_or_load_induction
    from utils.lm_training import train_or_load_language_model
    from utils.widgets.induction import InductionExplorer
    from utils.widgets.sampling import SamplingExplorer

    def sampling():
        model, vocab, *_ = train_or_load_language_model(animate=False, show_progress=False)
        return SamplingExplorer(model, vocab)

    yield "08", "SamplingExplorer", sampling
    yield "08", "InductionExplorer", lambda: InductionExplorer(train_or_load_induction()[0])


def control_values(control, count: int) -> list:
    """`count` values for a control, each different from the one before."""
    if isinstance(control, (widgets.Dropdown, widgets.SelectionSlider, widgets.ToggleButtons,
                            widgets.RadioButtons, widgets.Select)):
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        if isinstance(control.options, dict):
            options = list(control.options.values())
        values = options
    elif isinstance(control, (widgets.Checkbox, widgets.ToggleButton)):
        values = [not control.value, control.value]
    elif isinstance(control, widgets.FloatLogSlider):
        values = list(control.base ** np.linspace(control.min, control.max, 12))
    elif isinstance(control, widgets.IntRangeSlider):               # widen, then narrow
        low, high = control.value
        values = [(low, min(control.max, high + k * control.step)) for k in range(12)]
    elif isinstance(control, (widgets.IntSlider, widgets.BoundedIntText)):
        values = list(range(control.min, control.max + 1, max(control.step, 1)))
    elif isinstance(control, (widgets.FloatSlider, widgets.BoundedFloatText)):
        values = list(np.linspace(control.min, control.max, 12))
    elif isinstance(control, (widgets.Text, widgets.Textarea)):    # sentence boxes
        values = list(SENTENCES)
    else:
        raise TypeError(f"no benchmark values for {type(control).__name__}")
    # Walk back and forth so that consecutive values differ.
    cycle = values + values[-2:0:-1] if len(values) > 2 else values
    picked = list(itertools.islice(itertools.cycle(cycle), count + 1))
    return picked[1:] if picked[0] == control.value else picked[:count]


def time_control(explorer, name: str, count: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds (this thread's, ``time.thread_time``) of each of ``count`` changes."""
    control, times, cpu = explorer.controls[name], [], []
    for value in control_values(control, count):
        start, start_cpu = time.perf_counter(), time.thread_time()
        control.value = value
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    return times, cpu


@contextlib.contextmanager
def busy_core(enabled: bool = True):
    """A child process spinning one core while the block runs (nothing if not ``enabled``)."""
    if not enabled:
        print("busy core: off (--no-busy-core): the machine's own load only")
        yield
        return
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    print(f"busy core: started child process {child.pid} spinning one core for the whole run")
    try:
        time.sleep(0.5)                                  # let it reach the scheduler's steady state
        yield
    finally:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        print(f"busy core: stopped child process {child.pid}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--busy-core", action=argparse.BooleanOptionalAction, default=True,
                        help="keep one core busy with a child process while measuring "
                             "(default: on)")
    parser.add_argument("--lessons", nargs="*", default=None,
                        help="only these lessons' explorers, e.g. 06 07 (default: all)")
    parser.add_argument("--cpu", action="store_true",
                        help="also report the kernel thread's CPU time per change (less "
                             "sensitive to the machine's load than the wall time the budget "
                             "is checked on) and each explorer's build CPU time")
    args = parser.parse_args(argv)
    print(f"# Widget latency in the kernel (value set -> figure redrawn), {args.changes} changes "
          f"per control — {machine()} — rev {git_revision()}")
    with busy_core(args.busy_core):
        rows, misses = measure(args.changes, args.lessons, args.cpu)
    header = ["lesson", "explorer", "control", "median ms", "p95 ms", "budget"]
    if args.cpu:
        header += ["CPU median ms", "CPU p95 ms", "build CPU s"]
    print_table(header, rows)
    print(f"budget: median <= {MEDIAN_BUDGET_MS:.0f} ms and p95 <= {P95_BUDGET_MS:.0f} ms — "
          f"{len(rows) - misses} of {len(rows)} controls within"
          f"{', one core kept busy by a child process' if args.busy_core else ', no added load'}")
    return 0


def measure(changes: int, lessons=None, cpu: bool = False) -> tuple[list, int]:
    """Table rows (lesson, explorer, control, median, p95, verdict[, CPU median, CPU p95,
    build CPU]) and how many are over."""
    rows, misses = [], 0
    for lesson, name, factory in explorers():
        if lessons and lesson not in {f"{int(l):02d}" for l in lessons}:
            continue
        with contextlib.redirect_stdout(io.StringIO()):     # headless display() prints reprs
            start = time.thread_time()
            explorer = factory()
            build = time.thread_time() - start              # with the model's loading
        for control in explorer.controls:
            with contextlib.redirect_stdout(io.StringIO()):
                times, cpu_times = time_control(explorer, control, changes)
            median, p95 = summary_ms(times)
            ok = median <= MEDIAN_BUDGET_MS and p95 <= P95_BUDGET_MS
            misses += not ok
            rows.append([lesson, name, control, f"{median:.1f}", f"{p95:.1f}",
                         "ok" if ok else "OVER"])
            if cpu:
                rows[-1] += [*(f"{ms:.1f}" for ms in summary_ms(cpu_times)), f"{build:.2f}"]
    return rows, misses


if __name__ == "__main__":
    sys.exit(main())
