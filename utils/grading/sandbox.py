"""Start the student's process (``utils.grading.agent``) in a bubblewrap sandbox and talk to it.

What the sandbox sees: the Python installation and the course's virtual environment
(read-only), the course library ``<repo>/utils`` (read-only, not ``chapters/`` or ``tests/``),
``/usr`` (read-only), an empty private ``/tmp`` and home directory (64 MB tmpfs each), its own
``/proc`` and a minimal ``/dev``. No network (own network namespace), own PID, IPC and UTS
namespaces, killed with its parent. Started as root, the agent becomes an unprivileged uid
(one per worker slot) before it reads any student code, so the process limit applies.

Limits: address space and processes (rlimits set by the agent), total memory of the process
tree and raw output size (watched from outside), and a deadline on every request. When one is
exceeded the whole sandbox is killed and ``SandboxDied`` says why in words. A death the grader
did not cause (a signal it did not send as one of these limits, or a start-up that failed) is
also kept in ``Sandbox.foreign``: the submission is then graded again (``utils.grading.worker``).
So is a deadline missed while the student's processes mostly waited for a CPU that other
processes held (another student's fork bomb in the next slot, a busy machine): see ``_starved``.
"""

import dataclasses
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from utils.grading import GRADING_ENV_VAR, wire

REPO = pathlib.Path(__file__).resolve().parents[2]
SANDBOX_UID_BASE = 61000          # uid of worker slot k when the grader runs as root: 61000 + k
# Another base for the sandbox uids (two graders on one machine, e.g. the two lanes of
# `make test`: their sandboxes then never share a uid, its process limit or its processes).
UID_BASE_ENV_VAR = "ATTENTION_COURSE_SANDBOX_UID_BASE"
MAX_SLOTS = 256                   # the uids base .. base + 255 are reserved for sandboxes
STARTUP_SECONDS = 180             # importing torch on a busy machine


class SandboxDied(RuntimeError):
    """The student's process is gone (crash, limit, timeout); ``str()`` is the reason."""


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or does not work here."""


@dataclasses.dataclass
class Limits:
    memory_mb: int = 2048          # address space of each process and RSS of the whole tree
    processes: int = 64            # processes and threads of the sandbox's uid
    file_mb: int = 64              # largest file the student may write (tmpfs sizes too)
    output_mb: int = 8             # raw bytes written to fd 1/2 (Python-level output is capped)
    message_mb: int = 64           # largest answer (tensors) sent to the grader
    cpu_seconds: int = 3600        # CPU time per process (a backstop; deadlines come first)


def sandbox_uid(slot: int) -> int:
    """The unprivileged uid of worker slot ``slot``'s sandboxes: ``SANDBOX_UID_BASE + slot``,
    or ``$ATTENTION_COURSE_SANDBOX_UID_BASE + slot``. The uids must belong to no user."""
    raw = os.environ.get(UID_BASE_ENV_VAR, "").strip()
    try:
        base = int(raw) if raw else SANDBOX_UID_BASE
    except ValueError:
        base = -1
    if not 1000 <= base <= 2 ** 31 - 1 - MAX_SLOTS:
        raise ValueError(f"${UID_BASE_ENV_VAR} must be a number from 1000 to "
                         f"{2 ** 31 - 1 - MAX_SLOTS} (a range of {MAX_SLOTS} uids no user has), "
                         f"not {raw!r}")
    if not 0 <= slot < MAX_SLOTS:
        raise ValueError(f"worker slot {slot} is not below {MAX_SLOTS}")
    return base + slot


def bwrap_path():
    return shutil.which("bwrap")


def _ancestors(path: pathlib.Path):
    return [p for p in reversed(path.parents) if str(p) != "/"]


def _binds(extra_read_only=()) -> list:
    """The host paths the sandbox sees read-only (besides /usr and the system directories)."""
    binds = [pathlib.Path(sys.base_prefix).resolve(), pathlib.Path(sys.prefix).resolve(),
             REPO / "utils", *[pathlib.Path(p).resolve() for p in extra_read_only]]
    return [b for b in dict.fromkeys(binds) if not str(b).startswith("/usr/")]


def bwrap_command(workdir_size: int, extra_read_only=()) -> list:
    """The bwrap prefix: namespaces and the read-only view of the interpreter and library."""
    binds = _binds(extra_read_only)
    command = [bwrap_path(), "--unshare-ipc", "--unshare-pid", "--unshare-net",
               "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
               "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        target = pathlib.Path("/" + name)
        if target.is_symlink():
            command += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            command += ["--ro-bind", str(target), str(target)]
    if os.getuid() != 0:
        command.insert(1, "--unshare-user")
    # The private /tmp and home first, the read-only binds after: a checkout that lives under
    # /tmp (e.g. a CI clone) must stay visible on top of the empty tmpfs.
    command += ["--proc", "/proc", "--dev", "/dev",
                "--perms", "01777", "--size", str(workdir_size), "--tmpfs", "/tmp",
                "--perms", "01777", "--size", str(workdir_size), "--tmpfs", "/home/student"]
    made, bound = set(), []
    for bind in sorted(binds, key=lambda b: len(b.parts)):
        if any(b == bind or b in bind.parents for b in bound):
            continue                                   # already visible through a parent
        for parent in _ancestors(bind):
            if parent not in made:
                command += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        command += ["--ro-bind", str(bind), str(bind)]
        bound.append(bind)
    command += ["--chdir", "/home/student", "--clearenv"]
    return command


def _environment(sandboxed: bool) -> dict:
    env = {"HOME": "/home/student" if sandboxed else "", "LANG": "C.UTF-8",
           "PATH": f"{pathlib.Path(sys.executable).parent}:/usr/bin:/bin",
           "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", GRADING_ENV_VAR: "1"}
    data = os.environ.get("ATTENTION_COURSE_DATA")
    if data:
        env["ATTENTION_COURSE_DATA"] = data
    return env


def check_bwrap() -> None:
    """Raise SandboxUnavailable with the fix unless bubblewrap can start a sandbox here."""
    if not bwrap_path():
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so student code cannot be sandboxed; install "
            "it (Debian/Ubuntu: sudo apt-get install bubblewrap) or, only for trusted "
            "submissions, pass --allow-unsandboxed")
    command = bwrap_command(2 ** 20) + ["--", sys.executable, "-c", "print('ok')"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode != 0 or result.stdout.strip() != "ok":
        problem = result.stderr.strip()[:300]
        raise SandboxUnavailable(
            f"bubblewrap is installed but cannot create a sandbox here ({problem}); allow "
            f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
            f"user.max_user_namespaces) or run the grader as root, or, only for trusted "
            f"submissions, pass --allow-unsandboxed")


def _tree(pid: int) -> list:
    """pid and all its descendants (via /proc/<pid>/task/<tid>/children)."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as stream:
                    stack.extend(int(c) for c in stream.read().split())
        except (OSError, ValueError):
            continue
    return found


def _memory_bytes(pids) -> int:
    """Proportional set size of the processes (shared pages counted once, e.g. after fork);
    resident size where smaps_rollup cannot be read."""
    page, total = os.sysconf("SC_PAGE_SIZE"), 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as stream:
                total += next(int(line.split()[1]) * 1024 for line in stream
                              if line.startswith("Pss:"))
            continue
        except (OSError, ValueError, IndexError, StopIteration):
            pass
        try:
            with open(f"/proc/{pid}/statm") as stream:
                total += int(stream.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


def _schedule(pids) -> tuple:
    """(CPU time, time spent runnable but waiting for a CPU), in seconds, summed over ``pids``
    (``/proc/<pid>/schedstat``; processes already gone count nothing)."""
    ran = waited = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")          # every thread of the process
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as stream:
                    fields = stream.read().split()
                ran, waited = ran + int(fields[0]), waited + int(fields[1])
            except (OSError, ValueError, IndexError):
                continue
    return ran / 1e9, waited / 1e9


# A missed deadline is the machine's doing, not the student's, when over the request the
# student's processes together ran less than this share of the wall time and waited for a CPU
# more than this share of it (a process that sleeps waits for nothing; one that spins runs).
STARVED_SHARE = 0.5
# The window of that comparison opens at the latest look at the student's processes, taken at
# most this long before the request: a deadline is seconds, and a request about a millisecond,
# so walking /proc at every request (about 0.2 ms each, 60 a submission) bought nothing.
SCHEDULE_LOOK_SECONDS = 0.25


def _starved(before: tuple, after: tuple, wall: float) -> bool:
    """Whether a request that took ``wall`` seconds was starved of CPU (see STARVED_SHARE)."""
    ran, waited = after[0] - before[0], after[1] - before[1]
    return wall > 0 and ran < STARVED_SHARE * wall and waited > STARVED_SHARE * wall


def _foreign_signal(code):
    """The signal's name if ``code`` is a death by a signal that no limit of the grader sends
    (the grader's own kills are recorded before they happen), else None. SIGXCPU is the CPU-time
    limit's."""
    if code is None or code >= 0:
        return None
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return None if name == "SIGXCPU" else name


class ForkedProcess:
    """A student process forked by a ``SandboxTemplate``, with the parts of ``Popen`` that
    ``Sandbox`` uses. ``pid`` is its namespace's init (the grader's process, not the student's):
    killing it kills every process of the student at once."""

    def __init__(self, pidfd: int, stdin: int, stdout: int, stderr: int, status: int):
        self.pidfd, self.status_fd, self.returncode = pidfd, status, None
        self.stdin = open(stdin, "wb", buffering=0)
        self.stdout = open(stdout, "rb", buffering=0)
        self.stderr = open(stderr, "rb")
        self.pid = -1
        with open(f"/proc/self/fdinfo/{pidfd}") as stream:
            for line in stream:
                if line.startswith("Pid:"):
                    self.pid = int(line.split()[1])

    def _read_status(self) -> None:
        if self.status_fd is None or not select.select([self.status_fd], [], [], 0)[0]:
            return
        data = os.read(self.status_fd, 4096)
        try:
            code = json.loads(data.decode()).get("exit") if data else None
        except (ValueError, AttributeError):
            code = None
        self.returncode = code if type(code) is int else -signal.SIGKILL
        os.close(self.status_fd)
        self.status_fd = None

    def _init_exited(self, timeout: float = 0) -> bool:
        return bool(select.select([self.pidfd], [], [], timeout)[0])

    def poll(self):
        """The student's exit code (negative: the signal) once its init has ended, else None."""
        if self.returncode is None and self._init_exited():
            self._read_status()
            if self.returncode is None:            # the init was killed: no status
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float = None):
        if self.returncode is None and not self._init_exited(timeout):
            raise subprocess.TimeoutExpired("student process", timeout)
        return self.poll()

    def kill(self) -> None:
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for fd in (self.pidfd, self.status_fd):
            if fd is not None:
                os.close(fd)
        self.pidfd = self.status_fd = None


class SandboxTemplate:
    """A bubblewrap sandbox whose process (``utils.grading.template``) has imported torch once
    and forks a fresh student process per ``Sandbox``, in new PID, mount and IPC namespaces,
    after killing what was left of the previous one and emptying the writable directories.
    A pool of workers starts one with ``mother=True`` and ``clone``s a template per slot from it
    (one torch import for all); a lone worker starts its own. Needs the grader to run as root
    (the template makes namespaces)."""

    def __init__(self, limits: Limits, slot: int = 0, extra_read_only=(), imports=(),
                 mother: bool = False):
        self.limits, self.slot = limits, slot
        self.broken = None
        binds = _binds(extra_read_only)
        keep = [str(b) for b in binds
                if any(str(b).startswith(root + "/") for root in ("/tmp", "/home/student"))]
        settings = {"imports": list(imports), "keep": keep, "mother": mother,
                    "size": limits.file_mb * 2 ** 20}
        command = bwrap_command(limits.file_mb * 2 ** 20, extra_read_only)
        for key, value in _environment(True).items():
            command += ["--setenv", key, value]
        command += ["--", sys.executable, "-m", "utils.grading.template", json.dumps(settings)]
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(command, stdin=theirs, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, cwd="/",
                                        start_new_session=True)
        theirs.close()
        self.pidfd = os.pidfd_open(self.process.pid)   # usable from a forked worker too
        self._ready = False

    def ask_clone(self) -> socket.socket:
        """Ask this template (started with ``mother=True``) for a template for another slot,
        forked from it in namespaces of its own (no second torch import); it answers once it
        is ready. Returns the new template's control socket, for ``clone``."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self.control, [json.dumps({"op": "clone"}).encode()],
                            [theirs.fileno()])
        except OSError as error:
            mine.close()
            self.broken = self.broken or f"the grading sandbox stopped ({error})"
        finally:
            theirs.close()
        return mine

    def clone(self, slot: int, control: socket.socket = None) -> "SandboxTemplate":
        """The template for ``slot`` asked for with ``ask_clone`` (``control``), or asked for
        now. Raises SandboxDied; answers come in the order asked."""
        control = control or self.ask_clone()
        try:
            if self.broken:
                raise SandboxDied(self.broken)
            self.wait_ready()
            reply, fds = self._receive(time.monotonic() + 60)
            if not reply.get("ok") or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise SandboxDied(f"the grading sandbox could not start a template for slot "
                                  f"{slot} ({str(reply.get('error'))[:300]})")
        except SandboxDied:
            control.close()
            raise
        clone = object.__new__(SandboxTemplate)
        clone.limits, clone.slot, clone.broken = self.limits, slot, None
        clone.control, clone.process, clone.pidfd, clone._ready = control, None, fds[0], False
        return clone

    @staticmethod
    def supported(sandboxed: bool) -> bool:
        """Whether student processes can be forked from a template here (else one new sandbox
        per student): only sandboxed, as root, on a kernel with pidfds."""
        return sandboxed and os.getuid() == 0 and hasattr(os, "pidfd_open")

    def alive(self) -> bool:
        return (self.broken is None and self.pidfd is not None
                and not select.select([self.pidfd], [], [], 0)[0])

    def _receive(self, deadline: float):
        self.control.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            message, fds, _, _ = socket.recv_fds(self.control, 65536, 1)
        except (TimeoutError, OSError) as error:
            raise SandboxDied(f"the grading sandbox did not answer ({type(error).__name__})")
        if not message:
            raise SandboxDied("the grading sandbox stopped")
        try:
            return json.loads(message), fds
        except ValueError:
            raise SandboxDied("the grading sandbox sent an invalid answer") from None

    def wait_ready(self) -> None:
        if not self._ready:
            try:
                reply, _ = self._receive(time.monotonic() + STARTUP_SECONDS)
                if not reply.get("ready"):
                    raise SandboxDied("the grading sandbox did not start")
            except SandboxDied as error:
                self.broken = f"the grading sandbox did not start ({error})"
                self.close()
                raise SandboxDied(self.broken) from None
            self._ready = True

    def fork(self, settings: dict) -> ForkedProcess:
        """A fresh student process (raises SandboxDied if the template cannot make one)."""
        if self.broken:
            raise SandboxDied(self.broken)
        self.wait_ready()
        pipes = [os.pipe() for _ in range(4)]   # stdin, replies, output, status
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]]
        try:
            try:
                socket.send_fds(self.control, [json.dumps({"op": "fork", "settings": settings})
                                               .encode()], theirs)
            except OSError as error:
                raise SandboxDied(f"the grading sandbox stopped ({error})") from None
            reply, fds = self._receive(time.monotonic() + 60)
        except SandboxDied as error:
            self.broken = str(error)
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        if not reply.get("ok") or len(fds) != 1:
            for fd in [*fds, pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]]:
                os.close(fd)
            raise SandboxDied(f"the grading sandbox could not start the student's process "
                              f"({str(reply.get('error'))[:300]})")
        return ForkedProcess(fds[0], pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0])

    def close(self) -> None:
        """Kill the sandbox (bwrap's --die-with-parent takes the rest along)."""
        if self.pidfd is None:
            return
        if self.process is not None:                  # not a clone (its mother reaps it)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        select.select([self.pidfd], [], [], 5)
        if self.process is not None:
            try:
                self.process.wait(timeout=1)          # reap it, where this process is the parent
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass
        os.close(self.pidfd)
        self.pidfd = None
        self.control.close()

    def forget(self) -> None:
        """In a forked worker: drop this (another worker's) template without stopping it."""
        self.control.close()
        os.close(self.pidfd)
        self.pidfd = None


class Sandbox:
    """One student process. ``request()`` sends a message and returns the reply.

    Create it in a long-lived thread: bwrap's --die-with-parent kills the sandbox when the
    thread that started it ends. With a ``template`` (``SandboxTemplate``) the process is forked
    from it; otherwise a new bwrap sandbox starts Python and imports torch.
    """

    def __init__(self, limits: Limits, slot: int = 0, sandboxed: bool = True,
                 extra_read_only=(), template: SandboxTemplate = None, imports=()):
        self.limits, self.sandboxed = limits, sandboxed
        self.death = None               # reason the sandbox was stopped, in words
        self.foreign = None             # set when that death was not caused by the student's code
        self.output_bytes = 0
        self._workdir = None
        self.forked = template is not None
        uid = sandbox_uid(slot) if (sandboxed and os.getuid() == 0) else -1
        settings = {"uid": uid, "memory_mb": limits.memory_mb, "processes": limits.processes,
                    "file_mb": limits.file_mb, "cpu_seconds": limits.cpu_seconds,
                    "max_bytes": limits.message_mb * 2 ** 20,
                    "workdir": "/home/student" if sandboxed else None,
                    "imports": list(imports)}
        agent = [sys.executable, "-m", "utils.grading.agent"]
        if self.forked:
            self.process = template.fork(settings)
        elif sandboxed:
            command = bwrap_command(limits.file_mb * 2 ** 20, extra_read_only)
            for key, value in _environment(True).items():
                command += ["--setenv", key, value]
            command += ["--", *agent, json.dumps(settings)]
            env, cwd = {}, "/"
        else:
            self._workdir = tempfile.mkdtemp(prefix="grading-student-")
            settings["workdir"] = self._workdir
            command = [*agent, json.dumps(settings)]
            env, cwd = _environment(False), self._workdir
            env["HOME"] = self._workdir
        if not self.forked:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            env=env, cwd=cwd, start_new_session=True)
        os.set_blocking(self.process.stdin.fileno(), False)
        self.reader = wire.MessageReader(self.process.stdout.fileno(),
                                         limits.message_mb * 2 ** 20)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._drain_output, daemon=True).start()
        threading.Thread(target=self._watch_memory, daemon=True).start()
        self._ready = False             # the agent imports torch meanwhile; see _startup
        self._look = None               # (when, _schedule of the student's processes then)

    def wait_ready(self) -> None:
        """Wait until the agent has imported torch (raises SandboxDied if it never does)."""
        if not self._ready:
            self._startup()
        if self.death:
            raise SandboxDied(self.death)

    def _startup(self) -> None:
        """Wait for the agent's "ready" message (once, before the first request)."""
        self._ready = True
        try:
            reply, _ = self.reader.read(time.monotonic() + STARTUP_SECONDS)
        except (wire.PeerGone, wire.WireTimeout, wire.WireError) as error:
            self.foreign = self.foreign or "start-up"     # no student code ran yet
            self.kill(f"the grading sandbox did not start ({type(error).__name__})")
            raise SandboxDied(self.death) from None
        if not reply.get("ready"):
            self.foreign = self.foreign or "start-up"
            self.kill("the grading sandbox did not start")
            raise SandboxDied(self.death)

    # --- watchdogs ------------------------------------------------------------------------------
    def _drain_output(self) -> None:
        """Count the raw bytes the student writes to fd 1/2; stop the sandbox past the cap."""
        stream = self.process.stderr
        cap = self.limits.output_mb * 2 ** 20
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            self.output_bytes += len(chunk)
            if self.output_bytes > cap:
                self.kill(f"the student's code wrote more than {self.limits.output_mb} MB of "
                          f"output")
                return

    def _student_pids(self) -> list:
        """The processes of the student's tree (not the namespace's init when forked)."""
        pids = _tree(self.process.pid)
        return pids[1:] if self.forked else pids

    def _watch_memory(self) -> None:
        cap = self.limits.memory_mb * 2 ** 20
        while not self._stop.wait(0.2):
            if self.process.poll() is not None:
                return
            if _memory_bytes(self._student_pids()) > cap:
                self.kill(f"the student's processes used more than {self.limits.memory_mb} "
                          f"MB of memory")
                return

    # --- requests -------------------------------------------------------------------------------
    def request(self, header: dict, buffers=(), deadline: float = None):
        """Send one request; (reply, buffers). Raises SandboxDied (with the reason) or
        TimeoutError (the sandbox is then killed: it may be stuck in student code)."""
        if not self._ready:
            self._startup()
        if self.death:
            raise SandboxDied(self.death)
        with self._lock:
            started, schedule = self._recent_look()
            try:
                wire.write_message(self.process.stdin.fileno(), header, buffers,
                                   deadline or time.monotonic() + 60)
                return self.reader.read(deadline)
            except wire.WireTimeout:
                if _starved(schedule, _schedule(self._student_pids()),
                            time.monotonic() - started):
                    self.foreign = self.foreign or "starved of CPU"
                    self.kill("the student's code did not finish in time while other processes "
                              "held the CPU (the machine was busy), and was stopped")
                self.kill("the student's code did not finish in time and was stopped")
                raise TimeoutError("the student's code did not finish in time") from None
            except wire.PeerGone:
                self._wait_briefly()
                if not self.death:
                    self.foreign = _foreign_signal(self._exit_code())
                self.kill(self._exit_reason())
                raise SandboxDied(self.death) from None
            except wire.WireError as error:
                self.kill(f"the student's process sent an invalid answer: {error}")
                raise SandboxDied(self.death) from None

    def _recent_look(self) -> tuple:
        """(when, ``_schedule`` of the student's processes then), at most
        SCHEDULE_LOOK_SECONDS old: where a missed deadline's window opens (see ``_starved``)."""
        now = time.monotonic()
        if self._look is None or now - self._look[0] > SCHEDULE_LOOK_SECONDS:
            self._look = (now, _schedule(self._student_pids()))
        return self._look

    def _wait_briefly(self) -> None:
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass

    def _exit_code(self):
        """The student's exit code (negative: the signal), None while it runs."""
        code = self.process.poll()
        if code is not None and self.sandboxed and not self.forked and code > 128:
            code = 128 - code                                   # bwrap: 128 + signal number
        return code

    def _exit_reason(self) -> str:
        if self.death:
            return self.death
        code = self._exit_code()
        if code is None:
            return "the student's process closed its channel to the grader"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the student's process was killed by {name}" + (
                " (a crash, e.g. a segmentation fault)" if name in ("SIGSEGV", "SIGBUS", "SIGABRT")
                else " (CPU time limit)" if name == "SIGXCPU" else "")
        return f"the student's process exited (exit code {code}, e.g. os._exit or sys.exit)"

    def kill(self, reason: str) -> None:
        """Stop the sandbox and everything in it; the first reason given is kept."""
        if not self.death:
            self.death = reason
        self._stop.set()
        if not self.forked:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.kill()              # forked: the init, and with it the namespace
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.kill("closed by the grader")
        if not self.forked:                  # forked: the template reaps it before the next
            self._wait_briefly()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self.forked:
            self.process.close()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
