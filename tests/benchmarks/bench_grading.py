"""Benchmark 5 — grading throughput: one chapter's class graded with 1 and with 2 workers.

    .venv/bin/python -m tests.benchmarks.bench_grading [--students 30] [--chapter 01]

Builds a class from the released student notebook (every third student answers with the
instructor's solutions, the others hand in the untouched student version or a wrong answer),
then times `python -m utils.grading autograde --workers N --force` on the same submissions in
fresh course directories. Prints submissions per minute, the speed-up, and checks that both runs
export the same grade table.
"""

import argparse
import os
import pathlib
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
        nbformat.write(kinds[index % 3], inbox / f"student{index:02d}.ipynb")


def grade(chapter: str, assignment: str, inbox: pathlib.Path, course: pathlib.Path,
          workers: int) -> tuple[float, str]:
    run_cli("release", "--chapter", chapter, course=course)
    run_cli("collect", str(inbox), "--chapter", assignment, course=course)
    start = time.perf_counter()
    run_cli("autograde", "--chapter", chapter, "--workers", str(workers), "--force", course=course)
    seconds = time.perf_counter() - start
    table = course / "grades.csv"
    run_cli("export", "--chapter", chapter, "--to", str(table), course=course)
    return seconds, table.read_text()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--chapter", default="01")
    args = parser.parse_args(argv)
    chapter_dir = next((REPO / "chapters").glob(f"{args.chapter}_*"))
    assignment = chapter_dir.name
    print(f"# Grading throughput, {args.students} submissions of {assignment} — {machine()} — "
          f"rev {git_revision()}")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = pathlib.Path(tmp)
        run_cli("release", "--chapter", args.chapter, course=tmp / "seed")
        build_class(chapter_dir, tmp / "seed" / "release" / assignment / "exercises.ipynb",
                    tmp / "inbox", args.students)
        results = {n: grade(args.chapter, assignment, tmp / "inbox", tmp / f"course{n}", n)
                   for n in (1, 2)}
    rows = [[n, f"{s:.1f}", f"{args.students / s * 60:.1f}"] for n, (s, _) in results.items()]
    print_table(["workers", "wall s", "submissions / min"], rows)
    speedup = results[1][0] / results[2][0]
    same = results[1][1] == results[2][1]
    print(f"speed-up with 2 workers: {speedup:.2f}x; grade tables identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
