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
from ingest.derive.frame_layout import parts
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
#: Interval rows whose kinds :func:`network_waits` reads at a time.
_ROWS = 1 << 22


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


#: The syscalls' columns :func:`_syscall_summary` reads a part at a time.
_PART_COLUMNS = ("start_ts", "end_ts", "duration_ns", "start_known", "p_lost", "stolen_ts",
                 "stack_id")


def _syscall_summary(engine: Engine, frames: TraceFrames, t1: int | None = None,
                    t2: int | None = None, top: int = TOP_STACKS) -> dict[str, Any]:
    """Syscalls that began in [t1, t2): counts, duration distribution, top
    stacks, P handoffs (syscalls that lost their P: how long after the
    syscall began the P went to another M) and both over time. The columns
    are read a part at a time (whole, with their temporaries, 1.5 GB on the
    1 GB trace): only the durations and stacks are kept whole."""
    sc = frames.syscalls
    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    nb = len(edges) - 1
    counts = dict.fromkeys(("count", "complete", "started_before_trace", "unfinished",
                            "total_ns", "p_lost", "handoff_found"), 0)
    per_bin = {k: np.zeros(nb, np.int64) for k in ("syscalls", "p_lost", "handoffs")}
    ns = np.zeros(nb, np.float64)
    hsum = np.zeros(nb, np.float64)
    hmax = np.zeros(nb, np.int64)
    kept: dict[str, list[Arr]] = {k: [] for k in ("dur", "stack_id", "complete", "handoff",
                                                  "row", "longest")}
    for a, c in parts(sc, _PART_COLUMNS):
        keep = _window(c["start_ts"], t1, t2)
        start, end, dur = c["start_ts"][keep], c["end_ts"][keep], c["duration_ns"][keep]
        known = c["start_known"][keep] == 1
        unfinished = end >= frames.last_ts
        complete = known & ~unfinished
        lost = c["p_lost"][keep] == 1
        stolen = c["stolen_ts"][keep]
        has_handoff = lost & (stolen >= 0) & known
        handoff = (stolen - start)[has_handoff]
        b = bin_index(start, edges)
        hb = b[has_handoff]
        np.maximum.at(hmax, hb, handoff)
        per_bin["handoffs"] += np.bincount(hb, minlength=nb)
        hsum += np.bincount(hb, weights=handoff, minlength=nb)
        per_bin["syscalls"] += np.bincount(b, minlength=nb)
        per_bin["p_lost"] += np.bincount(b[lost], minlength=nb)
        # Float sums of integers below 2**53: exact, so the parts' add up as one's.
        ns += np.bincount(b, weights=dur, minlength=nb)
        for k, v in (("count", len(start)), ("complete", complete.sum()),
                     ("started_before_trace", (~known).sum()),
                     ("unfinished", unfinished.sum()), ("total_ns", dur.sum()),
                     ("p_lost", lost.sum()), ("handoff_found", has_handoff.sum())):
            counts[k] += int(v)
        # The longest of each part: their rows, and positions among the kept syscalls.
        top_k = np.sort(top_indices(dur, LONGEST))
        kept["longest"].append(top_k + counts["count"] - len(dur))
        kept["row"].append(a + (top_k if isinstance(keep, slice) else np.flatnonzero(keep)[top_k]))
        for k, v in (("dur", dur), ("stack_id", c["stack_id"][keep]), ("complete", complete),
                     ("handoff", handoff)):
            kept[k].append(v)
        del c, start, end, dur, stolen, b
    whole = {}
    for k in list(kept):  # each joined, its parts let go
        v = kept.pop(k)
        whole[k] = np.concatenate(v) if v else np.zeros(0, np.int64)
        del v
    dur, complete, handoff = whole["dur"], whole["complete"].astype(bool), whole["handoff"]
    best = top_indices(dur[whole["longest"]], LONGEST)  # ties by index, as over all
    return {
        "trace_id": frames.trace_id, "t1": t1, "t2": t2,
        **{k: counts[k] for k in ("count", "complete", "started_before_trace", "unfinished",
                                  "total_ns")},
        "duration": summary(dur[complete]), "histogram": log_histogram(dur[complete]),
        "p_lost": counts["p_lost"], "p_kept": counts["count"] - counts["p_lost"],
        "handoff_found": counts["handoff_found"],
        "handoff": summary(handoff), "handoff_histogram": log_histogram(handoff),
        "over_time": {
            "edges": edges.tolist(),
            "syscalls": per_bin["syscalls"].tolist(),
            "p_lost": per_bin["p_lost"].tolist(),
            "syscall_ns": np.rint(ns).astype(np.int64).tolist(),
            "handoffs": per_bin["handoffs"].tolist(),
            "handoff_max_ns": hmax.tolist(),
            "handoff_mean_ns": [float(s / c) if c else None
                                for s, c in zip(hsum.tolist(), per_bin["handoffs"].tolist(),
                                                strict=True)],
        },
        "stacks": top_stacks(engine, frames.trace_id, whole["stack_id"], dur, top),
        "longest": _longest_syscalls(frames, whole["row"][best], frames.last_ts),
    }


def _longest_syscalls(frames: TraceFrames, rows: I64, last_ts: int) -> list[dict[str, Any]]:
    """The syscalls ``rows``, in that order, as the summary lists its longest."""
    sc = frames.syscalls
    c = {k: sc.take(k, rows) for k in ("goid", "start_ts", "end_ts", "duration_ns", "m", "p",
                                       "p_lost", "start_known", "stolen_ts", "stolen_by_m")}
    out = []
    for i in range(len(rows)):
        lost, known = bool(c["p_lost"][i] == 1), bool(c["start_known"][i] == 1)
        handoff = lost and known and int(c["stolen_ts"][i]) >= 0
        out.append({
            "goid": int(c["goid"][i]), "start_ts": int(c["start_ts"][i]),
            "end_ts": int(c["end_ts"][i]), "duration_ns": int(c["duration_ns"][i]),
            "m": int(c["m"][i]), "p": int(c["p"][i]), "p_lost": lost,
            "complete": known and int(c["end_ts"][i]) < last_ts,
            "handoff_ns": int(c["stolen_ts"][i] - c["start_ts"][i]) if handoff else None,
            "stolen_by_m": int(c["stolen_by_m"][i]) if handoff else None})
    return out


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
    iv = frames.intervals
    # The kinds a part at a time (their pages handed back), the rest at the waits.
    idx = np.concatenate([np.zeros(0, np.int64)] + [
        np.flatnonzero(network[iv.part(("kind",), a, min(n_rows, a + _ROWS))["kind"]]) + a
        for a in range(0, n_rows, _ROWS)])
    # A goroutine's last row: the row before the next lane's first.
    unfinished = lanes.off[np.searchsorted(lanes.off, idx, side="right")] - 1 == idx
    return {"goid": iv.take("rid", idx).astype(np.int64), "start": iv.take("start_ts", idx),
            "end": iv.take("end_ts", idx), "stack_id": iv.take("stack_id", idx),
            "start_known": ~undetermined[iv.take("kind", idx)], "unfinished": unfinished}


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
