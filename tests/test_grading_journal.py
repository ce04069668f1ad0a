"""The gradebook's write-ahead log: on while the workers grade, folded back afterwards."""

import sqlite3

from utils.grading.autograde import write_ahead_log


def journal(path) -> str:
    connection = sqlite3.connect(path)       # closed here: an open one keeps the log on
    try:
        return connection.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        connection.close()


def test_log_on_while_grading_and_folded_back(tmp_path):
    database = tmp_path / "gradebook.db"
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE grade (student TEXT, score REAL)")
    connection.close()
    assert journal(database) == "delete"
    with write_ahead_log(f"sqlite:///{database}"):
        assert journal(database) == "wal"
        writer = sqlite3.connect(database)
        with writer:
            writer.execute("INSERT INTO grade VALUES ('ada', 3.0)")
        assert (tmp_path / "gradebook.db-wal").exists()      # the write is in the log
        writer.close()
    assert journal(database) == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gradebook.db"]
    assert read_all(database) == [("ada", 3.0)]


def test_log_folded_back_when_grading_fails(tmp_path):
    database = tmp_path / "gradebook.db"
    sqlite3.connect(database).close()
    try:
        with write_ahead_log(f"sqlite:///{database}"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert journal(database) == "delete"


def test_other_databases_and_missing_files_are_left_alone(tmp_path):
    missing = tmp_path / "none.db"
    with write_ahead_log(f"sqlite:///{missing}"):
        pass
    with write_ahead_log("postgresql://grader@localhost/course"):
        pass
    assert not missing.exists()


def read_all(path) -> list:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT * FROM grade").fetchall()
    finally:
        connection.close()
