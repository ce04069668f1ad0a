"""Autograding that hostile code cannot fool or break (``python -m utils.grading autograde``).

A class of lesson-1 submissions, one per attack plus honest ones (tests/grading_fixtures/
hostile.py), goes through the real command twice: one worker with the SQLite gradebook, then
two workers with a real PostgreSQL server started for the test. Both grade tables must equal
the hand-written one (each hostile student gets exactly what its honest content earns), the
course's files, the repository and a canary outside the course must not change, nothing may
reach a loopback port, and no student process may outlive the batch. The commands run in one
CLI process (``grading_fixtures.cli_session``), each with its own exit status and output.
"""

import csv
import hashlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from conftest import REPO
from grading_fixtures.cli_session import CliSession
from grading_fixtures.hostile import ASSIGNMENT, COLUMNS, SECURITY_ENV, build_class
from grading_fixtures.pg_server import temporary_postgres

# Seconds per cell (the course's default is 30); each endless loop costs this much (3 of them,
# twice). The slowest cells that end by themselves (allocate_forever's MemoryError, memory_tree's
# memory cap) take 1.3-1.6 s on a quiet machine, but with 4 s both timed out once on this 2-core
# machine under a load of 9 (not starved: running, slowly). 8 s held under a load of 11, then
# memory_tree timed out once at 8 s in a fresh-clone `make test` on a day when every test of both
# lanes ran 30-50 % slower than the day before (its memory is new pages, each touched first).
CELL_TIMEOUT = "12"
# Written by grading; everything else in the course directory must stay as it was.
GRADING_OUTPUTS = ("autograded", ".grading", "gradebook.db", "feedback")


def file_hashes(root: pathlib.Path, skip=()) -> dict:
    hashes = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and relative.parts[0] not in skip and "__pycache__" not in path.parts:
            hashes[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def read_table(path) -> list:
    return list(csv.reader(open(path, newline="")))


def sandbox_processes() -> list:
    """Processes still running as a sandbox uid (61000 + worker slot) that no live grading
    worker owns: once autograde has exited, its sandboxes must be gone. (Sandboxes of another
    grading run on the same machine, e.g. the other lane of `make test`, still have a live
    ``utils.grading.worker`` among their ancestors and are not leftovers of this one.)"""
    result = subprocess.run(["ps", "-eo", "uid=,pid=,ppid=,args="], capture_output=True,
                            text=True)
    rows = {}
    for line in result.stdout.splitlines():
        fields = line.split(None, 3)
        if len(fields) == 4:
            rows[int(fields[1])] = (int(fields[0]), int(fields[2]), fields[3])

    def owned_by_live_worker(pid: int) -> bool:
        seen = set()
        while pid in rows and pid not in seen and pid > 1:
            seen.add(pid)
            if "utils.grading.worker" in rows[pid][2]:
                return True
            pid = rows[pid][1]
        return False

    return [f"{uid} {pid} {args}" for pid, (uid, _, args) in rows.items()
            if 61000 <= uid < 61256 and not owned_by_live_worker(pid)]


def lasting_sandbox_processes(samples: int = 4, pause: float = 1.0) -> list:
    """``sandbox_processes()`` still there in every one of ``samples`` looks, ``pause`` s apart.
    A leftover of this run stays; a sandbox of another grading run on the machine (the other
    lane of `make test`) that is shutting down can lose its worker a moment before it goes
    (bwrap's --die-with-parent is asynchronous), and is gone by the next look. A look that
    finds none ends the wait: what was in no look cannot be in every look."""
    seen = set(sandbox_processes())
    for _ in range(samples - 1):
        if not seen:
            break
        time.sleep(pause)
        seen &= set(sandbox_processes())
    return sorted(seen)


@pytest.fixture(scope="module")
def graded():
    with tempfile.TemporaryDirectory(prefix="grading-hostile-") as tmp, \
            socket.socket() as listener, CliSession(dict(os.environ, **SECURITY_ENV)) as session:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        yield grade_class(pathlib.Path(tmp), listener, session.run)


def grade_class(tmp: pathlib.Path, listener, run_cli) -> dict:
    """``run_cli(*args, course=..., expect=0, env=None)``: a grading command (``CliSession``)."""
    course, inbox, canary = tmp / "course", tmp / "inbox", tmp / "canary-outside-course"
    inbox.mkdir()
    run_cli("release", "--chapter", "01", "--timeout", CELL_TIMEOUT, course=course)
    student_nb = nbformat.read(course / "release" / ASSIGNMENT / "exercises.ipynb", 4)
    students = build_class(student_nb, course, REPO, canary, listener.getsockname()[1])
    for student, (raw, _) in students.items():
        if student == "broken_json":      # `collect` rejects it; it arrives by another route
            target = course / "submitted" / student / ASSIGNMENT / "exercises.ipynb"
            target.parent.mkdir(parents=True)
            target.write_bytes(raw)
        else:
            (inbox / f"{student}.ipynb").write_bytes(raw)
    run_cli("collect", str(inbox), "--chapter", "01", course=course)
    out = {"course": course, "students": students, "canary": canary, "listener": listener}
    out["before"] = file_hashes(course, skip=GRADING_OUTPUTS)
    out["repo_before"] = {**file_hashes(REPO / "utils"), **file_hashes(REPO / "chapters")}

    started = time.monotonic()
    out["sqlite_run"] = run_cli("autograde", "--chapter", "01", "--workers", "1",
                                course=course)
    out["sqlite_seconds"] = time.monotonic() - started
    run_cli("export", "--chapter", "01", "--to", str(tmp / "sqlite.csv"), course=course)
    out["sqlite_table"] = read_table(tmp / "sqlite.csv")
    out["after"] = file_hashes(course, skip=GRADING_OUTPUTS)
    out["repo_after"] = {**file_hashes(REPO / "utils"), **file_hashes(REPO / "chapters")}
    out["leftovers"] = lasting_sandbox_processes()
    out["autograded"] = {s: nbformat.read(course / "autograded" / s / ASSIGNMENT /
                                          "exercises.ipynb", 4) for s in students}
    out["resume"] = run_cli("autograde", "--chapter", "01", course=course)
    out["no_bwrap"] = run_cli("autograde", "--chapter", "01", course=course, expect=None,
                              env={"PATH": str(pathlib.Path(sys.executable).parent)})

    with temporary_postgres() as url:       # same class, two workers, PostgreSQL gradebook
        run_cli("release", "--chapter", "01", "--db-url", url, course=course)
        started = time.monotonic()
        out["pg_run"] = run_cli("autograde", "--chapter", "01", "--workers", "2",
                                course=course)
        out["pg_seconds"] = time.monotonic() - started
        run_cli("export", "--chapter", "01", "--to", str(tmp / "pg.csv"), course=course)
        out["pg_table"] = read_table(tmp / "pg.csv")
    print(f"\nhostile class of {len(students)}: 1 worker + SQLite {out['sqlite_seconds']:.0f} s, "
          f"2 workers + PostgreSQL {out['pg_seconds']:.0f} s")
    return out


def expected_table(students) -> list:
    """The hand-written rows from grading_fixtures.hostile, sorted like the export."""
    return [COLUMNS] + [[student, *row] for student, (_, row) in sorted(students.items())]


def notes_of(graded, student) -> str:
    marker = graded["course"] / ".grading" / "done" / ASSIGNMENT / f"{student}.json"
    return " ".join(json.loads(marker.read_text())["notes"])


def outputs_text(nb, roles=("student",)) -> str:
    from utils.grading.evaluate import cell_role
    texts = []
    for cell in nb.cells:
        if cell_role(cell) in roles:
            for output in cell.get("outputs", []):
                texts.append(json.dumps(output))
    return "\n".join(texts)


# --- grades ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_one_worker_sqlite_grades_equal_the_hand_table(graded):
    expected = expected_table(graded["students"])
    assert len(expected) - 1 >= 12                     # at least ten hostile kinds + honest
    for row in expected[1:]:                           # the hand table is self-consistent
        assert float(row[6]) == sum(float(x) for x in row[1:6]), row
    assert graded["sqlite_table"] == expected


@pytest.mark.slow
def test_two_workers_postgresql_grades_are_identical(graded):
    assert graded["pg_table"] == graded["sqlite_table"] == expected_table(graded["students"])


@pytest.mark.slow
def test_the_batch_finished_and_resumes_without_regrading(graded):
    count = len(graded["students"])
    assert f"graded {count}, skipped 0 already graded, failed 0" in graded["sqlite_run"].stdout
    assert f"graded 0, skipped {count} already graded, failed 0" in graded["resume"].stdout
    assert f"graded {count}, skipped 0" in graded["pg_run"].stdout


# --- isolation ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_no_file_outside_the_sandbox_changed(graded):
    assert graded["after"] == graded["before"]             # source, release, submitted, config
    assert graded["repo_after"] == graded["repo_before"]   # utils/ and chapters/ of the repo
    assert not graded["canary"].exists()
    text = outputs_text(graded["autograded"]["escape_files"])
    assert text.count("blocked read") == 6 and text.count("blocked write") == 5, text[:3000]
    assert "blocked gradebook" in text and "READ" not in text and "WROTE" not in text


@pytest.mark.slow
def test_hidden_tests_never_reach_student_outputs(graded):
    from utils.grading.feedback import leak_markers, split_hidden
    source = nbformat.read(graded["course"] / "source" / ASSIGNMENT / "exercises.ipynb", 4)
    hidden = leak_markers(line for c in source.cells for line in split_hidden(c.source)[1])
    assert len(hidden) >= 20
    for student, nb in graded["autograded"].items():
        text = outputs_text(nb)
        assert not [line for line in hidden if line in text], student
    peek = outputs_text(graded["autograded"]["frame_peek"])
    assert "test source seen" not in peek


@pytest.mark.slow
def test_no_network_and_no_leftover_processes(graded):
    with pytest.raises(BlockingIOError):                  # nobody connected to the port
        graded["listener"].accept()
    text = outputs_text(graded["autograded"]["network"])
    assert text.count("blocked") == 2 and "CONNECTED" not in text
    assert graded["leftovers"] == []


# --- limits, with reasons the instructor can read ---------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("student, reason", [
    ("ignore_sigint_loop", f"did not finish within {CELL_TIMEOUT} s and was stopped"),
    ("fork_bomb", f"did not finish within {CELL_TIMEOUT} s and was stopped"),
    ("memory_tree", "used more than 2048 MB of memory"),
    ("segfault", "killed by SIGSEGV"),
    ("os_exit", "exited (exit code 3"),
    ("output_flood", "wrote more than 8 MB of output"),
    ("slow_hidden_case", "restarted 1 time(s)"),
    ("broken_json", "not valid notebook JSON"),
    ("cells_retyped", "answer cell query_for_weights was changed from code to raw"),
    ("cells_shuffled", "test cell test_scaled_scores was missing"),
])
def test_stopped_work_has_a_readable_reason(graded, student, reason):
    assert reason in notes_of(graded, student)
    first = graded["autograded"][student].cells[0]
    assert first.cell_type == "markdown" and reason in first.source   # the student sees it too


def test_only_a_cell_the_grader_did_not_run_counts_as_never_run():
    from utils.grading.evaluate import NOT_RUN, _error, _grading_error, never_ran
    assert never_ran([_grading_error(f"{NOT_RUN}the notebook's time budget is used up")])
    assert not never_ran([])                                       # ran, printed nothing
    assert not never_ran([_grading_error("the student's process sent an invalid value")])
    assert not never_ran([_error("TimeoutError", "stopped", ["TimeoutError: stopped"])])
    assert not never_ran([_grading_error(f"{NOT_RUN}x"), _grading_error(f"{NOT_RUN}y")])


@pytest.mark.slow
def test_the_cells_the_grader_ran_are_numbered_in_order(graded):
    """Every code cell the grader ran gets the next number (``In [n]:`` on the feedback page,
    ``Out[n]:`` on its result), also where the student's code crashed or was stopped; a cell it
    did not run, and every cell it does not run, has none."""
    from utils.grading.cell_roles import cell_role
    from utils.grading.evaluate import never_ran
    numbered_students = 0
    for student, nb in graded["autograded"].items():
        expected, counts = 0, []
        unreadable = any(output.get("ename") == "UnreadableSubmission"      # nothing ran
                         for cell in nb.cells for output in cell.get("outputs", []))
        for cell in nb.cells:
            ran = not unreadable and cell_role(cell) != "text" and not never_ran(cell.outputs)
            expected += ran
            counts.append((cell.get("execution_count"), expected if ran else None))
            for output in cell.get("outputs", []):
                if output.output_type == "execute_result":
                    assert output.execution_count == cell.execution_count, student
        assert [have for have, _ in counts] == [want for _, want in counts], student
        numbered_students += expected > 0
    assert numbered_students == len(graded["autograded"]) - 1      # broken_json: nothing ran
    honest = graded["autograded"]["honest_correct"]
    assert max(c.get("execution_count") or 0 for c in honest.cells) == sum(
        c.cell_type == "code" for c in honest.cells)


@pytest.mark.slow
def test_allocation_without_bound_is_a_memory_error_in_the_students_function(graded):
    nb = graded["autograded"]["allocate_forever"]
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == "test_attend")
    assert [o.ename for o in test.outputs if o.output_type == "error"] == ["MemoryError"]


@pytest.mark.slow
def test_refuses_to_grade_without_bubblewrap(graded):
    result = graded["no_bwrap"]
    assert result.returncode == 2
    assert "bubblewrap (bwrap) is not installed" in result.stderr
    assert "--allow-unsandboxed" in result.stderr


# --- the data channel (fast, no sandbox) -----------------------------------------------------
def test_wire_round_trips_plain_data_and_rejects_the_rest():
    import numpy as np
    import torch
    from utils.grading import wire

    value = {"t": torch.arange(6.0).reshape(2, 3), "a": np.array([1, 2], dtype=np.int16),
             "x": [1, 2.5, float("nan"), "s", None, True, (torch.Size([2]), torch.float64)]}
    encoder = wire.Encoder(lambda obj: {"t": "ref", "id": 1}, 2 ** 20)
    header = encoder.encode(value)
    decoded = wire.Decoder(encoder.buffers, lambda node: "REF").decode(header)
    assert torch.equal(decoded["t"], value["t"]) and decoded["a"].dtype == np.int16
    assert decoded["x"][:2] == [1, 2.5] and np.isnan(decoded["x"][2])
    assert decoded["x"][6] == (torch.Size([2]), torch.float64)
    assert wire.Decoder([], lambda n: "REF").decode(encoder.encode(object())) == "REF"
    bad = [({"t": "tensor", "dtype": "float32", "shape": [3], "b": 0, "grad": False}, [b"x"]),
           ({"t": "tensor", "dtype": "object", "shape": [1], "b": 0}, [b"12345678"]),
           ({"t": "ndarray", "dtype": "|O", "shape": [1], "b": 0}, [b"12345678"]),
           ({"t": "pickle", "v": "gASVAAAAAAAAAC4="}, [])]
    for node, buffers in bad:
        with pytest.raises(wire.WireError):
            wire.Decoder(buffers, lambda n: None).decode(node)


def test_normalize_rebuilds_the_trusted_structure():
    from utils.grading.normalize import normalize
    source = nbformat.v4.new_notebook(cells=[
        _cell("code", "setup = 1", "setup", locked=True),
        _cell("code", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "answer", solution=True),
        _cell("code", "assert x == 1\n### BEGIN HIDDEN TESTS\nassert x > 0\n### END HIDDEN TESTS",
              "test", grade=True, locked=True)])
    release = nbformat.v4.new_notebook(cells=[
        source.cells[0], _cell("code", "raise NotImplementedError()", "answer", solution=True),
        _cell("code", "assert x == 1", "test", grade=True, locked=True)])
    student = nbformat.v4.new_notebook(cells=[
        _cell("code", "x = 2", "answer", solution=True), _cell("code", "pass", "test"),
        _cell("code", "x = 1  # duplicate", "answer", solution=True),
        nbformat.v4.new_code_cell("helper = 3")])
    nb, notes, unreadable = normalize(nbformat.writes(student).encode(), source, release)
    assert unreadable is None
    assert [c.source for c in nb.cells] == [
        "setup = 1", "x = 2", source.cells[2].source, "x = 1  # duplicate", "helper = 3"]
    assert any("answer appears more than once" in n for n in notes), notes
    _, notes, unreadable = normalize(b"\x00not json", source, release)
    assert "not valid notebook JSON" in unreadable


def _cell(kind, text, gid, **flags):
    maker = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    meta = {"grade_id": gid, "grade": False, "solution": False, "locked": False,
            "schema_version": 3, "task": False, **flags}
    if meta["grade"]:
        meta["points"] = 1
    return maker(text, metadata={"nbgrader": meta})


def test_sandbox_uids_start_at_the_base_the_environment_gives(monkeypatch):
    """Two graders on one machine (the two lanes of `make test`) give their sandboxes
    different uids with $ATTENTION_COURSE_SANDBOX_UID_BASE; a base that is not a number of the
    reserved kind is refused with the rule."""
    from utils.grading import sandbox
    monkeypatch.delenv(sandbox.UID_BASE_ENV_VAR, raising=False)
    assert sandbox.sandbox_uid(0) == sandbox.SANDBOX_UID_BASE == 61000
    assert sandbox.sandbox_uid(3) == 61003
    monkeypatch.setenv(sandbox.UID_BASE_ENV_VAR, "61128")
    assert sandbox.sandbox_uid(1) == 61129
    for bad in ("root", "0", "999", str(2 ** 31)):
        monkeypatch.setenv(sandbox.UID_BASE_ENV_VAR, bad)
        with pytest.raises(ValueError, match="must be a number from 1000"):
            sandbox.sandbox_uid(0)
    monkeypatch.setenv(sandbox.UID_BASE_ENV_VAR, "61128")
    with pytest.raises(ValueError, match="not below 256"):
        sandbox.sandbox_uid(256)
