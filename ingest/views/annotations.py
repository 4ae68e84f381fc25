"""User annotations of one trace: tasks (as a tree), regions by name, logs.

All strings are returned exactly as stored (the program wrote them; the
pages show them as text). Durations are known only where both ends are in
the trace; a task or region missing an end (or a begin) is counted but not
timed. Percentiles are nearest-rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine, func, select

from ingest.derive.interval_order import nearest_rank
from ingest.store import models

MAX_LOGS = 5000


def _duration(s: int | None, e: int | None) -> int | None:
    return None if s is None or e is None else int(e) - int(s)


def tasks(engine: Engine, trace_id: int) -> list[dict[str, Any]]:
    """Every task in tree order (parents before children, depth-first), with
    ``depth``, ``duration_ns``, ``children`` and ``goroutines`` (the distinct
    goroutines that began or ended it, ran its regions or logged into it)."""
    tk, rg, lg = models.tasks, models.regions, models.logs
    with engine.connect() as conn:
        rows: list[dict[str, Any]] = [dict(r._mapping) for r in conn.execute(
            select(tk.c.task_id, tk.c.parent_id, tk.c.name, tk.c.start_ts, tk.c.end_ts,
                   tk.c.start_g, tk.c.end_g).where(tk.c.trace_id == trace_id)
            .order_by(tk.c.start_ts.is_(None).desc(), tk.c.start_ts, tk.c.task_id))]
        gs: dict[int, set[int]] = {}
        for table in (rg, lg):
            for row in conn.execute(select(table.c.task_id, table.c.g).distinct()
                                    .where(table.c.trace_id == trace_id,
                                           table.c.task_id.is_not(None))):
                gs.setdefault(int(row.task_id), set()).add(int(row.g))
        n_regions: dict[Any, Any] = dict(conn.execute(
            select(rg.c.task_id, func.count()).where(rg.c.trace_id == trace_id,
                                                     rg.c.task_id.is_not(None))
            .group_by(rg.c.task_id)).all())
        n_logs: dict[Any, Any] = dict(conn.execute(
            select(lg.c.task_id, func.count()).where(lg.c.trace_id == trace_id,
                                                     lg.c.task_id.is_not(None))
            .group_by(lg.c.task_id)).all())
    by_id = {r["task_id"]: r for r in rows}
    children: dict[int | None, list[int]] = {}
    for r in rows:
        parent = r["parent_id"] if r["parent_id"] in by_id else None
        children.setdefault(parent, []).append(r["task_id"])
    out: list[dict[str, Any]] = []
    stack: list[tuple[int, int]] = [(t, 0) for t in reversed(children.get(None, []))]
    while stack:
        tid, depth = stack.pop()
        r = by_id[tid]
        g = set(gs.get(tid, set()))
        g.update(x for x in (r["start_g"], r["end_g"]) if x is not None and x >= 0)
        out.append({**r, "name": r["name"] if r["name"] is not None else "",
                    "depth": depth, "duration_ns": _duration(r["start_ts"], r["end_ts"]),
                    "children": len(children.get(tid, [])), "goroutines": sorted(g),
                    "regions": int(n_regions.get(tid, 0)), "logs": int(n_logs.get(tid, 0))})
        stack.extend((c, depth + 1) for c in reversed(children.get(tid, [])))
    return out


def region_stats(engine: Engine, trace_id: int) -> list[dict[str, Any]]:
    """Regions grouped by name: count, timed (both ends seen), total, mean,
    p50, p99 and max duration, goroutines; most total time first."""
    rg = models.regions
    with engine.connect() as conn:
        rows = conn.execute(select(rg.c.name, rg.c.start_ts, rg.c.end_ts, rg.c.g)
                            .where(rg.c.trace_id == trace_id)).all()
    groups: dict[str, tuple[list[int], list[int], set[int]]] = {}
    for r in rows:
        d, n, g = groups.setdefault(r.name, ([], [0], set()))
        n[0] += 1
        g.add(int(r.g))
        dur = _duration(r.start_ts, r.end_ts)
        if dur is not None:
            d.append(dur)
    out: list[dict[str, Any]] = []
    for name, (durs, n, g) in groups.items():
        a = np.sort(np.asarray(durs, dtype=np.int64))
        timed = len(a) > 0
        out.append({"name": name, "count": n[0], "timed": len(a),
                    "total_ns": int(a.sum()) if timed else 0,
                    "mean_ns": float(a.mean()) if timed else None,
                    "p50_ns": nearest_rank(a, 0.5) if timed else None,
                    "p99_ns": nearest_rank(a, 0.99) if timed else None,
                    "max_ns": int(a[-1]) if timed else None,
                    "goroutines": len(g)})
    out.sort(key=lambda r: (-r["total_ns"], -r["count"], r["name"]))
    return out


def logs(engine: Engine, trace_id: int, *, category: str | None = None,
         text: str | None = None, g: int | None = None, task_id: int | None = None,
         limit: int = MAX_LOGS) -> dict[str, Any]:
    """Log records in time order, filtered (``category`` exact, ``text`` a
    substring of category or message, ``g``, ``task_id``); at most ``limit``
    rows, with the total that matched."""
    lg = models.logs
    cond = [lg.c.trace_id == trace_id]
    if category is not None:
        cond.append(lg.c.category == category)
    if g is not None:
        cond.append(lg.c.g == g)
    if task_id is not None:
        cond.append(lg.c.task_id == task_id)
    with engine.connect() as conn:
        rows = conn.execute(select(lg.c.seq, lg.c.ts, lg.c.g, lg.c.task_id, lg.c.category,
                                   lg.c.message).where(*cond).order_by(lg.c.seq)).all()
        cats = conn.execute(select(lg.c.category, func.count())
                            .where(lg.c.trace_id == trace_id)
                            .group_by(lg.c.category).order_by(lg.c.category)).all()
    # Substring match in Python: LIKE would treat % and _ in the needle as
    # wildcards, and SQLite's LIKE folds ASCII case only.
    recs = [dict(r._mapping) for r in rows
            if text is None or text in r.category or text in r.message]
    return {"total": len(recs), "rows": recs[:max(0, limit)],
            "categories": [{"category": c, "count": int(n)} for c, n in cats]}


def annotations_data(engine: Engine, trace_id: int, **log_filters: Any) -> dict[str, Any]:
    """Tasks, region statistics and logs of a trace; LookupError when no trace."""
    with engine.connect() as conn:
        if conn.execute(select(models.traces.c.id)
                        .where(models.traces.c.id == trace_id)).first() is None:
            raise LookupError(f"no trace with id {trace_id}")
    return {"trace_id": trace_id, "tasks": tasks(engine, trace_id),
            "regions": region_stats(engine, trace_id),
            "logs": logs(engine, trace_id, **log_filters)}
