"""The grading CLI in one long-lived process: each command through the CLI's own entry point.

``CliSession.run(*args)`` is ``python -m utils.grading <args> --quiet``, run by
``utils.grading.cli.main`` in a Python process that stays up between commands (the same
argument parsing, course lock, gradebook check and one-line errors): its own exit status,
stdout and stderr, as a ``subprocess.CompletedProcess``. A new process costs about 0.15 s of
CPU to start; a command that imports nbgrader (release, collect, feedback) pays that import once
per session here instead of once per command. Module-level state outlives a command here, unlike
an instructor's separate processes: commands that must start fresh (killed or interrupted on
purpose) still run as processes of their own. The environment of each command is
the session's, plus the course directory given to ``run``.
"""

import json
import os
import select
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Requests (a JSON line: argv and environment) on one pipe, replies (a JSON line: status,
# stdout, stderr) on another. During a command, file descriptors 1 and 2 are files of that
# command: what it prints, and what its child processes print, is its stdout and stderr, in
# order, as with a process of its own.
_SERVER = """\
import json, os, sys, tempfile, traceback
requests, replies = os.fdopen(int(sys.argv[1]), "r"), os.fdopen(int(sys.argv[2]), "w")
from utils.grading import skip_unused_schema_formats
skip_unused_schema_formats()        # as `python -m utils.grading` does first (its __main__)
from utils.grading.cli import main
saved = os.dup(1), os.dup(2)
for line in requests:
    request = json.loads(line)
    os.environ.clear()
    os.environ.update(request["env"])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            status = main(request["argv"])
        except SystemExit as stop:              # argparse's errors
            status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:                   # what `python -m` would print, exit 1
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        texts = []
        for stream in (out, err):
            stream.seek(0)
            texts.append(stream.read().decode(errors="replace"))
    replies.write(json.dumps([status, *texts]) + "\\n")
    replies.flush()
"""


class CliSession:
    """One process serving grading commands; ``close()`` (or ``with``) ends it."""

    def __init__(self, env: dict):
        self.env = dict(env)
        self._stderr = tempfile.TemporaryFile("w+")      # a pipe could fill and block it
        requests_read, self._requests = os.pipe()
        self._replies, replies_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(requests_read), str(replies_write)],
            cwd=REPO, env=self.env, pass_fds=(requests_read, replies_write),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr)
        os.close(requests_read)
        os.close(replies_write)
        self._send = os.fdopen(self._requests, "w")
        self._receive = os.fdopen(self._replies, "r")

    def run(self, *args, course, expect=0, env=None, timeout=1200) -> subprocess.CompletedProcess:
        """``python -m utils.grading <args> --quiet`` on ``course``, with the session's
        environment updated by ``env``; asserts its exit status is ``expect`` (None: any).
        A command that takes more than ``timeout`` seconds ends the session."""
        argv = [str(arg) for arg in args] + ["--quiet"]
        env = dict(self.env, **(env or {}), ATTENTION_COURSE_GRADING_DIR=str(course))
        env.pop("ATTENTION_COURSE_GRADING", None)
        self._send.write(json.dumps({"argv": argv, "env": env}) + "\n")
        self._send.flush()
        if not select.select([self._receive], [], [], timeout)[0]:
            self.process.kill()
            raise AssertionError(f"{argv} did not finish within {timeout} s")
        line = self._receive.readline()
        if not line:
            self.process.wait(timeout=60)
            self._stderr.seek(0)
            raise AssertionError(f"the CLI session ended during {argv} (exit "
                                 f"{self.process.returncode}):\n{self._stderr.read()[-3000:]}")
        status, out, err = json.loads(line)
        assert expect is None or status == expect, (f"{args} exited {status}, not {expect}\n"
                                                    f"{out[-3000:]}\n{err[-3000:]}")
        return subprocess.CompletedProcess(argv, status, out, err)

    def close(self) -> None:
        self._send.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._receive.close()
        self._stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
