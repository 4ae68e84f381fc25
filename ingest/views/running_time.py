"""Running time of goroutines inside time windows (the GC assists' ranges
of :mod:`ingest.views.goroutines`, a goroutine's own in
:mod:`ingest.views.goroutine`): exact integer sums over the frames'
goroutine rows, read a stretch of the intervals at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.cache import release_pages
from ingest.derive.frames import TraceFrames
from ingest.store import models

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]


def running_in(frames: TraceFrames, rows: slice, t1: int, t2: int) -> int:
    """Running time of one goroutine's rows inside [t1, t2)."""
    st = frames.intervals["start_ts"][rows]
    en = frames.intervals["end_ts"][rows]
    lo = max(0, int(np.searchsorted(st, t1, side="right")) - 1)
    hi = int(np.searchsorted(st, t2, side="left"))
    s, e = st[lo:hi], en[lo:hi]
    run = frames.state[rows][lo:hi] == models.RUNNING
    ov = np.clip(np.minimum(e, t2) - np.maximum(s, t1), 0, None)
    return int(ov[run].sum())


#: Windows a pass of :func:`running_in_chunks` takes, at most.
WINDOW_CHUNK = 1 << 16
#: Rows of the lanes of a pass's windows, at most (but a lane's windows
#: are one pass, however long the lane).
LANE_ROWS = 1 << 22


def running_in_chunks(frames: TraceFrames, lane: I64, t1: I64, t2: I64) -> I64:
    """:func:`running_in_many` by lane order, a pass of windows at a time,
    the mapped columns' pages handed back after each: the windows of a
    pass fall on neighbouring lanes of :data:`LANE_ROWS` rows in all, so one
    pass reads a stretch of the intervals, not all of them (the GC assists
    of a 1 GB trace read through every page of start and end: 3.5 GB; and
    64 K windows' lanes, 57 M rows read at once, 2.2 GB)."""
    by = np.argsort(lane, kind="stable")
    out = np.zeros(len(lane), np.int64)
    iv = frames.intervals
    for sl in _passes(frames.goroutines.off, lane[by]):
        k = by[sl]
        out[k] = running_in_many(frames, lane[k], t1[k], t2[k])
        release_pages(iv["start_ts"])
        release_pages(iv["end_ts"])
    return out


def _passes(off: I64, lane: I64) -> list[slice]:
    """Runs of the windows on lanes ``lane`` (ascending; rows
    ``off[l]:off[l + 1]``) taken in one pass (see :func:`running_in_chunks`)."""
    if not len(lane):
        return []
    firsts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])  # each lane's first window
    rows = (off[lane[firsts] + 1] - off[lane[firsts]]).tolist()
    out, a, held = [], 0, 0
    for f, r in zip(firsts.tolist(), rows, strict=True):
        if f > a and (held + r > LANE_ROWS or f - a >= WINDOW_CHUNK):
            out.append(slice(a, f))
            a, held = f, 0
        held += r
    out.append(slice(a, len(lane)))
    return out


def running_in_many(frames: TraceFrames, lane: I64, t1: I64, t2: I64) -> I64:
    """Running time of goroutine lane ``lane[k]`` inside [t1[k], t2[k]), for
    all k at once: a binary search per window over its lane's rows (all
    windows in step), then the Running time of the rows between."""
    lanes = frames.goroutines
    iv = frames.intervals
    start_col, end_col = iv["start_ts"], iv["end_ts"]
    lo = lanes.off[lane].astype(np.int64)
    hi = lanes.off[lane + 1].astype(np.int64)
    base, top = frames.first_ts, frames.last_ts
    a = _last_start_at_or_before(start_col, lo, hi, np.clip(t1, base, top))
    b = _last_start_at_or_before(start_col, lo, hi, np.clip(t2, base, top))
    first = np.maximum(a, lo)  # rows first..b overlap the window (none: b < lo)
    n = np.maximum(np.where(b >= lo, b - first + 1, 0), 0)
    if int(n.sum()) > 4 * len(lane) + (1 << 20):  # long windows over long lanes
        if (len(lanes.ids) + 1) * (max(top - base, 0) + 2) < 2**62:
            return running_in_many_by_lanes(frames, lane, t1, t2)
        return np.array([running_in(frames, slice(int(x), int(y)), int(u), int(v))
                         for x, y, u, v in zip(lo, hi, t1, t2, strict=True)], dtype=np.int64)
    rows = np.repeat(first - np.cumsum(np.r_[0, n[:-1]]), n) + np.arange(int(n.sum()))
    s = start_col[rows]
    e = end_col[rows]
    run = frames.state[rows] == models.RUNNING
    k = np.repeat(np.arange(len(lane)), n)
    ov = np.minimum(e, np.clip(t2, base, top)[k]) - np.maximum(s, np.clip(t1, base, top)[k])
    ov = np.where(run, np.clip(ov, 0, None), 0)
    out = np.zeros(len(lane), np.int64)
    np.add.at(out, k, ov)
    return out


def _last_start_at_or_before(start: Arr, lo: I64, hi: I64, t: I64) -> I64:
    """Per k, the last row of lo[k]:hi[k] (rows sorted by start) whose start
    is at or before t[k]; lo[k] - 1 when none."""
    a, b = lo.copy(), hi.copy()  # rows before a start <= t; rows from b start > t
    live = np.flatnonzero(a < b)
    while len(live):
        mid = (a[live] + b[live]) // 2
        le = start[mid] <= t[live]
        a[live[le]] = mid[le] + 1
        b[live[~le]] = mid[~le]
        live = live[a[live] < b[live]]
    return a - 1


def running_in_many_by_lanes(frames: TraceFrames, lane: I64, t1: I64, t2: I64) -> I64:
    """:func:`running_in_many` by binary search on (lane, start) keys over a
    cumulative sum of Running time, built over the rows of those lanes."""
    lanes = frames.goroutines
    used, local = np.unique(lane, return_inverse=True)
    lo, hi = lanes.off[used], lanes.off[used + 1]
    lens = hi - lo
    sub_off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = np.repeat(lo - sub_off[:-1], lens) + np.arange(int(sub_off[-1]), dtype=np.int64)
    iv = frames.intervals
    start = iv["start_ts"][rows]
    dur = iv["end_ts"][rows] - start
    run = frames.state[rows] == models.RUNNING
    base = frames.first_ts
    width = max(frames.last_ts - base, 0) + 2
    key = np.repeat(np.arange(len(used), dtype=np.int64), lens) * width + (start - base)
    cum = np.concatenate([[0], np.cumsum(np.where(run, dur, 0))])
    local = local.reshape(-1).astype(np.int64)

    def upto(t: I64) -> I64:
        t = np.clip(t, base, frames.last_ts)
        j = np.searchsorted(key, local * width + (t - base), side="right") - 1
        first = sub_off[local]
        inside = j >= first
        jj = np.where(inside, j, first)
        part = np.where(inside & run[jj], np.clip(t - start[jj], 0, dur[jj]), 0)
        return np.asarray(cum[jj] + part, dtype=np.int64)

    return upto(t2) - upto(t1)
