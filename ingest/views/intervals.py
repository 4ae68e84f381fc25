"""Interval windows over SQL: what a goroutine, a proc or a thread did during
``[t1, t2)``, shared by the HTTP API, the pages and the CLI. Every function
takes an Engine and returns plain data (dicts and lists of JSON-able values).

Intervals are half-open, ``[start_ts, end_ts)``, in the trace's ns. A window
query ``(t1, t2)`` returns the intervals that overlap ``[t1, t2)``: those that
start inside it, plus the one in progress at ``t1``. A resource's intervals do
not overlap each other, so the latter is the last one that started before
``t1``, found through the primary key without scanning.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, TextClause, and_, select, text

from ingest.store import models, pg_chunks
from ingest.store.coded_models import rows_by_key

#: (resource, from_state, to_state, reason) by kind code, for one trace.
Kinds = dict[int, tuple[str, str, str, str]]


def _kinds(conn: Connection, trace_id: int) -> Kinds:
    tc = models.transition_counts
    rows = conn.execute(select(tc.c.kind, tc.c.resource, tc.c.from_state, tc.c.to_state,
                               tc.c.reason).where(tc.c.trace_id == trace_id)).all()
    return {r.kind: (r.resource, r.from_state, r.to_state, r.reason) for r in rows}


_IV = models.intervals
_IV_COLS = (_IV.c.rid, _IV.c.kind, _IV.c.start_ts, _IV.c.end_ts, _IV.c.m, _IV.c.p, _IV.c.g,
            _IV.c.stack_id, _IV.c.seq)
_RUNS = models.proc_runs
_RUN_COLS = (_RUNS.c.p, _RUNS.c.g, _RUNS.c.m, _RUNS.c.start_ts, _RUNS.c.end_ts, _RUNS.c.seq)
#: Below this many rows a resource's range is read whole instead of bisected.
_SMALL = 64


def _interval_dict(row: Any, kinds: Kinds) -> dict[str, Any]:
    resource, frm, to, reason = kinds.get(row.kind, ("", "", "", ""))
    return {"resource": resource, "id": row.rid, "state": to, "from_state": frm,
            "reason": reason, "start_ts": row.start_ts, "end_ts": row.end_ts, "m": row.m,
            "p": row.p, "g": row.g, "stack_id": row.stack_id, "seq": row.seq}


def _first_from(conn: Connection, table: Any, lo: int, hi: int, t: int) -> int:
    """The smallest id in [lo, hi] whose start_ts >= t (hi + 1 if none).

    A resource's rows have consecutive ids in time order, so a binary search
    with point lookups on the primary key finds it in O(log n) steps. The
    steps run inside the database, as one recursive query (SQLite and
    PostgreSQL alike): a step per round trip cost ~0.5 ms each on PostgreSQL.
    """
    sql = _bisect_sql(table.name, conn.dialect.name == "postgresql")
    return int(conn.execute(sql, {"a": lo, "b": hi + 1, "t": t}).scalar_one())


@cache
def _bisect_sql(name: str, chunked: bool) -> TextClause:
    # [a, b) narrows to the answer, a row per step, until a = b. (SQLite wants
    # the recursive table once in the step's FROM and in no subquery, so the
    # middle row is looked up by each arm of the CASE.) On PostgreSQL a row is
    # found by id through its chunk's key (ingest.store.pg_chunks).
    mid = "(s.a + s.b) / 2"
    at = (pg_chunks.start_ts_at(name, mid) if chunked
          else f"(SELECT x.start_ts FROM {name} x WHERE x.id = {mid})")
    below = f"{at} < :t"
    return text(
        "WITH RECURSIVE s(a, b) AS ("
        " SELECT CAST(:a AS BIGINT), CAST(:b AS BIGINT)"
        " UNION ALL"
        f" SELECT CASE WHEN {below} THEN {mid} + 1 ELSE s.a END,"
        f" CASE WHEN {below} THEN s.b ELSE {mid} END"
        " FROM s WHERE s.a < s.b"
        ") SELECT min(b) FROM s")


def _window(conn: Connection, table: Any, cols: tuple[Any, ...], lo: int | None,
            hi: int | None, t1: int, t2: int) -> list[Any]:
    """Rows of one resource (ids lo..hi) overlapping [t1, t2), in time order."""
    if lo is None or hi is None or hi < lo or t2 <= t1:
        return []
    if hi - lo < _SMALL:
        a, b = lo, hi
    else:
        a = max(lo, _first_from(conn, table, lo, hi, t1) - 1)
        b = _first_from(conn, table, a, hi, t2) - 1
        if b < a:
            return []
    src = _source(conn, table, a, b)
    rows = conn.execute(select(*(src.c[c.name] for c in cols))
                        .where(src.c.id.between(a, b)).order_by(src.c.id)).all()
    return [r for r in rows if r.start_ts < t2 and (r.end_ts > t1 or r.start_ts >= t1)]


def _source(conn: Connection, table: Any, lo: int, hi: int) -> Any:
    """What to read ``table``'s rows with ids lo..hi from: the view, or on
    PostgreSQL its range function (a view cannot reach the chunks by id)."""
    if conn.dialect.name == "postgresql":
        return pg_chunks.range_source(table, lo, hi)
    return table


def _ids(conn: Connection, table: Any, key: Any, first: str, last: str
         ) -> tuple[int | None, int | None]:
    row = conn.execute(select(table.c[first], table.c[last]).where(key)).first()
    return (None, None) if row is None else (row[0], row[1])


def goroutine_intervals(engine: Engine, trace_id: int, goid: int, t1: int,
                        t2: int) -> list[dict[str, Any]]:
    """What goroutine ``goid`` was doing during ``[t1, t2)``: its state
    intervals in time order (state, reason it entered it, M/P of the
    transition that began it, stack)."""
    with engine.connect() as conn:
        got = rows_by_key(conn, "goroutines", trace_id, [goid],
                          ("first_interval", "last_interval"))
        lo, hi = (got[0][0], got[0][1]) if got else (None, None)
        rows = _window(conn, _IV, _IV_COLS, lo, hi, t1, t2)
        kinds = _kinds(conn, trace_id) if rows else {}
    return [_interval_dict(r, kinds) for r in rows]


def proc_intervals(engine: Engine, trace_id: int, t1: int, t2: int) -> list[dict[str, Any]]:
    """Every proc during ``[t1, t2)``: its state intervals (Running/Idle...),
    each with ``goroutines``: the goroutines that ran on it inside that
    interval and the window (g, m, start_ts, end_ts)."""
    p = models.procs
    out: list[dict[str, Any]] = []
    with engine.connect() as conn:
        kinds = _kinds(conn, trace_id)
        procs = conn.execute(select(p.c.pid, p.c.first_interval, p.c.last_interval,
                                    p.c.first_run, p.c.last_run)
                             .where(p.c.trace_id == trace_id).order_by(p.c.pid)).all()
        for pr in procs:
            runs = [{"g": r.g, "m": r.m, "start_ts": r.start_ts, "end_ts": r.end_ts}
                    for r in _window(conn, _RUNS, _RUN_COLS, pr.first_run, pr.last_run,
                                     t1, t2)]
            for row in _window(conn, _IV, _IV_COLS, pr.first_interval, pr.last_interval,
                               t1, t2):
                d = _interval_dict(row, kinds)
                d["goroutines"] = [g for g in runs if g["start_ts"] < d["end_ts"]
                                   and g["end_ts"] > d["start_ts"]
                                   or g["start_ts"] == d["start_ts"]]
                out.append(d)
    return out


def who_ran_on_proc(engine: Engine, trace_id: int, p: int, t: int) -> dict[str, Any] | None:
    """The goroutine running on proc ``p`` at time ``t`` (g, m, start_ts,
    end_ts of its Running interval), or None when none was."""
    pr = models.procs
    with engine.connect() as conn:
        lo, hi = _ids(conn, pr, and_(pr.c.trace_id == trace_id, pr.c.pid == p),
                      "first_run", "last_run")
        rows = _window(conn, _RUNS, _RUN_COLS, lo, hi, t, t + 1)
    for row in rows:
        if row.start_ts <= t < row.end_ts:
            return {"g": row.g, "m": row.m, "start_ts": row.start_ts, "end_ts": row.end_ts}
    return None


def goroutine(engine: Engine, trace_id: int, goid: int) -> dict[str, Any] | None:
    """One goroutine's summary row."""
    with engine.connect() as conn:
        rows = rows_by_key(conn, "goroutines", trace_id, [goid])
    return dict(rows[0]._mapping) if rows else None


def thread_intervals(engine: Engine, trace_id: int, m: int, t1: int,
                     t2: int) -> list[dict[str, Any]]:
    """What thread ``m`` did during ``[t1, t2)``: the goroutine Running and
    Syscall intervals begun on it (g, p, state). Not indexed by M: this scans
    the trace's intervals."""
    rr = models.row_ranges
    with engine.connect() as conn:
        kinds = _kinds(conn, trace_id)
        want = [k for k, (res, _, to, _) in kinds.items()
                if res == "goroutine" and to in ("Running", "Syscall")]
        span = conn.execute(select(rr.c.first_id, rr.c.last_id).where(
            rr.c.trace_id == trace_id, rr.c.table_name == "intervals")).first()
        if span is None or not want:
            return []
        if conn.dialect.name == "postgresql":
            rows: list[Any] = _thread_rows_chunked(conn, trace_id, m, want, t1, t2)
        else:
            rows = list(conn.execute(
                select(_IV.c.rid, _IV.c.kind, _IV.c.p, _IV.c.start_ts, _IV.c.end_ts)
                .where(_IV.c.id.between(span.first_id, span.last_id), _IV.c.m == m,
                       _IV.c.kind.in_(want), _IV.c.start_ts < t2, _IV.c.end_ts > t1)
                .order_by(_IV.c.start_ts)).all())
    return [{"m": m, "g": r[0], "state": kinds[r[1]][2], "p": r[2],
             "start_ts": r[3], "end_ts": r[4]} for r in rows]


def _thread_rows_chunked(conn: Connection, trace_id: int, m: int, want: list[int],
                         t1: int, t2: int) -> list[tuple[int, ...]]:
    """PostgreSQL: (rid, kind, p, start_ts, end_ts) of thread_intervals'
    rows, the M's positions found in each chunk's array of Ms and only the
    chunks with a row decompressed (ingest.store.pg_chunks.thread_rows_sql),
    in start_ts order."""
    sql = pg_chunks.thread_rows_sql(["rid", "kind", "p", "start_ts", "end_ts"], m=True,
                                    t1=True, t2=True, g=False, running=False)
    rows = conn.execute(text(sql), {"t": trace_id, "m": m, "t1": t1, "t2": t2}).all()
    keep = set(want)
    out = sorted((tuple(int(v) for v in r) for r in rows if int(r[2]) in keep),
                 key=lambda r: (r[4], r[0]))  # start_ts, then id (SQLite's scan order)
    return [r[1:] for r in out]
