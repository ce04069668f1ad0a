"""Benchmark 5 — grading throughput: one chapter's class graded with 1 and with 2 workers.

    .venv/bin/python -m tests.benchmarks.bench_grading [--students 30 [120 ...]] [--chapter 01]

Builds a class from the released student notebook (every third student answers with the
instructor's solutions, the others hand in the untouched student version or a wrong answer),
then times `python -m utils.grading autograde --workers N --force` on the same submissions in
fresh course directories, the whole command (start-up included) as an instructor runs it. Prints
submissions per minute, CPU seconds per submission (the processes it reaped), how many cores
grading used on average and how many the whole machine kept busy meanwhile (/proc/stat: when
the second is near all cores but the first is well below, other work held the CPU and the wall
times say little), the speed-up, and checks
that both runs export the same grade table. With two class sizes it also prints the cost of one
more submission (the difference of the two runs), which is what a large class pays.
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[30])
    parser.add_argument("--chapter", default="01")
    args = parser.parse_args(argv)
    chapter_dir = next((REPO / "chapters").glob(f"{args.chapter}_*"))
    assignment = chapter_dir.name
    print(f"# Grading throughput, {' and '.join(map(str, args.students))} submissions of "
          f"{assignment} — {machine()} — rev {git_revision()}")
    results, same = {}, True
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = pathlib.Path(tmp)
        run_cli("release", "--chapter", args.chapter, course=tmp / "seed")
        released = tmp / "seed" / "release" / assignment / "exercises.ipynb"
        for size in args.students:
            build_class(chapter_dir, released, tmp / f"inbox{size}", size)
            for workers in (1, 2):
                results[size, workers] = grade(args.chapter, assignment, tmp / f"inbox{size}",
                                               tmp / f"course{size}-{workers}", workers)
            same = same and results[size, 1][2] == results[size, 2][2]
    cores = os.cpu_count() or 1
    rows = [[size, workers, f"{wall:.1f}", f"{size / wall * 60:.1f}", f"{cpu / size:.2f}",
             f"{cpu / wall:.2f}", f"{busy * cores:.2f} of {cores}"]
            for (size, workers), (wall, cpu, _, _, busy) in results.items()]
    print_table(["students", "workers", "wall s (start-up included)", "submissions / min",
                 "CPU s / submission (reaped processes)", "cores used by grading (CPU / wall)",
                 "cores busy (whole machine)"], rows)
    print("\nInside a worker, per submission (median seconds): grading (sandbox and tests, wall; "
          "the worker's own CPU), then recording in the gradebook (wall; CPU)")
    print_table(["students", "workers", *PHASES],
                [[size, workers, *phase_medians(phases)]
                 for (size, workers), (_, _, _, phases, _) in results.items()])
    for size in args.students:
        print(f"{size} students: speed-up with 2 workers "
              f"{results[size, 1][0] / results[size, 2][0]:.2f}x")
    if len(args.students) > 1:
        small, large = min(args.students), max(args.students)
        for workers in (1, 2):
            extra = ((results[large, workers][0] - results[small, workers][0])
                     / (large - small))
            print(f"{workers} worker(s): each further submission {extra:.3f} s "
                  f"({60 / extra:.0f} / min); start-up "
                  f"{results[small, workers][0] - small * extra:.1f} s")
    print(f"grade tables identical with 1 and 2 workers: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
