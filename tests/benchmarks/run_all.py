"""Run every benchmark, one after another: `make bench` (or `python -m tests.benchmarks.run_all`).

Each benchmark also runs on its own: `python -m tests.benchmarks.bench_<name> --help`.
"""

import subprocess
import sys

BENCHMARKS = ["bench_course", "bench_widgets", "bench_browser", "bench_training", "bench_heldout",
              "bench_attention", "bench_grading", "bench_language_model",
              "bench_induction", "bench_alignment", "bench_kv_cache"]


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"\n===== {name} =====", flush=True)
        if subprocess.run([sys.executable, "-m", f"tests.benchmarks.{name}"]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that failed to run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
