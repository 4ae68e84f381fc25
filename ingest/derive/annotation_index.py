"""The annotations page's index of a trace's tasks, regions and logs: what its
answers need of those tables' millions of rows, aggregated once.

- per task type and per region name: count, timed (both ends in the trace),
  total, mean and nearest-rank p50/p90/p99/max duration (regions: and their
  distinct goroutines);
- the tasks in the two orders the task pages offer, each task's type and
  number of children;
- per task, the rows of its regions and of its logs and their distinct
  goroutines;
- the log categories with their counts.

A request then reads a page's worth of it (the rows themselves come from the
database by primary key) instead of sorting or scanning millions of rows.
The loader builds it from the columns it stores (:func:`task_index_of`,
:func:`region_index_of`, :func:`log_index_of`, one table each); the views
from the database when the loader did not (:func:`task_index`,
:func:`region_index`, :func:`log_index`, which keep it with the frames,
:mod:`ingest.derive.cache`). Names are ordered by code point, NULL names as
"". About 70 bytes per task on disk, memory-mapped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, Table, case, func, select

from ingest.columns import Nullable
from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames, trim_heap
from ingest.derive.interval_order import nearest_rank
from ingest.store.coded_models import log_rows_all, read_strings, region_rows_all, task_rows_all

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]
Bool = npt.NDArray[np.bool_]

#: The cache keys (``derived-v<N>/<key>/``), one per table.
TASKS_KEY = "annotations_tasks"
REGIONS_KEY = "annotations_regions"
LOGS_KEY = "annotations_logs"

#: Rows per query when the index is read from the database.
_CHUNK = 100_000


@dataclass
class NameStats:
    """Durations by name (task type or region name), names ascending."""

    names: list[str]
    count: Arr
    timed: Arr  # with both ends in the trace
    total: I64  # ns, timed only
    mean: npt.NDArray[np.float64]  # NaN where none timed
    p50: I64  # nearest-rank; meaningless where none timed
    p90: I64
    p99: I64
    max: I64
    goroutines: Arr | None  # distinct goroutines (regions), None for tasks


@dataclass
class PerTask:
    """The rows of one table (regions or logs) that name a task, by task."""

    task_id: Arr  # ascending, distinct
    rows: Arr
    g_off: Arr  # task i's goroutines: g[g_off[i]:g_off[i + 1]], ascending, distinct
    g: Arr


@dataclass
class TaskIndex:
    """Task types, and every task (by id) with the two page orders."""

    stats: NameStats
    task_id: Arr  # ascending
    name: Arr  # index into stats.names
    children: Arr  # tasks whose parent is this one
    by_duration: Arr  # positions: timed longest first, then untimed; ties by start, id
    by_start: Arr  # positions: begun before the trace first, then by start, id


@dataclass
class RegionIndex:
    stats: NameStats
    tasks: PerTask


@dataclass
class LogIndex:
    categories: list[str]  # ascending
    count: Arr
    tasks: PerTask


_CLASSES = (TaskIndex, RegionIndex, LogIndex, NameStats, PerTask)


# --------------------------------------------------------------------------
# columns in any of the loader's forms


def _ints(col: Any) -> tuple[I64, Bool]:
    """(values, null) of an integer column: a Nullable, an array, or a
    sequence with None for NULL (0 stands in the values there)."""
    if isinstance(col, Nullable):
        return (np.asarray(col.values).astype(np.int64, copy=False),
                np.asarray(col.null, dtype=bool))
    if isinstance(col, np.ndarray) and col.dtype != object:
        return col.astype(np.int64, copy=False), np.zeros(len(col), dtype=bool)
    try:  # no NULL: numpy converts the sequence at C speed
        return np.array(col, dtype=np.int64), np.zeros(len(col), dtype=bool)
    except TypeError:
        pass
    o = np.array(col, dtype=object)
    null = np.array([v is None for v in o.tolist()], dtype=bool)
    o[null] = 0
    return o.astype(np.int64), null


class _Names:
    """Strings as small codes (NULL as ""), across chunks; :meth:`finish`
    renumbers them in ascending order."""

    def __init__(self) -> None:
        self.codes: dict[str | None, int] = {}
        self.names: list[str] = []

    def encode(self, col: Any) -> npt.NDArray[np.int32]:
        codes = getattr(col, "codes", None)
        if codes is not None:
            # A loader's coded column (ingest.store.coded_insert.CodedText):
            # its few distinct values mapped, then its codes through them
            # (no Python list of millions of rows).
            values = self.encode(list(col.values))
            return values[codes] if len(values) else np.zeros(len(codes), np.int32)
        vals = col.tolist() if isinstance(col, np.ndarray) else col
        d = self.codes
        for v in set(vals) - d.keys():  # the few distinct values, then a C-level map
            key = "" if v is None else v
            if key not in d:
                d[key] = len(self.names)
                self.names.append(key)
            d[v] = d[key]
        return np.fromiter(map(d.__getitem__, vals), dtype=np.int32, count=len(vals))

    def finish(self, raw: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.int32], list[str]]:
        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        remap = np.empty(len(order), dtype=np.int32)
        remap[order] = np.arange(len(order), dtype=np.int32)
        return (remap[raw] if len(raw) else raw), [self.names[i] for i in order]


def _narrow(a: Arr) -> Arr:
    """``a`` as int32 when every value fits (half the bytes on disk)."""
    a = np.asarray(a)
    if len(a) == 0 or (int(a.min()) >= -2**31 and int(a.max()) < 2**31):
        return a.astype(np.int32)
    return a.astype(np.int64)


# --------------------------------------------------------------------------
# the aggregates


def _name_stats(code: Arr, names: list[str], timed: Bool, dur: I64,
                g: I64 | None = None) -> NameStats:
    """Per name: the durations of its timed rows sorted, then summed,
    averaged (numpy's mean of the sorted int64 durations) and ranked."""
    k = len(names)
    count = np.bincount(code, minlength=k)
    # (Most rows are timed: no copies of the columns then.)
    every = bool(timed.all())
    t_code, t_dur = (code, dur) if every else (code[timed], dur[timed])
    n_timed = np.bincount(t_code, minlength=k)
    # Grouped by name, each group's durations ascending.
    sd = _sorted_pairs(t_code, t_dur)[1]
    del t_code, t_dur
    off = np.concatenate([[0], np.cumsum(n_timed)]).astype(np.int64)
    stats = duration_stats(k, ((i, sd[off[i]:off[i + 1]]) for i in range(k)))
    del sd
    gor = None
    if g is not None:
        nc, ng = _sorted_pairs(code, g)
        gor = goroutines_per_name(nc, ng, k)
    return NameStats(names=names, count=_narrow(count), timed=_narrow(n_timed),
                     goroutines=gor, **stats)


def duration_stats(k: int, groups: Iterator[tuple[int, I64]]) -> dict[str, Any]:
    """total, mean, p50, p90, p99 and max of each of ``k`` names, from each
    name's (code, durations ascending)."""
    stats: dict[str, Any] = {key: np.zeros(k, dtype=np.int64)
                             for key in ("total", "p50", "p90", "p99", "max")}
    mean = np.full(k, np.nan)
    for i, a in groups:
        if not len(a):
            continue
        stats["total"][i] = int(a.sum())
        mean[i] = float(a.mean())
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
            stats[key][i] = nearest_rank(a, q)
        stats["max"][i] = int(a[-1])
    stats["mean"] = mean
    return stats


def goroutines_per_name(code: I64, g: I64, k: int) -> Arr:
    """Distinct goroutines per name, from (code, g) pairs sorted by code then g."""
    return _narrow(np.bincount(code[pair_starts(code, g)], minlength=k))


def pair_starts(a: Arr, b: Arr) -> npt.NDArray[np.intp]:
    """Where each run of equal (a, b) pairs begins, the pairs sorted."""
    if not len(a):
        return np.zeros(0, np.intp)
    return np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])


def _sorted_pairs(a: I64, b: I64) -> tuple[I64, I64]:
    """The pairs (a[i], b[i]) sorted by a, then b: one in-place sort of
    combined int64 keys when both ranges fit in one, else a lexsort."""
    if not len(a):
        return a.astype(np.int64), b.astype(np.int64)
    amin, amax, bmin, bmax = int(a.min()), int(a.max()), int(b.min()), int(b.max())
    span = bmax - bmin + 1
    if (amax - amin + 1) * span >= 2**62:
        order = np.lexsort((b, a))
        return a[order].astype(np.int64), b[order].astype(np.int64)
    key = a.astype(np.int64)  # in place from here: a big trace's keys are 24 MB each
    key -= amin
    key *= span
    key += b
    key -= bmin
    key.sort()
    lo = key % span
    lo += bmin
    key //= span
    key += amin
    return key, lo


def _runs(a: I64) -> npt.NDArray[np.intp]:
    """Where each run of equal values of sorted ``a`` begins."""
    return np.flatnonzero(np.r_[True, a[1:] != a[:-1]]) if len(a) else np.zeros(0, np.intp)


def _per_task(task: I64, task_null: Bool, g: I64) -> PerTask:
    return per_task_of_pairs(*task_pairs(task, task_null, g))


def task_pairs(task: Arr, task_null: Bool, g: Arr) -> tuple[I64, I64, I64]:
    """The distinct (task, goroutine) pairs of the rows that name a task,
    sorted by task then goroutine, and each pair's rows."""
    if task_null.any():
        task, g = task[~task_null], g[~task_null]
    t, gg = _sorted_pairs(task, g)
    at = pair_starts(t, gg)  # each task's first row begins a pair
    return t[at], gg[at], np.diff(np.r_[at, len(t)]).astype(np.int64)


def per_task_of_pairs(t: I64, g: I64, rows: I64) -> PerTask:
    """:class:`PerTask` from the distinct (task, goroutine) pairs, sorted by
    task then goroutine, and the rows of each pair."""
    starts = _runs(t)
    per_task = np.add.reduceat(rows, starts) if len(starts) else np.zeros(0, np.int64)
    g_off = np.r_[starts, len(t)].astype(np.int64)
    return PerTask(task_id=_narrow(t[starts]), rows=_narrow(per_task),
                   g_off=_narrow(g_off), g=_narrow(g))


def task_index_of(task_id: Any, parent_id: Any, name: Any, start_ts: Any,
                  end_ts: Any) -> TaskIndex:
    """The tasks' index from the ``tasks`` table's columns."""
    names = _Names()
    raw = names.encode(name)
    code, ordered = names.finish(raw)
    return _task_index(_ints(task_id)[0], _ints(parent_id), code, ordered,
                       _ints(start_ts), _ints(end_ts))


def _task_index(tid: I64, parent: tuple[I64, Bool], code: Arr, names: list[str],
                start: tuple[I64, Bool], end: tuple[I64, Bool]) -> TaskIndex:
    order = np.argsort(tid, kind="stable")
    tid, code = tid[order], code[order]
    s, s_null = start[0][order], start[1][order]
    e, e_null = end[0][order], end[1][order]
    p, p_null = parent[0][order], parent[1][order]
    timed = ~s_null & ~e_null
    dur = np.where(timed, e - s, 0)
    stats = _name_stats(code, names, timed, dur)
    n = len(tid)
    pos = np.searchsorted(tid, p[~p_null])
    ok = pos < n
    ok[ok] = tid[pos[ok]] == p[~p_null][ok]
    children = np.bincount(pos[ok], minlength=n)
    started = (~s_null).astype(np.int8)
    s0 = np.where(s_null, 0, s)
    # The pages' orders, as SQL's ORDER BY (NULL start first, as SQLite sorts it).
    by_duration = np.lexsort((tid, s0, started, -dur, (~timed).astype(np.int8)))
    by_start = np.lexsort((tid, s0, started))
    return TaskIndex(stats=stats, task_id=_narrow(tid), name=code.astype(np.int32),
                     children=_narrow(children), by_duration=_narrow(by_duration),
                     by_start=_narrow(by_start))


def region_index_of(name: Any, task_id: Any, g: Any, start_ts: Any,
                    end_ts: Any) -> RegionIndex:
    """The regions' index from the ``regions`` table's columns."""
    names = _Names()
    cols: dict[str, Any] = {}
    cols["code"], ordered = names.finish(names.encode(name))
    s, s_null = _ints(start_ts)
    e, e_null = _ints(end_ts)
    cols["timed"] = ~s_null & ~e_null
    dur = e - s
    dur[~cols["timed"]] = 0  # in place: one column of a big trace's, not two
    cols["dur"] = dur
    del s, s_null, e, e_null, dur
    cols["task"], cols["task_null"] = _ints(task_id)
    # Goroutine ids in the loader's own type (they are only sorted and counted).
    cols["g"] = g if isinstance(g, np.ndarray) and g.dtype.kind == "i" else _ints(g)[0]
    return _region_index(cols, ordered)


def _region_index(cols: dict[str, Any], names: list[str]) -> RegionIndex:
    """From ``cols`` (code, timed, dur, task, task_null, g), taken out of it
    as they are used: a big trace's columns are freed as soon as they can."""
    stats = _name_stats(cols.pop("code"), names, cols.pop("timed"), cols.pop("dur"),
                        g=cols["g"])
    return RegionIndex(stats=stats, tasks=_per_task(cols.pop("task"), cols.pop("task_null"),
                                                    cols.pop("g")))


def log_index_of(category: Any, task_id: Any, g: Any) -> LogIndex:
    """The logs' index from the ``logs`` table's columns."""
    names = _Names()
    code, ordered = names.finish(names.encode(category))
    return _log_index(code, ordered, _ints(task_id), _ints(g)[0])


def _log_index(code: Arr, names: list[str], task: tuple[I64, Bool], g: I64) -> LogIndex:
    return LogIndex(categories=names, count=_narrow(np.bincount(code, minlength=len(names))),
                    tasks=_per_task(task[0], task[1], g))


#: The tables the index is made of, and the key each one's part is kept under.
TABLE_KEYS = {"tasks": TASKS_KEY, "regions": REGIONS_KEY, "logs": LOGS_KEY}


def index_of_table(table: str, cols: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(key, value) of the index part made of ``table``'s columns, as the
    loader stores them; None for another table. The loader stages it with
    the frames (``FrameWriter.add_derived(key, value)``), so a new trace's
    first view reads it instead of building it from the database."""
    if table == "tasks":
        value: Any = task_index_of(cols["task_id"], cols["parent_id"], cols["name"],
                                   cols["start_ts"], cols["end_ts"])
    elif table == "regions":
        value = region_index_of(cols["name"], cols["task_id"], cols["g"], cols["start_ts"],
                                cols["end_ts"])
    elif table == "logs":
        value = log_index_of(cols["category"], cols["task_id"], cols["g"])
    else:
        return None
    return TABLE_KEYS[table], value


# --------------------------------------------------------------------------
# from the database


def _read(conn: Connection, table: Table, key: str, cols: Sequence[Any],
          trace_id: int) -> Iterator[list[tuple[Any, ...]]]:
    """The trace's rows of ``table`` (``cols``), ``_CHUNK`` at a time in
    primary-key order (keyset pages: bounded memory on any database),
    through the DB-API cursor (SQLAlchemy's rows would cost more than the
    query). ``key`` is the primary key's column after ``trace_id``; it is
    read last in each row."""
    k = table.c[key]
    last: int | None = None
    while True:
        q = select(*cols, k).where(table.c.trace_id == trace_id)
        if last is not None:
            q = q.where(k > last)
        sql = str(q.order_by(k).limit(_CHUNK).compile(
            conn.engine, compile_kwargs={"literal_binds": True}))
        cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.execute(sql)
            rows = cur.fetchall()
        finally:
            cur.close()
        if not rows:
            return
        yield rows
        if len(rows) < _CHUNK:
            return
        last = int(rows[-1][-1])


def _count(conn: Connection, table: Table, trace_id: int) -> int:
    return int(conn.execute(select(func.count()).select_from(table)
                            .where(table.c.trace_id == trace_id)).scalar_one())


class _Filling:
    """Columns filled chunk by chunk into arrays sized beforehand."""

    def __init__(self, n: int, ints: Sequence[str]) -> None:
        self.n, self.at = n, 0
        self.values = {c: np.zeros(n, dtype=np.int64) for c in ints}
        self.null = {c: np.zeros(n, dtype=bool) for c in ints}
        self.names = _Names()
        self.code = np.zeros(n, dtype=np.int32)

    def add(self, rows: list[tuple[Any, ...]], name_at: int | None,
            ints: Sequence[tuple[str, int]], nullable: Sequence[int] = ()) -> None:
        """Rows' column ``name_at`` as name codes, and ``ints`` (name,
        position); ``nullable``: the positions that may hold NULL."""
        a, b = self.at, self.at + len(rows)
        if b > self.n:  # rows stored meanwhile: the count is stale
            raise RuntimeError("the table grew while it was read")
        width = len(rows[0]) if rows else 0
        try:  # numpy reads the tuples at C speed (objects where NULL may be)
            rec = np.array(rows, dtype=[
                (f"c{i}", object if i == name_at or i in nullable else np.int64)
                for i in range(width)])
            cols: list[Any] = [rec[f"c{i}"] for i in range(width)]
        except (TypeError, ValueError):
            cols = list(zip(*rows, strict=True))
        if name_at is not None:
            self.code[a:b] = self.names.encode(cols[name_at])
        for c, i in ints:
            v, nl = _ints(cols[i])
            self.values[c][a:b], self.null[c][a:b] = v, nl
        self.at = b

    def col(self, c: str) -> tuple[I64, Bool]:
        return self.values[c][:self.at], self.null[c][:self.at]

    def take(self, c: str) -> tuple[I64, Bool]:
        """:meth:`col`, no longer kept here."""
        return self.values.pop(c)[:self.at], self.null.pop(c)[:self.at]

    def codes(self) -> tuple[npt.NDArray[np.int32], list[str]]:
        """The names' codes (no longer kept here) and the names."""
        raw, self.code = self.code[:self.at], np.zeros(0, dtype=np.int32)
        return self.names.finish(raw)


def _named(f: _Filling, conn: Connection, trace_id: int, column: str
           ) -> tuple[npt.NDArray[np.int32], list[str]]:
    """The names of ``f``'s ``code`` column (codes into the trace's strings of
    ``column``, NULL as ""), as codes into the names in ascending order."""
    code, null = f.take("code")
    strings = read_strings(conn, trace_id, column)
    names = _Names()
    # Every string of the column is a row's (the trace's distinct values);
    # NULL ("") is one only where a row has it.
    per_code = names.encode([*strings, *([""] if bool(null.any()) else [])])
    raw = per_code[np.where(null, len(strings), code)] if len(code) else \
        np.zeros(0, np.int32)
    return names.finish(raw)


# The indexes read the coded tables behind the views (ingest.store.coded_models):
# codes, not a string a row.


def read_task_index(engine: Engine, trace_id: int) -> TaskIndex:
    """The tasks' index read from the database."""
    t = task_rows_all
    with engine.connect() as conn:
        f = _Filling(_count(conn, t, trace_id),
                     ("code", "task_id", "parent_id", "start_ts", "end_ts"))
        end_ts = func.coalesce(t.c.start_ts, 0) + t.c.end_ts_delta
        for rows in _read(conn, t, "task_id", [t.c.name_code, t.c.parent_id, t.c.start_ts,
                                               end_ts], trace_id):
            f.add(rows, None, (("code", 0), ("parent_id", 1), ("start_ts", 2), ("end_ts", 3),
                               ("task_id", 4)), nullable=(0, 1, 2, 3))
        code, names = _named(f, conn, trace_id, "tasks.name")
    value = _task_index(f.col("task_id")[0], f.col("parent_id"), code, names,
                        f.col("start_ts"), f.col("end_ts"))
    del f, code
    trim_heap()  # the rows' temporaries, or a server worker keeps them
    return value


def read_region_index(engine: Engine, trace_id: int) -> RegionIndex:
    """The regions' index read from the database."""
    r = region_rows_all
    with engine.connect() as conn:
        f = _Filling(_count(conn, r, trace_id), ("code", "task_id", "g", "dur"))
        # end_ts - start_ts: the delta, NULL when either end is missing
        dur = case((r.c.start_ts.is_(None), None), else_=r.c.end_ts_delta)
        for rows in _read(conn, r, "id", [r.c.name_code, r.c.task_id, r.c.g, dur], trace_id):
            f.add(rows, None, (("code", 0), ("task_id", 1), ("g", 2), ("dur", 3)),
                  nullable=(1, 3))
        cols: dict[str, Any] = {}
        cols["code"], names = _named(f, conn, trace_id, "regions.name")
    cols["dur"], untimed = f.take("dur")  # NULL when either end is missing
    cols["timed"] = ~untimed
    del untimed
    cols["task"], cols["task_null"] = f.take("task_id")
    cols["g"] = f.take("g")[0]
    del f
    value = _region_index(cols, names)
    trim_heap()
    return value


def read_log_index(engine: Engine, trace_id: int) -> LogIndex:
    """The logs' index read from the database."""
    lg = log_rows_all
    with engine.connect() as conn:
        f = _Filling(_count(conn, lg, trace_id), ("code", "task_id", "g"))
        for rows in _read(conn, lg, "seq", [lg.c.category_code, lg.c.task_id, lg.c.g],
                          trace_id):
            f.add(rows, None, (("code", 0), ("task_id", 1), ("g", 2)), nullable=(1,))
        code, names = _named(f, conn, trace_id, "logs.category")
    value = _log_index(code, names, f.col("task_id"), f.col("g")[0])
    del f, code
    trim_heap()
    return value


def task_index(engine: Engine, frames: TraceFrames) -> TaskIndex:
    """The trace's tasks' index (cached with its frames)."""
    return cached(frames, TASKS_KEY, lambda: read_task_index(engine, frames.trace_id),
                  persist=_CLASSES)


def region_index(engine: Engine, frames: TraceFrames) -> RegionIndex:
    """The trace's regions' index (cached with its frames)."""
    return cached(frames, REGIONS_KEY, lambda: read_region_index(engine, frames.trace_id),
                  persist=_CLASSES)


def log_index(engine: Engine, frames: TraceFrames) -> LogIndex:
    """The trace's logs' index (cached with its frames)."""
    return cached(frames, LOGS_KEY, lambda: read_log_index(engine, frames.trace_id),
                  persist=_CLASSES)
