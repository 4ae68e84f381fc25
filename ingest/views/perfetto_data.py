"""What a Perfetto export holds, as plain data: the tracks, each track's
slices as row sets of the frames, the wake-ups, the counters.

No bytes here (:mod:`ingest.views.perfetto_proto` encodes, and
:mod:`ingest.views.perfetto` puts the file together). Everything is numpy
columns over the memory-mapped frames (:mod:`ingest.derive.frames`) or rows
fetched in chunks from SQL, so a trace of 19 M intervals is walked a chunk at
a time and never becomes Python objects.

- **Goroutine slices**: every goroutine interval except ``NotExist``, named by
  its state (``Waiting: chan receive``: the reason Go gives).
- **Wake-ups**: each goroutine ``Waiting -> Runnable`` transition made in the
  context of another goroutine (the decoded ``g``) and followed by that
  goroutine's ``Running``: a flow from the waker's track at the transition's
  time to the woken goroutine's next ``Running`` slice.
- **P slices**: the ``proc_runs`` (one per goroutine run on that P).
- **M slices**: the goroutine ``Running`` and ``Syscall`` intervals begun on
  that thread (the ``thread_intervals`` view's rows), in time order.
- **Counters**: every runtime metric of SQL ``metrics`` (heap, GOMAXPROCS...),
  the goroutines that exist, and the threads in a syscall.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, func, select

from ingest.derive.frames import TraceFrames
from ingest.store.coded_models import CodedQuery, goroutine_rows_all, metric_rows_all, read_strings

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

_FETCH = 100_000
#: States a goroutine has no slice for (it does not exist then).
_ABSENT = ("NotExist",)
#: States in which a goroutine is counted as existing.
_NOT_EXISTING = ("NotExist", "Undetermined")


def n_goroutine_rows(frames: TraceFrames) -> int:
    """Goroutine rows come first in the intervals; this many."""
    return int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0


def state_name(to_state: str, reason: str) -> str:
    """A goroutine slice's name: its state, with Go's reason when there is one."""
    return f"{to_state}: {reason}" if reason else to_state


def kind_names(frames: TraceFrames) -> tuple[list[str], I64]:
    """(distinct slice names, per kind code the index of its name or -1 for
    a kind that makes no slice: proc kinds, NotExist)."""
    names: list[str] = []
    index: dict[str, int] = {}
    per_kind = np.full(max(frames.kinds, default=0) + 1, -1, np.int64)
    for code, k in sorted(frames.kinds.items()):
        if k.resource != "goroutine" or k.to_state in _ABSENT:
            continue
        name = state_name(k.to_state, k.reason)
        per_kind[code] = index.setdefault(name, len(names))
        if per_kind[code] == len(names):
            names.append(name)
    return names, per_kind


def _kind_mask(frames: TraceFrames, pred: Any) -> npt.NDArray[np.bool_]:
    out = np.zeros(max(frames.kinds, default=0) + 1, bool)
    for code, k in frames.kinds.items():
        out[code] = bool(pred(k))
    return out


# --------------------------------------------------------------------------
# goroutines and their groups


@dataclass
class Goroutines:
    """The goroutines with intervals (``ids``, sorted), each one's group
    (``group``, an index into ``groups``: start functions, ``''`` unknown)."""

    ids: I64
    group: I64
    groups: list[str]
    functions: list[str]

    def index(self, goid: Arr) -> I64:
        """Index of each goid in ``ids`` (-1 when it has no intervals)."""
        i = np.searchsorted(self.ids, goid)
        i = np.minimum(i, max(len(self.ids) - 1, 0))
        ok = (self.ids[i] == goid) if len(self.ids) else np.zeros(len(goid), bool)
        return np.where(ok, i, -1).astype(np.int64)


def goroutines(engine: Engine, frames: TraceFrames) -> Goroutines:
    """The goroutines of the frames with their start functions (SQL
    ``goroutines``, fetched in chunks)."""
    ids = np.asarray(frames.goroutines.ids, np.int64)
    fn_code = np.full(len(ids), -1, np.int64)
    functions: list[str] = []
    codes: dict[str, int] = {}
    g = goroutine_rows_all  # the functions as codes (ingest.store.coded_models)
    stmt = (select(g.c.goid, g.c.start_function_code)
            .where(g.c.trace_id == frames.trace_id).order_by(g.c.goid))
    with engine.connect() as conn:
        names = [*read_strings(conn, frames.trace_id, "goroutines.start_function"), ""]
        cursor = conn.execute(stmt).cursor
        assert cursor is not None
        while rows := cursor.fetchmany(_FETCH):
            goids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            fns = [codes.setdefault(names[-1 if r[1] is None else r[1]], len(codes))
                   for r in rows]
            if len(codes) > len(functions):
                functions.extend(list(codes)[len(functions):])
            at = np.searchsorted(ids, goids)
            ok = at < len(ids)
            ok[ok] = ids[at[ok]] == goids[ok]
            fn_code[at[ok]] = np.asarray(fns, np.int64)[ok]
    unknown = codes.setdefault("", len(codes))
    if len(codes) > len(functions):
        functions.append("")
    fn_code[fn_code < 0] = unknown
    # Groups: the start functions, biggest first (ties by name).
    counts = np.bincount(fn_code, minlength=len(functions))
    order = sorted((i for i in range(len(functions)) if counts[i]),
                   key=lambda i: (-int(counts[i]), functions[i]))
    rank = np.full(len(functions), -1, np.int64)
    rank[order] = np.arange(len(order))
    return Goroutines(ids=ids, group=rank[fn_code], groups=[functions[i] for i in order],
                      functions=functions)


def goroutine_label(goid: int, function: str) -> str:
    """A goroutine's name on the P and M tracks."""
    return f"G{goid} {function}" if function else f"G{goid}"


# --------------------------------------------------------------------------
# wake-ups


@dataclass
class Wakeups:
    """The flows, sorted by ``waker_row``: ``source`` is the woken goroutine's
    ``Runnable`` row (its flow id is ``source + 1``; the flow ends on row
    ``source + 1``, its ``Running``), ``waker_row`` the waker's row the
    transition falls in (``start < ts <= end``, or its first row), ``ts``
    the transition's time. ``ends`` marks, per goroutine row, the
    ``Running`` rows a flow ends on."""

    source: I64
    waker_row: I64
    ts: I64
    ends: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.source)


def wakeups(frames: TraceFrames, chunk: int = 1 << 21) -> Wakeups:
    """The wake-up flows of the trace (see :class:`Wakeups`)."""
    iv = frames.intervals
    n = n_goroutine_rows(frames)
    wake = _kind_mask(frames, lambda k: k.resource == "goroutine"
                      and k.from_state == "Waiting" and k.to_state == "Runnable")
    running = _kind_mask(frames, lambda k: k.to_state == "Running")
    kind, rid, g, start = iv["kind"], iv["rid"], iv["g"], iv["start_ts"]
    parts: list[I64] = []
    for a in range(0, max(n - 1, 0), chunk):
        b = min(a + chunk, n - 1)  # the row after each candidate is read too
        k = np.asarray(kind[a:b])
        cand = np.flatnonzero(wake[k])
        if not len(cand):
            continue
        r = cand + a
        gr, rr = np.asarray(g[r], np.int64), np.asarray(rid[r], np.int64)
        ok = (gr >= 0) & (gr != rr) & (np.asarray(rid[r + 1], np.int64) == rr) \
            & running[np.asarray(kind[r + 1])]
        parts.append(r[ok].astype(np.int64))
    source = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    waker = np.asarray(g[source], np.int64)
    ts = np.asarray(start[source], np.int64)
    lanes = frames.goroutines
    li = np.searchsorted(lanes.ids, waker)
    known = li < len(lanes.ids)
    known[known] = lanes.ids[li[known]] == waker[known]
    source, waker, ts, li = source[known], waker[known], ts[known], li[known]
    lo, hi = lanes.off[li], lanes.off[li + 1]
    row = np.maximum(_last_start_before(start, lo, hi, ts), lo)
    order = np.lexsort((ts, row))
    ends = np.zeros(n, bool)
    ends[source + 1] = True
    return Wakeups(source=source[order], waker_row=row[order], ts=ts[order], ends=ends)


def _last_start_before(start: Arr, lo: I64, hi: I64, t: I64) -> I64:
    """Per k, the last row of ``lo[k]:hi[k]`` (sorted by start) starting
    strictly before ``t[k]``; ``lo[k] - 1`` when none. A binary search of all
    k at once."""
    a, b = lo.copy(), hi.copy()
    live = np.flatnonzero(a < b)
    while len(live):
        mid = (a[live] + b[live]) // 2
        lt = np.asarray(start[mid]) < t[live]
        a[live[lt]] = mid[lt] + 1
        b[live[~lt]] = mid[~lt]
        live = live[a[live] < b[live]]
    return a - 1


# --------------------------------------------------------------------------
# threads


@dataclass
class ThreadRows:
    """The goroutine Running and Syscall rows begun on each thread: thread
    ``ms[i]`` owns ``rows[off[i]:off[i+1]]``, in time order."""

    ms: I64
    off: I64
    rows: npt.NDArray[np.uint32]


def thread_rows(frames: TraceFrames, chunk: int = 1 << 21) -> ThreadRows:
    """:class:`ThreadRows`: a counting sort by M over the goroutine rows (a
    4-byte row number each), then a sort by start within each M."""
    iv = frames.intervals
    n = n_goroutine_rows(frames)
    on_thread = _kind_mask(frames, lambda k: k.resource == "goroutine"
                           and k.to_state in ("Running", "Syscall"))
    m_col, kind, start = iv["m"], iv["kind"], iv["start_ts"]
    counts: dict[int, int] = {}
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        m = np.asarray(m_col[a:b], np.int64)
        sel = on_thread[np.asarray(kind[a:b])] & (m >= 0)
        ms, c = np.unique(m[sel], return_counts=True)
        for mi, ci in zip(ms.tolist(), c.tolist(), strict=True):
            counts[mi] = counts.get(mi, 0) + ci
    ms_sorted = np.asarray(sorted(counts), np.int64)
    off = np.zeros(len(ms_sorted) + 1, np.int64)
    np.cumsum([counts[m] for m in ms_sorted.tolist()], out=off[1:])
    rows = np.empty(int(off[-1]), np.uint32)
    fill = off[:-1].copy()
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        m = np.asarray(m_col[a:b], np.int64)
        sel = np.flatnonzero(on_thread[np.asarray(kind[a:b])] & (m >= 0))
        if not len(sel):
            continue
        mi = np.searchsorted(ms_sorted, m[sel])
        order = np.argsort(mi, kind="stable")
        mi, r = mi[order], (sel[order] + a).astype(np.uint32)
        bounds = np.flatnonzero(np.r_[True, mi[1:] != mi[:-1], True])
        for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            j = int(mi[s])
            rows[fill[j]:fill[j] + (e - s)] = r[s:e]
            fill[j] += e - s
    for j in range(len(ms_sorted)):
        seg = rows[off[j]:off[j + 1]]
        seg[:] = seg[np.argsort(np.asarray(start[seg]), kind="stable")]
    return ThreadRows(ms=ms_sorted, off=off, rows=rows)


def clipped_ends(start: I64, end: I64) -> I64:
    """Ends cut at the next slice's start, so that one track's slices never
    overlap (Perfetto nests slices on a track; an overlap would misnest)."""
    out = end.copy()
    if len(out) > 1:
        np.minimum(out[:-1], start[1:], out=out[:-1])
    return np.maximum(out, start)


# --------------------------------------------------------------------------
# counters


@dataclass
class Counter:
    """One counter track's samples, in time order (ties in sample order)."""

    name: str
    unit: str  # "bytes" or "count"
    ts: I64
    value: I64


def metric_names(engine: Engine, trace_id: int) -> list[tuple[str, int]]:
    """(name, samples with a value) of each runtime metric of the trace."""
    mt = metric_rows_all  # the samples by name code (ingest.store.coded_models)
    stmt = (select(mt.c.name_code, func.count()).where(mt.c.trace_id == trace_id,
                                                        mt.c.value.is_not(None))
            .group_by(mt.c.name_code))
    with engine.connect() as conn:
        names = read_strings(conn, trace_id, "metrics.name")
        return sorted((names[int(r[0])], int(r[1])) for r in conn.execute(stmt))


def metric_chunks(engine: Engine, trace_id: int, name: str) -> Iterator[tuple[I64, I64]]:
    """(ts, value) of one metric's samples, in sample order, a chunk at a time."""
    q = CodedQuery("metrics", trace_id)
    stmt = (q.select(("ts", "value")).where(q.codes("name", [name]),
                                             q.col("value").is_not(None))
            .order_by(q.col("seq")))
    with engine.connect() as conn:
        cursor = conn.execute(stmt).cursor
        assert cursor is not None
        while rows := cursor.fetchmany(_FETCH):
            arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
            yield arr[:, 0].copy(), arr[:, 1].copy()


def metric_unit(name: str) -> str:
    """Go's runtime/metrics names end in their unit (``:bytes``)."""
    return "bytes" if name.endswith(":bytes") else "count"


def _step_counter(name: str, ups: I64, downs: I64) -> Counter:
    """A count that goes up by one at each of ``ups`` and down by one at each
    of ``downs``: one sample per distinct time, the count just after it
    (sorted copies and searches: no per-event delta array is sorted)."""
    ups, downs = np.sort(ups), np.sort(downs)
    # Not np.unique: its hashing crawls on these times (multiples of 64 ns:
    # 19 s for 5.9 M); a stable sort merges the two sorted runs.
    ts = np.sort(np.concatenate([ups, downs]), kind="stable")
    ts = ts[np.r_[ts[1:] != ts[:-1], True]] if len(ts) else ts
    value = np.searchsorted(ups, ts, "right").astype(np.int64)
    value -= np.searchsorted(downs, ts, "right")
    return Counter(name, "count", ts, value)


def goroutine_counter(frames: TraceFrames, chunk: int = 1 << 21) -> Counter:
    """Goroutines that exist (in a state other than NotExist, once seen)."""
    exists = {c: k.to_state not in _NOT_EXISTING for c, k in frames.kinds.items()}
    delta_of = np.zeros(max(frames.kinds, default=0) + 1, np.int64)
    for code, k in frames.kinds.items():
        if k.resource == "goroutine":
            delta_of[code] = int(exists[code]) - int(k.from_state not in _NOT_EXISTING)
    iv = frames.intervals
    ups: list[I64] = []
    downs: list[I64] = []
    for a in range(0, n_goroutine_rows(frames), chunk):
        b = min(a + chunk, n_goroutine_rows(frames))
        d = delta_of[np.asarray(iv["kind"][a:b])]
        ts = np.asarray(iv["start_ts"][a:b], np.int64)
        ups.append(ts[d > 0])
        downs.append(ts[d < 0])
    empty = np.zeros(0, np.int64)
    return _step_counter("Goroutines", np.concatenate([empty, *ups]),
                         np.concatenate([empty, *downs]))


def syscall_counter(frames: TraceFrames) -> Counter:
    """Threads in a syscall: +1 at each syscall interval's start, -1 at its end."""
    sc = frames.syscalls
    start = np.asarray(sc["start_ts"], np.int64)
    end = np.asarray(sc["end_ts"], np.int64)
    end = np.where(end < 0, frames.last_ts, end)
    return _step_counter("Threads in syscall", start, end)
