"""The named checks of a test cell share the student's answers (issue 35): a call to the
student's function with the same plain-data arguments runs once per input
(utils.grading.remote.Session), with the same result, in-place changes and errors as a real call.
A fake sandbox stands in for the student's process: it runs a local function and counts calls."""

import types

import pytest
import torch

from utils.grading import wire
from utils.grading.remote import RemoteObject, Session


class FakeSandbox:
    death = None
    limits = types.SimpleNamespace(message_mb=64)

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def wait_ready(self):
        pass

    def close(self):
        pass

    def request(self, header, buffers=(), deadline=None):
        if header["op"] == "run":
            return {"ok": True}, []
        assert header["op"] == "call"
        args, kwargs = wire.Decoder(buffers, lambda node: None).decode(header["args"])
        self.calls += 1
        try:
            result = self.fn(*args, **kwargs)
        except ValueError as error:
            return {"ok": False, "error": {"ename": "ValueError", "base": "ValueError",
                                           "evalue": str(error)}}, []
        encoder = wire.Encoder(lambda x: None, 2 ** 26)
        node = encoder.encode((result, [a for a in args if isinstance(a, torch.Tensor)]))
        return {"ok": True, "value": node}, encoder.buffers


def session_for(fn):
    sandbox = FakeSandbox(fn)
    session = Session(lambda: sandbox, notebook_deadline=float("inf"))
    session._ensure()                                   # the process starts: generation 1
    remote = RemoteObject(session, {"id": 1, "type": "function", "callable": True, "name": "f"})
    return session, sandbox, remote


def test_the_same_input_is_answered_once_with_an_independent_copy():
    session, sandbox, f = session_for(lambda x, scale=1.0: (x * scale, {"n": x.numel()}))
    x = torch.arange(4.0)
    first = f(x, scale=2.0)
    second = f(torch.arange(4.0), scale=2.0)
    assert sandbox.calls == 1 and torch.equal(first[0], second[0]) and second[1] == {"n": 4}
    first[0].add_(100)                                  # a test changing one result...
    assert torch.equal(f(x, scale=2.0)[0], torch.arange(4.0) * 2)   # ...changes no other
    f(x, scale=3.0), f(x + 1, scale=2.0), f(x.double(), scale=2.0)
    assert sandbox.calls == 4                           # another input: another call


def test_in_place_changes_and_errors_are_replayed_and_a_student_cell_forgets():
    def doubling(x):
        if x.numel() == 0:
            raise ValueError("empty input")
        x.mul_(2)
        return x.sum()
    session, sandbox, f = session_for(doubling)
    a, b = torch.ones(3), torch.ones(3)
    assert f(a).item() == 6 and f(b).item() == 6 and sandbox.calls == 1
    assert torch.equal(a, torch.full((3,), 2.0)) and torch.equal(b, a)   # both changed in place
    for _ in range(2):
        with pytest.raises(ValueError, match="empty input"):
            f(torch.ones(0))
    assert sandbox.calls == 2
    session.run_cell("cell 3", "x = 1")                 # the student's globals may have changed
    f(torch.ones(3))
    assert sandbox.calls == 3


def test_plain_torch_checks_compile_the_students_cells_once(monkeypatch):
    """check_plain_torch runs before every call of a test's helper: the student's cells are
    compiled once per session (they never change), while each check still asks the sandbox."""
    from utils.grading import checks, remote
    compiled = []
    real = remote.student_code_objects
    monkeypatch.setattr(remote, "student_code_objects",
                        lambda sources: compiled.append(1) or real(sources))
    session, sandbox, _ = session_for(lambda: None)
    session.student_sources = ["import torch\ndef f(x):\n    return torch.softmax(x, -1)\n",
                               "from utils.attention import soft_address\n"
                               "def g(x):\n    return soft_address(x, x, x)\n"]
    asked = []

    def request(header, buffers=(), deadline=None):
        asked.append(header["op"])
        name = "f" if header["ref"] == 1 else "g"
        modules = {"torch": "torch"} if name == "f" else {"soft_address": "utils.attention"}
        return {"ok": True, "value": {"is_function": True, "co_name": name,
                                      "modules": modules}}, []
    sandbox.request = request
    f = RemoteObject(session, {"id": 1, "type": "function", "callable": True, "name": "f"})
    g = RemoteObject(session, {"id": 2, "type": "function", "callable": True, "name": "g"})
    for _ in range(3):
        checks.check_plain_torch(f)
        with pytest.raises(AssertionError, match="soft_address"):
            checks.check_plain_torch(g)
    assert len(compiled) == 1 and asked == ["code"] * 6
