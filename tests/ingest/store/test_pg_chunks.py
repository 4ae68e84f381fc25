"""PostgreSQL's chunk rows (ingest.store.pg_chunks): rows written in parts of
any size make the same chunks as one part, on the id grid; the views, the
range functions and the arrays read back give the rows written; a trace's
delete removes its chunks. Needs GMPSCOPE_TEST_PG_URL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, select, text

from ingest.columns import Gather, Nullable, Seq
from ingest.store import models, pg_chunk_io, pg_chunks
from ingest.store.db import make_engine, write_tx
from tests.support.ingest_fixtures import make_db_url

pytestmark = pytest.mark.skipif(not os.environ.get("GMPSCOPE_TEST_PG_URL"),
                                reason="needs GMPSCOPE_TEST_PG_URL")

CHUNK = pg_chunks.CHUNK


def _trace(conn: Any) -> int:
    return int(conn.exec_driver_sql(
        "INSERT INTO traces (sha256, name, source, go_version, family, events, transitions, "
        "goroutines, procs, threads, stacks, event_counts, status, bytes_lost, "
        "generations_lost, loss_offset, loss_error, created_at) VALUES (md5(random()::text) "
        "|| md5(random()::text), 't', 'trace', '1.27', 'v2', 0, 0, 0, 0, 0, 0, '{}', "
        "'complete', 0, 0, 0, '', now()) RETURNING id").scalar_one())


def _intervals(n: int, seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.integers(0, 1000, n)).astype(np.int64)
    return {"rid": rng.integers(0, 50, n), "start_ts": start, "seq": np.arange(n) * 3,
            "end_ts": start + rng.integers(0, 500, n),
            "kind": rng.integers(0, 30, n).astype(np.int16),
            "m": rng.integers(-1, 8, n), "p": rng.integers(-1, 4, n), "g": rng.integers(0, 9, n),
            "stack_id": rng.integers(0, 2**40, n)}


def _store(conn: Any, trace_id: int, first: int, cols: dict[str, Any], cuts: list[int]) -> None:
    """``cols`` stored as the loader does, in parts ending at ``cuts``."""
    a = 0
    for b in [*cuts, len(next(iter(cols.values())))]:
        part: dict[str, Any] = {"id": Seq(first + a)}
        for k, v in cols.items():
            part[k] = (Gather(v.values, v.index[a:b]) if isinstance(v, Gather)
                       else Nullable(v.values[a:b], v.null[a:b]) if isinstance(v, Nullable)
                       else v[a:b])
        pg_chunk_io.store_table(conn, trace_id, "intervals", part, b - a, 0)
        a = b


def _chunks(conn: Any, table: str = "interval_chunks") -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.exec_driver_sql(
        f"SELECT first_id, trace_id, cardinality(rid) FROM {table} ORDER BY first_id")]


def test_parts_make_the_chunks_one_part_makes(pg: Engine) -> None:
    n = 5 * CHUNK + 77
    cols = _intervals(n)
    first = 3 * CHUNK - 10  # a block starting 11 ids before the grid's next line
    seen = []
    for cuts in ([], [1, 2, 700, 3000], list(range(97, n, 997))):
        with write_tx(pg) as conn:
            tid = _trace(conn)
            _store(conn, tid, first, cols, cuts)
            seen.append([(f, k) for f, _, k in _chunks(conn)])
            got = conn.execute(select(models.intervals).order_by(models.intervals.c.id)).all()
            conn.exec_driver_sql(f"DELETE FROM traces WHERE id = {tid}")
        assert [r.id for r in got] == list(range(first, first + n))
        for name, values in cols.items():
            assert [getattr(r, name) for r in got] == values.tolist(), name
    assert seen[0] == seen[1] == seen[2]
    # The grid: 11 rows to the line, then whole cells, then the rest.
    assert seen[0] == [(first, 11)] + [(3 * CHUNK + 1 + i * CHUNK, CHUNK) for i in range(5)] + [
        (8 * CHUNK + 1, n - 11 - 5 * CHUNK)]
    with pg.connect() as conn:
        assert _chunks(conn) == []  # gone with their trace


def test_range_functions_and_arrays_give_the_views_rows(pg: Engine) -> None:
    n = 3 * CHUNK + 5
    cols = _intervals(n, seed=2)
    with write_tx(pg) as conn:
        tid = _trace(conn)
        _store(conn, tid, 1, cols, [CHUNK + 3])
        runs = np.array([5, 0, n - 1, 2 * CHUNK, 17], np.int64)
        pg_chunk_io.store_table(conn, tid, "proc_runs", {"id": Seq(1), "interval_row": runs},
                              len(runs), 1)
        outcome = Gather(np.array(pg_chunks.OUTCOMES, dtype=object), np.array([0, 3, 1]))
        pg_chunk_io.store_table(conn, tid, "syscalls", {
            "id": Seq(1), "interval_row": np.array([9, 10, 3000]),
            "start_known": np.array([True, False, True]), "outcome": outcome,
            "p_lost": np.array([False, True, True]),
            "stolen_ts": Nullable(np.array([0, 123, 0]), np.array([True, False, True])),
            "stolen_by_m": Nullable(np.array([0, 4, 0]), np.array([True, False, True]))}, 3, 1)
    with pg.connect() as conn:
        for lo, hi in ((1, n), (CHUNK - 2, CHUNK + 2), (2 * CHUNK + 1, 2 * CHUNK + 1), (7, 6)):
            via_view = conn.execute(text(
                "SELECT * FROM intervals WHERE id BETWEEN :a AND :b ORDER BY id"),
                {"a": lo, "b": hi}).all()
            via_fn = conn.execute(text(
                "SELECT * FROM gmpscope_intervals(:a, :b) ORDER BY id"), {"a": lo, "b": hi}).all()
            assert via_fn == via_view and len(via_view) == max(0, hi - lo + 1)
            arrays = pg_chunk_io.read_block(conn, "intervals", ["start_ts", "kind"], lo, hi)
            assert arrays["start_ts"].tolist() == [r.start_ts for r in via_view]
            assert arrays["kind"].tolist() == [r.kind for r in via_view]
        for view in ("proc_runs", "syscalls"):
            every = conn.execute(text(f"SELECT * FROM {view} ORDER BY id")).all()
            assert conn.execute(text(
                f"SELECT * FROM gmpscope_{view}(2, 3) ORDER BY id")).all() == every[1:3]
        runs_seen = conn.execute(text("SELECT start_ts, g FROM proc_runs ORDER BY id")).all()
        assert runs_seen == [(int(cols["start_ts"][i]), int(cols["rid"][i])) for i in runs]
        sc = conn.execute(text("SELECT outcome, stolen_ts, stolen_by_m, start_known, p_lost, "
                               "end_ts - start_ts = duration_ns FROM syscalls ORDER BY id")).all()
        assert sc == [("returned", None, None, True, False, True),
                      ("unfinished", 123, 4, False, True, True),
                      ("blocked", None, None, True, True, True)]
        assert pg_chunk_io.last_id(conn, "intervals") == n
        assert pg_chunk_io.last_id(conn, "syscalls") == 3


def test_follow_on_intervals_keep_zero_ends(pg: Engine) -> None:
    """A resource's intervals follow one another (each ends where the next
    begins): the chunks keep 0 for every end but a chunk's or a resource's
    last, and the seq less the id; the view, the range function and the
    arrays give the times and seqs back."""
    n = 2 * CHUNK + 40
    cols = _intervals(n, seed=4)
    cols["rid"] = np.repeat(np.arange(4), [700, 900, 1, n - 1601])
    cols["end_ts"] = np.append(cols["start_ts"][1:], cols["start_ts"][-1] + 5)
    last = np.cumsum([700, 900, 1, n - 1601]) - 1
    cols["end_ts"][last[:-1]] -= 1  # a resource's last ends before the next one's first
    cols["seq"] = np.arange(n) + 7
    with write_tx(pg) as conn:
        tid = _trace(conn)
        _store(conn, tid, 1, cols, [300, CHUNK + 1])
        kept = conn.exec_driver_sql(
            "SELECT first_id, end_ts, seq FROM interval_chunks ORDER BY first_id").all()
        view = conn.execute(text("SELECT end_ts, seq FROM intervals ORDER BY id")).all()
        fn = conn.execute(text(f"SELECT end_ts, seq FROM gmpscope_intervals(1, {n})")).all()
        arrays = pg_chunk_io.read_block(conn, "intervals", ["end_ts", "seq"], 2, n)
        conn.exec_driver_sql(f"DELETE FROM traces WHERE id = {tid}")
    ends = [e for _, chunk_ends, _ in kept for e in chunk_ends[:-1]]
    assert len(ends) == n - len(kept) and sum(e != 0 for e in ends) == len(last) - 1
    assert {s for _, _, seqs in kept for s in seqs} == {7 - 1}
    want = list(zip(cols["end_ts"].tolist(), cols["seq"].tolist(), strict=True))
    assert [tuple(r) for r in view] == [tuple(r) for r in fn] == want
    assert arrays["end_ts"].tolist() == cols["end_ts"][1:].tolist()
    assert arrays["seq"].tolist() == cols["seq"][1:].tolist()


def _alembic(engine: Engine, action: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(models.__file__).parent / "migrations"))
    with write_tx(engine) as conn:
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, revision)


_SHOWN = {"intervals": "id", "proc_runs": "id", "syscalls": "id", "interval_view": "id",
          "transitions": "trace_id, seq", "interval_rows": "id", "proc_run_index": "id",
          "syscall_outcomes": "id"}


def _shown(engine: Engine) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        return {v: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {v} ORDER BY {o}"))]
                for v, o in _SHOWN.items()}


def test_revision_0015_carries_rows_over_and_back(tmp_path: Path) -> None:
    """Rows stored at revision 0014 (two traces' blocks, one starting off the
    grid) show the same through every view after the upgrade, as chunks, and
    after the downgrade, as rows again; a delete then removes one trace's."""
    for url in make_db_url("postgresql", tmp_path):
        engine = make_engine(url, migrate_to_head=False)
        _alembic(engine, "upgrade", "0014")
        rng = np.random.default_rng(3)
        with write_tx(engine) as conn:
            first = 1
            for n in (CHUNK + 300, 2 * CHUNK + 7):
                tid = _trace(conn)
                cols = _intervals(n, seed=tid)
                ids = np.arange(first, first + n)
                conn.exec_driver_sql(
                    "INSERT INTO interval_rows SELECT * FROM unnest("
                    + ", ".join(["%s::bigint[]", "%s::int[]"] + ["%s::bigint[]"] * 4
                                + ["%s::smallint[]"] + ["%s::bigint[]"] * 4) + ")",
                    (ids.tolist(), [tid] * n, *[cols[c].tolist() for c in (
                        "rid", "start_ts", "seq", "end_ts", "kind", "m", "p", "g",
                        "stack_id")]))
                conn.exec_driver_sql(
                    "INSERT INTO transition_counts SELECT %s, k, 'goroutine', 'a', 'b', 'r', 1 "
                    "FROM generate_series(0, 29) k", (tid,))
                runs = rng.choice(ids, 40, replace=False).tolist()
                conn.exec_driver_sql(
                    "INSERT INTO proc_run_index SELECT %s + i - 1, %s, r "
                    "FROM unnest(%s::bigint[]) WITH ORDINALITY u(r, i)", (first, tid, runs))
                calls = rng.choice(ids, 9, replace=False).tolist()
                conn.exec_driver_sql(
                    "INSERT INTO syscall_outcomes SELECT %s + i - 1, %s, r, i %% 2 = 0, "
                    "(ARRAY['returned','blocked','exited','unfinished'])[1 + i %% 4], "
                    "i %% 3 = 0, "
                    "CASE WHEN i %% 3 = 0 THEN 1000 * i END, CASE WHEN i %% 3 = 0 THEN i END "
                    "FROM unnest(%s::bigint[]) WITH ORDINALITY u(r, i)", (first, tid, calls))
                for name, k in (("intervals", n), ("proc_runs", 40), ("syscalls", 9)):
                    conn.exec_driver_sql("INSERT INTO row_ranges VALUES (%s, %s, %s, %s)",
                                         (tid, name, first, first + k - 1))
                first += n + 500  # the next block starts off the grid
        before = _shown(engine)
        assert len(before["intervals"]) == 3 * CHUNK + 307
        _alembic(engine, "upgrade", "head")
        assert _shown(engine) == before
        with engine.connect() as conn:
            chunks = _chunks(conn)
        assert all(k <= CHUNK and (f - 1) // CHUNK == (f + k - 2) // CHUNK for f, _, k in chunks)
        assert sum(k for _, _, k in chunks) == len(before["intervals"])
        _alembic(engine, "downgrade", "0014")
        assert _shown(engine) == before
        _alembic(engine, "upgrade", "head")
        with write_tx(engine) as conn:
            conn.exec_driver_sql("DELETE FROM traces WHERE id = (SELECT min(id) FROM traces)")
        after = _shown(engine)
        assert after["intervals"] == [r for r in before["intervals"] if r[1] != before[
            "intervals"][0][1]]
        engine.dispose()
