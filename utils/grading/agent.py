"""The student's side of grading: runs inside the sandbox and answers requests with plain data.

Forked per student by ``utils.grading.template`` (see there), or started by
``utils.grading.sandbox`` as ``python -m utils.grading.agent <limits JSON>``. It drops root (if
started as root), sets its resource limits, has torch imported, and then serves
requests read from stdin, replying on a private copy of stdout; the student's own fd 1 and 2
go to a separate, size-capped pipe. Requests:

    run      execute one of the student's cells (IPython syntax; stdout captured)
    fetch    global names -> values (data, or refs to objects that stay here)
    call / getattr / getitem / len / iter / repr    on a ref
    code     what ``checks.check_plain_torch`` needs to know about a function ref

Nothing here is trusted by the grader: everything this process says counts as the student's
answer, and the grader's verdicts are computed elsewhere.
"""

import ast
import io
import json
import os
import resource
import sys
import traceback

MAX_TEXT = 20_000                  # characters of captured output per request
MAX_ITER = 100_000                 # items when the grader iterates over a student object


def _drop_privileges(uid: int) -> None:
    """Running as root (bwrap without a user namespace): become an unprivileged uid."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def _set_limits(limits: dict) -> None:
    memory = limits["memory_mb"] * 2 ** 20
    for name, value in [("RLIMIT_AS", memory), ("RLIMIT_NPROC", limits["processes"]),
                        ("RLIMIT_FSIZE", limits["file_mb"] * 2 ** 20), ("RLIMIT_CORE", 0),
                        ("RLIMIT_NOFILE", 256), ("RLIMIT_CPU", limits["cpu_seconds"])]:
        resource.setrlimit(getattr(resource, name), (value, value))


class CappedText(io.TextIOBase):
    """A text stream keeping the first MAX_TEXT characters and counting the rest."""

    def __init__(self):
        self.parts, self.kept, self.dropped = [], 0, 0

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        room = MAX_TEXT - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def value(self) -> str:
        tail = f"\n[... {self.dropped} more characters not shown]" if self.dropped else ""
        return "".join(self.parts) + tail


class _ShellStub:
    """``get_ipython()`` for transformed IPython syntax: magics and shell commands do nothing."""

    def _ignored(self, kind, *args, **kwargs):
        print(f"[grader: {kind} {' '.join(str(a) for a in args[:2])!s:.60} ignored]")

    def run_line_magic(self, *args, **kwargs):
        self._ignored("magic", *args)

    def run_cell_magic(self, *args, **kwargs):
        self._ignored("cell magic", *args)

    def system(self, *args, **kwargs):
        self._ignored("shell command", *args)

    getoutput = system


class Agent:
    def __init__(self, reply_fd: int, max_bytes: int):
        from utils.grading import wire
        self.wire = wire
        self.reply_fd, self.max_bytes = reply_fd, max_bytes
        self.reader = wire.MessageReader(0, max_bytes)
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__,
                          "get_ipython": _ShellStub}
        self.objects, self.next_id = {}, 1
        self.transformer = None        # IPython's, imported for the first cell with magics

    # --- values ---------------------------------------------------------------------------------
    def _make_ref(self, obj) -> dict:
        ref_id, self.next_id = self.next_id, self.next_id + 1
        self.objects[ref_id] = obj
        return {"t": "ref", "id": ref_id, "type": type(obj).__name__[:100],
                "callable": callable(obj), "name": str(getattr(obj, "__name__", ""))[:100]}

    def _resolve(self, node):
        ref_id = node.get("id")
        if ref_id in self.objects:
            return self.objects[ref_id]
        if node.get("t") == "ref" and "symbol" in node:
            return self._symbol(node["symbol"])
        raise KeyError(f"unknown object {ref_id!r}")

    @staticmethod
    def _symbol(path: str):
        """A library function the grader passes as an argument, e.g. "torch:softmax"."""
        import importlib
        module, _, qualname = path.partition(":")
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def encode(self, value):
        encoder = self.wire.Encoder(self._make_ref, self.max_bytes)
        return encoder.encode(value), encoder.buffers

    def decode(self, node, buffers):
        decoder = self.wire.Decoder(buffers, self._resolve)
        return decoder.decode(node), decoder.tensors

    # --- requests -------------------------------------------------------------------------------
    def _run(self, request, buffers):
        source = request["source"]
        try:
            tree = ast.parse(source, filename=request.get("label", "<cell>"))
        except SyntaxError:            # maybe IPython syntax (%magic, !command)
            if self.transformer is None:
                from IPython.core.inputtransformer2 import TransformerManager
                self.transformer = TransformerManager()
            source = self.transformer.transform_cell(source)
            tree = ast.parse(source, filename=request.get("label", "<cell>"))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        code = compile(tree, request.get("label", "<cell>"), "exec")
        exec(code, self.namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), request.get("label", "<cell>"),
                                 "eval"), self.namespace)
            if value is not None:
                return {"display": repr(value)[:MAX_TEXT]}
        return {}

    def _fetch(self, request, buffers):
        names = [n for n in request["names"] if isinstance(n, str) and n in self.namespace]
        found = {name: self.namespace[name] for name in names}
        node, out = self.encode(found)
        return {"value": node}, out

    def _call(self, request, buffers):
        target = self.objects[request["ref"]]
        (args, kwargs), tensors = self.decode(request["args"], buffers)
        result = target(*args, **kwargs)
        # The arguments' tensors as they are now: the grader copies in-place changes back.
        return self._reply_value((result, tensors))

    def _reply_value(self, value):
        node, out = self.encode(value)
        return {"value": node}, out

    def _code(self, request, buffers):
        fn = self.objects[request["ref"]]
        code = getattr(fn, "__code__", None)
        names = set()
        if code is not None:
            stack = [code]
            while stack:
                current = stack.pop()
                names.update(current.co_names)
                stack.extend(c for c in current.co_consts if hasattr(c, "co_names"))
        glob = getattr(fn, "__globals__", {})
        modules = {}
        for name in sorted(names):
            if name in glob:
                target = glob[name]
                modules[name] = str(getattr(target, "__module__", None)
                                    or getattr(target, "__name__", ""))[:200]
        return {"value": {"is_function": type(fn).__name__ == "function",
                          "co_name": getattr(code, "co_name", None),
                          "modules": modules}}

    def handle(self, request, buffers):
        op = request.get("op")
        if op == "run":
            return self._run(request, buffers), []
        if op == "fetch":
            return self._fetch(request, buffers)
        if op == "call":
            return self._call(request, buffers)
        if op == "code":
            return self._code(request, buffers), []
        if op == "release":
            for ref_id in request.get("refs", []):
                self.objects.pop(ref_id, None)
            return {}, []
        target = self.objects[request["ref"]]
        if op == "getattr":
            return self._reply_value(getattr(target, request["name"]))
        if op == "getitem":
            key, _ = self.decode(request["key"], buffers)
            return self._reply_value(target[key])
        if op == "len":
            return self._reply_value(int(len(target)))
        if op == "iter":
            items = []
            for item in target:
                items.append(item)
                if len(items) > MAX_ITER:
                    raise ValueError(f"more than {MAX_ITER} items")
            return self._reply_value(items)
        if op in ("repr", "str"):
            return {"value": (repr if op == "repr" else str)(target)[:MAX_TEXT]}, []
        raise ValueError(f"unknown request {op!r}")

    def serve(self) -> None:
        pid = os.getpid()
        while True:
            try:
                request, buffers = self.reader.read()
            except self.wire.PeerGone:
                return
            stdout, stderr = CappedText(), CappedText()
            sys.stdout, sys.stderr = stdout, stderr
            try:
                reply, out = self.handle(request, buffers)
                reply["ok"] = True
            except BaseException as error:          # noqa: BLE001 - reported to the grader
                if isinstance(error, SystemExit) and request.get("op") != "run":
                    pass
                reply, out = {"ok": False, "error": _describe(error)}, []
            finally:
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
                if os.getpid() != pid:         # a child the student forked: never answer
                    os._exit(0)
            reply.update(stdout=stdout.value(), stderr=stderr.value())
            try:
                self.wire.write_message(self.reply_fd, reply, out)
            except self.wire.WireError as error:
                self.wire.write_message(self.reply_fd, {
                    "ok": False, "error": _describe(error), "stdout": reply["stdout"],
                    "stderr": reply["stderr"]})


def _describe(error: BaseException) -> dict:
    """An exception as strings: class name, builtin base, message, formatted traceback."""
    base = next((c.__name__ for c in type(error).__mro__
                 if c.__module__ == "builtins" and issubclass(c, BaseException)), "Exception")
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    # Drop this module's frames: the student needs their own code, not the grader's.
    lines = [line for line in lines if "utils/grading/agent.py" not in line]
    try:
        message = str(error)
    except Exception:                                   # noqa: BLE001
        message = "<unprintable>"
    return {"ename": type(error).__name__[:100], "base": base, "evalue": message[:MAX_TEXT],
            "traceback": [line[:MAX_TEXT] for line in lines[-30:]]}


def warm_imports(modules=()) -> None:
    """Import torch (and what its first use pulls in), numpy, the checks and ``modules`` (those
    the assignment's locked setup cells import), so no student cell pays for them."""
    import importlib
    import torch
    torch.set_num_threads(1)
    import numpy  # noqa: F401  (warm import: the student's first cell runs quickly)
    import utils.grading.checks  # noqa: F401
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:                           # noqa: BLE001 - the cell will say why
            pass


def start(limits: dict, reply_fd: int) -> None:
    """Become the student's process (uid, rlimits, working directory) and serve requests."""
    _drop_privileges(limits["uid"])
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()            # a fresh seed per student, as in a new process
    _set_limits(limits)
    os.chdir(limits["workdir"])
    agent = Agent(reply_fd, limits["max_bytes"])
    agent.wire.write_message(reply_fd, {"ok": True, "ready": True})
    agent.serve()


def main() -> None:
    limits = json.loads(sys.argv[1])
    # Replies go to a private copy of fd 1; the student's fd 1 and 2 go to the capped pipe.
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    _drop_privileges(limits["uid"])
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    warm_imports(limits.get("imports", ()))
    start(limits, reply_fd)


if __name__ == "__main__":
    main()
