"""The one query layer over the ingest database, shared by the HTTP API, the
pages and the CLI. Every function takes an Engine and returns plain data
(dicts and lists of JSON-able values).

Intervals are half-open, ``[start_ts, end_ts)``, in the trace's ns. A window
query ``(t1, t2)`` returns the intervals that overlap ``[t1, t2)``: those that
start inside it, plus the one in progress at ``t1``. A resource's intervals do
not overlap each other, so the latter is the last one that started before
``t1``, found through the primary key without scanning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, delete, select

from ingest import models
from ingest.db import write_tx
from ingest.models import GOROUTINE, PROC, RESOURCE_NAMES, STATE_NAMES

_TRACE_COLUMNS = [c for c in models.traces.c]


def _trace_dict(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["event_counts"] = json.loads(d["event_counts"] or "{}")
    if d.get("created_at") is not None:
        d["created_at"] = d["created_at"].isoformat()
    d["loss"] = {"bytes_lost": d.pop("bytes_lost"), "generations_lost": d.pop("generations_lost"),
                 "offset": d.pop("loss_offset"), "error": d.pop("loss_error")}
    return d


def list_traces(engine: Engine) -> list[dict[str, Any]]:
    """Every stored trace, newest first."""
    t = models.traces
    with engine.connect() as conn:
        rows = conn.execute(select(*_TRACE_COLUMNS).order_by(t.c.id.desc())).all()
    return [_trace_dict(r) for r in rows]


def get_trace(engine: Engine | Connection, trace_id: int) -> dict[str, Any] | None:
    """One trace's row (as list_traces), or None."""
    stmt = select(*_TRACE_COLUMNS).where(models.traces.c.id == trace_id)
    if isinstance(engine, Connection):
        row = engine.execute(stmt).first()
    else:
        with engine.connect() as conn:
            row = conn.execute(stmt).first()
    return None if row is None else _trace_dict(row)


def trace_summary(engine: Engine, trace_id: int) -> dict[str, Any] | None:
    """The trace row plus transition counts by (resource, from, to, reason),
    time per state, and the ranges, tasks and syscalls counts."""
    tc = models.transition_counts
    with engine.connect() as conn:
        info = get_trace(conn, trace_id)
        if info is None:
            return None
        counts = conn.execute(
            select(tc.c.resource, tc.c.from_state, tc.c.to_state, tc.c.reason, tc.c.count)
            .where(tc.c.trace_id == trace_id)
            .order_by(tc.c.resource, tc.c.count.desc(), tc.c.from_state, tc.c.to_state,
                      tc.c.reason)).all()
        info["transition_counts"] = [
            {"resource": r.resource, "from": r.from_state, "to": r.to_state,
             "reason": r.reason, "count": r._mapping["count"]} for r in counts]
        by_res: dict[str, int] = {}
        for r in counts:
            by_res[r.resource] = by_res.get(r.resource, 0) + r._mapping["count"]
        info["transitions_by_resource"] = by_res
        for name, table in (("syscall_count", models.syscalls), ("range_count", models.ranges),
                            ("task_count", models.tasks), ("region_count", models.regions),
                            ("log_count", models.logs)):
            info[name] = _count(conn, table, trace_id)
    return info


def _count(conn: Connection, table: Any, trace_id: int) -> int:
    from sqlalchemy import func

    return int(conn.execute(select(func.count()).select_from(table)
                            .where(table.c.trace_id == trace_id)).scalar_one())


def delete_trace(engine: Engine, trace_id: int, data_dir: Path | None = None) -> bool:
    """Delete a trace and everything derived from it (and its raw file, when
    ``data_dir`` is given); False when there was no such trace."""
    t = models.traces
    with write_tx(engine) as conn:
        sha = conn.execute(select(t.c.sha256).where(t.c.id == trace_id)).scalar_one_or_none()
        if sha is None:
            return False
        # Explicit deletes, children first: the same result as the ON DELETE
        # CASCADE, also where foreign keys are not enforced.
        for table in models.TRACE_TABLES:
            conn.execute(delete(table).where(table.c.trace_id == trace_id))
        conn.execute(delete(t).where(t.c.id == trace_id))
    if data_dir is not None:
        from ingest.load import raw_path

        raw_path(data_dir, sha).unlink(missing_ok=True)
    return True


def _reasons(conn: Connection, trace_id: int) -> list[str]:
    r = models.reasons
    rows = conn.execute(select(r.c.code, r.c.reason).where(r.c.trace_id == trace_id)).all()
    out = [""] * (max((c for c, _ in rows), default=-1) + 1)
    for code, text in rows:
        out[code] = text
    return out


_IV = models.intervals
_IV_COLS = (_IV.c.resource, _IV.c.rid, _IV.c.state, _IV.c.from_state, _IV.c.reason,
            _IV.c.start_ts, _IV.c.end_ts, _IV.c.m, _IV.c.p, _IV.c.g, _IV.c.stack_id, _IV.c.seq)


def _interval_dict(row: Any, reasons: list[str]) -> dict[str, Any]:
    return {"resource": RESOURCE_NAMES[row.resource], "id": row.rid,
            "state": STATE_NAMES[row.state], "from_state": STATE_NAMES[row.from_state],
            "reason": reasons[row.reason] if row.reason < len(reasons) else "",
            "start_ts": row.start_ts, "end_ts": row.end_ts, "m": row.m, "p": row.p,
            "g": row.g, "stack_id": row.stack_id, "seq": row.seq}


def _window_rows(conn: Connection, trace_id: int, resource: int, rid: int, t1: int,
                 t2: int) -> list[Any]:
    key = and_(_IV.c.trace_id == trace_id, _IV.c.resource == resource, _IV.c.rid == rid)
    before = conn.execute(
        select(*_IV_COLS).where(key, _IV.c.start_ts < t1)
        .order_by(_IV.c.start_ts.desc(), _IV.c.seq.desc()).limit(1)).first()
    inside = conn.execute(
        select(*_IV_COLS).where(key, _IV.c.start_ts >= t1, _IV.c.start_ts < t2)
        .order_by(_IV.c.start_ts, _IV.c.seq)).all()
    rows = list(inside)
    if before is not None and before.end_ts > t1:
        rows.insert(0, before)
    return rows


def goroutine_intervals(engine: Engine, trace_id: int, goid: int, t1: int,
                        t2: int) -> list[dict[str, Any]]:
    """What goroutine ``goid`` was doing during ``[t1, t2)``: its state
    intervals in time order (state, reason it entered it, M/P of the
    transition that began it, stack)."""
    with engine.connect() as conn:
        reasons = _reasons(conn, trace_id)
        rows = _window_rows(conn, trace_id, GOROUTINE, goid, t1, t2)
    return [_interval_dict(r, reasons) for r in rows]


def _proc_ids(conn: Connection, trace_id: int) -> list[int]:
    p = models.procs
    return [r[0] for r in conn.execute(select(p.c.pid).where(p.c.trace_id == trace_id)
                                       .order_by(p.c.pid))]


def _runs(conn: Connection, trace_id: int, p: int, t1: int, t2: int) -> list[Any]:
    r = models.proc_runs
    cols = (r.c.p, r.c.g, r.c.m, r.c.start_ts, r.c.end_ts, r.c.seq)
    key = and_(r.c.trace_id == trace_id, r.c.p == p)
    before = conn.execute(select(*cols).where(key, r.c.start_ts < t1)
                          .order_by(r.c.start_ts.desc(), r.c.seq.desc()).limit(1)).first()
    rows = list(conn.execute(select(*cols).where(key, r.c.start_ts >= t1, r.c.start_ts < t2)
                             .order_by(r.c.start_ts, r.c.seq)).all())
    if before is not None and before.end_ts > t1:
        rows.insert(0, before)
    return rows


def proc_intervals(engine: Engine, trace_id: int, t1: int, t2: int) -> list[dict[str, Any]]:
    """Every proc during ``[t1, t2)``: its state intervals (Running/Idle...),
    each with ``goroutines``: the goroutines that ran on it inside that
    interval and the window (g, m, start_ts, end_ts)."""
    out: list[dict[str, Any]] = []
    with engine.connect() as conn:
        reasons = _reasons(conn, trace_id)
        for pid in _proc_ids(conn, trace_id):
            runs = [{"g": r.g, "m": r.m, "start_ts": r.start_ts, "end_ts": r.end_ts}
                    for r in _runs(conn, trace_id, pid, t1, t2)]
            for row in _window_rows(conn, trace_id, PROC, pid, t1, t2):
                d = _interval_dict(row, reasons)
                d["goroutines"] = [g for g in runs if g["start_ts"] < d["end_ts"]
                                   and g["end_ts"] > d["start_ts"]
                                   or g["start_ts"] == d["start_ts"]]
                out.append(d)
    return out


def who_ran_on_proc(engine: Engine, trace_id: int, p: int, t: int) -> dict[str, Any] | None:
    """The goroutine running on proc ``p`` at time ``t`` (g, m, start_ts,
    end_ts of its Running interval), or None when none was."""
    r = models.proc_runs
    with engine.connect() as conn:
        row = conn.execute(
            select(r.c.g, r.c.m, r.c.start_ts, r.c.end_ts)
            .where(r.c.trace_id == trace_id, r.c.p == p, r.c.start_ts <= t)
            .order_by(r.c.start_ts.desc(), r.c.seq.desc()).limit(1)).first()
    if row is None or row.end_ts <= t:
        return None
    return {"g": row.g, "m": row.m, "start_ts": row.start_ts, "end_ts": row.end_ts}


def goroutine(engine: Engine, trace_id: int, goid: int) -> dict[str, Any] | None:
    """One goroutine's summary row."""
    g = models.goroutines
    with engine.connect() as conn:
        row = conn.execute(select(g).where(g.c.trace_id == trace_id, g.c.goid == goid)).first()
    if row is None:
        return None
    d = dict(row._mapping)
    d.pop("trace_id")
    return d


def thread_intervals(engine: Engine, trace_id: int, m: int, t1: int,
                     t2: int) -> list[dict[str, Any]]:
    """What thread ``m`` did during ``[t1, t2)``: the goroutine Running and
    Syscall intervals begun on it (g, p, state). Not indexed by M: this scans
    the trace's goroutine intervals that start in the window."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(_IV.c.rid, _IV.c.state, _IV.c.p, _IV.c.start_ts, _IV.c.end_ts)
            .where(_IV.c.trace_id == trace_id, _IV.c.resource == GOROUTINE,
                   _IV.c.m == m, _IV.c.state.in_([models.RUNNING, models.SYSCALL]),
                   _IV.c.start_ts < t2, _IV.c.end_ts > t1)
            .order_by(_IV.c.start_ts)).all()
    return [{"m": m, "g": r.rid, "state": STATE_NAMES[r.state], "p": r.p,
             "start_ts": r.start_ts, "end_ts": r.end_ts} for r in rows]
