"""Syscalls and netpoller waits: duration distributions, top stacks, P
handoffs over time. Numpy over the frames' ``syscalls`` table and the
goroutine ``Waiting`` intervals whose reason is ``network``; frames of the
top stacks come from the ``stacks`` table.

A duration is *complete* when both ends are in the trace: it did not begin
before the trace (``start_known``; for waits, the interval was not entered
from ``Undetermined``) and did not last until the trace's end. Only complete
durations go into histograms and percentiles; the others are counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.cache import cached_json
from ingest.derive.frames import TraceFrames
from ingest.views.goroutines import stack_frames
from ingest.views.histo import (
    bin_index,
    count_at_or_before,
    dense_codes,
    log_histogram,
    released,
    summary,
    time_bins,
    top_indices,
)

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

TOP_STACKS = 10
LONGEST = 50


def _window(ts: I64, t1: int | None, t2: int | None) -> slice | npt.NDArray[np.bool_]:
    """The rows of ``ts`` in [t1, t2): every row (a slice, no copy) without a window."""
    if t1 is None and t2 is None:
        return slice(None)
    keep = np.ones(len(ts), dtype=bool)
    if t1 is not None:
        keep &= ts >= t1
    if t2 is not None:
        keep &= ts < t2
    return keep


def top_stacks(engine: Engine, trace_id: int, stack_id: I64, dur: I64,
               top: int = TOP_STACKS) -> dict[str, list[dict[str, Any]]]:
    """The stacks with the most total time and the most occurrences."""
    if len(stack_id) == 0:
        return {"by_total": [], "by_count": []}
    uniq, inv = dense_codes(stack_id)
    cnt = np.bincount(inv, minlength=len(uniq))
    tot = np.rint(np.bincount(inv, weights=dur, minlength=len(uniq))).astype(np.int64)
    by_total = np.lexsort((uniq, -tot))[:top]
    by_count = np.lexsort((uniq, -cnt))[:top]
    # Max only for the stacks shown: one pass over their rows.
    shown = np.zeros(len(uniq), dtype=bool)
    shown[np.r_[by_total, by_count]] = True
    rows = np.flatnonzero(shown[inv])
    mx = np.full(len(uniq), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(mx, inv[rows], np.asarray(dur, dtype=np.int64)[rows])
    frames = stack_frames(engine, trace_id, uniq[np.r_[by_total, by_count]].tolist())

    def row(i: int) -> dict[str, Any]:
        sid = int(uniq[i])
        return {"stack_id": sid, "count": int(cnt[i]), "total_ns": int(tot[i]),
                "mean_ns": float(tot[i] / cnt[i]), "max_ns": int(mx[i]),
                "frames": frames.get(sid, [])}

    return {"by_total": [row(int(i)) for i in by_total],
            "by_count": [row(int(i)) for i in by_count]}


def syscall_summary(engine: Engine, frames: TraceFrames, t1: int | None = None,
                    t2: int | None = None, top: int = TOP_STACKS) -> dict[str, Any]:
    """:func:`_syscall_summary`; the whole trace's is built once and kept (ingest.derive.cache)."""
    if t1 is None and t2 is None:
        return cached_json(frames, f"syscall_summary-top{top}",  # type: ignore[no-any-return]
                           lambda: released(frames, lambda: _syscall_summary(
                               engine, frames, None, None, top)))
    return released(frames, lambda: _syscall_summary(engine, frames, t1, t2, top))


def _syscall_summary(engine: Engine, frames: TraceFrames, t1: int | None = None,
                    t2: int | None = None, top: int = TOP_STACKS) -> dict[str, Any]:
    """Syscalls that began in [t1, t2): counts, duration distribution, top
    stacks, P handoffs (syscalls that lost their P: how long after the
    syscall began the P went to another M) and both over time."""
    sc = frames.syscalls
    keep = _window(np.asarray(sc["start_ts"]), t1, t2)

    def col(name: str) -> Arr:
        return np.asarray(sc[name])[keep]

    start = col("start_ts")
    end = col("end_ts")
    dur = col("duration_ns")
    known = col("start_known") == 1
    unfinished = end >= frames.last_ts
    complete = known & ~unfinished
    lost = col("p_lost") == 1
    stolen = col("stolen_ts")
    has_handoff = lost & (stolen >= 0) & known
    handoff = (stolen - start)[has_handoff]
    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    nb = len(edges) - 1
    b = bin_index(start, edges)
    hb = b[has_handoff]
    hmax = np.zeros(nb, np.int64)
    np.maximum.at(hmax, hb, handoff)
    hcount = np.bincount(hb, minlength=nb)
    hsum = np.bincount(hb, weights=handoff, minlength=nb)
    longest = top_indices(dur, LONGEST)
    goid, m, p = col("goid"), col("m"), col("p")
    stolen_by_m = col("stolen_by_m")
    return {
        "trace_id": frames.trace_id, "t1": t1, "t2": t2,
        "count": int(len(start)), "complete": int(complete.sum()),
        "started_before_trace": int((~known).sum()), "unfinished": int(unfinished.sum()),
        "total_ns": int(dur.sum()),
        "duration": summary(dur[complete]), "histogram": log_histogram(dur[complete]),
        "p_lost": int(lost.sum()), "p_kept": int((~lost).sum()),
        "handoff_found": int(has_handoff.sum()),
        "handoff": summary(handoff), "handoff_histogram": log_histogram(handoff),
        "over_time": {
            "edges": edges.tolist(),
            "syscalls": np.bincount(b, minlength=nb).tolist(),
            "p_lost": np.bincount(b[lost], minlength=nb).tolist(),
            "syscall_ns": np.rint(np.bincount(b, weights=dur, minlength=nb)).astype(np.int64)
            .tolist(),
            "handoffs": hcount.tolist(),
            "handoff_max_ns": hmax.tolist(),
            "handoff_mean_ns": [float(s / c) if c else None
                                for s, c in zip(hsum.tolist(), hcount.tolist(), strict=True)],
        },
        "stacks": top_stacks(engine, frames.trace_id, col("stack_id"), dur, top),
        "longest": [{
            "goid": int(goid[i]), "start_ts": int(start[i]), "end_ts": int(end[i]),
            "duration_ns": int(dur[i]), "m": int(m[i]), "p": int(p[i]),
            "p_lost": bool(lost[i]), "complete": bool(complete[i]),
            "handoff_ns": int(stolen[i] - start[i]) if has_handoff[i] else None,
            "stolen_by_m": int(stolen_by_m[i]) if has_handoff[i] else None,
        } for i in longest.tolist()],
    }


def network_waits(frames: TraceFrames) -> dict[str, I64]:
    """Every goroutine Waiting interval with reason ``network``: goid,
    start, end, stack, start_known, unfinished (still waiting at the end)."""
    lanes = frames.goroutines
    n_rows = int(lanes.off[-1]) if len(lanes.ids) else 0
    top = max(frames.kinds, default=0) + 1
    network = np.zeros(top, dtype=bool)
    undetermined = np.zeros(top, dtype=bool)
    for c, k in frames.kinds.items():
        if k.resource == "goroutine" and k.to_state == "Waiting" and k.reason == "network":
            network[c] = True
            undetermined[c] = k.from_state == "Undetermined"
    kind = frames.intervals["kind"]
    idx = np.flatnonzero(network[kind[:n_rows]])
    last = np.zeros(n_rows, dtype=bool)
    if n_rows:
        last[lanes.off[1:] - 1] = True
    iv = frames.intervals
    return {"goid": iv.take("rid", idx).astype(np.int64), "start": iv.take("start_ts", idx),
            "end": iv.take("end_ts", idx), "stack_id": iv.take("stack_id", idx),
            "start_known": ~undetermined[kind[idx]], "unfinished": last[idx]}


def netpoll_summary(engine: Engine, frames: TraceFrames, t1: int | None = None,
                    t2: int | None = None, top: int = TOP_STACKS) -> dict[str, Any]:
    """:func:`_netpoll_summary`; the whole trace's is built once and kept (ingest.derive.cache)."""
    if t1 is None and t2 is None:
        return cached_json(frames, f"netpoll_summary-top{top}",  # type: ignore[no-any-return]
                           lambda: released(frames, lambda: _netpoll_summary(
                               engine, frames, None, None, top)))
    return released(frames, lambda: _netpoll_summary(engine, frames, t1, t2, top))


def _netpoll_summary(engine: Engine, frames: TraceFrames, t1: int | None = None,
                    t2: int | None = None, top: int = TOP_STACKS) -> dict[str, Any]:
    """Network (netpoller) waits that began in [t1, t2): counts, duration
    distribution, top stacks, waits begun and goroutines parked over time,
    goroutines still parked at the trace's end."""
    w = network_waits(frames)
    keep = _window(w["start"], t1, t2)
    start, end, goid = w["start"][keep], w["end"][keep], w["goid"][keep]
    dur = end - start
    unfinished = w["unfinished"][keep]
    complete = w["start_known"][keep] & ~unfinished
    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    nb = len(edges) - 1
    b = bin_index(start, edges)
    # Goroutines parked at each bin's start: waits begun at or before it
    # minus waits ended at or before it (all waits, not only those in the window).
    at = edges[:-1]
    parked = count_at_or_before(w["start"], at) - count_at_or_before(w["end"], at)
    longest = top_indices(dur, LONGEST)
    return {
        "trace_id": frames.trace_id, "t1": t1, "t2": t2,
        "count": int(len(start)), "complete": int(complete.sum()),
        "started_before_trace": int((~w["start_known"][keep]).sum()),
        "unfinished": int(unfinished.sum()), "total_ns": int(dur.sum()),
        "goroutines": int(len(dense_codes(goid)[0])),
        "parked_at_end": int(w["unfinished"].sum()),
        "duration": summary(dur[complete]), "histogram": log_histogram(dur[complete]),
        "over_time": {"edges": edges.tolist(), "waits": np.bincount(b, minlength=nb).tolist(),
                      "wait_ns": np.rint(np.bincount(b, weights=dur, minlength=nb))
                      .astype(np.int64).tolist(),
                      "parked": parked.astype(np.int64).tolist()},
        "stacks": top_stacks(engine, frames.trace_id, w["stack_id"][keep], dur, top),
        "longest": [{"goid": int(goid[i]), "start_ts": int(start[i]), "end_ts": int(end[i]),
                     "duration_ns": int(dur[i]), "complete": bool(complete[i]),
                     "unfinished": bool(unfinished[i])} for i in longest.tolist()],
    }
