"""The write-back of a load's SQLite files (ingest.writeback): a hint to the
kernel that changes no byte, tolerates files that are not there, and leaves
no thread behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ingest.writeback import Writeback, sqlite_files

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
    w = Writeback([tmp_path / "missing", there]).start()
    w.start()  # once only
    assert len(writeback_threads()) == 1
    time.sleep(0.1)
    w.stop()
    w.stop()
    assert writeback_threads() == [] and there.read_bytes() == b"x" * (1 << 20)
    w.start()  # a stopped one stays stopped
    assert writeback_threads() == []
    Writeback([]).start()  # nothing to write back: no thread
    assert writeback_threads() == []


def test_a_load_leaves_no_thread_behind(tmp_path: Path) -> None:
    from ingest.db import make_engine
    from ingest.load import ingest_trace_file

    engine = make_engine(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        res = ingest_trace_file(engine, TRACE, data_dir=tmp_path / "data")
        assert res.created
        assert writeback_threads() == []
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    finally:
        engine.dispose()
