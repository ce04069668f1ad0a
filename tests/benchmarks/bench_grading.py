"""Benchmark 5 — grading throughput: one chapter's class graded with 1 and with 2 workers.

    .venv/bin/python -m tests.benchmarks.bench_grading [--students 30 [120 ...]] [--chapter 01]
                                                       [--repeat 3]

Builds a class from the released student notebook (every third student answers with the
instructor's solutions, the others hand in the untouched student version or a wrong answer),
then times `python -m utils.grading autograde --workers N --force` on the same submissions in
fresh course directories, the whole command (start-up included) as an instructor runs it. Each
pool size runs ``--repeat`` times in turns (1 worker, 2 workers, 1, 2, ...). Prints submissions
per minute (median and range), CPU seconds per submission (the processes it reaped), how many
cores grading used on average and how many the whole machine kept busy meanwhile (/proc/stat:
when the second is near all cores but the first is well below, other work held the CPU and the
wall times say little), the speed-up (of the medians, and run by run), and checks that every run
exports the same grade table. With two class sizes it also prints the cost of one more
submission (the difference of the two runs), which is what a large class pays. Last it measures
how much this machine's second core adds to the first for a plain CPU-bound loop: the ceiling of
any 2-worker speed-up here.
"""

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat

from tests.benchmarks.common import git_revision, machine, print_table

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_cli(*args, course: pathlib.Path) -> None:
    env = dict(os.environ, ATTENTION_COURSE_GRADING_DIR=str(course))
    subprocess.run([sys.executable, "-m", "utils.grading", *args, "--quiet"], cwd=REPO, env=env,
                   check=True, capture_output=True, text=True)


def build_class(chapter_dir: pathlib.Path, released: pathlib.Path, inbox: pathlib.Path,
                students: int) -> None:
    instructor = nbformat.read(chapter_dir / "exercises.ipynb", as_version=4)
    student = nbformat.read(released, as_version=4)
    wrong = nbformat.from_dict(nbformat.reads(nbformat.writes(student), as_version=4))
    for cell in wrong.cells:          # answers that run but are wrong: every function returns 0
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = cell.source.replace("raise NotImplementedError()", "return 0")
    kinds = [instructor, student, wrong]
    inbox.mkdir(parents=True)
    for index in range(students):
        nbformat.write(kinds[index % 3], inbox / f"student{index:03d}.ipynb")


def _machine_ticks() -> tuple:
    """(all, idle) CPU ticks of the whole machine since boot, from /proc/stat (Linux)."""
    fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]                  # idle + iowait


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade(chapter: str, assignment: str, inbox: pathlib.Path, course: pathlib.Path,
          workers: int) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of every process, exported grade table)."""
    run_cli("release", "--chapter", chapter, course=course)
    run_cli("collect", str(inbox), "--chapter", assignment, course=course)
    cpu, ticks, start = _children_cpu(), _machine_ticks(), time.perf_counter()
    timings = course / "timings.json"
    run_cli("autograde", "--chapter", chapter, "--workers", str(workers), "--force",
            "--timings", str(timings), course=course)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    (total, idle), (total0, idle0) = _machine_ticks(), ticks
    busy = 1 - (idle - idle0) / max(total - total0, 1)            # share of all cores in use
    table = course / "grades.csv"
    run_cli("export", "--chapter", chapter, "--to", str(table), course=course)
    phases = [p for per_student in json.loads(timings.read_text()).values()
              for p in per_student.values()]
    return seconds, cpu, table.read_text(), phases, busy


PHASES = ("grade", "grade_cpu", "record", "record_cpu")


def phase_medians(phases: list) -> list:
    """Median seconds of each phase over the graded submissions."""
    return [f"{statistics.median(p[name] for p in phases):.3f}" if phases else "-"
            for name in PHASES]


SPIN = ("import time\nstart = time.perf_counter()\ntotal = 0\n"
        "for i in range({n}): total += i\nprint(time.perf_counter() - start)")


def core_scaling(tries: int = 5, loops: int = 10_000_000) -> tuple[float, float, float]:
    """How much work two cores do at once against one, for the same CPU-bound loop (pure
    Python; each copy times its own loop, not its interpreter's start): (median, lowest,
    highest) over ``tries``, each one copy alone and then two copies at once. 2.0 means the
    second core adds a whole core; on shared or virtual machines two busy cores slow each
    other, which caps any 2-worker speed-up."""
    code = SPIN.format(n=loops)

    def spin(copies: int) -> float:
        processes = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                      text=True) for _ in range(copies)]
        return max(float(process.communicate()[0]) for process in processes)

    ratios = [2 * spin(1) / spin(2) for _ in range(tries)]
    return statistics.median(ratios), min(ratios), max(ratios)


def spread(values: list) -> str:
    """Median and range of a few figures, e.g. '161.5 (155.0-170.2)'."""
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[30])
    parser.add_argument("--chapter", default="01")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each pool size, in turns (1, 2, 1, 2, ...); default 3")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    chapter_dir = next((REPO / "chapters").glob(f"{args.chapter}_*"))
    assignment = chapter_dir.name
    print(f"# Grading throughput, {' and '.join(map(str, args.students))} submissions of "
          f"{assignment}, {args.repeat} run(s) of each pool size in turns — {machine()} — "
          f"rev {git_revision()}")
    runs, tables = {}, set()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = pathlib.Path(tmp)
        run_cli("release", "--chapter", args.chapter, course=tmp / "seed")
        released = tmp / "seed" / "release" / assignment / "exercises.ipynb"
        for size in args.students:
            build_class(chapter_dir, released, tmp / f"inbox{size}", size)
            for turn in range(args.repeat):
                for workers in (1, 2):
                    run = grade(args.chapter, assignment, tmp / f"inbox{size}",
                                tmp / f"course{size}-{workers}-{turn}", workers)
                    runs.setdefault((size, workers), []).append(run)
                    tables.add((size, run[2]))
        scaling = core_scaling()
    same = len(tables) == len(args.students)
    cores = os.cpu_count() or 1
    rows = []
    for (size, workers), group in runs.items():
        walls = [wall for wall, *_ in group]
        rows.append([size, workers, spread(walls), spread([size / w * 60 for w in walls]),
                     f"{statistics.median(cpu / size for _, cpu, *_ in group):.2f}",
                     f"{statistics.median(cpu / wall for wall, cpu, *_ in group):.2f}",
                     f"{statistics.median(busy for *_, busy in group) * cores:.2f} of {cores}"])
    print_table(["students", "workers", "wall s (start-up included; median, range)",
                 "submissions / min (median, range)", "CPU s / submission (reaped processes)",
                 "cores used by grading (CPU / wall)", "cores busy (whole machine)"], rows)
    print("\nInside a worker, per submission (median seconds over all runs): grading (sandbox "
          "and tests, wall; the worker's own CPU), then recording in the gradebook (wall; CPU)")
    print_table(["students", "workers", *PHASES],
                [[size, workers, *phase_medians([p for run in group for p in run[3]])]
                 for (size, workers), group in runs.items()])
    for size in args.students:
        pairs = [one[0] / two[0] for one, two in zip(runs[size, 1], runs[size, 2])]
        ratio = (statistics.median(w for w, *_ in runs[size, 1])
                 / statistics.median(w for w, *_ in runs[size, 2]))
        print(f"{size} students: speed-up with 2 workers {ratio:.2f}x (medians); run by run "
              f"in turns: {', '.join(f'{r:.2f}x' for r in pairs)}")
    if len(args.students) > 1:
        small, large = min(args.students), max(args.students)
        for workers in (1, 2):
            walls = {size: statistics.median(w for w, *_ in runs[size, workers])
                     for size in (small, large)}
            extra = (walls[large] - walls[small]) / (large - small)
            print(f"{workers} worker(s): each further submission {extra:.3f} s "
                  f"({60 / extra:.0f} / min); start-up {walls[small] - small * extra:.1f} s")
    print(f"this machine's own 2-core scaling (a CPU-bound loop, two copies at once against "
          f"one; 2.00 would be a whole second core): {scaling[0]:.2f}x "
          f"({scaling[1]:.2f}-{scaling[2]:.2f})")
    print(f"grade tables identical in every run, with 1 and 2 workers: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
