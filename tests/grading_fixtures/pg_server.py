"""A throw-away PostgreSQL server for tests (Debian's ``postgresql`` package).

``temporary_postgres()`` runs ``initdb`` and ``pg_ctl start`` in a temporary folder, listening
only on a Unix socket in that folder (no TCP port), and yields a SQLAlchemy URL of an empty
database; the server is stopped and the folder removed afterwards. PostgreSQL refuses to run
as root, so as root the server runs as the ``postgres`` user (created by the package) via
``runuser``.
"""

import contextlib
import glob
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile

INSTALL_HINT = ("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb); "
                "install them: sudo apt-get install -y postgresql")


def server_bin() -> pathlib.Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError(INSTALL_HINT)
    return pathlib.Path(found[-1]).parent


def _as_server_user(command: list) -> list:
    if os.getuid() != 0:
        return command
    if not shutil.which("runuser"):
        raise RuntimeError("running as root needs `runuser` (util-linux) to start PostgreSQL "
                           "as the postgres user")
    return ["runuser", "-u", "postgres", "--", *command]


@contextlib.contextmanager
def temporary_postgres(database: str = "gradebook"):
    """Yield ``postgresql+psycopg2://...`` for a fresh database on a private server."""
    bin_dir = server_bin()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="grading-pg-"))
    data, socket_dir = folder / "data", folder / "socket"
    socket_dir.mkdir()
    if os.getuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (folder, socket_dir):
            os.chown(path, user.pw_uid, user.pw_gid)
    folder.chmod(0o755)
    run = lambda *cmd: subprocess.run(_as_server_user([str(c) for c in cmd]),  # noqa: E731
                                      check=True, capture_output=True, text=True, timeout=120)
    started = False
    try:
        run(bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        run(bin_dir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "60",
            "-o", f"-c listen_addresses='' -k {socket_dir} -c fsync=off", "start")
        started = True
        run(bin_dir / "createdb", "-h", socket_dir, "-U", "postgres", database)
        yield f"postgresql+psycopg2://postgres@/{database}?host={socket_dir}"
    finally:
        if started:
            subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m",
                                            "immediate", "-w", "stop"]),
                           capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
