"""User annotations of one trace: task types (a summary per task name), a
bounded page of tasks, regions by name, logs (a bounded page).

Nothing here is proportional to the trace's number of tasks, regions or logs
in Python: summaries are SQL aggregates and numpy over one column of
durations, and task and log rows come a page at a time (``LIMIT``/``OFFSET``)
with the total that matched, so a page of the explorer stays small at any
trace size. All strings are returned exactly as stored (the program wrote
them; the pages show them as text). Durations are known only where both ends
are in the trace; a task or region missing an end (or a begin) is counted but
not timed. Percentiles are nearest-rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, Table, and_, case, func, select
from sqlalchemy.sql.elements import ColumnElement

from ingest.derive.interval_order import nearest_rank
from ingest.store import models

#: Log rows in a page by default, and at most.
LOG_LIMIT = 1000
MAX_LOGS = 5000
#: Task rows in a page by default, and at most.
TASK_LIMIT = 200
MAX_TASK_LIMIT = 5000
TASK_SORTS = ("duration", "start")
#: Ids per ``IN (...)`` list (well under SQLite's bound variables limit).
_CHUNK = 900


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield list(ids[i:i + _CHUNK])


def _duration_stats(conn: Connection, table: Table, trace_id: int,
                    with_goroutines: bool = False) -> list[dict[str, Any]]:
    """Per name (NULL as ""): count, timed, total, mean, p50, p90, p99, max
    duration (and distinct goroutines), by SQL aggregates and numpy over the
    timed durations sorted by name then duration."""
    name = func.coalesce(table.c.name, "").label("name")
    dur = table.c.end_ts - table.c.start_ts
    timed = and_(table.c.start_ts.is_not(None), table.c.end_ts.is_not(None))
    cols: list[Any] = [name, func.count().label("count"),
                       func.count(case((timed, 1))).label("timed")]
    if with_goroutines:
        cols.append(func.count(table.c.g.distinct()).label("goroutines"))
    groups = conn.execute(select(*cols).where(table.c.trace_id == trace_id)
                          .group_by(name).order_by(name)).all()
    durs = np.fromiter(conn.execute(
        select(dur).where(table.c.trace_id == trace_id, timed)
        .order_by(func.coalesce(table.c.name, ""), dur)).scalars(), dtype=np.int64)
    out: list[dict[str, Any]] = []
    at = 0
    for g in groups:
        r = g._mapping
        a = durs[at:at + int(r["timed"])]
        at += int(r["timed"])
        n = len(a)
        row: dict[str, Any] = {
            "name": r["name"], "count": int(r["count"]), "timed": n,
            "total_ns": int(a.sum()) if n else 0,
            "mean_ns": float(a.mean()) if n else None,
            "p50_ns": nearest_rank(a, 0.5) if n else None,
            "p90_ns": nearest_rank(a, 0.9) if n else None,
            "p99_ns": nearest_rank(a, 0.99) if n else None,
            "max_ns": int(a[-1]) if n else None}
        if with_goroutines:
            row["goroutines"] = int(r["goroutines"])
        out.append(row)
    if at != len(durs):  # the two queries disagreed on the names' order
        raise RuntimeError("durations and groups out of step")
    out.sort(key=lambda r: (-r["total_ns"], -r["count"], r["name"]))
    return out


def task_types(engine: Engine, trace_id: int) -> list[dict[str, Any]]:
    """Tasks grouped by name (type): count, timed (both ends in the trace),
    total, mean, p50, p90, p99 and max duration; most total time first."""
    with engine.connect() as conn:
        return _duration_stats(conn, models.tasks, trace_id)


def _depths(conn: Connection, trace_id: int, parents: dict[int, int | None]) -> dict[int, int]:
    """Depth of each task in ``parents`` (task -> parent id): its number of
    ancestors in the trace, found by walking parent ids up (a parent missing
    from the trace ends the chain, as does a cycle)."""
    tk = models.tasks
    known: dict[int, int | None] = dict(parents)  # task -> parent, every task seen
    missing: set[int] = set()
    todo = {p for p in known.values() if p is not None and p not in known}
    while todo:
        found: dict[int, int | None] = {}
        for ids in _chunks(sorted(todo)):
            found.update((int(r.task_id), None if r.parent_id is None else int(r.parent_id))
                         for r in conn.execute(select(tk.c.task_id, tk.c.parent_id).where(
                             tk.c.trace_id == trace_id, tk.c.task_id.in_(ids))))
        missing |= todo - found.keys()
        known.update(found)
        todo = {p for p in found.values() if p is not None and p not in known
                and p not in missing}
    out: dict[int, int] = {}
    for tid in parents:
        depth, seen, p = 0, {tid}, known.get(tid)
        while p is not None and p in known and p not in seen:
            seen.add(p)
            depth += 1
            p = known[p]
        out[tid] = depth
    return out


def task_page(engine: Engine, trace_id: int, *, limit: int = TASK_LIMIT, offset: int = 0,
              name: str | None = None, sort: str = "duration") -> dict[str, Any]:
    """A page of tasks (of type ``name`` when given): ``total`` that match and
    ``rows``, each with ``parent_id``, ``depth`` (ancestors in the trace),
    ``duration_ns``, ``children``, ``goroutines`` (that began or ended it, ran
    its regions or logged into it), ``regions`` and ``logs``. ``sort``:
    ``duration`` (longest first, untimed last) or ``start`` (begun before the
    trace first, then by start)."""
    if sort not in TASK_SORTS:
        raise ValueError(f"sort must be one of {', '.join(TASK_SORTS)}, not {sort!r}")
    limit = max(0, min(limit, MAX_TASK_LIMIT))
    offset = max(0, offset)
    tk, rg, lg = models.tasks, models.regions, models.logs
    cond: list[ColumnElement[bool]] = [tk.c.trace_id == trace_id]
    if name is not None:
        cond.append(func.coalesce(tk.c.name, "") == name)
    dur = tk.c.end_ts - tk.c.start_ts
    order: list[Any] = ([dur.is_(None), dur.desc(), tk.c.start_ts, tk.c.task_id]
                        if sort == "duration" else
                        [tk.c.start_ts.is_(None).desc(), tk.c.start_ts, tk.c.task_id])
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(tk).where(*cond))
                    .scalar_one())
        rows: list[dict[str, Any]] = [dict(r._mapping) for r in conn.execute(
            select(tk.c.task_id, tk.c.parent_id, tk.c.name, tk.c.start_ts, tk.c.end_ts,
                   tk.c.start_g, tk.c.end_g).where(*cond).order_by(*order)
            .limit(limit).offset(offset))] if limit else []
        ids = [int(r["task_id"]) for r in rows]
        depth = _depths(conn, trace_id, {int(r["task_id"]): r["parent_id"] for r in rows})
        children: dict[int, int] = {}
        gs: dict[int, set[int]] = {}
        counts: dict[str, dict[int, int]] = {"regions": {}, "logs": {}}
        for chunk in _chunks(ids):
            children.update((int(p), int(n)) for p, n in conn.execute(
                select(tk.c.parent_id, func.count()).where(
                    tk.c.trace_id == trace_id, tk.c.parent_id.in_(chunk))
                .group_by(tk.c.parent_id)))
            for key, table in (("regions", rg), ("logs", lg)):
                for t, goid, n in conn.execute(
                        select(table.c.task_id, table.c.g, func.count())
                        .where(table.c.trace_id == trace_id, table.c.task_id.in_(chunk))
                        .group_by(table.c.task_id, table.c.g)):
                    gs.setdefault(int(t), set()).add(int(goid))
                    counts[key][int(t)] = counts[key].get(int(t), 0) + int(n)
    out: list[dict[str, Any]] = []
    for r in rows:
        tid = int(r["task_id"])
        g = set(gs.get(tid, set()))
        g.update(x for x in (r["start_g"], r["end_g"]) if x is not None and x >= 0)
        s, e = r["start_ts"], r["end_ts"]
        out.append({**r, "name": r["name"] if r["name"] is not None else "",
                    "depth": depth[tid],
                    "duration_ns": None if s is None or e is None else int(e) - int(s),
                    "children": children.get(tid, 0), "goroutines": sorted(g),
                    "regions": counts["regions"].get(tid, 0),
                    "logs": counts["logs"].get(tid, 0)})
    return {"total": total, "limit": limit, "offset": offset, "name": name, "sort": sort,
            "rows": out}


def region_stats(engine: Engine, trace_id: int) -> list[dict[str, Any]]:
    """Regions grouped by name: count, timed (both ends seen), total, mean,
    p50, p90, p99 and max duration, goroutines; most total time first."""
    with engine.connect() as conn:
        return _duration_stats(conn, models.regions, trace_id, with_goroutines=True)


def _contains(conn: Connection, col: Any, text: str) -> ColumnElement[bool]:
    """``text`` is a literal substring of ``col``, case-sensitive: on SQLite
    ``instr`` (its LIKE folds ASCII case and stops at a NUL); elsewhere LIKE
    with ``%``, ``_`` and the escape character escaped."""
    if conn.dialect.name == "sqlite":
        found: ColumnElement[bool] = func.instr(col, text) > 0
    else:
        found = col.contains(text, autoescape=True)
    return found


def logs(engine: Engine, trace_id: int, *, category: str | None = None,
         text: str | None = None, g: int | None = None, task_id: int | None = None,
         limit: int = LOG_LIMIT, offset: int = 0) -> dict[str, Any]:
    """Log records in time order, filtered in SQL (``category`` exact, ``text``
    a literal substring of category or message, ``g``, ``task_id``): ``total``
    that matched and at most ``limit`` ``rows`` from ``offset``; with every
    category and its count."""
    lg = models.logs
    cond: list[ColumnElement[bool]] = [lg.c.trace_id == trace_id]
    if category is not None:
        cond.append(lg.c.category == category)
    if g is not None:
        cond.append(lg.c.g == g)
    if task_id is not None:
        cond.append(lg.c.task_id == task_id)
    limit, offset = max(0, limit), max(0, offset)
    with engine.connect() as conn:
        if text is not None:
            cond.append(_contains(conn, lg.c.category, text)
                        | _contains(conn, lg.c.message, text))
        total = int(conn.execute(select(func.count()).select_from(lg).where(*cond))
                    .scalar_one())
        rows = conn.execute(select(lg.c.seq, lg.c.ts, lg.c.g, lg.c.task_id, lg.c.category,
                                   lg.c.message).where(*cond).order_by(lg.c.seq)
                            .limit(limit).offset(offset)).all() if limit else []
        cats = conn.execute(select(lg.c.category, func.count())
                            .where(lg.c.trace_id == trace_id)
                            .group_by(lg.c.category).order_by(lg.c.category)).all()
    return {"total": total, "offset": offset, "rows": [dict(r._mapping) for r in rows],
            "categories": [{"category": c, "count": int(n)} for c, n in cats]}


def annotations_data(engine: Engine, trace_id: int, *, task_limit: int = TASK_LIMIT,
                     task_offset: int = 0, task_name: str | None = None,
                     task_sort: str = "duration", **log_filters: Any) -> dict[str, Any]:
    """Task types, a page of tasks, region statistics and a page of logs of a
    trace; LookupError when no trace."""
    with engine.connect() as conn:
        if conn.execute(select(models.traces.c.id)
                        .where(models.traces.c.id == trace_id)).first() is None:
            raise LookupError(f"no trace with id {trace_id}")
    return {"trace_id": trace_id, "task_types": task_types(engine, trace_id),
            "tasks": task_page(engine, trace_id, limit=task_limit, offset=task_offset,
                               name=task_name, sort=task_sort),
            "regions": region_stats(engine, trace_id),
            "logs": logs(engine, trace_id, **log_filters)}
