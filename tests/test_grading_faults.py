"""The grader under faults: killed processes, a damaged gradebook, a full disk, two runs at once.

One class of lesson-1 submissions (the frozen security assignment: correct, wrong and untouched
answers, plus one whose function kills its own process) is released and collected once; the
course is copied for each fault. Every fault ends the same way: the same command run again (or
the documented rebuild) gives an export equal to the uninterrupted run's, which equals the
hand-written table, so no honest student loses a point.

The commands that are not the run under a fault go through one CLI process for the module
(``grading_fixtures.cli_session``: the CLI's own entry point, each command with its own exit
status, stdout and stderr), not a process each.
"""

import contextlib
import csv
import fcntl
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from conftest import REPO, copy_course
from grading_fixtures.cli_session import CliSession
from grading_fixtures.hostile import (ASSIGNMENT, COLUMNS, GOOD, SECURITY_ENV, WRONG, dump,
                                      insert_after, with_answers)
from test_grading_hostile import lasting_sandbox_processes

STUDENTS = 6
# The sandbox uids of this run's graders (utils.grading.sandbox: a base, then one per worker slot).
_UID_BASE = int(os.environ.get("ATTENTION_COURSE_SANDBOX_UID_BASE", "61000"))
SANDBOX_UIDS = (_UID_BASE, _UID_BASE + 256)
ROWS = {                             # by hand: points per exercise, total, max, manual pending
    "correct": ["2", "3", "2", "2", "0", "9", "11", "1"],
    "wrong": ["0", "0", "0", "0", "0", "0", "11", "1"],
    "untouched": ["0", "0", "0", "0", "0", "0", "11", "0"],
}
# attend kills its own process: a death the grader did not cause, every time it is called
SELF_KILL = """\
def attend(queries, keys, values, temperature=1.0):
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
"""
SELF_KILL_ROW = ["2", "3", "0", "2", "0", "7", "11", "1"]


def cli(*args, course):
    env = dict(os.environ, ATTENTION_COURSE_GRADING_DIR=str(course), **SECURITY_ENV)
    env.pop("ATTENTION_COURSE_GRADING", None)
    return [sys.executable, "-m", "utils.grading", *args, "--quiet"], env


@pytest.fixture(scope="module")
def session():
    """The module's CLI process (``CliSession``): ``session.run(*args, course=..., expect=0)``."""
    with CliSession(dict(os.environ, **SECURITY_ENV)) as served:
        yield served


def start_cli(*args, course):
    command, env = cli(*args, course=course)
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def export(session, course, path) -> list:
    session.run("export", "--chapter", "01", "--to", str(path), course=course)
    return list(csv.reader(open(path, newline="")))


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def course_setup(lesson_one_release, session):
    """The honest class collected and not graded (``pristine``, copied for each fault), and
    the same plus ``self_kill`` graded without faults (``baseline``), with their exports."""
    with tempfile.TemporaryDirectory(prefix="grading-faults-") as tmp:
        tmp = pathlib.Path(tmp)
        pristine, inbox, more = tmp / "pristine", tmp / "inbox", tmp / "inbox-self-kill"
        inbox.mkdir()
        more.mkdir()
        copy_course(lesson_one_release[0], pristine)      # released (tests/conftest.py)
        released = nbformat.read(pristine / "release" / ASSIGNMENT / "exercises.ipynb", 4)
        kinds = {"correct": dump(with_answers(released, GOOD)),
                 "wrong": dump(with_answers(released, WRONG)), "untouched": dump(released)}
        expected = [COLUMNS]
        for index in range(STUDENTS):
            kind = list(kinds)[index % 3]
            (inbox / f"s{index}_{kind}.ipynb").write_bytes(kinds[kind])
            expected.append([f"s{index}_{kind}", *ROWS[kind]])
        (more / "self_kill.ipynb").write_bytes(
            dump(with_answers(released, {**GOOD, "attend": SELF_KILL})))
        expected = [expected[0]] + sorted(expected[1:] + [["self_kill", *SELF_KILL_ROW]])
        session.run("collect", str(inbox), "--chapter", "01", course=pristine)
        baseline = copy_course(pristine, tmp / "baseline")
        session.run("collect", str(more), "--chapter", "01", course=baseline)
        graded = session.run("autograde", "--chapter", "01", "--workers", "2", course=baseline)
        table = export(session, baseline, tmp / "baseline.csv")
        honest = [row for row in table if row[0] != "self_kill"]
        yield {"tmp": tmp, "pristine": pristine, "expected": expected, "baseline": baseline,
               "table": table, "honest": honest, "run": graded, "inbox": inbox}


def test_uninterrupted_run_equals_the_hand_table(course_setup):
    assert course_setup["table"] == course_setup["expected"]
    assert f"graded {STUDENTS + 1}, skipped 0 already graded, failed 0" in \
        course_setup["run"].stdout


def test_a_death_that_happens_again_is_charged_with_the_signal_and_exercise(course_setup):
    out = course_setup["run"].stdout
    assert "graded again from scratch after a crash that was not theirs: 1" in out, out
    assert "self_kill: <cell" in out and "SIGKILL" in out
    marker = course_setup["baseline"] / ".grading" / "done" / ASSIGNMENT / "self_kill.json"
    notes = " ".join(json.loads(marker.read_text())["notes"])
    assert "test_attend" in notes and "killed by SIGKILL" in notes, notes
    assert "it happened again when the whole submission was graded a second time" in notes


# --- killed processes -----------------------------------------------------------------------------
def processes(root: int) -> dict:
    """pid -> (parent pid, uid, command line) of ``root`` and every process below it (found
    through the kernel's lists of each thread's children: reading every process of the
    machine, 100 times a second while a batch runs, cost the test a core of its own)."""
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as stream:
                fields = dict(line.split(":", 1) for line in stream if ":" in line)
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                args = stream.read().replace(b"\0", b" ").decode(errors="replace")
            found[pid] = (int(fields["PPid"]), int(fields["Uid"].split()[0]), args)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as stream:
                    todo.extend(int(child) for child in stream.read().split())
        except (OSError, ValueError, KeyError):
            continue
    return found


def ancestors(table, pid) -> list:
    chain = []
    while pid in table and pid > 1:
        chain.append(pid)
        pid = table[pid][0]
    return chain


def started(pid: int) -> int:
    """When a process started (clock ticks since boot; 0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return int(stream.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


# A student's process that has used this much CPU runs a submission (a spare one waits idle).
BUSY_TICKS = 3


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process, in clock ticks (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def find_target(root: int, kind: str):
    """The process of this autograde run (``root``'s descendant) to kill: the newest student's
    process (a sandbox uid), its slot's sandbox template, the pool's template that cloned every
    slot's, or the worker that owns them (the worker of
    the newest student's process that has run code: a worker keeps an idle spare process for its
    next submission, and killing it between two submissions hits nothing in flight); None if no
    such student's process is running. (The oldest one may be a submission already recorded, its
    process on its way out: a kill then hits nothing in flight.)"""
    table = processes(root)
    students = [pid for pid, (_, uid, _) in table.items()
                if SANDBOX_UIDS[0] <= uid < SANDBOX_UIDS[1] and root in ancestors(table, pid)]
    if kind == "worker":        # a worker also keeps a spare student's process, idle, for its next
        students = [pid for pid in students if cpu_ticks(pid) >= BUSY_TICKS]   # submission
    if not students:
        return None
    newest = max(students, key=lambda pid: started(pid))   # just begun: its submission is in flight
    chain = ancestors(table, newest)
    if kind == "student":
        return newest
    # Nearest first: the student's process, its namespace's init, its slot's template, and the
    # pool's template that cloned it (the one bwrap started); without a pool, the slot's own.
    templates = [p for p in chain if "utils.grading.template" in table[p][2]]
    if kind == "pool":
        return templates[-1]
    if kind == "template":
        return templates[-2] if len(templates) == 4 else templates[-1]
    workers = [p for p in chain if "utils.grading.worker" in table[p][2]]
    return workers[0]                               # the nearest: the worker, not the zygote


def killed_run(course_setup, session, kind: str, ordinal: int, attempt: int) -> str:
    """One batch with a SIGKILL to a process of ``kind`` when the ``ordinal``-th student's
    process is seen; every honest student keeps every point. Returns autograde's output."""
    course = copy_course(course_setup["pristine"], course_setup["tmp"] / f"kill-{kind}-{attempt}")
    process = start_cli("autograde", "--chapter", "01", "--workers", "2", course=course)
    deadline, seen, target = time.monotonic() + 300, set(), None
    while True:
        assert time.monotonic() < deadline, f"no {kind} process to kill within 300 s"
        if process.poll() is not None:  # the batch ended first (seen once for the worker kind,
            break                       # whose target must have run code): a run that hit nothing
        student = find_target(process.pid, "student")
        if student is not None:
            seen.add(student)
            if len(seen) >= ordinal and (target := find_target(process.pid, kind)) is not None:
                break
        time.sleep(0.01)
    if target is not None:
        os.kill(target, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stdout + stderr[-3000:]
    assert f"graded {STUDENTS}, skipped 0 already graded, failed 0" in stdout
    # The "worker" kill hits the pool's zygote (the nearest utils.grading.worker above a
    # student's process: the sandbox templates are its children); the workers it forked then
    # hold the course lock (as they should: until the last worker that may write is gone) for
    # a moment after autograde has exited (0.07 s seen), which a new CLI process took longer
    # than to start. The next command may wait for that, 5 s at the most.
    deadline = time.monotonic() + 5
    while not lock_is_free(course) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert export(session, course, course.parent / f"kill-{kind}-{attempt}.csv") == \
        course_setup["honest"]
    rerun = session.run("autograde", "--chapter", "01", course=course)
    assert f"graded 0, skipped {STUDENTS} already graded" in rerun.stdout
    assert lasting_sandbox_processes() == []
    return stdout


@pytest.mark.parametrize("kind, ordinal", [("student", 2), ("template", 1), ("pool", 1),
                                           ("worker", 3)])
def test_a_killed_process_costs_no_student_a_point(course_setup, session, kind, ordinal):
    """SIGKILL, when the ``ordinal``-th student's process of the batch is seen (a moment tied to
    the batch's progress, not to a clock that a faster grader outruns), to a process of this
    ``kind``: the submission in flight is graded again and no honest student loses a point. (The
    pool's template is bwrap's command: its death ends the sandbox and every slot's template
    with it, so each slot's submission in flight is graded again.)

    A kill can land between two steps of a submission and hit nothing that matters (seen for
    the worker kind twice this round); every run must still give the honest table, and one
    of at most five runs, each a little later in the batch, must have hit a submission in
    flight and graded it again (the worker kind missed in all of three runs once: a worker
    between two submissions has nothing in flight)."""
    outputs = []
    for attempt in range(5):
        outputs.append(killed_run(course_setup, session, kind, ordinal + attempt % 3,  # 6 students
                                  attempt))
        if re.search(r"graded again from scratch after a crash that was not theirs: [12]\b",
                     outputs[-1]):
            return
    pytest.fail(f"no kill of a {kind} process hit a submission in flight in 5 runs:\n"
                + "\n".join(outputs))



# --- a damaged gradebook --------------------------------------------------------------------------
def test_a_truncated_gradebook_is_reported_and_rebuilt(course_setup, session):
    course = copy_course(course_setup["baseline"], course_setup["tmp"] / "truncated")
    database = course / "gradebook.db"
    with open(database, "r+b") as stream:
        stream.truncate(database.stat().st_size // 2)
    damaged = database.read_bytes()
    for args in [("autograde", "--chapter", "01"), ("export", "--chapter", "01"),
                 ("feedback", "--chapter", "01"),
                 ("collect", str(course_setup["inbox"]), "--chapter", "01")]:
        line = one_line(session.run(*args, course=course, expect=2).stderr)
        assert f"the gradebook {database} is damaged" in line, line
        assert "python -m utils.grading rebuild-gradebook" in line, line
        assert database.read_bytes() == damaged            # nothing changed
    rebuilt = session.run("rebuild-gradebook", course=course)
    assert f"{STUDENTS + 1} graded submission(s) recorded again" in rebuilt.stdout
    assert export(session, course, course.parent / "rebuilt.csv") == course_setup["table"]
    rerun = session.run("autograde", "--chapter", "01", course=course)
    assert f"graded 0, skipped {STUDENTS + 1} already graded" in rerun.stdout


# --- a full disk ----------------------------------------------------------------------------------
@contextlib.contextmanager
def small_disk(folder: pathlib.Path, megabytes: int):
    """A tmpfs of this size mounted on ``folder`` (root only)."""
    folder.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs",
                             str(folder)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs to fill a disk: {result.stderr.strip()}; "
                    f"run the grading tests as root (.ci/run does), or with the permission to "
                    f"mount a tmpfs")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@contextlib.contextmanager
def full(disk: pathlib.Path):
    """The disk filled to the last byte while the block runs."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as stream:
        for size in (2 ** 20, 4096, 1):                 # to the last byte
            try:
                while True:
                    stream.write(b"\0" * size)
            except OSError:
                pass
    try:
        yield
    finally:
        filler.unlink()


def whole_files(course: pathlib.Path) -> None:
    """No half-written file: no staging leftovers, every notebook, JSON and CSV parses."""
    assert not list(course.rglob("*.partial")) and not list(course.rglob("staging/*"))
    for path in course.rglob("*"):
        if path.suffix in (".ipynb", ".json") and path.is_file() and path.name != "lock":
            json.loads(path.read_text())
        elif path.suffix == ".csv":
            list(csv.reader(open(path, newline="")))


def test_a_full_disk_stops_each_command_in_one_line_and_the_rerun_succeeds(course_setup,
                                                                           session):
    with small_disk(course_setup["tmp"] / "disk", 48) as disk:
        course = copy_course(course_setup["pristine"], disk / "course")
        shutil.rmtree(course / "submitted")
        steps = [("collect", str(course_setup["inbox"]), "--chapter", "01"),
                 ("release", "--chapter", "01"),
                 ("autograde", "--chapter", "01", "--workers", "2"),
                 ("feedback", "--chapter", "01"),
                 ("export", "--chapter", "01", "--to", str(course / "grades.csv"))]
        for args in steps:
            with full(disk):
                line = one_line(session.run(*args, course=course, expect=2).stderr)
                assert "is full" in line and f"python -m utils.grading {args[0]}" in line, line
                whole_files(course)
            session.run(*args, course=course, expect=0)
            whole_files(course)
        assert list(csv.reader(open(course / "grades.csv", newline=""))) == \
            course_setup["honest"]
        pages = list((course / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
        assert len(pages) == STUDENTS


# --- two runs at once -----------------------------------------------------------------------------
def holder(course: pathlib.Path) -> dict:
    try:
        return json.loads((course / ".grading" / "lock").read_text() or "{}")
    except (OSError, ValueError):
        return {}


def lock_is_free(course: pathlib.Path) -> bool:
    with open(course / ".grading" / "lock", "a") as stream:
        try:
            fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(stream, fcntl.LOCK_UN)
        return True


# A cell a student added that waits until this test sends its process a SIGWINCH (ignored by
# default: a signal that comes before the handler is set changes nothing), 25 s at the most
# (a cell may take 30 s).
WAIT_FOR_THE_TEST = """\
import signal, time
_go = []
signal.signal(signal.SIGWINCH, lambda *_: _go.append(1))
_until = time.monotonic() + 25
while not _go and time.monotonic() < _until:
    time.sleep(0.05)
"""


def release_waiting_cells(root: int) -> None:
    """SIGWINCH to every student's process of the autograde run ``root``."""
    for pid, (_, uid, _) in processes(root).items():
        if SANDBOX_UIDS[0] <= uid < SANDBOX_UIDS[1]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGWINCH)


def test_a_second_run_meets_the_lock_and_a_killed_runs_lock_is_taken_over(course_setup,
                                                                          session):
    course = copy_course(course_setup["pristine"], course_setup["tmp"] / "twice")
    slow = course_setup["tmp"] / "inbox-slow"           # a correct answer that takes its time
    slow.mkdir()
    released = nbformat.read(course / "release" / ASSIGNMENT / "exercises.ipynb", 4)
    # An added cell that waits for this test (WAIT_FOR_THE_TEST): the first run stays busy
    # until four CLI calls have met its lock, however loaded the machine (fixed pauses of
    # 2 x 22 s were needed before, for four CLI processes).
    # Its id sorts first: the one worker grades it first (submissions go in id order), and the
    # first run is killed only once it is recorded, so the second run does not wait for it again.
    slowed = insert_after(with_answers(released, GOOD), "attend", WAIT_FOR_THE_TEST)
    (slow / "a-slow.ipynb").write_bytes(dump(slowed))
    session.run("collect", str(slow), "--chapter", "01", course=course)
    expected = [course_setup["honest"][0]] + sorted(course_setup["honest"][1:]
                                                    + [["a-slow", *ROWS["correct"]]])
    assert expected[1][0] == "a-slow"
    slow_done = course / ".grading" / "done" / ASSIGNMENT / "a-slow.json"
    first = start_cli("autograde", "--chapter", "01", "--workers", "1", course=course)
    deadline = time.monotonic() + 120
    while holder(course).get("pid") != first.pid:
        assert time.monotonic() < deadline and first.poll() is None, "no lock was taken"
        time.sleep(0.05)
    for args in [("autograde", "--chapter", "01"), ("collect", str(course_setup["inbox"]),
                 "--chapter", "01"), ("feedback", "--chapter", "01"),
                 ("export", "--chapter", "01")]:
        line = one_line(session.run(*args, course=course, expect=2).stderr)
        assert "another grading command is running" in line, line
        assert f"autograde (pid {first.pid}" in line, line
        assert first.poll() is None, "the first run ended too soon for this test"
    # the first run is killed once it is grading (the slow submission recorded, the next one
    # in flight); its workers end their submission and go
    while not slow_done.exists() or find_target(first.pid, "student") is None:
        assert time.monotonic() < deadline + 300 and first.poll() is None
        if not slow_done.exists():
            release_waiting_cells(first.pid)
        time.sleep(0.05)
    first.kill()
    first.communicate()
    deadline = time.monotonic() + 120
    while not lock_is_free(course):
        assert time.monotonic() < deadline, "the killed run's workers kept the lock"
        time.sleep(0.2)
    second = session.run("autograde", "--chapter", "01", "--workers", "2", course=course)
    assert f"autograde (pid {first.pid}" in second.stderr and "took it over" in second.stderr
    assert re.search(r"graded \d+, skipped [1-9]\d* already graded", second.stdout), \
        second.stdout                           # the killed run's recorded work is kept
    assert export(session, course, course.parent / "twice.csv") == expected
    assert lasting_sandbox_processes() == []
