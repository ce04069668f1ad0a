"""Grade one normalized notebook: student cells in the sandbox, test cells in this process.

Cell by cell, in the notebook's order:

- locked setup cells run here *and* in the sandbox (both sides need the lesson's data);
- the student's cells (answers and cells they added) run only in the sandbox, each with the
  per-cell timeout; their output is recorded as the student's;
- test cells run only here, in a namespace holding this process's own ``torch``, ``checks``
  and builtins plus the setup cells' values. Each global name a test reads that the student
  defined (and that no setup cell defined) is fetched from the sandbox: data as data,
  functions and other objects as ``RemoteObject`` stand-ins (see ``utils.grading.remote``).

nbgrader then scores each test cell as usual: full points without an error output, zero with
one. A crash, timeout or limit in the sandbox stops it; it is restarted with the cells that
had succeeded, so later exercises are still graded. A death the student's code did not cause
(``Sandbox.foreign``) is listed in ``NotebookGrader.foreign``, for the worker to grade again.
"""

import ast
import builtins
import contextlib
import dis
import io
import linecache
import time
import traceback
import warnings

import nbformat

from utils.grading.cell_roles import cell_role, nbgrader_metadata as _nbgrader  # noqa: F401
from utils.grading.remote import GradingError, Session, StudentError
from utils.grading.sandbox import SandboxDied

MAX_OUTPUT_CHARS = 20_000
NOT_RUN = "not run: "               # the grader's note on a cell it did not run




_NAMES = {}                      # (kind, code object) -> names: the same for every student


def loaded_names(code) -> set:
    """Global names a code object (and the functions inside it) reads, plus string constants
    that look like names (``checks.check_defined("answer", globals())``)."""
    if ("loaded", code) not in _NAMES:
        _NAMES["loaded", code] = frozenset(_loaded_names(code))
    return set(_NAMES["loaded", code])


def _loaded_names(code) -> set:
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        for instruction in dis.get_instructions(current):
            if instruction.opname in ("LOAD_NAME", "LOAD_GLOBAL", "LOAD_FROM_DICT_OR_GLOBALS"):
                names.add(instruction.argval)
        names.update(_string_constants(current.co_consts))
        stack.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    return names


def _string_constants(constants) -> set:
    """Identifier-like strings among constants, also inside constant tuples and frozensets
    (``for name in ("answer_a", "answer_b"): ...`` compiles to one tuple constant)."""
    found = set()
    for constant in constants:
        if isinstance(constant, str) and constant.isidentifier():
            found.add(constant)
        elif isinstance(constant, (tuple, frozenset)):
            found |= _string_constants(constant)
    return found


def stored_names(code) -> set:
    """Global names a cell's top level binds (assignments, imports, defs)."""
    if ("stored", code) not in _NAMES:
        _NAMES["stored", code] = frozenset(
            i.argval for i in dis.get_instructions(code)
            if i.opname in ("STORE_NAME", "STORE_GLOBAL", "DELETE_NAME"))
    return set(_NAMES["stored", code])


_COMPILED = {}                   # (source, label) -> compiled cell: the same for every student


def _compile_cell(source: str, label: str):
    """(statements code, last-expression code or None); the source is kept for tracebacks.
    Compiled once per worker (the trusted cells are the same for every student)."""
    key = (source, label)
    if key not in _COMPILED:
        from IPython.core.inputtransformer2 import TransformerManager
        text = TransformerManager().transform_cell(source)
        tree = ast.parse(text, filename=label)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        _COMPILED[key] = (text, compile(tree, label, "exec", dont_inherit=True),
                          compile(last, label, "eval", dont_inherit=True) if last else None)
    text, code, last = _COMPILED[key]
    linecache.cache[label] = (len(text), None, text.splitlines(True), label)
    return code, last


def _stream(name: str, text: str):
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n[... {len(text) - MAX_OUTPUT_CHARS} more characters]"
    return nbformat.v4.new_output("stream", name=name, text=text)


def _error(ename: str, evalue: str, lines) -> dict:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue[:MAX_OUTPUT_CHARS],
                                  traceback=[str(x)[:MAX_OUTPUT_CHARS] for x in lines])


def _trusted_error(error: BaseException, label: str) -> dict:
    """An error output for a failed test: frames of the test cell only, plus the student's
    traceback when their code raised."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == label]
    lines = ["Traceback (most recent call last):"]
    lines += [line.rstrip("\n") for line in traceback.format_list(frames)]
    lines.append(f"{type(error).__name__}: {error}")
    if isinstance(error, StudentError) and error.student_traceback:
        lines += ["", "The error was raised in your code:"]
        lines += [line.rstrip("\n") for line in error.student_traceback]
    return _error(type(error).__name__, str(error), lines)


def _grading_error(reason: str) -> dict:
    return _error("GradingError", reason, [f"GradingError: {reason}"])


def never_ran(outputs) -> bool:
    """Whether a cell's outputs say only that the grader did not run it (``not run: ...``)."""
    return (len(outputs) == 1 and outputs[0].get("ename") == "GradingError"
            and str(outputs[0].get("evalue", "")).startswith(NOT_RUN))


def number_cell(cell, count: int) -> None:
    """Give a cell the grader ran its place in the run, as Jupyter numbers the cells it runs
    (``In [3]:``, and ``Out[3]:`` on its result), so that a feedback page does not show the
    student's cells as never run."""
    cell.execution_count = count
    for output in cell.outputs:
        if output.get("output_type") == "execute_result":
            output["execution_count"] = count


def _cell_label(index: int, cell) -> str:
    return f"<cell {index}: {_nbgrader(cell).get('grade_id') or cell.get('id')}>"


def compile_trusted(nb) -> None:
    """Compile the setup and test cells of a normalized notebook as ``NotebookGrader.grade``
    does, with the names they read and bind (all cached: a worker's zygote does it once for
    the workers it forks)."""
    for index, cell in enumerate(nb.cells):
        role = cell_role(cell)
        if role not in ("setup", "test"):
            continue
        label = _cell_label(index, cell)
        for name in [label.replace(" ", "_")] + ([label] if role == "setup" else []):
            try:
                code, last = _compile_cell(cell.source, name)
            except Exception:                   # noqa: BLE001 - grading reports it
                continue
            loaded_names(code), stored_names(code)
            if last is not None:
                loaded_names(last)


class NotebookGrader:
    """Runs the cells of one normalized notebook (see the module docstring)."""

    def __init__(self, make_sandbox, cell_timeout: float, notebook_timeout: float):
        self.cell_timeout = cell_timeout
        self.deadline = time.monotonic() + notebook_timeout
        self.make_sandbox = make_sandbox
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.protected = set(dir(builtins)) | {"__name__", "__builtins__"}
        self.events = []
        self._reported = set()          # sandboxes whose death is already in the events
        self.foreign = []               # "<cell>: reason" of deaths not caused by the student
        self._sandboxes, self._label = [], "before the first cell"

    def _new_sandbox(self):
        """``make_sandbox()``, remembering each sandbox (and a failed start: never the
        student's doing) so that deaths the grader did not cause are found."""
        try:
            sandbox = self.make_sandbox()
        except SandboxDied as error:
            self.foreign.append(f"{self._label}: the student's process could not be started "
                                f"({error})")
            raise
        self._sandboxes.append(sandbox)
        return sandbox

    def _note_foreign(self) -> None:
        for sandbox in self._sandboxes:
            if sandbox.foreign and sandbox not in self._reported_foreign:
                self._reported_foreign.add(sandbox)
                self.foreign.append(f"{self._label}: {sandbox.death or sandbox.foreign}")

    def grade(self, nb) -> list:
        """Fill the outputs of ``nb`` in place; returns notes on what went wrong."""
        students = [c.source for c in nb.cells if cell_role(c) == "student"]
        self.session = Session(self._new_sandbox, self.deadline, students)
        self._reported_foreign = set()
        try:
            try:
                self.session._ensure()
            except GradingError as error:       # nothing of the student's ran yet
                self._note_foreign()
                raise SandboxDied(f"the sandbox could not start: {error}") from None
            ran = 0
            for index, cell in enumerate(nb.cells):
                self._note_foreign()
                role = cell_role(cell)
                label = _cell_label(index, cell)
                self._label = label
                if role == "setup":
                    cell.outputs = self._setup(cell.source, label)
                elif role == "student":
                    cell.outputs = self._student(cell.source, label)
                elif role == "test":
                    cell.outputs = self._test(cell.source, label.replace(" ", "_"))
                if role in ("setup", "student", "test") and not never_ran(cell.outputs):
                    ran += 1
                    number_cell(cell, ran)
            self._note_foreign()
        finally:
            self.session.close()
        if self.session.restarts:
            self.events.append(f"the student's process was restarted {self.session.restarts} "
                               f"time(s) after it was stopped")
        return self.events

    # --- the three kinds of code cell -----------------------------------------------------------
    def _setup(self, source: str, label: str) -> list:
        """A locked cell: here (like a test, but not graded), then in the sandbox too. The
        names it binds are the instructor's: tests never take them from the student."""
        outputs = self._run_test(source, label.replace(" ", "_"))
        try:
            self.protected |= stored_names(_compile_cell(source, label)[0])
        except SyntaxError:
            pass
        try:
            reply = self.session.run_cell(label, source)
            if not reply.get("ok"):
                self.events.append(f"locked cell {label} failed in the sandbox: "
                                   f"{str(reply.get('error', {}).get('evalue', ''))[:200]}")
        except (GradingError, SandboxDied, TimeoutError) as error:
            self.events.append(f"locked cell {label} could not run in the sandbox: {error}")
        return outputs

    def _student(self, source: str, label: str) -> list:
        self.session.cell_deadline = time.monotonic() + self.cell_timeout
        try:
            reply = self.session.run_cell(label, source)
        except TimeoutError:
            self._reported.add(self.session.sandbox)
            reason = (f"the cell did not finish within {self.cell_timeout:g} s and was stopped"
                      if time.monotonic() < self.deadline else
                      "the notebook's time budget was used up in this cell")
            self.events.append(f"{label}: {reason}")
            return [_error("TimeoutError", reason, [f"TimeoutError: {reason}"])]
        except SandboxDied as error:
            self._reported.add(self.session.sandbox)
            self.events.append(f"{label}: {error}")
            return [_error("SandboxStopped", str(error), [f"SandboxStopped: {error}"])]
        except GradingError as error:
            return [_grading_error(f"{NOT_RUN}{error}")]
        outputs = []
        for name in ("stdout", "stderr"):
            if reply.get(name):
                outputs.append(_stream(name, str(reply[name])))
        if reply.get("display") is not None:
            outputs.append(nbformat.v4.new_output(
                "execute_result", data={"text/plain": str(reply["display"])[:MAX_OUTPUT_CHARS]}))
        if not reply.get("ok"):
            error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            outputs.append(_error(str(error.get("ename", "Error"))[:100],
                                  str(error.get("evalue", "")), error.get("traceback", [])[:40]))
        return outputs

    def _test(self, source: str, label: str) -> list:
        outputs = self._run_test(source, label)
        sandbox = self.session.sandbox
        if sandbox is not None and sandbox.death and sandbox not in self._reported:
            self._reported.add(sandbox)
            self.events.append(f"{label}: while the test called your code, {sandbox.death}")
        return outputs

    def _run_test(self, source: str, label: str) -> list:
        self.session.cell_deadline = time.monotonic() + self.cell_timeout
        stdout = io.StringIO()
        try:
            code, last = _compile_cell(source, label)
            wanted = loaded_names(code) | (loaded_names(last) if last else set())
            wanted -= self.protected | stored_names(code)
            if wanted:
                self.namespace.update(self.session.fetch(wanted))
            with contextlib.redirect_stdout(stdout), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, self.namespace)
                value = eval(last, self.namespace) if last is not None else None
        except GradingError as error:
            return self._with_stdout(stdout, _grading_error(str(error)))
        except SandboxDied as error:
            return self._with_stdout(stdout, _error(
                "SandboxStopped", str(error), [f"SandboxStopped: {error} (while the test "
                                               f"called your code)"]))
        except Exception as error:              # noqa: BLE001 - a failed test
            return self._with_stdout(stdout, _trusted_error(error, label))
        outputs = self._with_stdout(stdout)
        if value is not None:
            outputs.append(nbformat.v4.new_output(
                "execute_result", data={"text/plain": repr(value)[:MAX_OUTPUT_CHARS]}))
        return outputs

    @staticmethod
    def _with_stdout(stdout: io.StringIO, *more) -> list:
        text = stdout.getvalue()
        return ([_stream("stdout", text)] if text else []) + list(more)


def mark_unreadable(nb, reason: str) -> None:
    """Every test cell of ``nb`` fails with the reason (nothing runs)."""
    for cell in nb.cells:
        if cell_role(cell) == "test":
            cell.outputs = [_error("UnreadableSubmission", reason,
                                   [f"UnreadableSubmission: {reason}"])]


def add_notes(nb, notes, language: str = "en") -> None:
    """A markdown cell at the top listing what the grader changed or stopped, in ``language``
    (the submission's; the notes themselves are English, as the instructor reads them)."""
    from utils.grading.student_text import notes_title, translate
    if notes:
        text = (f"**{notes_title(language)}**\n\n"
                + "\n".join(f"- {translate(note, language)}" for note in notes))
        cell = nbformat.v4.new_markdown_cell(text)
        cell["id"] = "grader-notes"
        nb.cells.insert(0, cell)
