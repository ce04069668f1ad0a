"""A grading worker: grades submissions one after the other for ``utils.grading.autograde``.

Run as ``python -m utils.grading.worker``; it reads one JSON job per line on stdin and answers
one JSON line per job on its own copy of stdout. A job names the submitted notebook, the
trusted source and release notebooks, where to write the graded notebook, and the limits.
The worker never writes to the gradebook: the parent process does, one submission at a time.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import sys
import time
import traceback

import nbformat

from utils.grading import GRADING_ENV_VAR
from utils.grading.evaluate import NotebookGrader, add_notes, mark_unreadable
from utils.grading.normalize import normalize
from utils.grading.sandbox import Limits, Sandbox, SandboxDied


@dataclasses.dataclass
class Job:
    student: str
    assignment: str
    submission: str                   # path of the submitted notebook
    source: str                       # <course>/source/<assignment>/exercises.ipynb
    release: str                      # <course>/release/<assignment>/exercises.ipynb
    output: str                       # where the graded notebook goes
    slot: int = 0
    cell_timeout: float = 30
    notebook_timeout: float = 600
    sandboxed: bool = True
    extra_read_only: tuple = ()
    limits: dict = dataclasses.field(default_factory=dict)


class SpareSandbox:
    """The next submission's sandbox, started while this one is graded (it hides the
    seconds torch needs to import). A spare never ran student code; each is used once."""

    def __init__(self):
        self.key, self.sandbox = None, None

    def start(self, key, factory) -> None:
        self.discard()
        try:
            self.key, self.sandbox = key, factory()
        except Exception:                          # noqa: BLE001 - the job starts its own
            self.sandbox = None

    def take(self, key):
        """The spare for ``key`` if there is a healthy one, else None."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None and (self.key != key or sandbox.death):
            sandbox.close()
            sandbox = None
        return sandbox

    def discard(self) -> None:
        sandbox = self.take(None)
        if sandbox is not None:
            sandbox.close()


SPARE = SpareSandbox()


def grade(job: Job) -> dict:
    """Grade one submission; the result says 'graded' (with notes) or 'failed' (with why)."""
    started = time.monotonic()
    raw = pathlib.Path(job.submission).read_bytes()
    source_nb = nbformat.read(job.source, as_version=4)
    release_nb = nbformat.read(job.release, as_version=4)
    nb, notes, unreadable = normalize(raw, source_nb, release_nb)
    limits = Limits(**job.limits)

    key = (job.slot, job.sandboxed, tuple(job.extra_read_only), json.dumps(job.limits))

    def new_sandbox():
        return Sandbox(limits, slot=job.slot, sandboxed=job.sandboxed,
                       extra_read_only=job.extra_read_only)

    def make_sandbox():
        sandbox = SPARE.take(key) or new_sandbox()
        SPARE.start(key, new_sandbox)                # warm up the next one meanwhile
        return sandbox

    if unreadable:
        mark_unreadable(nb, unreadable)
    else:
        grader = NotebookGrader(make_sandbox, job.cell_timeout, job.notebook_timeout)
        try:
            notes += grader.grade(nb)
        except SandboxDied as error:          # before any student code ran: not their fault
            return {"status": "failed", "student": job.student, "reason": str(error)}
    add_notes(nb, notes)
    output = pathlib.Path(job.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, output)
    return {"status": "graded", "student": job.student, "notes": notes,
            "submission_sha256": hashlib.sha256(raw).hexdigest(),
            "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    os.environ[GRADING_ENV_VAR] = "1"         # locked cells here skip their demos too
    # Results go to a private copy of stdout; anything else printed goes to stderr.
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import torch
    # The locked setup cells run here too and call set_seed: warm the import it triggers
    # (torch._inductor, seconds on a busy machine) before any cell's clock starts.
    torch.use_deterministic_algorithms(torch.are_deterministic_algorithms_enabled())
    for line in sys.stdin:
        try:
            fields = json.loads(line)
            fields["extra_read_only"] = tuple(fields.get("extra_read_only", ()))
            result = grade(Job(**fields))
        except Exception as error:            # noqa: BLE001 - reported, the worker goes on
            result = {"status": "failed", "reason": f"{type(error).__name__}: {error}",
                      "detail": traceback.format_exc()[-3000:]}
        results.write(json.dumps(result) + "\n")
        results.flush()
    SPARE.discard()


if __name__ == "__main__":
    main()
