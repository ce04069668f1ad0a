"""A deadline missed because other processes held the CPU is not the student's doing.

A student's cell that spins past its deadline on a free CPU, or sleeps past it, is charged. The
same cell pinned to one CPU beside four spinning processes that are not the student's (each in its
own session, as the kernel's autogroups share a CPU between sessions) misses the deadline while
waiting for that CPU: the sandbox marks the death foreign ("starved of CPU"), so
the worker grades the whole submission again (tests/test_grading_faults.py covers that regrade
for deaths by signal; utils.grading.worker treats every foreign death alike).
"""

import os
import subprocess
import sys
import time

import pytest

from utils.grading.sandbox import Limits, Sandbox, _starved

DEADLINE = 2.0                        # seconds the cell may run


def run_past_deadline(source: str, pin: bool = False, spinners: int = 0) -> Sandbox:
    """Run ``source`` in an unsandboxed student process until its deadline; the sandbox."""
    sandbox = Sandbox(Limits(), sandboxed=False)
    hogs = []
    try:
        sandbox.wait_ready()
        cpu = min(os.sched_getaffinity(0))
        if pin:
            for pid in sandbox._student_pids():
                for task in os.listdir(f"/proc/{pid}/task"):        # every thread
                    os.sched_setaffinity(int(task), {cpu})
        for _ in range(spinners):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                   start_new_session=True)    # own scheduling group each
            os.sched_setaffinity(hog.pid, {cpu})
            hogs.append(hog)
        with pytest.raises(TimeoutError):
            sandbox.request({"op": "run", "source": source, "label": "cell"},
                            deadline=time.monotonic() + DEADLINE)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        sandbox.close()
    return sandbox


def test_a_cell_starved_by_other_processes_is_not_charged():
    sandbox = run_past_deadline("while True: pass", pin=True, spinners=4)
    assert sandbox.foreign == "starved of CPU"
    assert "other processes held the CPU" in sandbox.death


@pytest.mark.parametrize("source", ["import time; time.sleep(60)"])
def test_a_cell_that_sleeps_past_its_deadline_is_charged(source):
    """(A spinning cell is charged too, on a free CPU; but `make test` keeps both cores busy, so
    here it may truly be starved: the rule's spinning case is the (1.9, 0.1) row below.)"""
    sandbox = run_past_deadline(source)
    assert sandbox.foreign is None
    assert sandbox.death == "the student's code did not finish in time and was stopped"


@pytest.mark.parametrize("ran, waited, starved", [
    (0.2, 1.8, True),                 # mostly waiting for a CPU
    (1.9, 0.1, False),                # spinning on a free CPU
    (0.0, 0.0, False),                # sleeping
    (1.5, 1.5, False),                # a fork bomb: its processes ran a lot, waited a lot
])
def test_starvation_needs_little_cpu_and_long_waits(ran, waited, starved):
    assert _starved((0.0, 0.0), (ran, waited), wall=2.0) is starved
