"""Shared helpers of the benchmark scripts: machine description, statistics, table printing."""

import os
import platform
import statistics
import subprocess


def machine() -> str:
    """One line: CPU model, cores, memory, load average, Python and torch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem_kb = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")))
        mem = f"{mem_kb / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        mem = "? GiB"
    import torch
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu}; {os.cpu_count()} cores; {mem}; load average {load}; "
            f"Python {platform.python_version()}; torch {torch.__version__} "
            f"({torch.get_num_threads()} threads)")


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(seconds: list[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return statistics.median(ms), percentile(ms, 95)


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths)) + " |"
    print(line(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print(line(row))


def git_revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
