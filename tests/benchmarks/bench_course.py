"""Benchmark 1 — course run time: every lesson executed headless as nbval runs it.

    .venv/bin/python -m tests.benchmarks.bench_course [chapters/01_*/lesson.ipynb ...]

Runs `pytest --nbval` on one lesson at a time (a fresh kernel each, as in `make test`) and prints
wall time per lesson, the total, and the peak resident memory of the kernel process tree.
Budget (issue 35): each lesson <= 30 s, the course <= 120 s, on 2 CPU cores.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

from tests.benchmarks.common import git_revision, machine, print_table
from tests.conftest import SESSION_DIRS

REPO = pathlib.Path(__file__).resolve().parents[2]
BUDGET_S = 120
LESSON_BUDGET_S = 30


def run_lesson(path: pathlib.Path, env: dict) -> tuple[float, float, bool]:
    """(wall seconds, peak RSS MiB of the pytest process and its kernel, passed)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.quick_imports", str(path), "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-q", "-p", "no:cacheprovider"]
    # A wrapper process per lesson, so RUSAGE_CHILDREN of the wrapper covers this lesson only.
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "rc = subprocess.run(sys.argv[1:], capture_output=True).returncode; "
               "print(time.perf_counter() - t, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)")
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], cwd=REPO, capture_output=True,
                         text=True, check=True, env=env).stdout.split()
    wall, maxrss_kb, rc = float(out[0]), int(out[1]), int(out[2])
    return wall, maxrss_kb / 1024, rc == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    lessons = args.lessons or sorted((REPO / "chapters").glob("*/lesson.ipynb"))
    print(f"# Course run time (nbval, one kernel per lesson) — {machine()} — rev {git_revision()}")
    rows, total, peak, ok, lesson_walls = [], 0.0, 0.0, True, {}
    # Byte-compiled first, as `make test` does: on a machine that sets PYTHONDONTWRITEBYTECODE
    # (this project's do) each lesson's kernel would otherwise compile the course's modules
    # again, about 0.1 s a lesson that a student's machine (which keeps .pyc files) never pays.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "utils", "tests"],
                   cwd=REPO, check=True, capture_output=True)
    # One matplotlib font cache and one course cache for all lessons, as in one `make test`
    # session or a student's JupyterLab: otherwise each lesson's pytest makes its own
    # (tests/conftest.py) and rebuilds matplotlib's font list, about 0.6 s a lesson.
    with tempfile.TemporaryDirectory(prefix="bench-course-") as session:
        env = dict(os.environ)
        for variable in SESSION_DIRS:
            env.setdefault(variable, tempfile.mkdtemp(dir=session))
        for lesson in lessons:
            wall, rss, passed = run_lesson(lesson, env)
            total, peak, ok = total + wall, max(peak, rss), ok and passed
            lesson_walls[lesson.parent.name] = wall
            rows.append([lesson.parent.name, f"{wall:.1f}", f"{rss:.0f}", "pass" if passed else "FAIL"])
    rows.append(["total", f"{total:.1f}", f"{peak:.0f}", "pass" if ok else "FAIL"])
    print_table(["lesson", "wall s", "peak RSS MiB (largest process)", "nbval"], rows)
    verdict = "within" if total <= BUDGET_S else "OVER"
    print(f"budget: total {total:.0f} s vs {BUDGET_S} s — {verdict} budget")
    over = [name for name, wall in lesson_walls.items() if wall > LESSON_BUDGET_S]
    print(f"lessons over {LESSON_BUDGET_S} s: {', '.join(over) if over else 'none'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
