"""A new gradebook records nbgrader's schema revision without running ``alembic`` in a new process
(utils.grading.alembic_head): the same revision as the command gives, on a PATH without it."""

import io
import sqlite3

import pytest


def revision_by_the_command() -> str:
    """What nbgrader's ``get_alembic_version`` reads from ``alembic -c <its ini> heads``: the same
    command run in this process (alembic's CLI calls ``command.heads`` with the ini's Config)."""
    from alembic import command
    from alembic.config import Config
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        out = io.StringIO()
        command.heads(Config(ini, stdout=out))
    return out.getvalue().split("\n")[0].split(" ")[0]


def recorded_revision(db_path) -> list:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT version_num FROM alembic_version").fetchall()


def test_the_revision_read_in_process_is_the_commands():
    from utils.grading import alembic_head
    assert alembic_head.newest_revisions() == (revision_by_the_command(),)
    assert len(revision_by_the_command()) == 12                  # a revision id, not a message


def test_a_new_gradebook_records_it_without_the_alembic_command(tmp_path, monkeypatch):
    from nbgrader import api

    from utils.grading import alembic_head
    monkeypatch.setattr(api, "get_alembic_version", api.get_alembic_version)   # restored after
    monkeypatch.setenv("PATH", "/usr/bin:/bin")          # no environment bin/: no `alembic`
    if not getattr(api.get_alembic_version, "reads_in_process", False):
        with pytest.raises(FileNotFoundError, match="alembic"):    # nbgrader's own way
            api.Gradebook(f"sqlite:///{tmp_path / 'by_command.db'}", "course").close()
    alembic_head.install()
    alembic_head.install()                                        # idempotent
    api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", "course").close()
    assert recorded_revision(tmp_path / "gradebook.db") == [(revision_by_the_command(),)]
