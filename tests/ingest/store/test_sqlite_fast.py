"""The C binder (ingest.store._sqlitebulk via ingest.store.sqlite_fast) stores exactly what
binding through Python's sqlite3 stores: whole real traces loaded both ways
give the same tables, value by value and type by type; and the binder's own
cases (every integer width, gathers, NULLs, texts, errors) on a small table.
It reaches a connection only through the SQL function that register() has
SQLite add to connections opened afterwards; it binds without the GIL."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    text,
)

from ingest.columns import Gather, Nullable, Seq
from ingest.extensions import PURE_ENV
from ingest.load.pipeline import ingest_trace_file
from ingest.store import bulk, interval_files, models, sqlite_fast
from ingest.store.db import make_engine, migrate, write_tx
from tests.support.consistency import _WALL_CLOCK

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT / "tests" / "data" / "traces"
pytestmark = pytest.mark.skipif(sqlite_fast._extension() is None,
                                reason="ingest.store._sqlitebulk is not built")


def _ext() -> Any:
    ext = sqlite_fast._extension()
    assert ext is not None
    return ext


def _raw(conn: Connection) -> Any:
    """The sqlite3 connection under a SQLAlchemy one."""
    return conn.connection.driver_connection


@pytest.fixture()
def used(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each of bulk's calls got the C binder (appended per call)."""
    calls: list[bool] = []
    real = sqlite_fast.column_inserter

    def spy(dbapi_conn: Any) -> sqlite_fast.Inserter | None:
        got = real(dbapi_conn)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(bulk, "column_inserter", spy)
    yield calls
    assert _ext().pending() == 0, "every staged batch released"


def _python_inserts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bind through Python's sqlite3: bulk gets no C inserter."""
    monkeypatch.setattr(bulk, "column_inserter", lambda _conn: None)


def _exact(engine: Engine, tables: list[Table]) -> dict[str, list[tuple[str, ...]]]:
    """Every row of ``tables`` as typeof:hex per column, in a stable order:
    equal only for the same values of the same storage classes, byte for
    byte (wall-clock columns left out, as dump_tables does)."""
    out: dict[str, list[tuple[str, ...]]] = {}
    with engine.connect() as conn:
        for table in tables:
            cols = [c.name for c in table.columns if c.name not in _WALL_CLOCK
                    and not (table is models.traces and isinstance(c.type, Float))]
            sel = ", ".join(f"typeof({c}) || ':' || hex({c})" for c in cols)
            rows = conn.execute(text(f"SELECT {sel} FROM {table.name} "
                                     f"ORDER BY {', '.join(cols)}")).all()
            out[table.name] = [tuple(r) for r in rows]
    return out


def _load(tmp: Path, trace: Path, python: bool, monkeypatch: pytest.MonkeyPatch) -> Engine:
    name = "python" if python else "c"
    with monkeypatch.context() as m:
        if python:
            _python_inserts(m)
        # The intervals as rows, bound like every other table's (kept in
        # files they are not bound at all: tests/ingest/store/test_interval_files.py).
        m.setattr(interval_files, "store_in_files", lambda engine: False)
        engine = make_engine(f"sqlite:///{tmp / name}.db")
        migrate(engine)
        ingest_trace_file(engine, trace, data_dir=tmp / name)
    return engine


@pytest.mark.parametrize("trace", ["go1.23-workers.trace", "go1.26-allocfree.trace",
                                   "go1.21-mixed.trace"])
def test_binder_stores_what_python_binding_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, used: list[bool], trace: str) -> None:
    tables = [*models.TRACE_TABLES, models.traces, models.intervals]
    fast = _exact(_load(tmp_path, TRACES / trace, False, monkeypatch), tables)
    assert used and all(used), "every bulk insert of the load bound through C"
    python = _exact(_load(tmp_path, TRACES / trace, True, monkeypatch), tables)
    assert fast["intervals"], "the trace has intervals"
    assert fast.keys() == python.keys()
    for name in fast:
        assert len(fast[name]) == len(python[name]), name
        assert fast[name] == python[name], f"{name} differs"


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
    return _exact(engine, [_t])["t"]


def _insert(engine: Engine, cols: dict[str, Any], python: bool,
            monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    with monkeypatch.context() as m:
        if python:
            _python_inserts(m)
        with write_tx(engine) as conn:
            conn.exec_driver_sql("DELETE FROM t")
            bulk.insert_columns(conn, _t, cols, {"k": 7})
    return _rows(engine)


def test_widths_gathers_nulls_and_texts(small: Engine, monkeypatch: pytest.MonkeyPatch,
                                        used: list[bool]) -> None:
    n = 70_000  # more than one chunk and one batch, not a multiple of either
    rng = np.random.default_rng(3)
    values = rng.integers(-2**62, 2**62, 1000)
    order = rng.integers(0, 1000, n).astype(np.int32)
    names = ["μ-function", "main.main", None, "", "a\x00b", "😀" * 300]
    m = len(names)
    cases: list[dict[str, Any]] = [
        {"id": Seq(10), "a": rng.integers(-128, 127, n).astype(np.int8),
         "b": rng.integers(0, 65535, n).astype(np.uint16),
         "c": rng.integers(-2**31, 2**31 - 1, n).astype(np.int32),
         "s": [names[i % m] for i in range(n)]},
        {"id": Seq(1), "a": Gather(values, order), "b": rng.integers(0, 2, n).astype(bool),
         "c": Nullable(rng.integers(0, 2**40, n), rng.integers(0, 2, n).astype(bool)),
         "s": np.array([names[i % m] for i in range(n)], dtype=object)},
        {"id": Seq(1), "a": np.full(n, -2**63, dtype=np.int64), "b": np.arange(n, dtype=np.uint32),
         "c": Gather(np.array([-1, 2**63 - 1], dtype=np.int64), (np.arange(n) % 2)),
         "s": Gather(np.array(names, dtype=object), np.arange(n) % m)},
        {"id": Seq(1), "a": [None if i % 5 == 0 else (i - n // 2) * 2**40 for i in range(n)],
         "b": [None] * n, "c": np.array([i % 3 for i in range(n)], dtype=object),
         "s": [None] * 65536 + ["late"] * (n - 65536)},
    ]
    for cols in cases:
        assert all(map(sqlite_fast.bindable, cols.values()))
        used.clear()
        fast = _insert(small, cols, False, monkeypatch)
        assert used == [True]
        python = _insert(small, cols, True, monkeypatch)
        assert len(fast) == n
        assert fast == python


def test_staged_texts_are_copies(small: Engine) -> None:
    """The function runs after staging, without the GIL: what it binds was
    copied at staging, whatever happens to the list meanwhile."""
    ext = _ext()
    texts = ["first", "zweite", None]
    with write_tx(small) as conn:
        raw = _raw(conn)
        token = ext.stage(sqlite_fast.select_sql("t", ["id", "s"], {"k": 1}), 3,
                          [(None, None, None, 1), (None, None, None, 0, texts)])
        texts[:] = ["x" * 10_000] * 3
        del texts
        try:
            assert raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone() == (3,)
        finally:
            assert ext.release(token)
    with small.connect() as conn:
        assert conn.exec_driver_sql("SELECT s FROM t ORDER BY id").all() == [
            ("first",), ("zweite",), (None,)]


# ---------------------------------------------------------------------------
# which connections get the binder


def test_connections_without_the_binder(small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite_fast.column_inserter(object()) is None
    raw = sqlite3.connect(small.url.database or "", isolation_level=None)
    try:
        assert sqlite_fast.column_inserter(raw) is None, "no transaction open"
        raw.execute("BEGIN IMMEDIATE")
        # Opened after register() (make_engine called it): the function is there.
        assert sqlite_fast.column_inserter(raw) is not None
        monkeypatch.setenv(PURE_ENV, "1")
        assert sqlite_fast.column_inserter(raw) is None
        assert not sqlite_fast.register()
        raw.rollback()
    finally:
        raw.close()
    monkeypatch.delenv(PURE_ENV)
    with write_tx(small) as conn:  # what the loader gets: the binder is used
        assert sqlite_fast.column_inserter(_raw(conn)) is not None


_BEFORE_AND_AFTER = """
import json, sqlite3
from ingest.store import sqlite_fast
early = sqlite3.connect(":memory:", isolation_level=None)
registered = sqlite_fast.register() and sqlite_fast.register()  # idempotent
late = sqlite3.connect(":memory:", isolation_level=None)
out = {"registered": registered}
for name, conn in (("early", early), ("late", late)):
    conn.execute("BEGIN")
    out[name] = sqlite_fast.column_inserter(conn) is not None
with open("/proc/self/maps") as maps:
    out["libraries"] = sorted({line.split()[-1] for line in maps if "libsqlite3" in line})
print(json.dumps(out))
"""


def test_a_connection_opened_before_register_binds_through_python() -> None:
    """In a fresh process (this one registered long ago): a connection
    opened before register() has no function and gets no inserter; one
    opened after does. One SQLite library serves both _sqlite3 and the
    extension."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    out = subprocess.run([sys.executable, "-c", _BEFORE_AND_AFTER], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert got["registered"] and not got["early"] and got["late"]
    assert len(got["libraries"]) == 1, got["libraries"]


def test_the_function_is_for_top_level_sql_only(small: Engine) -> None:
    """A view or trigger (a database file's schema) cannot call it."""
    raw = sqlite3.connect(":memory:", isolation_level=None)
    try:
        assert raw.execute("SELECT gmpscope_bulk_insert(NULL)").fetchone() == (
            _ext().instance(),)
        raw.execute("CREATE VIEW v AS SELECT gmpscope_bulk_insert(NULL)")
        with pytest.raises(sqlite3.OperationalError, match="unsafe use"):
            raw.execute("SELECT * FROM v").fetchall()
    finally:
        raw.close()


def test_gmpscope_rows_reads_only_the_functions_batch(small: Engine) -> None:
    """SQL cannot name a batch (the argument is a pointer only C binds): a
    query of gmpscope_rows without one, with a token or from a view fails;
    the function's statement must take the batch, and nothing else."""
    ext = _ext()
    raw = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for sql, match in (("SELECT * FROM gmpscope_rows", "a batch argument expected"),
                           ("SELECT c0 FROM gmpscope_rows(1)", "only gmpscope_bulk_insert"),
                           ("SELECT c0 FROM gmpscope_rows WHERE batch = 1",
                            "only gmpscope_bulk_insert"),
                           ("SELECT c0 FROM gmpscope_rows WHERE batch > 1",
                            "a batch argument expected"),
                           ("CREATE VIRTUAL TABLE x USING gmpscope_rows", "gmpscope_rows")):
            with pytest.raises(sqlite3.OperationalError, match=match):
                raw.execute(sql).fetchall()
        # The argument's value from another table: a plan that reads it first.
        raw.execute("CREATE TABLE k (v)")
        raw.execute("INSERT INTO k VALUES (1)")
        with pytest.raises(sqlite3.OperationalError, match="only gmpscope_bulk_insert"):
            raw.execute("SELECT c0 FROM gmpscope_rows, k WHERE batch = k.v").fetchall()
        raw.execute("CREATE VIEW v AS SELECT c0 FROM gmpscope_rows(1)")
        with pytest.raises(sqlite3.OperationalError, match="unsafe use"):
            raw.execute("SELECT * FROM v").fetchall()
    finally:
        raw.close()
    with write_tx(small) as conn:
        raw = _raw(conn)
        for sql in ("INSERT INTO t (a, k) VALUES (1, 1)",
                    "INSERT INTO t (a, k) SELECT c0, ? FROM gmpscope_rows(?)"):
            token = ext.stage(sql, 1, [(np.arange(1), None, None, 0)])
            try:
                with pytest.raises(sqlite3.OperationalError, match="one parameter"):
                    raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone()
            finally:
                assert ext.release(token)
        # Columns past the batch's are NULL; the rows are inserted in order.
        token = ext.stage("INSERT INTO t (a, b, k) SELECT c0, c1, 1 FROM gmpscope_rows(?)", 3,
                          [(np.array([5, 6, 7]), None, None, 0)])
        try:
            assert raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone() == (3,)
        finally:
            assert ext.release(token)
        assert raw.execute("SELECT a, b FROM t ORDER BY id").fetchall() == [
            (5, None), (6, None), (7, None)]
        # A statement that does not insert every row of the batch fails.
        token = ext.stage("INSERT INTO t (a, k) SELECT c0, 1 FROM gmpscope_rows(?) LIMIT 1", 3,
                          [(np.array([5, 6, 7]), None, None, 0)])
        try:
            with pytest.raises(sqlite3.OperationalError, match="1 rows inserted of 3"):
                raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone()
        finally:
            assert ext.release(token)
        conn.rollback()


# ---------------------------------------------------------------------------
# errors


def test_errors_roll_back_and_keep_what_was_stored(
        small: Engine, monkeypatch: pytest.MonkeyPatch, used: list[bool]) -> None:
    before = _insert(small, {"id": Seq(1), "a": np.arange(5)}, False, monkeypatch)
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed: t.id"):
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(5), "a": np.arange(3000)}, {"k": 1})
    with pytest.raises(IndexError):  # found while staging
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(100),
                                           "a": Gather(np.arange(3), np.array([0, 3]))}, {"k": 1})
    with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):  # k is NOT NULL
        with write_tx(small) as conn:
            bulk.insert_columns(conn, _t, {"id": Seq(100), "k": Nullable(
                np.arange(2), np.array([False, True]))})
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        with write_tx(small) as conn:
            fast = sqlite_fast.column_inserter(_raw(conn))
            assert fast is not None
            fast("nowhere", ["a"], [np.arange(3)], 0, 3, {})
    assert _rows(small) == before


def test_errors_are_those_of_pythons_own_insert(
        small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A duplicate key raises what the same INSERT through sqlite3 raises:
    class, message and SQLite's extended code (the loader maps them)."""
    _insert(small, {"id": Seq(1), "a": np.arange(5)}, False, monkeypatch)
    seen = []
    for python in (False, True):
        with monkeypatch.context() as m, pytest.raises(sqlite3.DatabaseError) as err:
            if python:
                _python_inserts(m)
            with write_tx(small) as conn:
                bulk.insert_columns(conn, _t, {"id": Seq(3), "a": np.arange(10)}, {"k": 1})
        seen.append((type(err.value), str(err.value), err.value.sqlite_errorname))
    assert seen[0] == seen[1]
    assert seen[0][0] is sqlite3.IntegrityError
    assert seen[0][2] == "SQLITE_CONSTRAINT_PRIMARYKEY"


def test_tokens_insert_once(small: Engine) -> None:
    ext = _ext()
    with write_tx(small) as conn:
        raw = _raw(conn)
        token = ext.stage(sqlite_fast.select_sql("t", ["a"], {"k": 1}), 2,
                          [(np.arange(2), None, None, 0)])
        try:
            assert raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone() == (2,)
            with pytest.raises(sqlite3.OperationalError, match="inserted already"):
                raw.execute("SELECT gmpscope_bulk_insert(?)", (token,)).fetchone()
        finally:
            assert ext.release(token)
        assert not ext.release(token)
        for bad in (token, "x", 1.5):
            with pytest.raises(sqlite3.OperationalError, match="gmpscope_bulk_insert"):
                raw.execute("SELECT gmpscope_bulk_insert(?)", (bad,)).fetchone()
    assert ext.pending() == 0


def test_staging_refuses_bad_columns() -> None:
    ext = _ext()
    sql = sqlite_fast.select_sql("t", ["a"])
    for specs, exc in (([(np.arange(1.0), None, None, 0)], TypeError),
                       ([(None, None, None, 0, ["a", 1])], TypeError),
                       ([(None, None, None, 0, ["\ud800"])], UnicodeEncodeError),
                       ([(None, None, None, 0, ["a"])], ValueError),  # fewer texts than rows
                       ([], ValueError),
                       ([(None, None, None, 0)] * (ext.COLUMNS + 1), ValueError)):
        with pytest.raises(exc):
            ext.stage(sql, 2, specs)
    assert ext.pending() == 0


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
    with small.connect() as conn:
        got = conn.exec_driver_sql("SELECT a FROM t ORDER BY id LIMIT 5").scalars().all()
    assert got == values[index[:5]].tolist()


def test_a_shared_index_is_checked_against_each_columns_values(
        small: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _insert(small, {"id": Seq(1), "a": np.arange(5)}, False, monkeypatch)
    index = np.array([0, 1, 4], np.int32)
    for cols in ({"a": Gather(np.arange(5), index), "b": Gather(np.arange(4), index)},
                 {"a": Gather(np.arange(5), np.array([0, -1], np.int32))}):
        with pytest.raises(IndexError):
            with write_tx(small) as conn:
                bulk.insert_columns(conn, _t, {"id": Seq(100), **cols}, {"k": 1})
    assert _rows(small) == before


# ---------------------------------------------------------------------------
# without the GIL


def test_other_threads_run_while_rows_are_bound(small: Engine) -> None:
    """One call binding a million rows: another Python thread keeps running
    meanwhile (with the GIL held it could not run at all until the end)."""
    n = 1_000_000
    ticks = [0]
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks[0] += 1

    rng = np.random.default_rng(5)
    cols = [Seq(1), rng.integers(0, 2**40, n), Gather(rng.integers(0, 99, 1000),
                                                      rng.integers(0, 1000, n))]
    ticker = threading.Thread(target=tick, daemon=True)
    with write_tx(small) as conn:
        fast = sqlite_fast.column_inserter(_raw(conn))
        assert fast is not None
        ticker.start()
        try:
            time.sleep(0.05)  # the ticker is running
            before, started = ticks[0], time.perf_counter()
            assert fast("t", ["id", "a", "b"], cols, 0, n, {"k": 1}) == n
            during, seconds = ticks[0] - before, time.perf_counter() - started
        finally:
            stop.set()
            ticker.join()
    assert seconds > 0.05
    assert during > 10_000, f"the other thread ran {during} times in {seconds:.2f} s"
    with small.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*), max(id) FROM t").one() == (n, n)
