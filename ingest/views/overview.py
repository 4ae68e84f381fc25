"""The overview of one trace: key numbers and what happened over time.

Goroutines by state over time are time-weighted average counts per time bin:
for a set of intervals, the count of those in progress is a step function
c(t); its integral F(t) is piecewise linear with breakpoints at the interval
starts and ends, so it is computed exactly at those points (+1/-1 events and
cumulative sums) and interpolated at the bin edges. A bin's average count is
(F(right) - F(left)) / width, so the averages times the bin widths add up to
the total time spent in the state inside the trace window (intervals clipped
to ``[first_ts, last_ts]``). Threads over time use the same reduction over the
derived thread stays (:func:`ingest.views.states_frames.thread_stays`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.derive.frames import TraceFrames
from ingest.store import models
from ingest.store.traces import get_trace
from ingest.views.states_frames import (
    WAIT_CATEGORIES,
    goroutine_wait_categories,
    node_name,
    thread_stays,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Metrics plotted on the overview (Go's runtime/metrics names).
HEAP_METRICS = ("/memory/classes/heap/objects:bytes", "/gc/heap/goal:bytes")
GOMAXPROCS_METRIC = "/sched/gomaxprocs:threads"
DEFAULT_BINS = 200
MAX_BINS = 5000

#: Goroutine series of the stacked area, bottom to top.
STATE_SERIES = ("Running", "Runnable", "Syscall",
                *(node_name("Waiting", c) for c in WAIT_CATEGORIES))


def bin_edges(t1: int, t2: int, bins: int) -> I64:
    """``bins`` equal bins over ``[t1, t2]`` as integer ns edges."""
    bins = max(1, min(int(bins), MAX_BINS))
    if t2 <= t1:
        t2 = t1 + 1
    return np.unique(np.linspace(t1, t2, bins + 1).round().astype(np.int64))


def time_weighted(start: I64, end: I64, edges: I64) -> F64:
    """Average number of the intervals ``[start, end)`` in progress in each bin
    of ``edges`` (intervals clipped to the edges' span)."""
    lo, hi = int(edges[0]), int(edges[-1])
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return np.zeros(len(edges) - 1)
    t = np.concatenate([s, e])
    step = np.concatenate([np.ones(len(s), np.int64), -np.ones(len(e), np.int64)])
    order = np.argsort(t, kind="stable")
    t, step = t[order], step[order]
    count = np.cumsum(step)  # in progress right after each event
    area = np.zeros(len(t))
    area[1:] = np.cumsum(count[:-1] * np.diff(t).astype(np.float64))
    # F is continuous and linear between events; interp at the edges is exact.
    f = np.interp(edges.astype(np.float64), t.astype(np.float64), area,
                  left=0.0, right=float(area[-1]))
    return np.diff(f) / np.diff(edges).astype(np.float64)


def goroutine_state_series(frames: TraceFrames, edges: I64) -> dict[str, list[float]]:
    """Time-weighted goroutine counts per bin for each of STATE_SERIES."""
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    st = frames.state[:n_g]
    start = frames.intervals["start_ts"][:n_g]
    end = frames.intervals["end_ts"][:n_g]
    cats, names = goroutine_wait_categories(frames)
    out: dict[str, list[float]] = {}
    for name in ("Running", "Runnable", "Syscall"):
        mask = st == models.STATE_CODE[name]
        out[name] = time_weighted(start[mask], end[mask], edges).tolist()
    waiting = st == models.STATE_CODE["Waiting"]
    for i, cat in enumerate(names):
        mask = waiting & (cats == i)
        out[node_name("Waiting", cat)] = time_weighted(start[mask], end[mask], edges).tolist()
    return out


def thread_series(frames: TraceFrames, edges: I64) -> dict[str, list[float]]:
    """Time-weighted counts of threads running a goroutine and in a syscall."""
    s = thread_stays(frames)
    out: dict[str, list[float]] = {}
    for name in ("Running", "Syscall"):
        mask = s["state"] == models.STATE_CODE[name]
        out[name] = time_weighted(s["start_ts"][mask], s["end_ts"][mask], edges).tolist()
    return out


def metric_series(engine: Engine, trace_id: int) -> dict[str, dict[str, list[int]]]:
    """Heap and GOMAXPROCS samples: metric name -> {"ts": [...], "value": [...]}."""
    mt = models.metrics
    names = (*HEAP_METRICS, GOMAXPROCS_METRIC)
    out: dict[str, dict[str, list[int]]] = {n: {"ts": [], "value": []} for n in names}
    with engine.connect() as conn:
        for r in conn.execute(select(mt.c.name, mt.c.ts, mt.c.value)
                              .where(mt.c.trace_id == trace_id, mt.c.name.in_(names),
                                     mt.c.value.is_not(None))
                              .order_by(mt.c.seq)):
            out[r.name]["ts"].append(int(r.ts))
            out[r.name]["value"].append(int(r.value))
    return out


def gc_bands(engine: Engine, trace_id: int, first_ts: int, last_ts: int
             ) -> list[dict[str, Any]]:
    """GC cycles and stop-the-world pauses: kind, name, start_ts, end_ts
    (clipped to the trace where the range began before it or never ended)."""
    rg = models.ranges
    with engine.connect() as conn:
        rows = conn.execute(select(rg.c.kind, rg.c.name, rg.c.start_ts, rg.c.end_ts)
                            .where(rg.c.trace_id == trace_id, rg.c.kind.in_(("gc", "stw")))
                            .order_by(rg.c.start_ts)).all()
    return [{"kind": r.kind, "name": r.name,
             "start_ts": first_ts if r.start_ts is None else int(r.start_ts),
             "end_ts": last_ts if r.end_ts is None else int(r.end_ts),
             "clipped": r.start_ts is None or r.end_ts is None} for r in rows]


def _union_ns(bands: list[dict[str, Any]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for b in sorted(bands, key=lambda b: b["start_ts"]):
        if cur_e is None or b["start_ts"] > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = b["start_ts"], b["end_ts"]
        else:
            cur_e = max(cur_e, b["end_ts"])
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def key_numbers(trace: dict[str, Any], bands: list[dict[str, Any]],
                metrics: dict[str, dict[str, list[int]]]) -> dict[str, Any]:
    """The overview's headline numbers from the trace row, GC bands and metrics."""
    gmp = metrics.get(GOMAXPROCS_METRIC, {"value": []})["value"]
    stw = [b for b in bands if b["kind"] == "stw"]
    first, last = trace.get("first_ts") or 0, trace.get("last_ts") or 0
    return {
        "name": trace["name"],
        "go_version": trace["go_version"],
        "family": trace["family"],
        "duration_ns": int(last) - int(first),
        "first_ts": first,
        "last_ts": last,
        "events": trace["events"],
        "transitions": trace["transitions"],
        "goroutines": trace["goroutines"],
        "procs": trace["procs"],
        "gomaxprocs": max(gmp) if gmp else None,
        "gomaxprocs_changes": len(set(gmp)) - 1 if gmp else 0,
        "threads": trace["threads"],
        "gc_count": sum(1 for b in bands if b["kind"] == "gc"),
        "stw_count": len(stw),
        "stw_total_ns": _union_ns(stw),
        "status": trace["status"],
        "bytes_lost": trace["loss"]["bytes_lost"],
        "generations_lost": trace["loss"]["generations_lost"],
        "size_bytes": trace.get("size_bytes"),
    }


def overview(engine: Engine, frames: TraceFrames, trace_id: int,
             bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """Everything the overview page shows, as plain data; LookupError when no trace."""
    trace = get_trace(engine, trace_id)
    if trace is None:
        raise LookupError(f"no trace with id {trace_id}")
    first, last = int(trace["first_ts"] or 0), int(trace["last_ts"] or 0)
    edges = bin_edges(first, last, bins)
    bands = gc_bands(engine, trace_id, first, last)
    metrics = metric_series(engine, trace_id)
    return {
        "trace_id": trace_id,
        "key": key_numbers(trace, bands, metrics),
        "bins": {"edges": edges.tolist(), "width_ns": int(edges[1] - edges[0])
                 if len(edges) > 1 else 0},
        "goroutine_states": goroutine_state_series(frames, edges),
        "threads": thread_series(frames, edges),
        "metrics": metrics,
        "gc_bands": bands,
    }
