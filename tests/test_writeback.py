"""The write-back of a load's SQLite files (ingest.load.writeback): a hint to the
kernel that changes no byte, tolerates files that are not there, and leaves
no thread behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from ingest.load.writeback import Writeback, sqlite_files

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "samples" / "go1.27-httpnet-2MB.trace"


def writeback_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sqlite-writeback"]


def test_the_files_of_a_database() -> None:
    assert sqlite_files("/d/g.db") == [Path("/d/g.db-wal"), Path("/d/g.db")]
    assert sqlite_files(":memory:") == [] and sqlite_files(None) == []


def test_started_on_files_there_and_not_there_then_stopped(tmp_path: Path) -> None:
    there = tmp_path / "there"
    there.write_bytes(b"x" * (1 << 20))
    held = os.open(there, os.O_RDONLY)  # write-back goes through descriptors held here
    w = Writeback([tmp_path / "missing", there]).start()
    w.start()  # once only
    assert len(writeback_threads()) == 1
    time.sleep(0.1)
    w.stop()
    w.stop()
    os.close(held)
    assert writeback_threads() == [] and there.read_bytes() == b"x" * (1 << 20)
    w.start()  # a stopped one stays stopped
    assert writeback_threads() == []
    Writeback([]).start()  # nothing to write back: no thread
    assert writeback_threads() == []


def test_a_load_leaves_no_thread_behind(tmp_path: Path) -> None:
    from ingest.load.pipeline import ingest_trace_file
    from ingest.store.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        res = ingest_trace_file(engine, TRACE, data_dir=tmp_path / "data")
        assert res.created
        assert writeback_threads() == []
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    finally:
        engine.dispose()


def another_process_can_take_the_database(db: Path) -> bool:
    """Whether another process gets the exclusive lock a journal-mode change
    needs (it must not while this one reads the database)."""
    code = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], timeout=0)\n"
        "try:\n"
        "    print(c.execute('PRAGMA journal_mode=DELETE').fetchone()[0])\n"
        "except sqlite3.OperationalError as e:\n"
        "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True,
                         text=True, timeout=60).stdout.strip()
    assert out in ("delete", "wal", "database is locked"), out
    return out == "delete"


def test_sqlites_locks_survive_the_write_back(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops this process's POSIX locks on
    it: the write-back never opens or closes SQLite's files, so a reader here
    still keeps other processes from taking the database."""
    db = tmp_path / "g.db"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("BEGIN")
        conn.execute("SELECT * FROM t").fetchall()  # a read transaction: locks held
        assert not another_process_can_take_the_database(db)
        w = Writeback(sqlite_files(str(db))).start()
        time.sleep(0.1)
        w.stop()
        assert not another_process_can_take_the_database(db)
        # What an open and close of the file would have done:
        os.close(os.open(db, os.O_RDONLY))
        assert another_process_can_take_the_database(db)
    finally:
        conn.close()
