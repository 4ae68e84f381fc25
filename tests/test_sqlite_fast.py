"""The C binder (ingest.store._sqlitebulk via ingest.store.sqlite_fast) stores exactly what
binding through Python's sqlite3 stores: whole real traces loaded both ways
give the same database, table by table; and the binder's own cases (every
integer width, gathers, NULLs, texts, errors) on a small table."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import BigInteger, Column, Engine, Integer, MetaData, Table, Text, text

from ingest.columns import Gather, Nullable, Seq
from ingest.load.pipeline import ingest_trace_file
from ingest.store import bulk, sqlite_fast
from ingest.store.db import make_engine, migrate, write_tx
from tests.support.consistency import assert_same_database, dump_tables

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
pytestmark = pytest.mark.skipif(sqlite_fast._extension() is None,
                                reason="ingest.store._sqlitebulk is not built")


def _load(tmp: Path, trace: Path, pure: bool, monkeypatch: pytest.MonkeyPatch) -> Engine:
    if pure:
        monkeypatch.setenv(sqlite_fast.PURE_ENV, "1")
    else:
        monkeypatch.delenv(sqlite_fast.PURE_ENV, raising=False)
    engine = make_engine(f"sqlite:///{tmp / ('pure' if pure else 'fast')}.db")
    migrate(engine)
    ingest_trace_file(engine, trace, data_dir=tmp / ("pure" if pure else "fast"))
    return engine


@pytest.mark.parametrize("trace", ["go1.23-workers.trace", "go1.26-allocfree.trace",
                                   "go1.21-mixed.trace"])
def test_binder_stores_what_python_binding_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: str) -> None:
    fast = dump_tables(_load(tmp_path, TRACES / trace, False, monkeypatch))
    pure = dump_tables(_load(tmp_path, TRACES / trace, True, monkeypatch))
    assert fast["intervals"], "the trace has intervals"
    assert any(r for r in fast["syscall_outcomes"]) or trace != "go1.23-workers.trace"
    assert_same_database(fast, pure)


# ---------------------------------------------------------------------------
# the binder's own cases, on a small table

_meta = MetaData()
_t = Table("t", _meta, Column("id", Integer, primary_key=True), Column("a", BigInteger),
           Column("b", BigInteger), Column("c", BigInteger), Column("s", Text),
           Column("k", Integer, nullable=False))


@pytest.fixture()
def small(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'small.db'}")
    _meta.create_all(engine)
    return engine


def _rows(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text("SELECT * FROM t ORDER BY id")).all()]


def _insert(engine: Engine, cols: dict[str, Any], pure: bool,
            monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    if pure:
        monkeypatch.setenv(sqlite_fast.PURE_ENV, "1")
    else:
        monkeypatch.delenv(sqlite_fast.PURE_ENV, raising=False)
    with write_tx(engine) as conn:
        conn.exec_driver_sql("DELETE FROM t")
        bulk.insert_columns(conn, _t, cols, {"k": 7})
    return _rows(engine)


def test_widths_gathers_nulls_and_texts(small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 70_000  # more than one chunk and one batch, not a multiple of either
    rng = np.random.default_rng(3)
    values = rng.integers(-2**62, 2**62, 1000)
    order = rng.integers(0, 1000, n).astype(np.int32)
    names = ["μ-function", "main.main", None, ""]
    cases: list[dict[str, Any]] = [
        {"id": Seq(10), "a": rng.integers(-128, 127, n).astype(np.int8),
         "b": rng.integers(0, 65535, n).astype(np.uint16),
         "c": rng.integers(-2**31, 2**31 - 1, n).astype(np.int32),
         "s": [names[i % 4] for i in range(n)]},
        {"id": Seq(1), "a": Gather(values, order), "b": rng.integers(0, 2, n).astype(bool),
         "c": Nullable(rng.integers(0, 2**40, n), rng.integers(0, 2, n).astype(bool)),
         "s": np.array([names[i % 4] for i in range(n)], dtype=object)},
        {"id": Seq(1), "a": np.full(n, -2**63, dtype=np.int64), "b": np.arange(n, dtype=np.uint32),
         "c": Gather(np.array([-1, 2**63 - 1], dtype=np.int64), (np.arange(n) % 2)),
         "s": Gather(np.array(names, dtype=object), np.arange(n) % 4)},
        {"id": Seq(1), "a": [None if i % 5 == 0 else (i - n // 2) * 2**40 for i in range(n)],
         "b": [None] * n, "c": np.array([i % 3 for i in range(n)], dtype=object),
         "s": [None] * 65536 + ["late"] * (n - 65536)},
    ]
    for cols in cases:
        assert all(map(sqlite_fast.bindable, cols.values()))
        fast = _insert(small, cols, False, monkeypatch)
        pure = _insert(small, cols, True, monkeypatch)
        assert len(fast) == n
        assert fast == pure


def test_no_transaction_or_another_connection_is_refused(small: Engine) -> None:
    ext = sqlite_fast._extension()
    import _sqlite3

    path = small.url.database
    raw = sqlite3.connect(path)
    try:
        assert not ext.handle_ok(raw, _sqlite3.__file__, str(Path(path).resolve())), \
            "no transaction open"
        raw.execute("BEGIN IMMEDIATE")
        assert ext.handle_ok(raw, _sqlite3.__file__, str(Path(path).resolve()))
        assert not ext.handle_ok(raw, _sqlite3.__file__, "/elsewhere.db")
        assert not ext.handle_ok(object(), _sqlite3.__file__, str(Path(path).resolve()))
        raw.rollback()
    finally:
        raw.close()
    assert sqlite_fast.column_inserter(object()) is None
    with write_tx(small) as conn:  # what the loader gets: the binder is used
        assert sqlite_fast.column_inserter(conn.connection.driver_connection) is not None


def test_errors_roll_back_and_keep_what_was_stored(
        small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sqlite_fast.PURE_ENV, raising=False)
    before = _insert(small, {"id": Seq(1), "a": np.arange(5)}, False, monkeypatch)
    with pytest.raises(sqlite3.IntegrityError):
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(5), "a": np.arange(3000)}, {"k": 1})
    with pytest.raises(IndexError):
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(100),
                                           "a": Gather(np.arange(3), np.array([0, 3]))}, {"k": 1})
    with pytest.raises(sqlite3.IntegrityError):  # k is NOT NULL
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(100), "k": Nullable(
                np.arange(2), np.array([False, True]))})
    assert _rows(small) == before


def test_what_the_binder_takes() -> None:
    """uint64 (may exceed SQLite's integers), floats and mixed lists go
    through Python's binding, which raises or converts as it always did."""
    assert sqlite_fast.bindable(np.arange(3, dtype=np.uint32))
    assert not sqlite_fast.bindable(np.array([2**63], dtype=np.uint64))
    assert not sqlite_fast.bindable(np.array([0.5]))
    assert not sqlite_fast.bindable([1, "x"])
    assert not sqlite_fast.bindable([2**64])
    assert not sqlite_fast.bindable([True, None])  # bool is its own type: Python binds it
    assert sqlite_fast.bindable([None, 2**63 - 1, -2**63])
    assert sqlite_fast.bindable(Gather(np.array(["a", None], dtype=object), np.array([1, 0])))


def test_insert_refuses_what_is_not_a_connection() -> None:
    ext = sqlite_fast._extension()
    with pytest.raises(TypeError):
        ext.insert_columns(object(), "INSERT INTO t (a) VALUES (?)", 1,
                           "INSERT INTO t (a) VALUES (?)", 1, [(np.arange(1), None, None, 0)])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_int32_gathers_of_every_width_equal_pythons(
        small: Engine, monkeypatch: pytest.MonkeyPatch, dtype: type) -> None:
    """The binder's typed gather (int32 index, signed values, no NULL) stores
    what Python's sqlite3 stores; three columns share one index."""
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, 10_000, dtype=dtype, endpoint=True)
    index = rng.permutation(10_000).astype(np.int32)[:9_000]
    cols = {"id": Seq(1), "a": Gather(values, index), "b": Gather(values[::-1].copy(), index),
            "c": Gather(values, index[::-1].copy())}
    fast = _insert(small, cols, False, monkeypatch)
    assert fast == _insert(small, cols, True, monkeypatch)
    assert [r[1] for r in fast[:5]] == values[index[:5]].tolist()


def test_a_shared_index_is_checked_against_each_columns_values(
        small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sqlite_fast.PURE_ENV, raising=False)
    before = _insert(small, {"id": Seq(1), "a": np.arange(5)}, False, monkeypatch)
    index = np.array([0, 1, 4], np.int32)
    for cols in ({"a": Gather(np.arange(5), index), "b": Gather(np.arange(4), index)},
                 {"a": Gather(np.arange(5), np.array([0, -1], np.int32))}):
        with pytest.raises(IndexError):
            with write_tx(small) as conn:
                bulk.insert_columns(conn, _t, {"id": Seq(100), **cols}, {"k": 1})
    assert _rows(small) == before
