"""The grader's side of the sandbox: a session that runs student cells and stand-ins for
student objects that test cells can call.

Test cells run in the grader's own (trusted) process. A student function they call is a
``RemoteObject``: calling it sends the arguments as plain data to the sandbox, runs the
student's function there and brings back its result as plain data (tensors, arrays, numbers,
strings, lists, tuples, dicts) or as another ``RemoteObject``. In-place changes the student's
function makes to tensor arguments are copied back, so "must not change its inputs" tests work.
A ``RemoteObject`` cannot be compared, tested for truth or converted to a number: only data
the student computed reaches the checks, and the checks, ``torch``, ``numpy`` and builtins
they use are the grader's, which the student's process never touched.

The named checks of a test cell often call the student's function on the same input. A call
whose arguments are plain data (no student object) is answered once per input: a repeated call
with equal arguments gets a copy of the first result, and the first call's in-place changes to
its tensor arguments are made again on the new ones. A student cell that runs, or a restarted
process, forgets every answer (the student's globals may have changed).
"""

import ast
import builtins
import copy
import hashlib
import importlib
import time

from utils.grading import wire
from utils.grading.sandbox import Sandbox, SandboxDied

# Library callables a test may pass to student code by name (resolved inside the sandbox).
SYMBOL_MODULES = ("torch", "numpy", "math", "builtins", "operator", "functools")


class GradingError(Exception):
    """The grader could not run this part of the student's work; the message says why."""


class StudentError(Exception):
    """Base of exceptions raised by the student's code (re-created here by class name)."""

    student_traceback = ()


_ERROR_CLASSES = {}


def student_exception(error: dict) -> BaseException:
    """An exception the test cell can catch: same class name and builtin base as the
    student's, message and traceback as text. Never SystemExit/KeyboardInterrupt here."""
    base = getattr(builtins, str(error.get("base")), None)
    if not (isinstance(base, type) and issubclass(base, Exception)) or base is StopIteration:
        base = Exception
    name = str(error.get("ename") or "Exception")[:100]
    key = (name, base)
    if key not in _ERROR_CLASSES:
        _ERROR_CLASSES[key] = type(name if name.isidentifier() else "StudentError",
                                   (base, StudentError), {"__module__": "student"})
    exception = _ERROR_CLASSES[key](str(error.get("evalue", ""))[:20_000])
    exception.student_traceback = [str(x)[:20_000] for x in error.get("traceback", [])][:40]
    return exception


class RemoteObject:
    """Stand-in for an object that lives in the student's process."""

    __slots__ = ("_session", "_id", "_generation", "_type", "_callable", "_name")

    def __init__(self, session, node):
        self._session, self._generation = session, session.generation
        self._id = node.get("id")
        self._type = str(node.get("type", "object"))[:100]
        self._callable = node.get("callable") is True
        self._name = str(node.get("name", ""))[:100]

    @property
    def __name__(self):
        return self._name or self._type

    def __repr__(self):
        return f"<student's {self._type} {self._name}>".replace(" >", ">")

    def __call__(self, *args, **kwargs):
        return self._session.call(self, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._session.simple(self, "getattr", name=name)

    def __getitem__(self, key):
        return self._session.simple(self, "getitem", key=key)

    def __len__(self):
        value = self._session.simple(self, "len")
        if type(value) is not int or value < 0:
            raise GradingError("the student's __len__ did not return a count")
        return value

    def __iter__(self):
        items = self._session.simple(self, "iter")
        if type(items) is not list:
            raise GradingError("the student's object could not be iterated")
        return iter(items)

    def _not_data(self, *args):
        raise TypeError(f"{self!r} is not plain data (a tensor, array, number, string, list, "
                        f"tuple or dict), so the grader cannot compare or convert it")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _not_data
    __float__ = __int__ = __index__ = __complex__ = __contains__ = _not_data
    __hash__ = object.__hash__

    def grading_code_view(self):
        """For checks.check_plain_torch: (is_function, code objects compiled here from the
        student's own source, {global name: module}, names the source imports, by module)."""
        return self._session.code_view(self)


class Session:
    """The student's sandboxed process for one submission, restarted after a crash or timeout.

    ``replay`` holds the cells that ran without error; after a restart they run again (their
    output discarded) so that later exercises see the same definitions.
    """

    def __init__(self, make_sandbox, notebook_deadline: float, student_sources=()):
        self.make_sandbox, self.notebook_deadline = make_sandbox, notebook_deadline
        self.student_sources = list(student_sources)
        self._student_codes = None      # student_code_objects(student_sources), made once
        self.sandbox, self.generation = None, 0
        self.replay, self.broken = [], None
        self.cell_deadline = notebook_deadline
        self.restarts = 0
        self.answers = {}               # (generation, ref, hash of the arguments) -> result

    # --- lifetime -------------------------------------------------------------------------------
    def deadline(self) -> float:
        return min(self.cell_deadline, self.notebook_deadline)

    def _ensure(self) -> Sandbox:
        if self.broken:
            raise GradingError(self.broken)
        if self.sandbox is not None and not self.sandbox.death:
            return self.sandbox
        if self.sandbox is not None:
            self.sandbox.close()
            self.restarts += 1
        if time.monotonic() > self.notebook_deadline:
            self.broken = "the notebook's time budget is used up"
            raise GradingError(self.broken)
        self.generation += 1
        remaining = self.cell_deadline - time.monotonic()
        try:
            self.sandbox = self.make_sandbox()
            self.sandbox.wait_ready()
            for label, source in self.replay:
                reply, _ = self.sandbox.request({"op": "run", "source": source, "label": label},
                                                deadline=self.notebook_deadline)
                if not reply.get("ok"):
                    raise SandboxDied(f"cell {label} failed when it was run again")
        except (SandboxDied, TimeoutError) as error:
            self.broken = (f"the student's process could not be restored after it was "
                           f"stopped ({error})")
            raise GradingError(self.broken) from None
        # Starting and replaying is the grader's time, not the current cell's.
        self.cell_deadline = time.monotonic() + max(remaining, 0.0)
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()

    def _request(self, header, buffers=()):
        sandbox = self._ensure()
        reply, reply_buffers = sandbox.request(header, buffers, self.deadline())
        return reply, reply_buffers

    # --- cells ----------------------------------------------------------------------------------
    def run_cell(self, label: str, source: str, remember=True) -> dict:
        """Run one student (or setup) cell; the reply (ok, stdout, stderr, display, error)."""
        self.answers.clear()
        reply, _ = self._request({"op": "run", "source": source, "label": label})
        if reply.get("ok") and remember:
            self.replay.append((label, source))
        return reply

    def fetch(self, names) -> dict:
        """The student's values of these global names (those that exist)."""
        reply, buffers = self._request({"op": "fetch", "names": sorted(names)})
        values = self._value(reply, buffers)
        if type(values) is not dict or any(type(k) is not str for k in values):
            raise GradingError("the student's process answered with something else than names")
        return values

    # --- remote objects -------------------------------------------------------------------------
    def _check(self, obj: RemoteObject) -> None:
        if obj._session is not self or obj._generation != self.generation:
            raise GradingError(f"{obj!r} no longer exists: the student's process was "
                               f"restarted after it was stopped")

    def _encode(self, value):
        def make_ref(x):
            if isinstance(x, RemoteObject):
                self._check(x)
                return {"t": "ref", "id": x._id}
            symbol = _symbol(x)
            if symbol:
                return {"t": "ref", "id": None, "symbol": symbol}
            raise TypeError(f"a test passes a {type(x).__name__} to the student's code; only "
                            f"plain data (tensors, arrays, numbers, strings, lists, tuples, "
                            f"dicts) can cross into the sandbox")
        encoder = wire.Encoder(make_ref, self.sandbox.limits.message_mb * 2 ** 20
                               if self.sandbox else 64 * 2 ** 20)
        return encoder.encode(value), encoder.buffers, encoder.tensors

    def _value(self, reply, buffers):
        if not reply.get("ok"):
            raise student_exception(reply.get("error") or {})
        decoder = wire.Decoder(buffers, lambda node: RemoteObject(self, node))
        try:
            return decoder.decode(reply.get("value"))
        except (wire.WireError, ValueError, TypeError, OverflowError) as error:
            raise GradingError(f"the student's process sent an invalid value: {error}") from None

    def call(self, obj: RemoteObject, args, kwargs):
        self._check(obj)
        node, buffers, sent = self._encode((list(args), dict(kwargs)))
        key = _call_key(self.generation, obj._id, node, buffers)
        if key in self.answers:                     # the same input again: the same answer
            result, after, error = self.answers[key]
            if error is not None:
                raise student_exception(error)
            _write_back(sent, after)
            return copy.deepcopy(result)
        reply, reply_buffers = self._request({"op": "call", "ref": obj._id, "args": node},
                                             buffers)
        try:
            value = self._value(reply, reply_buffers)
        except StudentError:
            if key is not None:
                self.answers[key] = (None, None, reply.get("error") or {})
            raise
        if type(value) is not tuple or len(value) != 2 or type(value[1]) is not list:
            raise GradingError("the student's process sent a malformed call result")
        result, after = value
        if key is not None and not _holds_remote(result):
            self.answers[key] = (copy.deepcopy(result), copy.deepcopy(after), None)
        _write_back(sent, after)
        return result

    def simple(self, obj: RemoteObject, op: str, **fields):
        self._check(obj)
        buffers = []
        if "key" in fields:
            node, buffers, _ = self._encode(fields["key"])
            fields["key"] = node
        reply, reply_buffers = self._request({"op": op, "ref": obj._id, **fields}, buffers)
        return self._value(reply, reply_buffers)

    def code_view(self, obj: RemoteObject):
        self._check(obj)
        reply, _ = self._request({"op": "code", "ref": obj._id})
        info = reply.get("value") if reply.get("ok") else None
        if type(info) is not dict:
            raise GradingError("the student's process did not describe its function")
        co_name = info.get("co_name")
        modules = info.get("modules") if type(info.get("modules")) is dict else {}
        if self._student_codes is None:             # the sources never change: compile once
            self._student_codes = student_code_objects(self.student_sources)
        codes, imported = self._student_codes
        matching = [c for c in codes if c.co_name == co_name and co_name != "<module>"]
        return (info.get("is_function") is True, matching,
                {str(k): str(v) for k, v in modules.items()}, imported)


def _call_key(generation, ref, node, buffers):
    """A key for a call whose arguments are plain data, or None when they hold a reference
    (a student object or a library callable: its state may change between calls)."""
    text = repr(node)
    if "'ref'" in text:
        return None
    digest = hashlib.sha256(text.encode())
    for buffer in buffers:
        digest.update(len(buffer).to_bytes(8, "little"))
        digest.update(bytes(buffer))
    return generation, ref, digest.hexdigest()


def _holds_remote(value) -> bool:
    """True if ``value`` (plain data) holds a RemoteObject anywhere."""
    if isinstance(value, RemoteObject):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_remote(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_remote(k) or _holds_remote(v) for k, v in value.items())
    return False


def _symbol(x):
    """'module:qualname' for a library callable that the sandbox can import by name."""
    module, qualname = getattr(x, "__module__", None), getattr(x, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)
            and module.split(".")[0] in SYMBOL_MODULES and "<" not in qualname):
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if obj is x else None


def _write_back(sent, after) -> None:
    """Copy the student's in-place changes to tensor arguments into the test's tensors."""
    import torch
    if len(after) != len(sent):
        return
    with torch.no_grad():
        for original, changed in zip(sent, after):
            if not isinstance(changed, torch.Tensor):
                continue
            if changed.shape == original.shape and changed.dtype == original.dtype:
                if not torch.equal(original, changed):
                    original.copy_(changed)
            else:
                original.data = changed


def student_code_objects(sources):
    """Every code object compiled (not run) from the student's cells, and the names their
    import statements bind: {bound name: imported module}."""
    from IPython.core.inputtransformer2 import TransformerManager
    transformer, codes, imported = TransformerManager(), [], {}
    for index, source in enumerate(sources):
        try:
            text = transformer.transform_cell(source)
            tree = ast.parse(text)
            stack = [compile(tree, f"<student cell {index}>", "exec", dont_inherit=True)]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imported[alias.asname or alias.name.split(".")[0]] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        while stack:
            code = stack.pop()
            codes.append(code)
            stack.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return codes, imported
