"""The timeline's P and M lane sets: per proc, the goroutines it ran and its
Idle intervals; per thread, the goroutine Running and Syscall intervals begun
on it.

Building the P set takes one pass over the frames in C (``ingest.derive._lanesets``:
the proc runs and the Idle intervals, both already in (proc, start) order,
merged), or, without it or where that order does not hold, one numpy sort, as
the M set does; both are cached per trace (ingest.derive.cache) under their
:class:`~ingest.derive.lanesets.LaneSetKey`.
"""

from __future__ import annotations

import numpy as np

from ingest.codes import GOROUTINE, RUNNING, STATE_CODE, SYSCALL
from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames, release_pages
from ingest.derive.lane_grouping import group_in_time_order, group_sorted, trace_order
from ingest.derive.lanesets import (
    CAT,
    I64,
    REF_SOURCES,
    SRC_INTERVAL,
    SRC_RUN,
    LaneSet,
    LaneSetIndex,
    LaneSetKey,
    RowLanes,
    RowSource,
    build_index,
    kept_rows,
    lane_index,
    read_rows,
    ref_dtype,
    state_categories,
)
from ingest.extensions import optional_extension


def _proc_rows(frames: TraceFrames) -> I64:
    idx = lane_index(frames)
    if not len(idx.p_ids):
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64)
                           for a, b in zip(idx.p_lo.tolist(), idx.p_hi.tolist(), strict=True)])


def _p_lanes_c(frames: TraceFrames) -> LaneSet | None:
    """The P lane set merged in one pass by ``ingest.derive._lanesets``; None without
    it or where its inputs are not in (proc, start) order."""
    ext = optional_extension("ingest.derive._lanesets")
    if ext is None:
        return None
    runs, iv = frames.proc_runs, frames.intervals
    n_goroutine_rows = int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0
    got = ext.p_lane_rows(
        runs["p"], runs["start_ts"], runs["end_ts"], iv["rid"], iv["start_ts"], iv["end_ts"],
        frames.state, n_goroutine_rows,
        bytes([STATE_CODE["Idle"], CAT["Running"], CAT["Idle"], REF_SOURCES, SRC_RUN,
               SRC_INTERVAL]))
    for col in (runs["p"], runs["start_ts"], runs["end_ts"], iv["start_ts"], iv["end_ts"]):
        release_pages(col)  # read: see m_lanes
    if got is None:
        return None
    ids, lo, hi, start, end, cat, ref = got
    return build_index(LaneSet(
        np.frombuffer(ids, np.int64), np.frombuffer(lo, np.int64), np.frombuffer(hi, np.int64),
        np.frombuffer(start, np.int64), np.frombuffer(end, np.int64),
        np.frombuffer(cat, np.int8), np.frombuffer(ref, np.int64).astype(ref_dtype(frames))))


def p_lanes(frames: TraceFrames) -> LaneSet:
    """Per proc: the goroutines it ran (Running) and its Idle intervals
    (cached without their times and categories, which are the proc runs'
    and intervals')."""
    def build() -> RowLanes:
        return kept_rows(_p_lanes_c(frames) or _p_lanes_numpy(frames))
    kept = cached(frames, LaneSetKey.P_LANES, build, persist=(RowLanes, LaneSetIndex))
    iv = frames.intervals
    return read_rows(kept, {
        SRC_RUN: _run_source(frames),
        SRC_INTERVAL: RowSource(iv["start_ts"], iv["end_ts"], frames.state,
                                state_categories())})


def _run_source(frames: TraceFrames) -> RowSource:
    """Where the proc runs' times are: their intervals' rows, where the
    frames keep a run as its interval's row (never the run's own column,
    which would be made whole: 63 MB of a 200 MB trace for each)."""
    runs, iv = frames.proc_runs, frames.intervals
    running = np.array([CAT["Running"]], np.int8)
    via = runs.columns.get("row")
    if via is not None and runs.via_row.get("start_ts") is iv.columns.get("start_ts") and \
            runs.via_row.get("end_ts") is iv.columns.get("end_ts"):
        return RowSource(iv["start_ts"], iv["end_ts"], None, running, via)
    return RowSource(runs["start_ts"], runs["end_ts"], None, running)


def _p_lanes_numpy(frames: TraceFrames) -> LaneSet:
    runs = frames.proc_runs
    iv = frames.intervals
    prows = _proc_rows(frames)
    idle = prows[frames.state[prows] == STATE_CODE["Idle"]]
    key = np.concatenate([runs["p"], iv["rid"][idle]])
    start = np.concatenate([runs["start_ts"], iv["start_ts"][idle]])
    end = np.concatenate([runs["end_ts"], iv["end_ts"][idle]])
    for col in (runs["p"], runs["start_ts"], runs["end_ts"], iv["start_ts"],
                iv["end_ts"]):
        release_pages(col)  # read: see m_lanes
    cat = np.concatenate([np.full(len(runs), CAT["Running"], np.int8),
                          np.full(len(idle), CAT["Idle"], np.int8)])
    rt = ref_dtype(frames)
    ref = np.concatenate([np.arange(len(runs), dtype=rt) * REF_SOURCES + SRC_RUN,
                          idle.astype(rt) * REF_SOURCES + SRC_INTERVAL])
    order, ids, lo, hi = group_sorted(key, start)
    del key
    # One column reordered at a time: one copy in memory, not four.
    start = start[order]
    end = end[order]
    cat = cat[order]
    ref = ref[order]
    del order
    return build_index(LaneSet(ids, lo, hi, start, end, cat, ref))


def m_lanes(frames: TraceFrames) -> LaneSet:
    """Per thread: the goroutine Running/Syscall intervals begun on it (cached
    without their times and categories, which are the intervals')."""
    def build() -> RowLanes:
        return kept_rows(_m_lanes_c(frames) or _build_m_lanes(frames))
    kept = cached(frames, LaneSetKey.M_LANES, build, persist=(RowLanes, LaneSetIndex))
    iv = frames.intervals
    return read_rows(kept, {SRC_INTERVAL: RowSource(iv["start_ts"], iv["end_ts"], frames.state,
                                                    state_categories())})


def _m_lanes_c(frames: TraceFrames) -> LaneSet | None:
    """The M lane set's rows placed in Go's order by ``ingest.derive._lanesets`` (no
    sort, no temporaries per step); None without it, or where the rows' seqs
    or times are not in the order that needs (the numpy form sorts them)."""
    ext = optional_extension("ingest.derive._lanesets")
    if ext is None:
        return None
    iv = frames.intervals
    n_goroutine_rows = int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0
    got = ext.m_lane_rows(frames.state, iv["m"], iv["seq"], n_goroutine_rows,
                          bytes([RUNNING, SYSCALL]))
    # Each group of mapped columns let go once read (release_pages), before
    # the next is mapped: the build holds no more than one group at a time.
    release_pages(iv["m"])
    release_pages(iv["seq"])
    if got is None:
        return None
    ids, lo, hi = (np.frombuffer(a, np.int64) for a in got[:3])
    rows = np.frombuffer(got[3], np.int32)
    del got
    rt = ref_dtype(frames)
    cols = ext.m_lane_columns(
        rows, lo, hi, frames.state, iv["start_ts"], iv["end_ts"],
        bytes([SYSCALL, CAT["Syscall"], CAT["Running"], REF_SOURCES, SRC_INTERVAL,
               np.dtype(rt).itemsize]))
    release_pages(iv["start_ts"])
    release_pages(iv["end_ts"])
    del rows
    if cols is None:
        return None
    start, end, cat, ref = cols
    return build_index(LaneSet(ids, lo, hi, np.frombuffer(start, np.int64),
                               np.frombuffer(end, np.int64), np.frombuffer(cat, np.int8),
                               np.frombuffer(ref, rt)))


def _build_m_lanes(frames: TraceFrames) -> LaneSet:
    iv = frames.intervals
    st = frames.state
    rows = np.flatnonzero((frames.resource == GOROUTINE)
                          & ((st == RUNNING) | (st == SYSCALL))
                          & (iv["m"] >= 0)).astype(ref_dtype(frames))
    # Taken in Go's order, which is time order on each thread, the rows need
    # grouping by thread but no sort by time (the sort took 0.25 s of 0.42
    # on the benchmark trace).
    rows = trace_order(iv["seq"], rows)
    # Each mapped column let go once read (release_pages): a lane set of
    # 2.9 M rows otherwise holds 100 MB of them until it is done.
    release_pages(iv["seq"])
    m = iv["m"][rows]
    release_pages(iv["m"])
    start = iv["start_ts"][rows]
    release_pages(iv["start_ts"])
    order, ids, lo, hi, start = group_in_time_order(m, start)
    del m
    rows = rows[order]
    del order
    cat = np.where(st[rows] == SYSCALL, np.int8(CAT["Syscall"]),
                   np.int8(CAT["Running"]))
    end = iv["end_ts"][rows]
    release_pages(iv["end_ts"])
    ref = rows  # the refs made in place: one array, not two
    del rows
    ref *= REF_SOURCES
    ref += SRC_INTERVAL
    return build_index(LaneSet(ids, lo, hi, start, end, cat, ref))
