"""The overview of one trace: key numbers and what happened over time.

Goroutines by state over time are time-weighted average counts per time bin:
a bin's exact time in each state over its width, so the averages times the
bin widths add up to the total time spent in the state inside the window
(intervals clipped to it); threads over time likewise, from the goroutine
intervals begun on a thread. Both come from one pass over the intervals
(:mod:`ingest.views.overview_series`), the whole trace's default bins from a
cache kept with the frames.

Everything is bounded whatever the trace's size: the series have one value per
bin (at most MAX_BINS), the runtime-metrics counters (memory-mapped columns,
:mod:`ingest.derive.overview_counters`) are reduced to at most ``points``
points each with each bucket's min and max kept
(:mod:`ingest.views.counters`), and GC/STW bands narrower than a point's
bucket are merged into per-bucket coverage (:func:`band_view`). A window
``[t1, t2]`` gets its own bins, points and bands.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.cache import cached_json
from ingest.derive.frames import TraceFrames, release_pages
from ingest.derive.overview_counters import COUNTER_METRICS, GOMAXPROCS_METRIC, trace_counters
from ingest.store.coded_models import CodedQuery
from ingest.store.traces import get_trace
from ingest.views.counters import DEFAULT_BUCKETS, bucket_edges, reduce_counter
from ingest.views.overview_series import series

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

DEFAULT_BINS = 200
MAX_BINS = 5000
#: The report cache of the whole trace at the default bins and points.
WHOLE_TRACE_KEY = f"overview-bins{DEFAULT_BINS}-points{DEFAULT_BUCKETS}"


def bin_edges(t1: int, t2: int, bins: int) -> I64:
    """``bins`` equal bins over ``[t1, t2]`` as integer ns edges."""
    bins = max(1, min(int(bins), MAX_BINS))
    if t2 <= t1:
        t2 = t1 + 1
    return np.unique(np.linspace(t1, t2, bins + 1).round().astype(np.int64))


def _ramp_sums(points: I64, edges: I64) -> F64:
    """At each edge x: the sum over ``points`` p of max(0, x - p), from each
    point's bin (counts and sums per bin, then cumulative): no sort."""
    lo, nb = int(edges[0]), len(edges)
    i = np.searchsorted(edges, points, "right")  # edges[i - 1] <= p < edges[i]
    count = np.bincount(i, minlength=nb + 1)[:nb]
    total = np.bincount(i, weights=(points - lo).astype(np.float64), minlength=nb + 1)[:nb]
    x = (edges - lo).astype(np.float64)
    return x * np.cumsum(count) - np.cumsum(total)


def time_weighted(start: I64, end: I64, edges: I64) -> F64:
    """Average number of the intervals ``[start, end)`` in progress in each bin
    of ``edges`` (intervals clipped to the edges' span).

    The integral of the count in progress up to x is F(x) = sum over the
    intervals of max(0, x - start) - max(0, x - end), evaluated exactly at the
    edges; a bin's average is the difference of F over its width."""
    lo, hi = int(edges[0]), int(edges[-1])
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return np.zeros(len(edges) - 1)
    f = _ramp_sums(s, edges) - _ramp_sums(e, edges)
    return np.diff(f) / np.diff(edges).astype(np.float64)


def metric_arrays(engine: Engine, frames: TraceFrames, trace_id: int
                  ) -> dict[str, tuple[I64, I64]]:
    """Heap and GOMAXPROCS samples of the whole trace: metric name -> (ts, value)
    columns sorted by time (samples without a value left out), memory-mapped
    from the trace's counter cache (:mod:`ingest.derive.overview_counters`)."""
    c = trace_counters(engine, frames, trace_id)
    return c.all_series(COUNTER_METRICS)


def metric_series(arrays: dict[str, tuple[I64, I64]], t1: int, t2: int,
                  points: int = DEFAULT_BUCKETS) -> dict[str, dict[str, Any]]:
    """Each counter over ``[t1, t2)`` reduced to at most ``points`` points
    (:func:`ingest.views.counters.reduce_counter`): name -> ``ts``, ``value``
    (last), ``min``, ``max``, ``samples``, ``reduced``."""
    return {name: reduce_counter(ts, value, t1, t2, points).to_json()
            for name, (ts, value) in arrays.items()}


def gc_bands(engine: Engine, trace_id: int, first_ts: int, last_ts: int
             ) -> list[dict[str, Any]]:
    """GC cycles and stop-the-world pauses: kind, name, start_ts, end_ts
    (clipped to the trace where the range began before it or never ended)."""
    q = CodedQuery("ranges", trace_id)  # the kinds matched once, not per row
    with engine.connect() as conn:
        rows = conn.execute(q.select(("kind", "name", "start_ts", "end_ts"))
                            .where(q.codes("kind", ["gc", "stw"]))
                            .order_by(q.col("start_ts"), q.col("id"))).all()
    return [{"kind": r.kind, "name": r.name,
             "start_ts": first_ts if r.start_ts is None else int(r.start_ts),
             "end_ts": last_ts if r.end_ts is None else int(r.end_ts),
             "clipped": r.start_ts is None or r.end_ts is None} for r in rows]


def band_view(bands: list[dict[str, Any]], t1: int, t2: int,
              buckets: int = DEFAULT_BUCKETS
              ) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[Any]]]]:
    """The bands overlapping ``[t1, t2)``, bounded: a band at least one bucket
    (``(t2 - t1) / buckets``) wide is kept as it is; narrower ones are merged
    per kind into coverage buckets: ``start_ts``, ``end_ts``, ``fraction`` (of
    the bucket covered by that kind's narrow bands; bands of one kind are
    disjoint) and ``bands`` (how many of them begin in the bucket), for the
    buckets with any coverage. Returns (wide bands, kind -> coverage)."""
    edges = bucket_edges(t1, t2, buckets)
    width = max(1, (t2 - t1) // max(1, len(edges) - 1))
    inside = [b for b in bands if b["end_ts"] > t1 and b["start_ts"] < t2]
    wide = [b for b in inside if b["end_ts"] - b["start_ts"] >= width]
    coverage: dict[str, dict[str, list[Any]]] = {}
    for kind in ("gc", "stw"):
        narrow = [(b["start_ts"], b["end_ts"]) for b in inside
                  if b["kind"] == kind and b["end_ts"] - b["start_ts"] < width]
        if not narrow:
            continue
        s, e = (np.array(c, dtype=np.int64) for c in zip(*narrow, strict=True))
        frac = time_weighted(s, e, edges)
        begun = np.bincount(np.clip(np.searchsorted(edges, s, "right") - 1,
                                    0, len(edges) - 2), minlength=len(edges) - 1)
        keep = np.flatnonzero(frac > 0)
        coverage[kind] = {"start_ts": edges[keep].tolist(), "end_ts": edges[keep + 1].tolist(),
                          "fraction": np.round(frac[keep], 6).tolist(),
                          "bands": begun[keep].tolist()}
    return wide, coverage


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


def derived_numbers(bands: list[dict[str, Any]],
                    metrics: dict[str, tuple[I64, I64]]) -> dict[str, Any]:
    """The key numbers of the whole trace that come from its GC bands and
    metrics' raw samples: GOMAXPROCS (max, changes), GC and STW counts, STW
    time (the union of the pauses)."""
    gmp = metrics[GOMAXPROCS_METRIC][1] if GOMAXPROCS_METRIC in metrics else np.zeros(0)
    stw = [b for b in bands if b["kind"] == "stw"]
    return {
        "gomaxprocs": int(gmp.max()) if len(gmp) else None,
        "gomaxprocs_changes": len(np.unique(gmp)) - 1 if len(gmp) else 0,
        "gc_count": sum(1 for b in bands if b["kind"] == "gc"),
        "stw_count": len(stw),
        "stw_total_ns": _union_ns(stw),
    }


def key_numbers(trace: dict[str, Any], derived: dict[str, Any]) -> dict[str, Any]:
    """The overview's headline numbers: the trace row's and ``derived``
    (:func:`derived_numbers`; the whole trace, whatever the window)."""
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
        "gomaxprocs": derived["gomaxprocs"],
        "gomaxprocs_changes": derived["gomaxprocs_changes"],
        "threads": trace["threads"],
        "gc_count": derived["gc_count"],
        "stw_count": derived["stw_count"],
        "stw_total_ns": derived["stw_total_ns"],
        "status": trace["status"],
        "bytes_lost": trace["loss"]["bytes_lost"],
        "generations_lost": trace["loss"]["generations_lost"],
        "size_bytes": trace.get("size_bytes"),
    }


def window(trace: dict[str, Any], t1: int | None, t2: int | None) -> tuple[int, int]:
    """``[t1, t2]`` clipped to the trace (its whole span by default);
    ValueError when empty."""
    first, last = int(trace["first_ts"] or 0), int(trace["last_ts"] or 0)
    lo = first if t1 is None else max(first, int(t1))
    hi = last if t2 is None else min(last, int(t2))
    if (t1 is not None or t2 is not None) and hi <= lo:
        raise ValueError(f"empty window: t1={t1}, t2={t2} (the trace spans {first}..{last})")
    return lo, hi


def _trace(engine: Engine, trace_id: int) -> dict[str, Any]:
    trace = get_trace(engine, trace_id)
    if trace is None:
        raise LookupError(f"no trace with id {trace_id}")
    return trace


def _counters_part(engine: Engine, frames: TraceFrames, trace: dict[str, Any],
                   lo: int, hi: int, points: int) -> dict[str, Any]:
    """``numbers`` (:func:`derived_numbers`), reduced ``metrics``,
    ``gc_bands`` and ``gc_coverage`` over ``[lo, hi]``."""
    first, last = int(trace["first_ts"] or 0), int(trace["last_ts"] or 0)
    bands = gc_bands(engine, trace["id"], first, last)
    arrays = metric_arrays(engine, frames, trace["id"])
    wide, coverage = band_view(bands, lo, hi, points)
    part = {
        "numbers": derived_numbers(bands, arrays),
        # (a window reaching the trace's end keeps the samples at last_ts)
        "metrics": metric_series(arrays, lo, hi + 1 if hi >= last else hi, points),
        "gc_bands": wide,
        "gc_coverage": coverage,
    }
    for ts, value in arrays.values():
        release_pages(ts)  # a whole-trace view read them all
        release_pages(value)
    return part


def counters_view(engine: Engine, frames: TraceFrames, trace_id: int,
                  t1: int | None = None, t2: int | None = None,
                  points: int = DEFAULT_BUCKETS) -> dict[str, Any]:
    """The overview's part without the state series (what the heap figure
    draws): key numbers, ``window``, reduced ``metrics``, ``gc_bands`` and
    ``gc_coverage`` over ``[t1, t2]``; LookupError when no trace, ValueError
    for an empty window."""
    trace = _trace(engine, trace_id)
    lo, hi = window(trace, t1, t2)
    part = _counters_part(engine, frames, trace, lo, hi, points)
    return {"trace_id": trace_id, "key": key_numbers(trace, part.pop("numbers")),
            "window": {"t1": lo, "t2": hi}, **part}


def _body(engine: Engine, frames: TraceFrames, trace: dict[str, Any], lo: int, hi: int,
          bins: int, points: int) -> dict[str, Any]:
    """All of the overview over ``[lo, hi]`` but the trace row's numbers."""
    edges = bin_edges(lo, hi, bins)
    return {**_counters_part(engine, frames, trace, lo, hi, points),
            "bins": {"edges": edges.tolist(),
                     "width_ns": int(edges[1] - edges[0]) if len(edges) > 1 else 0},
            **series(frames, edges)}


def overview(engine: Engine, frames: TraceFrames, trace_id: int,
             bins: int = DEFAULT_BINS, t1: int | None = None, t2: int | None = None,
             points: int = DEFAULT_BUCKETS) -> dict[str, Any]:
    """Everything the overview page shows, as plain data, over the window
    ``[t1, t2]`` (default the whole trace; key numbers are always the whole
    trace's); LookupError when no trace, ValueError for an empty window.

    The whole trace at the default bins and points (what the page opens
    with) is built once per trace and kept with its frames (WHOLE_TRACE_KEY,
    :func:`ingest.derive.cache.cached_json`); anything else is computed."""
    trace = _trace(engine, trace_id)
    lo, hi = window(trace, t1, t2)
    span = (int(trace["first_ts"] or 0), int(trace["last_ts"] or 0))
    body: dict[str, Any] | None = None
    if (lo, hi) == span and (bins, points) == (DEFAULT_BINS, DEFAULT_BUCKETS):
        body = cached_json(frames, WHOLE_TRACE_KEY,
                           lambda: _body(engine, frames, trace, lo, hi, bins, points))
        if body["bins"]["edges"] != bin_edges(lo, hi, bins).tolist():
            body = None  # a trace row and cache that disagree: not served
    if body is None:
        body = _body(engine, frames, trace, lo, hi, bins, points)
    return {
        "trace_id": trace_id,
        "key": key_numbers(trace, body["numbers"]),
        "window": {"t1": lo, "t2": hi},
        "bins": body["bins"],
        "goroutine_states": body["goroutine_states"],
        "threads": body["threads"],
        "metrics": body["metrics"],
        "gc_bands": body["gc_bands"],
        "gc_coverage": body["gc_coverage"],
    }
