"""One instructor command at a time per course directory: ``<course>/.grading/lock``.

The lock is a ``flock`` on that file, which names the command holding it (pid, command, start
time). The kernel releases it when the holder dies, however it dies, so a lock left by a killed
run is simply taken over; the file still names that run, and the next command says so. An
autograde run hands the lock to its pool of workers too: it stays held until the last worker
that may still write the gradebook is gone.
"""

import fcntl
import json
import os
import pathlib
import time

LOCK_FILE = ".grading/lock"


def _holder(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


class CourseLock:
    """``with CourseLock(course_dir, "autograde"):`` the command runs alone on that course.
    Raises ValueError (one line, naming the running command) if another holds the lock."""

    def __init__(self, course_dir, command: str):
        self.path = pathlib.Path(course_dir) / LOCK_FILE
        self.command, self.fd, self.taken_over = command, None, None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            pid = holder.get("pid", "?")
            raise ValueError(
                f"another grading command is running on {self.path.parent.parent}: "
                f"{holder.get('command', 'unknown')} (pid {pid}, started "
                f"{holder.get('started', '?')}); wait until it ends (or stop it: kill {pid}), "
                f"then run this command again") from None
        previous = _holder(fd)
        if previous.get("pid") and not _alive(previous["pid"]):
            self.taken_over = previous          # the lock of a run that was killed
        self.fd = fd
        record = {"pid": os.getpid(), "command": self.command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        except OSError:                          # a full disk: the flock alone still works
            pass
        return self

    def note(self) -> str:
        """A line about the killed run whose lock was taken over, or ''."""
        if not self.taken_over:
            return ""
        return (f"note: {self.taken_over.get('command', 'a grading command')} (pid "
                f"{self.taken_over.get('pid')}, started {self.taken_over.get('started', '?')}) "
                f"ended without releasing the course lock; this run took it over")

    def __exit__(self, *exc):
        try:
            os.ftruncate(self.fd, 0)             # a clean end leaves no holder behind
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
