"""The sandbox template: one process per grading slot that has imported torch, forking a fresh
student process per submission.

Started by ``utils.grading.sandbox.SandboxTemplate`` inside bubblewrap (as root in the sandbox,
which the grader is too), as ``python -m utils.grading.template <settings JSON>``. Its fd 0 is a
control socket to the worker. Each request carries the limits of one student process and four
pipe ends (the student's stdin, reply channel and output, and a status pipe). For each:

1. everything left in the sandbox from the previous student is killed and its files in the
   writable directories (``/tmp``, the home directory) are deleted;
2. a helper forks into new PID, mount and IPC namespaces; its child is the *init* of the new
   PID namespace (it mounts that namespace's ``/proc``) and forks the student's process, which
   becomes the sandbox uid, sets its rlimits and serves requests (``utils.grading.agent``);
3. the worker gets a pidfd of the init: killing it kills every process of that student at once
   (the kernel empties the namespace). When the student's process ends by itself, the init kills
   the rest and writes its exit status (``{"exit": code}``, negative: a signal) to the status pipe.

A pool of workers shares one sandbox and one torch import: its template is started as a *mother*
(``"mother": true``) that forks nothing but one template per slot (``clone`` requests). Each
clone is PID 1 of new PID, mount, network and IPC namespaces, with its own empty tmpfs on the
writable directories (the read-only binds under them bound again) and its own ``/dev/pts``, so
the students of two slots share no file, socket, terminal or process; within its namespaces a
clone works as described above.

The template never reads the student's code or data and never runs as the student; it reads only
the worker's requests.
"""

import ctypes
import gc
import json
import os
import shutil
import signal
import socket
import stat
import sys

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x20000000,
                                                         0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 0x4000, 0x40000)
PR_SET_CHILD_SUBREAPER = 36
WRITABLE = ("/tmp", "/home/student")
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def kill_leftovers() -> None:
    """SIGKILL every process of this PID namespace but init and this one, and reap them (this
    process is their subreaper), until none is left."""
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return                                  # nobody else is left
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    raise RuntimeError("processes of the previous student could not be stopped")


def clean_writable(keep) -> None:
    """Delete everything in the writable directories but the read-only binds under them."""
    for root in WRITABLE:
        try:
            entries = list(os.scandir(root))
        except FileNotFoundError:
            continue
        for entry in entries:
            path = entry.path
            if any(k == path or k.startswith(path + "/") for k in keep):
                continue                            # made by bwrap, root-owned, read-only inside
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)                 # fd-based: never follows a symlink
            else:
                os.unlink(path)


def _move_high(fds) -> list:
    """Duplicates of ``fds`` numbered >= 100 (so dup2 onto 0..3 cannot clobber one)."""
    import fcntl
    return [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]


def _student(settings: dict, request_fd: int, reply_fd: int, output_fd: int) -> None:
    """In the fresh namespaces: become the student's process (never returns)."""
    try:
        request_fd, reply_fd, output_fd = _move_high([request_fd, reply_fd, output_fd])
        os.dup2(request_fd, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.dup2(reply_fd, 3)
        os.closerange(4, 65536)
        os.setsid()
        from utils.grading import agent
        agent.start(settings, reply_fd=3)
    except BaseException:                           # noqa: BLE001 - nothing may escape a fork
        pass
    os._exit(70)


def _init(settings: dict, fds: list) -> None:
    """PID 1 of the student's namespace: start the student, reap, report (never returns)."""
    code = 71
    try:
        request_fd, reply_fd, output_fd, status_fd = fds
        _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
               "mount /proc")
        student = os.fork()
        if student == 0:
            _student(settings, request_fd, reply_fd, output_fd)
        for fd in (request_fd, reply_fd, output_fd):
            os.close(fd)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == student:
                code = os.waitstatus_to_exitcode(status)
                break
        try:
            os.kill(-1, signal.SIGKILL)             # the student's leftovers
        except ProcessLookupError:
            pass
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        os.write(status_fd, json.dumps({"exit": code}).encode() + b"\n")
        code = 0
    except BaseException:                           # noqa: BLE001
        pass
    os._exit(code if 0 <= code < 256 else 72)


def _failure(error: BaseException) -> bytes:
    """The answer to a request that failed: why, in words."""
    return json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"[:500]}).encode()


def _fail(channel: socket.socket, error: BaseException) -> None:
    """In a forked helper: tell the other end why it failed, then exit 1 (never returns)."""
    try:
        channel.sendall(_failure(error))
    except OSError:
        pass
    os._exit(1)


def _helper(control: socket.socket, settings: dict, fds: list) -> None:
    """Forked from the template: new namespaces, start the init, hand its pidfd over."""
    try:
        _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        init = os.fork()
        if init == 0:
            control.close()
            _init(settings, fds)
        pidfd = os.pidfd_open(init)
        socket.send_fds(control, [json.dumps({"ok": True}).encode()], [pidfd])
        os._exit(0)
    except BaseException as error:                  # noqa: BLE001 - reported to the worker
        _fail(control, error)


def _fresh_writable(keep, size: int) -> None:
    """In a new mount namespace: an empty tmpfs (``size`` bytes) on each writable directory, and
    the read-only binds that lived under them (``keep``) bound there again, read-only."""
    held = {}
    for path in sorted(keep, key=len):
        if not any(path.startswith(other + "/") for other in held):   # else seen via a parent
            held[path] = os.open(path, os.O_PATH)
    for root in WRITABLE:
        _check(_libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                           f"size={size},mode=1777".encode()), f"mount a tmpfs on {root}")
    for path, fd in held.items():
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.makedirs(path, mode=0o755, exist_ok=True)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None,
                           MS_BIND | MS_REC, None), f"bind {path}")
        _check(_libc.mount(None, path.encode(), None,
                           MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
               f"make {path} read-only")
        os.close(fd)


def _clone(mother: socket.socket, control_fd: int, settings: dict) -> None:
    """Forked from the mother: new namespaces and writable directories, then one slot's
    template as PID 1 of the new PID namespace; hand its pidfd over (never returns)."""
    try:
        _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        _fresh_writable(settings.get("keep", []), int(settings["size"]))
        _check(_libc.mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                           b"newinstance,ptmxmode=0666,mode=0620"),
               "mount a devpts of its own")          # (a pty's number is no channel either)
        template = os.fork()
        if template == 0:
            code = 0
            try:
                mother.close()
                control = socket.socket(fileno=control_fd)
                control.sendall(json.dumps({"ok": True, "ready": True}).encode())
                serve(control, settings.get("keep", []))
            except BaseException:                   # noqa: BLE001 - nothing may escape a fork
                code = 1
            os._exit(code)
        pidfd = os.pidfd_open(template)
        socket.send_fds(mother, [json.dumps({"ok": True}).encode()], [pidfd])
        os._exit(0)
    except BaseException as error:                  # noqa: BLE001 - reported to the pool
        _fail(mother, error)


def _answer(control: socket.socket, op: str, count: int, what: str, helper,
            before=lambda: None, after=lambda: None) -> None:
    """Answer ``op`` requests, each carrying ``count`` descriptors (``what``), until the channel
    closes: ``before()`` here, then ``helper(request, fds)`` in a forked process that answers
    itself (exit 0, or 1 after saying why), then ``after()``."""
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, count)
        except (ConnectionError, OSError):
            return
        if not message:
            return                                  # the other end closed the channel
        try:
            request = json.loads(message)
            if len(fds) != count or request.get("op") != op:
                raise ValueError(f"a {op} request carries {what}")
            before()
            pid = os.fork()
            if pid == 0:                            # the helper: never back into this loop
                try:
                    helper(request, fds)
                except BaseException as error:      # noqa: BLE001 - e.g. a request's bad field
                    _fail(control, error)
                os._exit(1)
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) not in (0, 1):   # 0, 1: it answered itself
                raise RuntimeError(f"the {op} helper failed (status {status})")
        except Exception as error:                  # noqa: BLE001 - reported to the other end
            control.sendall(_failure(error))
        finally:
            for fd in fds:
                os.close(fd)
        after()


def _reap_ended() -> None:
    """Reap the clones that ended (the mother is their reaper)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve_clones(control: socket.socket, settings: dict) -> None:
    """The mother's loop: one new slot template per ``clone`` request (which carries the new
    template's control socket)."""
    _answer(control, "clone", 1, "one control socket",
            lambda _request, fds: _clone(control, fds[0], settings), after=_reap_ended)


def serve(control: socket.socket, keep) -> None:
    """A slot template's loop: one fresh student process per ``fork`` request (which carries its
    four pipe ends), after what the previous student left is gone."""
    def clear() -> None:
        kill_leftovers()
        clean_writable(keep)

    _answer(control, "fork", 4, "four pipe ends",
            lambda request, fds: _helper(control, request["settings"], fds), before=clear)


def main() -> None:
    settings = json.loads(sys.argv[1])
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "become a subreaper")
    from utils.grading import agent
    agent.warm_imports(settings.get("imports", ()))
    # No gc.collect() first: after the imports it found about 50 objects to free, for 0.16 s
    # of CPU on the path of the template's start.
    gc.freeze()                                     # fewer copied pages in each fork
    control.sendall(json.dumps({"ok": True, "ready": True}).encode())
    if settings.get("mother"):
        serve_clones(control, settings)
    else:
        serve(control, settings.get("keep", []))


if __name__ == "__main__":
    main()
