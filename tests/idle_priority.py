"""A pytest plugin that runs the whole pytest process (and its children) on CPU time nobody
else wants: Linux's ``SCHED_IDLE`` policy, or the lowest ``nice`` priority where that policy is
missing. ``make test`` loads it (``-p tests.idle_priority``) for lane 3, the two book-sized
trainings: they then fill the moments when lanes 1 and 2 leave a core idle (a browser loading,
a sandbox starting, a disk write) and step aside whenever the lanes want both cores, so the
lanes' timing-sensitive tests see no extra load. Their results do not depend on the schedule."""

import os

try:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    POLICY = "SCHED_IDLE"
except (AttributeError, OSError):
    os.nice(19)
    POLICY = "nice 19"


def pytest_report_header(config):
    return f"CPU priority: {POLICY} (tests/idle_priority.py)"
