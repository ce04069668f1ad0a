"""Ctrl-C in the middle of ``python -m utils.grading autograde``, then the same command again.

A class of lesson-1 submissions (correct, wrong and untouched, tests/grading_fixtures/hostile.py's
honest answers) is graded with two workers; once a few submissions are done, the whole command
gets SIGINT, as a terminal's Ctrl-C sends it. The rerun must grade exactly the ones that were not
done (a done submission is neither graded nor written again), the grade table must equal the
hand-written one, the gradebook must hold one submission per student, and no student process may
outlive the interrupted run. The commands besides the interrupted one run in the session's CLI
process (tests/conftest.py's ``grading_cli``), each with its own exit status and output.
"""

import contextlib
import csv
import functools
import hashlib
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from conftest import REPO, copy_course
from grading_fixtures.hostile import (ASSIGNMENT, COLUMNS, GOOD, SECURITY_ENV, WRONG, dump,
                                      with_answers)
from test_grading_hostile import lasting_sandbox_processes

STUDENTS = 15
INTERRUPT_AFTER = 3                  # done submissions before Ctrl-C
ROWS = {                             # by hand: points per exercise, total, max, manual pending
    "correct": ["2", "3", "2", "2", "0", "9", "11", "1"],
    "wrong": ["0", "0", "0", "0", "0", "0", "11", "1"],
    "untouched": ["0", "0", "0", "0", "0", "0", "11", "0"],
}


def cli(*args, course) -> list:
    env = dict(os.environ, ATTENTION_COURSE_GRADING_DIR=str(course), **SECURITY_ENV)
    env.pop("ATTENTION_COURSE_GRADING", None)
    return [sys.executable, "-m", "utils.grading", *args, "--quiet"], env


def snapshot(paths) -> dict:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in paths}


@pytest.mark.slow
def test_ctrl_c_then_rerun_loses_nothing_and_grades_nothing_twice(lesson_one_release,
                                                                  grading_cli):
    run_cli = functools.partial(grading_cli.run, env=SECURITY_ENV)
    with tempfile.TemporaryDirectory(prefix="grading-resume-") as tmp:
        tmp = pathlib.Path(tmp)
        course, inbox = tmp / "course", tmp / "inbox"
        inbox.mkdir()
        copy_course(lesson_one_release[0], course)         # released (tests/conftest.py)
        released = nbformat.read(course / "release" / ASSIGNMENT / "exercises.ipynb", 4)
        kinds = {"correct": dump(with_answers(released, GOOD)),
                 "wrong": dump(with_answers(released, WRONG)), "untouched": dump(released)}
        expected = [COLUMNS]
        for index in range(STUDENTS):
            kind = list(kinds)[index % 3]
            student = f"s{index:02d}_{kind}"
            (inbox / f"{student}.ipynb").write_bytes(kinds[kind])
            expected.append([student, *ROWS[kind]])
        run_cli("collect", str(inbox), "--chapter", "01", course=course)
        done = course / ".grading" / "done" / ASSIGNMENT

        command, env = cli("autograde", "--chapter", "01", "--workers", "2", course=course)
        # A test run started in the background by a non-interactive shell inherits SIGINT
        # ignored, and Python then keeps it ignored: give the command a terminal's Ctrl-C.
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 600
        while len(list(done.glob("*.json"))) < INTERRUPT_AFTER and process.poll() is None:
            assert time.monotonic() < deadline, "autograde did not finish any submission"
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGINT)              # Ctrl-C: the whole process group
        _, stderr = process.communicate(timeout=120)
        assert process.returncode != 0, "the interrupt came too late: every submission was done"
        assert "interrupted" in stderr and "Run autograde again" in stderr, stderr[-2000:]
        time.sleep(1)                         # bwrap's --die-with-parent is asynchronous
        assert lasting_sandbox_processes() == []
        with contextlib.closing(sqlite3.connect(course / "gradebook.db")) as connection:
            journal = connection.execute("PRAGMA journal_mode").fetchone()[0]
        assert journal == "delete", "the interrupted run left the write-ahead log on"

        markers = sorted(done.glob("*.json"))
        finished = [p.stem for p in markers]
        assert INTERRUPT_AFTER <= len(finished) < STUDENTS, finished
        autograded = [course / "autograded" / s / ASSIGNMENT / "exercises.ipynb"
                      for s in finished]
        before = snapshot(markers), {s: snapshot([p]) for s, p in zip(finished, autograded)}

        rerun = run_cli("autograde", "--chapter", "01", "--workers", "2", course=course)
        assert (f"graded {STUDENTS - len(finished)}, skipped {len(finished)} already graded, "
                f"failed 0") in rerun.stdout, rerun.stdout
        after = snapshot(markers), {s: snapshot([p]) for s, p in zip(finished, autograded)}
        assert after == before                # done work was not graded or written again

        run_cli("export", "--chapter", "01", "--to", str(tmp / "grades.csv"), course=course)
        assert list(csv.reader(open(tmp / "grades.csv", newline=""))) == expected
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-course") as book:
            submissions = book.find_assignment(ASSIGNMENT).submissions
            assert sorted(s.student.id for s in submissions) == [row[0] for row in expected[1:]]
