"""Scheduler latency: how long goroutines stayed Runnable before they ran.

Each spell of Runnable (one Runnable interval, or several in a row: Go
occasionally reports Runnable->Runnable) that is followed, in the same
goroutine, by a Running interval is one latency sample: the time from the
transition into Runnable to the transition to Running. The P and M are
those of the Running transition (where it got to run). Runnable intervals
entered from ``Undetermined`` (runnable when the trace began) have no known
start and are counted as ``censored``, not sampled; spells not followed by
Running (still runnable at the end, or gone) are counted as ``pending``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.cache import cached, cached_json
from ingest.derive.frames import TraceFrames
from ingest.store import models
from ingest.views.histo import (
    bin_index,
    group_percentiles,
    log_histogram,
    summary_and_ranks,
    time_bins,
    value_buckets,
)

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

WORST = 50
RUNNABLE = models.STATE_CODE["Runnable"]
#: The "next state" of a goroutine's last row: no state's code (there are
#: seven, and a row's pair of states is packed in a byte as state * 8 + next).
NO_NEXT = len(models.STATE_NAMES)

#: What made a goroutine Runnable, from the transition into it.
CAUSES = ("created", "unblocked", "preempted", "yielded", "syscall", "other")


@dataclass
class Samples:
    """One latency sample per array element, in (goroutine, time) order
    (goid, p and m are int32, cause int8: kept on disk)."""

    goid: Arr
    runnable_ts: I64
    running_ts: I64
    p: Arr
    m: Arr
    cause: Arr  # index into CAUSES
    censored: int
    pending: int

    @property
    def latency(self) -> I64:
        return self.running_ts - self.runnable_ts


def _cause_of_kinds(frames: TraceFrames) -> I64:
    top = max(frames.kinds, default=0) + 1
    out = np.full(top, CAUSES.index("other"), dtype=np.int64)
    for code, k in frames.kinds.items():
        if k.from_state == "NotExist":
            c = "created"
        elif k.from_state == "Waiting":
            c = "unblocked"
        elif k.from_state == "Syscall":
            c = "syscall"
        elif k.from_state == "Running":
            c = "yielded" if k.reason == "runtime.Gosched" else "preempted"
        else:
            c = "other"
        out[code] = CAUSES.index(c)
    return out


def latency_samples(frames: TraceFrames) -> Samples:
    """Every Runnable->Running latency of the trace (vectorised; built once per
    trace and kept with its frames, ingest.derive.cache)."""
    return _samples(frames)[0]


def _samples(frames: TraceFrames) -> tuple[Samples, Samples | None]:
    """(the kept samples, the same just built in memory or None): a report
    built right after them reads the arrays it has rather than paging the
    kept copy back in."""
    fresh: list[Samples] = []

    def build() -> Samples:
        fresh.append(_latency_samples(frames))
        return fresh[0]

    kept = cached(frames, "latency_samples", build, persist=(Samples,))
    return kept, (fresh[0] if fresh else None)


def _latency_samples(frames: TraceFrames) -> Samples:
    lanes = frames.goroutines
    n = int(lanes.off[-1]) if len(lanes.ids) else 0
    st = frames.state[:n]
    iv = frames.intervals
    # Each row's state and its successor's in the same goroutine, as one
    # byte (state * 8 + next state; NO_NEXT after a goroutine's last row):
    # a few passes over bytes where masks per condition took many.
    pair = np.zeros(n, dtype=np.int8)
    if n:
        np.left_shift(st, 3, out=pair)
        pair[:-1] |= st[1:]
        pair[lanes.off[1:] - 1] = (st[lanes.off[1:] - 1] << 3) | NO_NEXT
    ends = np.flatnonzero(pair == RUNNABLE * 8 + models.RUNNING)
    # Go sometimes reports Runnable->Runnable: one wait split in two. A
    # sample spans the whole spell of consecutive Runnable intervals.
    splits = np.flatnonzero(pair == RUNNABLE * 9)
    first = _spell_starts(ends, splits)
    # Runnable rows neither followed by Running nor by Runnable end a spell
    # that never ran: still runnable at the end, or gone.
    pending = int(np.count_nonzero(st == RUNNABLE)) - len(ends) - len(splits)
    top = max(frames.kinds, default=0) + 1
    undet = np.zeros(top, dtype=bool)
    for code, k in frames.kinds.items():
        undet[code] = k.from_state == "Undetermined"
    kind = iv["kind"][first]
    cens = undet[kind]
    if cens.any():
        first, ends, kind = first[~cens], ends[~cens], kind[~cens]
    nxt = ends + 1
    # Narrow columns (the frames' own): this value is kept on disk, a row per sample.
    return Samples(goid=iv["rid"][first], runnable_ts=iv["start_ts"][first],
                   running_ts=iv["start_ts"][nxt], p=iv["p"][nxt], m=iv["m"][nxt],
                   cause=_cause_of_kinds(frames).astype(np.int8)[kind],
                   censored=int(cens.sum()), pending=pending)


def _spell_starts(ends: I64, splits: I64) -> I64:
    """The first row of the Runnable spell that ends at each row of ``ends``:
    ``splits`` (ascending) are the rare Runnable rows followed by another
    Runnable row of their goroutine, so only ends just after one step back."""
    first = ends.copy()
    if not len(splits) or not len(ends):
        return first
    def is_split(rows: I64) -> npt.NDArray[np.bool_]:
        at = np.minimum(np.searchsorted(splits, rows), len(splits) - 1)
        return np.asarray(splits[at] == rows)

    j = np.searchsorted(ends, splits + 1)  # ends just after a split
    j = j[(j < len(ends)) & (ends[np.minimum(j, len(ends) - 1)] == splits + 1)]
    back = first[j] - 1
    while len(j):
        first[j] = back
        more = (back > 0) & is_split(back - 1)
        j, back = j[more], back[more] - 1
    return first


def latency_report(frames: TraceFrames, t1: int | None = None, t2: int | None = None,
                   worst: int = WORST) -> dict[str, Any]:
    """:func:`_latency_report`; the whole trace's is built once and kept."""
    if t1 is None and t2 is None:
        return cached_json(frames, f"latency_report-worst{worst}",  # type: ignore[no-any-return]
                           lambda: _latency_report(frames, None, None, worst))
    return _latency_report(frames, t1, t2, worst)


def _latency_report(frames: TraceFrames, t1: int | None = None, t2: int | None = None,
                    worst: int = WORST) -> dict[str, Any]:
    """Samples whose goroutine started running in [t1, t2): summary,
    histogram, percentiles over time and per P, by cause, worst cases.
    Linear time: percentiles are picked from value buckets, never by a sort."""
    kept, fresh = _samples(frames)
    s = fresh if fresh is not None else kept
    ran_all = np.asarray(s.running_ts)
    if t1 is None and t2 is None:
        keep: slice | npt.NDArray[np.bool_] = slice(None)
    else:
        keep = np.ones(len(ran_all), dtype=bool)
        if t1 is not None:
            keep &= ran_all >= t1
        if t2 is not None:
            keep &= ran_all < t2
    ran = ran_all[keep]
    runnable_ts = np.asarray(s.runnable_ts)[keep]
    lat = ran - runnable_ts
    p = np.asarray(s.p, dtype=np.int64)[keep]
    m, goid = np.asarray(s.m)[keep], np.asarray(s.goid)[keep]
    cause = np.asarray(s.cause, dtype=np.int64)[keep]
    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    nb = len(edges) - 1
    vb = value_buckets(lat)  # shared by every percentile below
    over = group_percentiles(bin_index(ran, edges), lat, nb, buckets=vb)
    over["edges"] = edges.tolist()
    # P ids are small: map them to codes by table lookup rather than a sort.
    present = np.bincount(p + 1, minlength=1) > 0 if len(p) else np.zeros(1, bool)
    pids = np.flatnonzero(present) - 1
    code_of = np.cumsum(present) - 1
    per_p = group_percentiles(code_of[p + 1] if len(p) else p, lat, len(pids),
                              buckets=vb)
    per_p["p"] = pids.tolist()
    if len(pids) and pids[0] < 0:  # no P known: not a P's sample
        per_p = {k: v[1:] for k, v in per_p.items()}
    by_cause = group_percentiles(cause, lat, len(CAUSES), buckets=vb)
    by_cause["cause"] = list(CAUSES)
    # The worst: the top ``worst`` by latency, ties by time of running; the
    # latency they reach is picked with the summary's percentiles.
    k = min(len(lat), worst * 4 + 64) if worst > 0 else 0
    summ, cut = summary_and_ranks(lat, np.array([len(lat) - k] if k else [], np.int64),
                                  buckets=vb)
    order = np.zeros(0, np.int64)
    if k:
        cand = np.flatnonzero(lat >= cut[0])
        order = cand[np.lexsort((ran[cand], -lat[cand]))][:worst]
    return {
        "trace_id": frames.trace_id, "t1": t1, "t2": t2,
        "samples": int(len(lat)), "censored": s.censored, "pending": s.pending,
        "summary": summ, "histogram": log_histogram(lat),
        "over_time": over, "per_p": per_p, "by_cause": by_cause,
        "worst": [{"goid": int(goid[i]), "runnable_ts": int(runnable_ts[i]),
                   "running_ts": int(ran[i]), "latency_ns": int(lat[i]), "p": int(p[i]),
                   "m": int(m[i]), "cause": CAUSES[int(cause[i])]}
                  for i in order.tolist()],
    }
