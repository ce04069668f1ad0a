"""A full disk: files written whole or not at all, and one message that says what to do.

``atomic_write`` writes a file next to its target and renames it into place, so a full disk
leaves the old file (or none), never half of one. ``is_disk_full`` recognises the error, from
the operating system or from SQLite; ``message`` is the line the commands print.
"""

import errno
import os
import pathlib

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
SQLITE_FULL = "database or disk is full"


class DiskFull(RuntimeError):
    """A command stopped because the disk is full; ``str()`` is the one-line message."""


def is_disk_full(error: BaseException) -> bool:
    """True for "no space left", "disk quota exceeded", "file too large", and SQLite's
    "database or disk is full" (also wrapped by SQLAlchemy), on the error or its causes."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in FULL_ERRNOS:
            return True
        if SQLITE_FULL in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def message(where, command: str = "the command") -> str:
    """The one line a command prints when the disk holding ``where`` is full."""
    return (f"the disk holding {where} is full (no space left); nothing half-written was "
            f"left: free some space there and run {command} again")


def atomic_write(path, data: bytes) -> pathlib.Path:
    """Write ``data`` to ``path`` whole: a temporary file in the same folder, then a rename."""
    path = pathlib.Path(path)
    staged = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(staged, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return path


def free_bytes(path) -> int:
    """Bytes an unprivileged writer may still use on the disk holding ``path`` (or a parent)."""
    path = pathlib.Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
