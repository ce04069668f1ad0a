"""A pool's slots share one sandbox template process but nothing a student can reach.

The pool's template (``SandboxTemplate(mother=True)``) imports torch once and clones one template
per worker slot, each in new PID, mount, network and IPC namespaces with its own empty ``/tmp``
and home directory (``utils.grading.template``). Two students graded at the same time in two
slots must not see each other's files, sockets or processes, the read-only binds under ``/tmp``
(a checkout there, the course data) must stay visible and read-only, and each slot's next
student must start from empty directories, as with a template per slot. Needs root and
bubblewrap, as grading does.
"""

import json
import os
import pathlib
import socket
import tempfile
import time

import pytest

from utils.grading.sandbox import Limits, Sandbox, SandboxTemplate, sandbox_uid

WRITE_AND_LISTEN = """\
import os, socket
open('/tmp/slot0-note', 'w').write('mine')
open('/home/student/slot0-note', 'w').write('mine')
abstract = socket.socket(socket.AF_UNIX)
abstract.bind('\\0clone-test')
abstract.listen()
tcp = socket.socket()
tcp.bind(('127.0.0.1', 0))
tcp.listen()
master, slave = os.openpty()
print('uid', os.getuid(), 'port', tcp.getsockname()[1], 'pts', sorted(os.listdir('/dev/pts')))
"""

LOOK_AROUND = """\
import os, socket
print('tmp', sorted(os.listdir('/tmp')), 'home', sorted(os.listdir('/home/student')))
print('uid', os.getuid(), 'pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
print('pts', sorted(os.listdir('/dev/pts')))
for name, family, address in [('abstract', socket.AF_UNIX, '\\0clone-test'),
                              ('tcp', socket.AF_INET, ('127.0.0.1', PORT))]:
    try:
        socket.socket(family).connect(address)
        print(name, 'CONNECTED')
    except OSError as error:
        print(name, 'blocked', type(error).__name__)
print('data', open(DATA + '/fact.txt').read())
try:
    open(DATA + '/mine.txt', 'w')
    print('data WROTE')
except OSError as error:
    print('data blocked', type(error).__name__)
"""


def children(pid: int) -> list:
    """The child processes of ``pid`` (all its threads')."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as stream:
            found += stream.read().split()
    return found


def run(sandbox: Sandbox, source: str) -> str:
    reply, _ = sandbox.request({"op": "run", "source": source, "label": "cell"},
                               deadline=time.monotonic() + 60)
    assert reply.get("ok"), reply
    return reply["stdout"]


@pytest.fixture(scope="module")
def pool():
    with tempfile.TemporaryDirectory(prefix="clone-test-") as tmp:     # under /tmp
        data = pathlib.Path(tmp) / "data"
        data.mkdir()
        (data / "fact.txt").write_text("read-only")
        limits = Limits()
        mother = SandboxTemplate(limits, 0, extra_read_only=[str(data)], mother=True)
        asked = mother.ask_clone()                 # asked before it is ready, as a pool does
        clones = [mother.clone(0, asked), mother.clone(1)]
        try:
            yield limits, clones, str(data)
        finally:
            for template in [*clones, mother]:
                template.close()


def test_two_slots_share_no_file_socket_terminal_or_process(pool):
    limits, clones, data = pool
    first, second = (Sandbox(limits, slot=slot, template=clones[slot]) for slot in (0, 1))
    try:
        said = run(first, WRITE_AND_LISTEN).split()
        assert said[:2] == ["uid", str(sandbox_uid(0))]
        seen = run(second, LOOK_AROUND.replace("PORT", said[3]).replace("DATA", repr(data)))
    finally:
        first.close()
        second.close()
    assert "slot0-note" not in seen and f"uid {sandbox_uid(1)} " in seen, seen
    assert "home []" in seen, seen
    assert "abstract blocked" in seen and "tcp blocked" in seen and "CONNECTED" not in seen
    assert "data read-only" in seen and "data blocked" in seen and "WROTE" not in seen
    assert "pids [1, 2]\n" in seen, seen     # its namespace's init and itself, nobody else
    assert "'0'" in " ".join(said) and "pts ['ptmx']" in seen, (said, seen)   # ptys: its own


def test_a_slots_next_student_starts_with_empty_directories(pool):
    limits, clones, _ = pool
    first = Sandbox(limits, slot=0, template=clones[0])
    try:
        run(first, "open('/tmp/left-behind', 'w').write('x')\n"
                   "open('/home/student/left-behind', 'w').write('x')\n")
    finally:
        first.close()
    nxt = Sandbox(limits, slot=0, template=clones[0])
    try:
        seen = run(nxt, "import os\nprint(os.listdir('/home/student'), "
                        "[n for n in os.listdir('/tmp') if n.startswith('left')])\n")
    finally:
        nxt.close()
    assert seen.strip() == "[] []", seen


def test_a_malformed_request_is_answered_and_the_template_goes_on(pool):
    """A fork request without its settings fails in the forked helper: the template says why,
    and the helper ends there (it never returns to the template's loop to answer requests)."""
    limits, clones, _ = pool
    template = clones[1]
    template.wait_ready()
    pipes = [os.pipe() for _ in range(4)]
    try:
        socket.send_fds(template.control, [json.dumps({"op": "fork"}).encode()],
                        [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]])
        reply, fds = template._receive(time.monotonic() + 30)
    finally:
        for read, write in pipes:
            os.close(read)
            os.close(write)
    assert reply == {"ok": False, "error": "KeyError: 'settings'"} and fds == []
    with open(f"/proc/self/fdinfo/{template.pidfd}") as stream:
        pid = next(int(line.split()[1]) for line in stream if line.startswith("Pid:"))
    deadline = time.monotonic() + 10                 # the failed helper exits and is reaped
    while children(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children(pid) == [], "the failed helper lives on"
    sandbox = Sandbox(limits, slot=1, template=template)
    try:
        assert run(sandbox, "print(6 * 7)\n").strip() == "42"
    finally:
        sandbox.close()
