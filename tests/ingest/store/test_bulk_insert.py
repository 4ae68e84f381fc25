"""The bulk insert paths (ingest.store.bulk) store exactly the derived columns: NULLs
where a Nullable column has none, constants written into the statement, rows
with NULLs inserted apart when they carry their ids. Checked on a real trace
whose syscalls mix both NULL patterns (one stolen P among 1,112 syscalls), on
SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from collectors.gotrace.todir import decode_file_to_dir
from ingest.columns import Computed, Diff, Gather, Nullable
from ingest.derive import intervals as derive
from ingest.load.pipeline import load_parquet_dir
from ingest.store.db import PAGE_CACHE_KIB, WAL_AUTOCHECKPOINT_PAGES, write_tx
from tests.support.ingest_fixtures import ROOT, db_url, engine
from tests.support.transitions_oracle import read_transitions

FIXTURES = (db_url, engine)
MIXED = ROOT / "tests" / "data" / "traces" / "go1.23-workers.trace"


def _whole(col: Any) -> Any:
    """A lazy column's values (Gather, Computed, Diff of those), else ``col``."""
    if isinstance(col, Diff):  # a - b
        return np.asarray(_whole(col.a), np.int64) - _whole(col.b)
    if isinstance(col, Gather):
        return col.values[col.index]
    if isinstance(col, Computed):
        return col.chunk(0, len(col))
    return col


def _expected(col: Any) -> list[Any]:
    col = _whole(col)
    if isinstance(col, Nullable):
        return [None if n else int(v) for v, n in zip(col.values, col.null, strict=True)]
    return [v if isinstance(v, str) else int(v) for v in np.asarray(col).tolist()]


def _stored(engine: Engine, table: str, trace_id: int, cols: list[str],
            order: str) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        rows = conn.execute(text(
            f"SELECT {', '.join(cols)} FROM {table} WHERE trace_id = :t ORDER BY {order}"),
            {"t": trace_id}).all()
    return {c: [r[i] if not isinstance(r[i], bool) else int(r[i]) for r in rows]
            for i, c in enumerate(cols)}


@pytest.fixture()
def mixed(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    d = tmp_path / "parquet"
    meta = decode_file_to_dir(MIXED, d)
    return d, meta


def test_syscalls_with_and_without_nulls_stored_as_derived(
        engine: Engine, mixed: tuple[Path, dict[str, Any]]) -> None:
    d, meta = mixed
    tr = read_transitions(d)
    o = derive.order_intervals(tr, int(meta["last_ts"]))
    want = derive.syscalls(tr, o)
    stolen = want["stolen_ts"].null
    assert 0 < int((~stolen).sum()) < len(stolen), "the trace mixes both NULL patterns"
    res = load_parquet_dir(engine, d, "mixed")
    # The view's columns (not the loader's interval_row, nor the frames' outcome code).
    cols = [c for c in want if c not in ("interval_row", "outcome_code")]
    got = _stored(engine, "syscalls", res.id, cols, "id")
    for c in cols:
        assert got[c] == _expected(want[c]), c


def test_procs_nulls_and_implicit_rowids(engine: Engine,
                                         mixed: tuple[Path, dict[str, Any]]) -> None:
    # procs has no id column of its own: rows keep their order and NULLs go
    # through the sentinel and UPDATE path.
    d, _ = mixed
    res = load_parquet_dir(engine, d, "mixed")
    got = _stored(engine, "procs", res.id, ["pid", "first_run", "last_run"], "pid")
    with engine.connect() as conn:
        runs = conn.execute(text(
            "SELECT p, min(id), max(id) FROM proc_runs WHERE trace_id = :t GROUP BY p"),
            {"t": res.id}).all()
    by_p = {int(p): (lo, hi) for p, lo, hi in runs}
    assert got["first_run"] == [by_p.get(p, (None, None))[0] for p in got["pid"]]
    assert got["last_run"] == [by_p.get(p, (None, None))[1] for p in got["pid"]]
    assert -(2**63) not in got["first_run"] + got["last_run"], "no sentinel left behind"


def test_bulk_transaction_restores_the_connection_settings(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("a SQLite setting")
    for fail in (False, True):
        raw: Any = None
        try:
            with write_tx(engine, bulk=True) as conn:
                raw = conn.connection.driver_connection
                assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -8192
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 0
                assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
                if fail:
                    raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        # The same connection, back in the pool: as every other one.
        assert raw.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB
        assert raw.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES
        assert not raw.in_transaction


def test_a_load_leaves_its_rows_checkpointed_into_the_database_file(
        engine: Engine, mixed: tuple[Path, dict[str, Any]]) -> None:
    """The load's commit leaves the rows in the write-ahead log; the loader
    copies them into the database file (checkpoint_meanwhile) before it
    returns, so the log holds nothing that the file lacks."""
    if engine.dialect.name != "sqlite":
        pytest.skip("a SQLite setting")
    d, _ = mixed
    res = load_parquet_dir(engine, d, "mixed")
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
        size = conn.exec_driver_sql("PRAGMA page_size").scalar()
        n = conn.exec_driver_sql("SELECT count(*) FROM intervals WHERE trace_id = ?",
                                 (res.id,)).scalar()
    assert n and n > 1000
    # Every page of the database, the loaded ones included, is in the file
    # (without the checkpoint the new pages are only in the -wal file).
    path = Path(engine.url.database or "")
    assert path.stat().st_size >= pages * size > 0
