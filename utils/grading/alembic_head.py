"""nbgrader's gradebook schema revision, read in this process instead of a new one.

When nbgrader's ``Gradebook`` opens a database without tables (a new course's first command), it
records the newest schema revision of its migration scripts, which it gets by running the
``alembic heads`` command in a new process: about 6 s of CPU, most of it importing nbgrader again
(and it fails when the environment's ``bin/`` is not on PATH). ``install()`` makes nbgrader read
the same revision from the same scripts in this process with alembic's ``ScriptDirectory`` (about
0.2 s). With anything but exactly one newest revision it falls back to nbgrader's own command.
tests/test_grading_alembic_head.py checks the value against the command's.
"""

import functools
import os


@functools.lru_cache(maxsize=1)
def newest_revisions() -> tuple:
    """The newest ("head") revisions of nbgrader's gradebook migrations, as ``alembic heads``."""
    import nbgrader
    from alembic.script import ScriptDirectory

    scripts = os.path.join(os.path.dirname(nbgrader.__file__), "alembic")
    return tuple(ScriptDirectory(scripts).get_heads())


def install() -> None:
    """Make ``nbgrader.api.get_alembic_version`` (what a new gradebook records) read the
    revision in this process. Idempotent."""
    from nbgrader import api

    if getattr(api.get_alembic_version, "reads_in_process", False):
        return
    by_command = api.get_alembic_version

    def get_alembic_version() -> str:
        heads = newest_revisions()
        return heads[0] if len(heads) == 1 else by_command()

    get_alembic_version.reads_in_process = True
    api.get_alembic_version = get_alembic_version
