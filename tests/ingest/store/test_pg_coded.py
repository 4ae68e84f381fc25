"""PostgreSQL's chunked coded tables (ingest.store.pg_coded): rows stored through
the loader's path in parts show through ``metric_rows``, ``region_rows``
and the views over them as they were given, NULLs and texts
included; revision 0017 carries rows stored as rows over into chunks and back;
a trace's delete removes its chunks. Needs GMPSCOPE_TEST_PG_URL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Boolean, Engine, select, text

from ingest.columns import Nullable
from ingest.store import pg_coded
from ingest.store.bulk import insert_columns
from ingest.store.coded_insert import CodeBook, in_book, store_coded, stored_columns
from ingest.store.coded_models import CODED, rows_by_key, strings
from ingest.store.coded_pages import page_rows
from ingest.store.db import make_engine, write_tx
from tests.ingest.store.test_pg_chunks import _alembic, _trace
from tests.support.ingest_fixtures import make_db_url

pytestmark = pytest.mark.skipif(not os.environ.get("GMPSCOPE_TEST_PG_URL"),
                                reason="needs GMPSCOPE_TEST_PG_URL")

CHUNK = pg_coded.CHUNK
_ORDER = {**{v: f"trace_id, {k}" for v, k in (
    ("metrics", "seq"), ("logs", "seq"), ("regions", "id"), ("goroutines", "goid"),
    ("tasks", "task_id"), ("ranges", "id"))}, **{
    CODED[v].table.name: f"trace_id, {k}" for v, k in (
        ("metrics", "seq"), ("logs", "seq"), ("regions", "id"), ("goroutines", "goid"),
        ("tasks", "task_id"), ("ranges", "id"))}, "transition_stacks": "trace_id, seq"}


def _any_view_cols(view: str, n: int, rng: Any, key: Any) -> dict[str, Any]:
    """Columns of ``view`` made from its model: the key increasing with gaps,
    texts from a few values, NULLs in every nullable column."""
    out: dict[str, Any] = {}
    for c in CODED[view].view.columns:
        if c.name == "trace_id":
            continue
        null = rng.random(n) < 0.2
        if c.primary_key:
            out[c.name] = key
        elif c.name in CODED[view].sources:
            words = ["Running", "gc", "main.worker", "/x"] + ([None] if c.nullable else [])
            out[c.name] = np.array(words, dtype=object)[rng.integers(0, len(words), n)]
        elif isinstance(c.type, Boolean):
            out[c.name] = rng.random(n) < 0.5
        elif c.nullable:
            out[c.name] = Nullable(rng.integers(-5, 2**40, n), null)
        else:
            out[c.name] = rng.integers(-1, 2**40, n)
    return out


def _view_cols(view: str, n: int, seed: int) -> dict[str, Any]:
    """The view's columns for ``n`` rows: increasing keys with gaps, a few
    names, NULLs in every nullable column."""
    rng = np.random.default_rng(seed)
    key = np.cumsum(rng.integers(1, 9, n)).astype(np.int64)
    ts = np.cumsum(rng.integers(0, 5000, n)).astype(np.int64)
    names = np.array(["/gc/heap/goal:bytes", "/sched/gomaxprocs:threads", "a", "b"],
                     dtype=object)
    null = rng.random(n) < 0.2
    if view not in ("metrics", "logs", "regions"):
        return _any_view_cols(view, n, rng, key)
    if view == "metrics":
        strs = np.array([None, "x", "y"], dtype=object)[rng.integers(0, 3, n)]
        return {"seq": key, "ts": ts, "name": names[rng.integers(0, 4, n)],
                "value": Nullable(rng.integers(-5, 2**40, n), null), "value_str": strs}
    if view == "logs":
        return {"seq": key, "ts": ts, "g": rng.integers(1, 900, n),
                "task_id": Nullable(rng.integers(0, 40, n), null),
                "category": names[rng.integers(0, 4, n)],
                "message": np.array([f"m{i % 37}" for i in range(n)], dtype=object),
                "stack_id": rng.integers(0, 2**33, n)}
    start = Nullable(ts, null)
    return {"id": key, "task_id": Nullable(rng.integers(0, 40, n), ~null),
            "name": names[rng.integers(0, 4, n)], "g": rng.integers(1, 900, n),
            "start_ts": start, "end_ts": Nullable(ts + rng.integers(0, 900, n), null & ~null),
            "stack_id": rng.integers(0, 2**33, n)}


def _expected(view: str, trace_id: int, cols: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The view's rows for ``cols``, as Python values (NULLs as None)."""
    out = []
    names = list(cols)
    n = len(cols[names[0]])
    for i in range(n):
        row: list[Any] = [trace_id]
        for k in names:
            c = cols[k]
            if isinstance(c, Nullable):
                row.append(None if c.null[i] else int(c.values[i]))
            elif isinstance(c, np.ndarray) and c.dtype != object:
                row.append(int(c[i]))
            else:
                row.append(c[i])
        out.append(tuple(row))
    return out


def _store_rows(conn: Any, trace_id: int, view: str, cols: dict[str, Any]) -> None:
    """As 0016's loader stored them: rows of the coded table, and its strings."""
    table_cols, texts = stored_columns(CODED[view], cols)
    for source, first, values in texts:
        insert_columns(conn, strings, {
            "source": np.full(len(values), source, np.int64),
            "code": np.arange(first, first + len(values), dtype=np.int64),
            "value": values}, {"trace_id": trace_id})
    insert_columns(conn, CODED[view].table, table_cols, {"trace_id": trace_id})


def _rows(engine: Engine, rel: str, trace_id: int | None = None) -> list[tuple[Any, ...]]:
    where = "" if trace_id is None else f" WHERE trace_id = {int(trace_id)}"
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            f"SELECT * FROM {rel}{where} ORDER BY {_ORDER[rel]}"))]


@pytest.mark.parametrize("view", pg_coded.VIEWS)
def test_parts_show_as_given(pg: Engine, view: str) -> None:
    """3 chunks and a bit, stored in the loader's parts (cut off the chunk size):
    the view shows every row as given; each chunk holds at most CHUNK rows of one
    trace, keyed by its first row's key; a second trace's rows stay its own."""
    n = 3 * CHUNK + 77
    traces = []
    for seed, cuts in ((1, [1, 700, 2500]), (2, [])):
        cols = _view_cols(view, n, seed)
        with write_tx(pg) as conn:
            tid = _trace(conn)
            a = 0
            books = {k: CodeBook() for k in CODED[view].sources}  # as the loader's parts
            for b in [*cuts, n]:
                part = {k: (Nullable(v.values[a:b], v.null[a:b]) if isinstance(v, Nullable)
                            else in_book(v[a:b], books[k]) if k in books else v[a:b])
                        for k, v in cols.items()}
                assert store_coded(conn, tid, view, part) == b - a
                a = b
        traces.append(tid)
        assert _rows(pg, view, tid) == _expected(view, tid, cols)
        with pg.connect() as conn:
            assert pg_coded.count_rows(conn, CODED[view].table.name, tid) == n
    c = pg_coded.CHUNKED[view]
    with pg.connect() as conn:
        chunks = [tuple(r) for r in conn.exec_driver_sql(
            f"SELECT trace_id, {c.first}, {c.key}[1], cardinality({c.key}) FROM {c.chunks} "
            f"ORDER BY trace_id, {c.first}")]
    assert all(first == k0 and 0 < size <= CHUNK for _, first, k0, size in chunks)
    # Cut every CHUNK rows of the trace, whatever the parts: 3 whole and 77.
    assert [s for t, _, _, s in chunks if t == traces[0]] == [CHUNK] * 3 + [77]
    assert [sum(s for t, _, _, s in chunks if t == tid) for tid in traces] == [n, n]
    # A page in key order from the chunks that hold it is the rows' own page.
    rows = CODED[view].rows
    with pg.connect() as conn:
        for offset, limit in ((0, 5), (CHUNK - 2, 4), (CHUNK, CHUNK + 3), (3 * CHUNK + 70, 20),
                              (n, 5), (5, 0), (1, 3 * CHUNK)):
            got = [tuple(r) for r in conn.execute(
                select(page_rows(view, traces[0], offset, limit, "postgresql")))]
            want = [tuple(r) for r in conn.execute(
                select(rows).where(rows.c.trace_id == traces[0])
                .order_by(rows.c[c.key]).limit(limit).offset(offset))]
            assert got == want, (offset, limit)
            assert len(got) == max(0, min(limit, n - offset))
    with write_tx(pg) as conn:
        conn.exec_driver_sql(f"DELETE FROM traces WHERE id = {traces[0]}")
    with pg.connect() as conn:
        left = {r[0] for r in conn.exec_driver_sql(f"SELECT DISTINCT trace_id FROM {c.chunks}")}
    assert left == {traces[1]}


def test_a_column_null_on_every_row_is_a_null_array(pg: Engine) -> None:
    """Go's new traces give no metric a text value: the column is left out of
    the insert, and its chunks hold a NULL array, not 1024 NULLs."""
    cols = _view_cols("metrics", 2 * CHUNK, 5)
    cols["value_str"] = np.full(2 * CHUNK, None, dtype=object)
    with write_tx(pg) as conn:
        tid = _trace(conn)
        store_coded(conn, tid, "metrics", cols)
    assert _rows(pg, "metrics", tid) == _expected("metrics", tid, cols)
    with pg.connect() as conn:
        assert conn.exec_driver_sql(
            "SELECT count(*), count(value_str) FROM metric_chunks").one() == (2, 0)


def test_revision_0017_carries_rows_over_and_back(tmp_path: Path) -> None:
    """Rows stored at revision 0016 (two traces) show the same through every
    table and view after the upgrade, as chunks of CHUNK rows in key order, and
    after the downgrade, as rows again; a delete then removes one trace's."""
    rels = (*_ORDER,)
    for url in make_db_url("postgresql", tmp_path):
        engine = make_engine(url, migrate_to_head=False)
        _alembic(engine, "upgrade", "0016")
        with write_tx(engine) as conn:
            for seed, n in ((1, CHUNK + 300), (2, 2 * CHUNK + 7)):
                tid = _trace(conn)
                for view in pg_coded.VIEWS:
                    _store_rows(conn, tid, view, _view_cols(view, n, seed))
                conn.exec_driver_sql(
                    "INSERT INTO transition_stacks SELECT %s, 3 * k, k %% 17 "
                    "FROM generate_series(1, %s) k", (tid, n))
        before = {r: _rows(engine, r) for r in rels}
        assert len(before["metrics"]) == 3 * CHUNK + 307
        _alembic(engine, "upgrade", "head")
        assert {r: _rows(engine, r) for r in rels} == before
        with engine.connect() as conn:
            sizes = [r[0] for r in conn.exec_driver_sql(
                "SELECT cardinality(seq) FROM metric_chunks ORDER BY trace_id, first_seq")]
        assert sizes == [CHUNK, 300, CHUNK, CHUNK, 7]
        _alembic(engine, "downgrade", "0016")
        assert {r: _rows(engine, r) for r in rels} == before
        _alembic(engine, "upgrade", "head")
        first = before["metrics"][0][0]
        with write_tx(engine) as conn:
            conn.exec_driver_sql(f"DELETE FROM traces WHERE id = {first}")
        assert _rows(engine, "regions") == [r for r in before["regions"] if r[0] != first]
        engine.dispose()


@pytest.mark.parametrize("view", ("goroutines", "tasks", "ranges", "regions", "logs"))
def test_rows_by_key_are_the_views_rows(pg: Engine, view: str) -> None:
    """``rows_by_key`` (through the table's keyed function) gives the rows the
    view gives for the same keys: a chunk's first and last rows, keys no row
    has (between rows, before the first, after the last), a key asked twice."""
    n = 2 * CHUNK + 50
    cols = _view_cols(view, n, 7)
    key = next(c.name for c in CODED[view].view.primary_key.columns if c.name != "trace_id")
    k = cols[key]
    with write_tx(pg) as conn:
        tid = _trace(conn)
        store_coded(conn, tid, view, cols)
    asked = [int(k[0]), int(k[CHUNK - 1]), int(k[CHUNK]), int(k[-1]), int(k[5]), int(k[5]),
             int(k[0]) - 1, int(k[-1]) + 1, *(int(x) + 1 for x in k[7:12] if x + 1 not in k)]
    names = [c.name for c in CODED[view].view.columns if c.name != "trace_id"]
    with pg.connect() as conn:
        want = [tuple(r) for r in conn.execute(text(
            f"SELECT {', '.join(names)} FROM {view} WHERE trace_id = :t AND {key} = ANY(:k) "
            f"ORDER BY {key}"), {"t": tid, "k": asked})]
        got = [tuple(r) for r in rows_by_key(conn, view, tid, asked)]
        some = [tuple(r) for r in rows_by_key(conn, view, tid, asked, (key, names[-1]))]
    assert len(want) == 5 and got == want
    assert some == [(r[0], r[-1]) for r in want]


def test_transition_stacks_in_parts_show_as_given(pg: Engine) -> None:
    """The loader's parts of ``transition_stacks`` (not a coded table) make
    chunks of CHUNK rows that its view shows as given."""
    from ingest.load.tables import store_table

    n = 2 * CHUNK + 9
    seq = np.cumsum(np.random.default_rng(3).integers(1, 40, n)).astype(np.int64)
    stack = (seq * 7) % 1000
    with write_tx(pg) as conn:
        tid = _trace(conn)
        a = 0
        for b in (5, CHUNK + 100, n):
            store_table(conn, tid, "transition_stacks", {"seq": seq[a:b], "stack_id": stack[a:b]},
                        b - a, 0, lambda k: None)
            a = b
        sizes = [r[0] for r in conn.exec_driver_sql(
            "SELECT cardinality(seq) FROM transition_stack_chunks ORDER BY first_seq")]
    assert sizes == [CHUNK, CHUNK, 9]
    assert _rows(pg, "transition_stacks", tid) == [
        (tid, int(s), int(k)) for s, k in zip(seq, stack, strict=True)]
