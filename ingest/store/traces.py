"""The trace catalog: the stored traces, one trace's row and its summary, and
how many are windows of live sessions. Every function takes an Engine (or a
Connection) and returns plain data (dicts and lists of JSON-able values).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from ingest.store import coded_files, live_models, models, pg_coded
from ingest.store.coded_models import CODED
from ingest.store.db import first_row

_TRACE_COLUMNS = [c for c in models.traces.c]


def _trace_dict(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["event_counts"] = json.loads(d["event_counts"] or "{}")
    if d.get("created_at") is not None:
        d["created_at"] = d["created_at"].isoformat()
    d["loss"] = {"bytes_lost": d.pop("bytes_lost"), "generations_lost": d.pop("generations_lost"),
                 "offset": d.pop("loss_offset"), "error": d.pop("loss_error")}
    return d


def list_traces(engine: Engine, live_windows: bool = False) -> list[dict[str, Any]]:
    """Stored traces, newest first; the windows of live sessions (a service
    watched for a day keeps hundreds) only with ``live_windows``."""
    t = models.traces
    stmt = select(*_TRACE_COLUMNS).order_by(t.c.id.desc())
    if not live_windows:
        stmt = stmt.where(t.c.id.not_in(_live_window_ids()))
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return [_trace_dict(r) for r in rows]


def _live_window_ids() -> Any:
    ls = live_models.live_segments
    return select(ls.c.trace_id).where(ls.c.trace_id.is_not(None))


def count_live_windows(engine: Engine) -> int:
    """How many stored traces are windows of live sessions."""
    t = models.traces
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(t)
                                .where(t.c.id.in_(_live_window_ids()))).scalar_one())


def row_of_trace(engine: Engine | Connection, table: Any, trace_id: int,
                 json_columns: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The one row of ``table`` (keyed by ``trace_id``) belonging to a trace, as a
    dict with ``json_columns`` decoded; None when it has none."""
    stmt = select(table).where(table.c.trace_id == trace_id)
    row = first_row(engine, stmt)
    if row is None:
        return None
    out = dict(row._mapping)
    for col in json_columns:
        out[col] = json.loads(out[col])
    return out


def get_trace(engine: Engine | Connection, trace_id: int) -> dict[str, Any] | None:
    """One trace's row (as list_traces), or None."""
    stmt = select(*_TRACE_COLUMNS).where(models.traces.c.id == trace_id)
    row = first_row(engine, stmt)
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
            select(tc.c.resource, tc.c.from_state, tc.c.to_state, tc.c.reason, tc.c["count"])
            .where(tc.c.trace_id == trace_id)
            .order_by(tc.c.resource, tc.c["count"].desc(), tc.c.from_state, tc.c.to_state,
                      tc.c.reason)).all()
        info["transition_counts"] = [
            {"resource": r.resource, "from": r.from_state, "to": r.to_state,
             "reason": r.reason, "count": r._mapping["count"]} for r in counts]
        by_res: dict[str, int] = {}
        for r in counts:
            by_res[r.resource] = by_res.get(r.resource, 0) + r._mapping["count"]
        info["transitions_by_resource"] = by_res
        rr = models.row_ranges
        blocks = {r.table_name: r.last_id - r.first_id + 1 for r in conn.execute(
            select(rr.c.table_name, rr.c.first_id, rr.c.last_id)
            .where(rr.c.trace_id == trace_id))}
        info["syscall_count"] = blocks.get("syscalls", 0)  # no trace_id index there
        # Counted in the coded tables: through the views SQLite would join
        # every row to its strings (2.3 s on the 200 MB trace instead of 0.2).
        for name, view in (("range_count", "ranges"), ("task_count", "tasks"),
                           ("region_count", "regions"), ("log_count", "logs")):
            info[name] = _count(conn, CODED[view].table, trace_id)
    return info


def _count(conn: Connection, table: Any, trace_id: int) -> int:
    if conn.dialect.name == "postgresql" and table.name in pg_coded.BY_TABLE:
        return pg_coded.count_rows(conn, table.name, trace_id)
    n = int(conn.execute(select(func.count()).select_from(table)
                         .where(table.c.trace_id == trace_id)).scalar_one())
    return n + coded_files.rows_in_files(conn, table.name, trace_id)
