"""SQLite's intervals kept in column files (ingest.store.interval_files), read
by SQL through the virtual table behind the view ``intervals``: the same rows
as a load that stores them as rows, whatever the constraints; a database with
both kinds of traces; a clear error when the files are gone; the files go
with their trace, and orphans older than an hour are swept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, text

from ingest.load.delete import delete_trace
from ingest.store import interval_files
from ingest.store.db import make_engine
from tests.support.files_load import fetch, load
from tests.support.ingest_fixtures import ROOT

TRACES = ROOT / "tests" / "data" / "traces"
A = TRACES / "go1.23-workers.trace"
B = TRACES / "go1.21-mixed.trace"

pytestmark = pytest.mark.skipif(not interval_files.register(),
                                reason="the interval files' extension is not built")


@pytest.fixture()
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Engine, Engine]:
    """The same two traces loaded with their intervals in files and as rows."""
    out = []
    for files in (True, False):
        d = tmp_path / ("files" if files else "rows")
        engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
        for trace in (A, B):
            load(engine, trace, d, files, monkeypatch)
        out.append(engine)
    files_engine, rows_engine = out
    n = fetch(rows_engine, "SELECT count(*) FROM interval_rows")[0][0]
    assert n > 10_000 and fetch(files_engine, "SELECT count(*) FROM interval_rows") == [(0,)]
    assert len(fetch(files_engine, "SELECT * FROM interval_files")) == 2
    # proc_run_index's rows are the frames' proc_runs.row files too.
    assert fetch(files_engine, "SELECT count(*) FROM proc_run_index") == [(0,)]
    assert len(fetch(files_engine, "SELECT * FROM proc_run_files")) == 2
    assert fetch(files_engine, "SELECT count(*) FROM syscall_outcomes") == [(0,)]
    assert len(fetch(files_engine, "SELECT * FROM syscall_files")) == 2
    return files_engine, rows_engine


QUERIES = [
    "SELECT * FROM intervals ORDER BY id",
    "SELECT * FROM intervals WHERE trace_id = 2 ORDER BY id",
    "SELECT * FROM intervals WHERE id BETWEEN :lo AND :hi ORDER BY id",
    "SELECT * FROM intervals WHERE id > :hi - 3",
    "SELECT * FROM intervals WHERE id >= :lo AND id < :lo + 5 AND trace_id = 1",
    "SELECT * FROM intervals WHERE id = :lo + 0.5",
    "SELECT * FROM intervals WHERE id = :lo + 7.0",
    "SELECT * FROM intervals WHERE id < 1 OR id IS NULL OR trace_id = 99",
    "SELECT * FROM intervals WHERE id <= '12'",
    "SELECT count(*), sum(end_ts - start_ts), min(id), max(id) FROM intervals GROUP BY trace_id",
    "SELECT * FROM proc_runs ORDER BY id",
    "SELECT * FROM proc_runs WHERE id BETWEEN :lo AND :lo + 50 ORDER BY id",
    "SELECT p, count(*), sum(end_ts - start_ts) FROM proc_runs GROUP BY trace_id, p",
    "SELECT * FROM syscalls ORDER BY id",
    "SELECT outcome, count(*), sum(p_lost), count(stolen_ts), count(stolen_by_m), "
    "sum(start_known) FROM syscalls GROUP BY trace_id, outcome",
    "SELECT * FROM syscalls WHERE stolen_by_m IS NULL AND id % 7 = 0 ORDER BY id",
    "SELECT * FROM transitions ORDER BY trace_id, seq",
    "SELECT * FROM thread_intervals ORDER BY trace_id, seq",
    "SELECT g.goid, v.state, v.start_ts FROM goroutines g JOIN interval_view v "
    "ON v.id BETWEEN g.first_interval AND g.last_interval WHERE g.trace_id = 2 "
    "AND g.goid = (SELECT min(goid) FROM goroutines WHERE trace_id = 2) ORDER BY v.id",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_files_answer_as_rows_do(pair: tuple[Engine, Engine], sql: str) -> None:
    files, rows = pair
    lo, hi = fetch(rows, "SELECT min(id) + 100, max(id) - 100 FROM interval_rows "
                         "WHERE trace_id = 2")[0]
    got = fetch(files, sql, lo=lo, hi=hi)
    assert got == fetch(rows, sql, lo=lo, hi=hi)


def test_a_database_with_both_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One trace as rows (loaded without the extension, say), the next in files:
    the view shows both, ids in one sequence."""
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    a = load(engine, A, d, False, monkeypatch)
    b = load(engine, B, d, True, monkeypatch)
    (ra,) = fetch(engine, "SELECT transitions FROM traces WHERE id = :t", t=a.id)[0]
    (rb,) = fetch(engine, "SELECT transitions FROM traces WHERE id = :t", t=b.id)[0]
    ids = [r[0] for r in fetch(engine, "SELECT id FROM intervals ORDER BY id")]
    assert ids == list(range(1, ra + rb + 1))
    assert fetch(engine, "SELECT trace_id, count(*) FROM intervals GROUP BY trace_id") == \
        [(a.id, ra), (b.id, rb)]


def test_missing_files_are_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    res = load(engine, A, d, True, monkeypatch)
    home = interval_files.home_dir(d, res.id, res.sha256)
    (home / "intervals.start_ts.npy").unlink()
    with pytest.raises(Exception, match=r"trace 1's intervals cannot be read from .*"
                                        r"intervals\.start_ts\.npy: No such file"):
        fetch(engine, "SELECT sum(start_ts) FROM intervals")
    (home / "proc_runs.row.npy").write_bytes(b"not an array")
    with pytest.raises(Exception, match=r"trace 1's proc runs cannot be read from .*"
                                        r"proc_runs\.row\.npy: not a \.npy file"):
        fetch(engine, "SELECT sum(interval_id) FROM gmpscope_proc_run_index")


def test_files_go_with_their_trace_and_orphans_are_swept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    a = load(engine, A, d, True, monkeypatch)
    b = load(engine, B, d, True, monkeypatch)
    home_a = interval_files.home_dir(d, a.id, a.sha256)
    home_b = interval_files.home_dir(d, b.id, b.sha256)
    assert delete_trace(engine, a.id, d)
    assert not home_a.exists() and home_b.is_dir()
    old, new = d / "intervals" / "7-00000000deadbeef", d / "intervals" / "8-00000000deadbeef"
    for o in (old, new):
        o.mkdir()
    hour_ago = time.time() - 7200
    for p in (old, home_b):
        os.utime(p, (hour_ago, hour_ago))
    assert interval_files.remove_orphans(engine, d) == 1
    assert not old.exists() and new.is_dir() and home_b.is_dir()
    assert fetch(engine, "SELECT count(*) FROM intervals") == \
        fetch(engine, "SELECT transitions FROM traces")


def _count(conn: Connection, trace_id: int) -> int:
    return int(conn.execute(text("SELECT count(*) FROM intervals WHERE trace_id = :t"),
                            {"t": trace_id}).scalar_one())


def test_a_connection_keeps_its_listing_only_while_the_database_is_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The virtual table keeps a connection's listing (and mappings) between
    statements; another connection's load or delete, and this connection's
    own writes, committed or rolled back, are seen by its next statement."""
    d = tmp_path / "data"
    url = f"sqlite:///{d / 'gmpscope.db'}"
    reader, writer = make_engine(url), make_engine(url)
    a = load(writer, A, d, True, monkeypatch)
    (n_a,) = fetch(writer, "SELECT transitions FROM traces WHERE id = :t", t=a.id)[0]
    with reader.connect() as conn:
        assert _count(conn, a.id) == n_a
        conn.rollback()
        b = load(writer, B, d, True, monkeypatch)  # another connection's commit
        (n_b,) = fetch(writer, "SELECT transitions FROM traces WHERE id = :t", t=b.id)[0]
        assert (_count(conn, a.id), _count(conn, b.id)) == (n_a, n_b)
        conn.rollback()
        # This connection's own write, seen inside its transaction, then undone.
        conn.execute(text("DELETE FROM interval_files WHERE trace_id = :t"), {"t": a.id})
        assert _count(conn, a.id) == 0
        conn.rollback()
        assert _count(conn, a.id) == n_a
        conn.rollback()
        assert delete_trace(writer, a.id, d)  # another connection's delete
        assert (_count(conn, a.id), _count(conn, b.id)) == (0, n_b)
