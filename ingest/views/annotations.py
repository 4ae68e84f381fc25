"""User annotations of one trace: task types (a summary per task name), a
bounded page of tasks, regions by name, logs (a bounded page).

Nothing here is proportional to the trace's number of tasks, regions or logs:
the summaries, the task pages' orders, each task's children, regions, logs
and goroutines, and the log categories come from the trace's annotation
index (:mod:`ingest.derive.annotation_index`, aggregated once and kept with
the frames; built from the database, uncached, when no frames are given),
and task and log rows come a page at a time from the database (tasks by
primary key; logs ``LIMIT``/``OFFSET`` in ``seq`` order) with the total that
matched, so a page of the explorer stays small at any trace size. All
strings are returned exactly as stored (the program wrote them; the pages
show them as text). Durations are known only where both ends are in the
trace; a task or region missing an end (or a begin) is counted but not
timed. Percentiles are nearest-rank.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, Select, func, select
from sqlalchemy.sql.elements import ColumnElement

from ingest.derive.annotation_index import (
    LogIndex,
    NameStats,
    PerTask,
    RegionIndex,
    TaskIndex,
    log_index,
    read_log_index,
    read_region_index,
    read_task_index,
    region_index,
    task_index,
)
from ingest.derive.frames import TraceFrames
from ingest.store import models
from ingest.store.coded_models import CodedQuery, keyed_rows, rows_by_key, strings
from ingest.store.coded_pages import page_rows

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


def _tasks(engine: Engine, trace_id: int, frames: TraceFrames | None) -> TaskIndex:
    return task_index(engine, frames) if frames is not None else read_task_index(engine,
                                                                                 trace_id)


def _regions(engine: Engine, trace_id: int, frames: TraceFrames | None) -> RegionIndex:
    return region_index(engine, frames) if frames is not None else read_region_index(
        engine, trace_id)


def _logs(engine: Engine, trace_id: int, frames: TraceFrames | None) -> LogIndex:
    return log_index(engine, frames) if frames is not None else read_log_index(engine,
                                                                               trace_id)


def _stat_rows(s: NameStats) -> list[dict[str, Any]]:
    """Per name (NULL as ""): count, timed, total, mean, p50, p90, p99, max
    duration (and distinct goroutines); most total time first."""
    out: list[dict[str, Any]] = []
    for i, name in enumerate(s.names):
        n = int(s.timed[i])
        row: dict[str, Any] = {
            "name": name, "count": int(s.count[i]), "timed": n,
            "total_ns": int(s.total[i]) if n else 0,
            "mean_ns": float(s.mean[i]) if n else None,
            "p50_ns": int(s.p50[i]) if n else None,
            "p90_ns": int(s.p90[i]) if n else None,
            "p99_ns": int(s.p99[i]) if n else None,
            "max_ns": int(s.max[i]) if n else None}
        if s.goroutines is not None:
            row["goroutines"] = int(s.goroutines[i])
        out.append(row)
    out.sort(key=lambda r: (-r["total_ns"], -r["count"], r["name"]))
    return out


def task_types(engine: Engine, trace_id: int,
               frames: TraceFrames | None = None) -> list[dict[str, Any]]:
    """Tasks grouped by name (type): count, timed (both ends in the trace),
    total, mean, p50, p90, p99 and max duration; most total time first."""
    return _stat_rows(_tasks(engine, trace_id, frames).stats)


def _depths(conn: Connection, trace_id: int, parents: dict[int, int | None]) -> dict[int, int]:
    """Depth of each task in ``parents`` (task -> parent id): its number of
    ancestors in the trace, found by walking parent ids up (a parent missing
    from the trace ends the chain, as does a cycle)."""
    known: dict[int, int | None] = dict(parents)  # task -> parent, every task seen
    missing: set[int] = set()
    todo = {p for p in known.values() if p is not None and p not in known}
    while todo:
        found: dict[int, int | None] = {}
        for ids in _chunks(sorted(todo)):
            found.update((int(r.task_id), None if r.parent_id is None else int(r.parent_id))
                         for r in rows_by_key(conn, "tasks", trace_id, ids,
                                              ("task_id", "parent_id")))
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


def _name_code(names: list[str], name: str) -> int | None:
    """Index of ``name`` in the ascending ``names``, None if absent."""
    i = bisect_left(names, name)
    return i if i < len(names) and names[i] == name else None


def _of_tasks(pt: PerTask, ids: list[int]) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Rows and distinct goroutines of the tasks ``ids`` that have any."""
    keys = np.asarray(pt.task_id)
    q = np.array(ids, dtype=np.int64)
    j = np.searchsorted(keys, q)
    rows: dict[int, int] = {}
    gs: dict[int, list[int]] = {}
    for tid, k in zip(ids, j.tolist(), strict=True):
        if k < len(keys) and int(keys[k]) == tid:
            rows[tid] = int(pt.rows[k])
            gs[tid] = [int(x) for x in pt.g[int(pt.g_off[k]):int(pt.g_off[k + 1])]]
    return rows, gs


def task_page(engine: Engine, trace_id: int, frames: TraceFrames | None = None, *,
              limit: int = TASK_LIMIT, offset: int = 0, name: str | None = None,
              sort: str = "duration") -> dict[str, Any]:
    """A page of tasks (of type ``name`` when given): ``total`` that match and
    ``rows``, each with ``parent_id``, ``depth`` (ancestors in the trace),
    ``duration_ns``, ``children``, ``goroutines`` (that began or ended it, ran
    its regions or logged into it), ``regions`` and ``logs``. ``sort``:
    ``duration`` (longest first, then the untimed: those begun before the
    trace first, then by start) or ``start`` (begun before the trace first,
    then by start); ties by task id."""
    if sort not in TASK_SORTS:
        raise ValueError(f"sort must be one of {', '.join(TASK_SORTS)}, not {sort!r}")
    limit = max(0, min(limit, MAX_TASK_LIMIT))
    offset = max(0, offset)
    ti = _tasks(engine, trace_id, frames)
    order = np.asarray(ti.by_duration if sort == "duration" else ti.by_start)
    if name is not None:
        code = _name_code(ti.stats.names, name)
        order = order[np.asarray(ti.name)[order] == code] if code is not None else order[:0]
    total = len(order)
    pos = order[offset:offset + limit] if limit else order[:0]
    ids = [int(x) for x in np.asarray(ti.task_id)[pos]]
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        by_id: dict[int, dict[str, Any]] = {}
        for chunk in _chunks(ids):
            by_id.update((int(r.task_id), dict(r._mapping)) for r in rows_by_key(
                conn, "tasks", trace_id, chunk, ("task_id", "parent_id", "name", "start_ts",
                                                  "end_ts", "start_g", "end_g")))
        if len(by_id) != len(ids):
            raise RuntimeError(f"trace {trace_id}: the annotation index names tasks "
                               "the database does not hold")
        rows = [by_id[i] for i in ids]
        depth = _depths(conn, trace_id, {int(r["task_id"]): r["parent_id"] for r in rows})
    children = {tid: int(c) for tid, c in zip(ids, np.asarray(ti.children)[pos].tolist(),
                                              strict=True)}
    if ids:
        n_regions, g_regions = _of_tasks(_regions(engine, trace_id, frames).tasks, ids)
        n_logs, g_logs = _of_tasks(_logs(engine, trace_id, frames).tasks, ids)
    else:
        n_regions, g_regions, n_logs, g_logs = {}, {}, {}, {}
    out: list[dict[str, Any]] = []
    for r in rows:
        tid = int(r["task_id"])
        g = set(g_regions.get(tid, ())) | set(g_logs.get(tid, ()))
        g.update(x for x in (r["start_g"], r["end_g"]) if x is not None and x >= 0)
        s, e = r["start_ts"], r["end_ts"]
        out.append({**r, "name": r["name"] if r["name"] is not None else "",
                    "depth": depth[tid],
                    "duration_ns": None if s is None or e is None else int(e) - int(s),
                    "children": children[tid], "goroutines": sorted(g),
                    "regions": n_regions.get(tid, 0), "logs": n_logs.get(tid, 0)})
    return {"total": total, "limit": limit, "offset": offset, "name": name, "sort": sort,
            "rows": out}


def region_stats(engine: Engine, trace_id: int,
                 frames: TraceFrames | None = None) -> list[dict[str, Any]]:
    """Regions grouped by name: count, timed (both ends seen), total, mean,
    p50, p90, p99 and max duration, goroutines; most total time first."""
    return _stat_rows(_regions(engine, trace_id, frames).stats)


def _contains(conn: Connection, col: Any, text: str) -> ColumnElement[bool]:
    """``text`` is a literal substring of ``col``, case-sensitive: on SQLite
    ``instr`` (its LIKE folds ASCII case and stops at a NUL); elsewhere LIKE
    with ``%``, ``_`` and the escape character escaped."""
    if conn.dialect.name == "sqlite":
        found: ColumnElement[bool] = func.instr(col, text) > 0
    else:
        found = col.contains(text, autoescape=True)
    return found


def _page(conn: Connection, q: CodedQuery, trace_id: int, cond: list[ColumnElement[bool]],
          limit: int, offset: int) -> Select[Any]:
    """The page's rows with their texts: the page cut from the coded rows
    first, its texts joined after (PostgreSQL joined every row before the
    cut, carrying its chunk's arrays: 105 s at offset 1,000,000). A filtered
    page's keys are found first, reading only the filtered columns, and its
    rows then by key."""
    dialect = conn.dialect.name
    if cond:
        t = q.t
        keys = conn.execute(select(t.c.seq).where(t.c.trace_id == trace_id, *cond)
                            .order_by(t.c.seq).limit(limit).offset(offset)).scalars().all()
        cut = keyed_rows("logs", trace_id, keys, dialect)
    else:
        cut = page_rows("logs", trace_id, offset, limit, dialect)
    p = CodedQuery("logs", trace_id, cut)
    return p.select(("seq", "ts", "g", "task_id", "category", "message")).order_by(p.col("seq"))


def logs(engine: Engine, trace_id: int, frames: TraceFrames | None = None, *,
         category: str | None = None, text: str | None = None, g: int | None = None,
         task_id: int | None = None, limit: int = LOG_LIMIT, offset: int = 0) -> dict[str, Any]:
    """Log records in time order, filtered in SQL (``category`` exact, ``text``
    a literal substring of category or message, ``g``, ``task_id``): ``total``
    that matched and at most ``limit`` ``rows`` from ``offset``; with every
    category and its count. The total comes from the index unless ``text``
    or ``g`` filter (or ``category`` and ``task_id`` both)."""
    # Straight from the logs' coded table: filters on texts match the
    # strings once, not a joined string on every row (ingest.store.coded_models).
    q = CodedQuery("logs", trace_id)
    li = _logs(engine, trace_id, frames)
    cats = [{"category": c, "count": int(n)} for c, n in zip(li.categories, li.count.tolist(),
                                                              strict=True)]
    cond: list[ColumnElement[bool]] = []
    if category is not None:
        cond.append(q.codes("category", [category]))
    if g is not None:
        cond.append(q.col("g") == g)
    if task_id is not None:
        cond.append(q.col("task_id") == task_id)
    limit, offset = max(0, limit), max(0, offset)
    total: int | None = None
    if text is None and g is None:
        if category is None and task_id is None:
            total = int(np.asarray(li.count).sum())
        elif task_id is None:
            code = _name_code(li.categories, category or "")
            total = 0 if code is None else int(li.count[code])
        elif category is None:
            total = _of_tasks(li.tasks, [task_id])[0].get(task_id, 0)
    with engine.connect() as conn:
        if text is not None:
            value = strings.c.value
            cond.append(q.codes("category", _contains(conn, value, text))
                        | q.codes("message", _contains(conn, value, text)))
        if total is None:
            total = int(conn.execute(select(func.count()).select_from(q.t)
                                     .where(q.t.c.trace_id == trace_id, *cond)).scalar_one())
        rows = conn.execute(_page(conn, q, trace_id, cond, limit, offset)
                            ).all() if limit and total else []
    return {"total": total, "offset": offset, "rows": [dict(r._mapping) for r in rows],
            "categories": cats}


def annotations_data(engine: Engine, trace_id: int, frames: TraceFrames | None = None, *,
                     task_limit: int = TASK_LIMIT, task_offset: int = 0,
                     task_name: str | None = None, task_sort: str = "duration",
                     **log_filters: Any) -> dict[str, Any]:
    """Task types, a page of tasks, region statistics and a page of logs of a
    trace (``frames``: its frames, where the index is kept); LookupError when
    no trace."""
    if frames is None:
        with engine.connect() as conn:
            if conn.execute(select(models.traces.c.id)
                            .where(models.traces.c.id == trace_id)).first() is None:
                raise LookupError(f"no trace with id {trace_id}")
    return {"trace_id": trace_id, "task_types": task_types(engine, trace_id, frames),
            "tasks": task_page(engine, trace_id, frames, limit=task_limit,
                               offset=task_offset, name=task_name, sort=task_sort),
            "regions": region_stats(engine, trace_id, frames),
            "logs": logs(engine, trace_id, frames, **log_filters)}
