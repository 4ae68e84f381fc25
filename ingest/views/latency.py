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
from ingest.views.histo import bin_index, group_percentiles, log_histogram, summary, time_bins

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

WORST = 50
RUNNABLE = models.STATE_CODE["Runnable"]

#: What made a goroutine Runnable, from the transition into it.
CAUSES = ("created", "unblocked", "preempted", "yielded", "syscall", "other")


@dataclass
class Samples:
    """One latency sample per array element, in (goroutine, time) order."""

    goid: I64
    runnable_ts: I64
    running_ts: I64
    p: I64
    m: I64
    cause: I64  # index into CAUSES
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
    return cached(frames, "latency_samples", lambda: _latency_samples(frames),
                  persist=(Samples,))


def _latency_samples(frames: TraceFrames) -> Samples:
    lanes = frames.goroutines
    n = int(lanes.off[-1]) if len(lanes.ids) else 0
    st = frames.state[:n]
    iv = frames.intervals
    kind = iv["kind"][:n]
    last = np.zeros(n, dtype=bool)
    if n:
        last[lanes.off[1:] - 1] = True
    runnable = st == RUNNABLE
    undet = np.array([frames.kinds[c].from_state == "Undetermined"
                      if c in frames.kinds else False
                      for c in range(max(frames.kinds, default=0) + 1)], dtype=bool)
    followed = np.zeros(n, dtype=bool)
    if n > 1:
        followed[:-1] = (st[1:] == models.RUNNING) & ~last[:-1]
    # Go sometimes reports Runnable->Runnable: one wait split in two. A
    # sample spans the whole spell of consecutive Runnable intervals.
    spell = runnable.copy()
    if n > 1:
        spell[1:] &= ~(runnable[:-1] & ~last[:-1])
    spell_starts = np.flatnonzero(spell)
    ends = np.flatnonzero(runnable & followed)
    first = spell_starts[np.searchsorted(spell_starts, ends, side="right") - 1] \
        if len(ends) else ends
    cens = undet[kind[first]]
    idx, ends = first[~cens], ends[~cens]
    nxt = ends + 1
    lane = np.searchsorted(lanes.off, idx, side="right") - 1
    spell_end = np.zeros(n, dtype=bool)
    if n:
        spell_end[:-1] = runnable[:-1] & ~(runnable[1:] & ~last[:-1])
        spell_end[-1] = runnable[-1]
    return Samples(goid=lanes.ids[lane].astype(np.int64), runnable_ts=iv["start_ts"][idx],
                   running_ts=iv["start_ts"][nxt], p=iv["p"][nxt].astype(np.int64),
                   m=iv["m"][nxt].astype(np.int64),
                   cause=_cause_of_kinds(frames)[kind[idx]],
                   censored=int(cens.sum()), pending=int((spell_end & ~followed).sum()))


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
    histogram, percentiles over time and per P, by cause, worst cases."""
    s = latency_samples(frames)
    keep = np.ones(len(s.goid), dtype=bool)
    if t1 is not None:
        keep &= s.running_ts >= t1
    if t2 is not None:
        keep &= s.running_ts < t2
    lat = s.latency[keep]
    ran = s.running_ts[keep]
    p, m, goid, cause = s.p[keep], s.m[keep], s.goid[keep], s.cause[keep]
    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    nb = len(edges) - 1
    by_lat = np.argsort(lat)
    over = group_percentiles(bin_index(ran, edges), lat, nb, by_value=by_lat)
    over["edges"] = edges.tolist()
    # P ids are small: map them to codes by table lookup rather than a sort.
    present = np.bincount(p + 1, minlength=1) > 0 if len(p) else np.zeros(1, bool)
    pids = np.flatnonzero(present) - 1
    code_of = np.cumsum(present) - 1
    per_p = group_percentiles(code_of[p + 1] if len(p) else p, lat, len(pids),
                              by_value=by_lat)
    per_p["p"] = pids.tolist()
    if len(pids) and pids[0] < 0:  # no P known: not a P's sample
        per_p = {k: v[1:] for k, v in per_p.items()}
    by_cause = group_percentiles(cause, lat, len(CAUSES), by_value=by_lat)
    by_cause["cause"] = list(CAUSES)
    # The worst: the top ``worst`` by latency, ties by time of running.
    cand = by_lat[len(by_lat) - min(len(by_lat), max(worst, 0) * 4 + 64):] if worst else by_lat[:0]
    cut = lat[cand].min() if len(cand) else 0
    cand = np.flatnonzero(lat >= cut) if len(cand) else cand
    order = cand[np.lexsort((ran[cand], -lat[cand]))][:worst]
    runnable_ts = s.runnable_ts[keep]
    return {
        "trace_id": frames.trace_id, "t1": t1, "t2": t2,
        "samples": int(len(lat)), "censored": s.censored, "pending": s.pending,
        "summary": summary(lat, lat[by_lat]), "histogram": log_histogram(lat),
        "over_time": over, "per_p": per_p, "by_cause": by_cause,
        "worst": [{"goid": int(goid[i]), "runnable_ts": int(runnable_ts[i]),
                   "running_ts": int(ran[i]), "latency_ns": int(lat[i]), "p": int(p[i]),
                   "m": int(m[i]), "cause": CAUSES[int(cause[i])]}
                  for i in order.tolist()],
    }
