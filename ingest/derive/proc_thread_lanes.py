"""The timeline's P and M lane sets: per proc, the goroutines it ran and its
Idle intervals; per thread, the goroutine Running and Syscall intervals begun
on it.

Both are made as kept (:class:`~ingest.derive.lanesets.RowLanes`: each row's
ref and the block index, never the rows' times) in C passes over the frames
(``ingest.derive._lanesets``; the P set merges the proc runs and the Idle
intervals, both already in (proc, start) order; the M set places its rows by
their seq), handing the mapped columns' pages back as they go: on the 1 GB
benchmark trace the sets' times and the whole columns read for them were
2.4-3.1 GB a set. Without the extension, or where that order does not hold,
one numpy sort builds the whole lane set instead. Both are cached per trace
(ingest.derive.cache) under their :class:`~ingest.derive.lanesets.LaneSetKey`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.codes import GOROUTINE, RUNNING, STATE_CODE, SYSCALL
from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames, release_pages
from ingest.derive.lane_grouping import group_in_time_order, group_sorted, trace_order
from ingest.derive.lanesets import (
    BLOCK,
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

#: Rows a C pass reads between two hand-backs of the mapped columns' pages
#: (their pages stay counted in the process until then).
RELEASE_ROWS = 1 << 20
#: The same for the passes that read the rows' times out of interval order
#: (a page or two a row: a million rows touched 860 MB of the 1 GB benchmark
#: trace's mapped times, 32 K rows at most 256 MB).
SCATTERED_RELEASE_ROWS = 1 << 15
#: Seqs placed a pass by m_lane_rows (a slot of 4 bytes each: 256 MB; the
#: 1 GB benchmark trace's 100 M seqs take two passes).
SEQ_WINDOW = 1 << 26


def _proc_rows(frames: TraceFrames) -> I64:
    idx = lane_index(frames)
    if not len(idx.p_ids):
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64)
                           for a, b in zip(idx.p_lo.tolist(), idx.p_hi.tolist(), strict=True)])


def _releaser(*cols: npt.NDArray[Any]) -> Callable[[], None]:
    """A callback handing back the pages of ``cols`` read so far
    (release_pages: a no-op for those not memory-mapped), for the C passes
    to call every RELEASE_ROWS rows."""
    def release() -> None:
        for col in cols:
            release_pages(col)
    return release


def _index(got: tuple[bytes, bytes, bytes] | None) -> LaneSetIndex | None:
    """The C passes' LaneSetIndex ((block_max, cats, cum) as bytes), or None."""
    if got is None:
        return None
    block_max, cats, cum = (np.frombuffer(a, np.int64) for a in got)
    return LaneSetIndex(block_max, cats, cum.reshape(len(block_max) + 1, len(cats)))


def _p_lanes_c(frames: TraceFrames) -> RowLanes | None:
    """The P lane set as kept, merged in one pass by ``ingest.derive._lanesets``
    (a run's p and times read at its interval's row: never gathered whole);
    None without it or where its inputs are not in (proc, start) order."""
    ext = optional_extension("ingest.derive._lanesets")
    if ext is None:
        return None
    runs, iv = frames.proc_runs, frames.intervals
    n_goroutine_rows = int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0
    via = runs.columns.get("row")
    run_cols: tuple[npt.NDArray[Any] | None, npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]
    if via is not None and all(runs.via_row.get(c) is iv.columns.get(c)
                               for c in ("p", "start_ts", "end_ts")):
        run_cols = (via, iv.columns["p"], iv.columns["start_ts"], iv.columns["end_ts"])
    else:
        run_cols = (None, runs["p"], runs["start_ts"], runs["end_ts"])
    idle = int(np.count_nonzero(frames.state[n_goroutine_rows:] == STATE_CODE["Idle"]))
    out = np.empty(len(runs) + idle, ref_dtype(frames))
    release = _releaser(*(c for c in run_cols if c is not None), iv["rid"], iv["start_ts"],
                        iv["end_ts"])
    got = ext.p_lane_refs(
        *run_cols, iv["rid"], iv["start_ts"], iv["end_ts"], frames.state, n_goroutine_rows,
        bytes([STATE_CODE["Idle"], CAT["Running"], CAT["Idle"], REF_SOURCES, SRC_RUN,
               SRC_INTERVAL]), out, BLOCK, release, SCATTERED_RELEASE_ROWS)
    release()
    if got is None:
        return None
    ids, lo, hi = (np.frombuffer(a, np.int64) for a in got[:3])
    return RowLanes(ids, lo, hi, out[:got[3]], _index(got[4]))


def p_lanes(frames: TraceFrames) -> LaneSet:
    """Per proc: the goroutines it ran (Running) and its Idle intervals
    (cached without their times and categories, which are the proc runs'
    and intervals')."""
    def build() -> RowLanes:
        return _p_lanes_c(frames) or kept_rows(_p_lanes_numpy(frames))
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
        return _m_lanes_c(frames) or kept_rows(_build_m_lanes(frames))
    kept = cached(frames, LaneSetKey.M_LANES, build, persist=(RowLanes, LaneSetIndex))
    iv = frames.intervals
    return read_rows(kept, {SRC_INTERVAL: RowSource(iv["start_ts"], iv["end_ts"], frames.state,
                                                    state_categories())})


def _m_lanes_c(frames: TraceFrames) -> RowLanes | None:
    """The M lane set as kept, its rows placed in Go's order by
    ``ingest.derive._lanesets`` (no sort, no column of the rows' times: their
    refs written over the rows in place where int32 holds them); None without
    it, or where the rows' seqs or times are not in the order that needs (the
    numpy form sorts them)."""
    ext = optional_extension("ingest.derive._lanesets")
    if ext is None:
        return None
    iv = frames.intervals
    n_goroutine_rows = int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0
    # Each group of mapped columns handed back as it is read (every
    # RELEASE_ROWS rows, and once done), before the next is read.
    release = _releaser(iv["m"], iv["seq"])
    got = ext.m_lane_rows(frames.state, iv["m"], iv["seq"], n_goroutine_rows,
                          bytes([RUNNING, SYSCALL]), SEQ_WINDOW, release, RELEASE_ROWS)
    release()
    if got is None:
        return None
    ids, lo, hi = (np.frombuffer(a, np.int64) for a in got[:3])
    rows = np.frombuffer(got[3], np.int32)
    del got
    rt = ref_dtype(frames)
    out = rows if rt is np.int32 else np.empty(len(rows), rt)
    release = _releaser(iv["start_ts"], iv["end_ts"])
    kept = ext.m_lane_refs(
        rows, lo, hi, frames.state, iv["start_ts"], iv["end_ts"],
        bytes([SYSCALL, CAT["Syscall"], CAT["Running"], REF_SOURCES, SRC_INTERVAL]), out,
        BLOCK, release, SCATTERED_RELEASE_ROWS)
    release()
    if kept is None:
        return None
    klo, khi = (np.frombuffer(a, np.int64) for a in kept[:2])
    return RowLanes(ids, klo, khi, out[:kept[2]], _index(kept[3]))


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
