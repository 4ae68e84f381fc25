"""The timeline's lanes: display categories and per-trace lane sets.

A *lane set* is a group of lanes whose intervals sit in flat arrays, each
lane's rows contiguous and ordered by start time, as the level-of-detail
reduction (:mod:`ingest.views.timeline_lod`) wants them:

- P lanes: the goroutines that ran on each proc (``proc_runs``) and the
  proc's Idle intervals, merged per proc;
- M lanes: the goroutine Running and Syscall intervals begun on each thread;
- G lanes: the goroutine's own intervals (the frames' rows, no copy);
- the GC/STW/sweep/assist bands from the ``ranges`` table.

Building the P set takes one pass over the frames in C (``ingest.derive._lanesets``:
the proc runs and the Idle intervals, both already in (proc, start) order,
merged), or, without it or where that order does not hold, one numpy sort, as
the M set does; they are built once per trace (:func:`precompute_steps`, right
after a load) and kept next to the frames on disk and on the
:class:`~ingest.derive.frames.TraceFrames` object (:mod:`ingest.derive.cache`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames, release_pages
from ingest.extensions import optional_extension
from ingest.store import models

I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]

#: Display categories of timeline shapes (index = code). Waiting is split by
#: Go's block reason so the eye can tell network waits from lock waits.
CATEGORIES = (
    "Running", "Runnable", "Syscall", "Waiting: network", "Waiting: sync",
    "Waiting: chan/select", "Waiting: sleep", "Waiting: GC", "Waiting: other", "Idle",
    "GC", "STW", "Sweep", "Assist",
)
CAT = {name: code for code, name in enumerate(CATEGORIES)}
NCAT = len(CATEGORIES)
#: Range kinds drawn as the top lanes, with their lane label and category.
RANGE_LANES = (("gc", "GC"), ("stw", "STW"), ("sweep", "Sweep"), ("assist", "Assist"))



class LaneSetKey(StrEnum):
    """The per-trace lane sets kept by the derived-value cache
    (ingest.derive.cache), by their cache key: the key the views read a set
    under, the one the loader stages it under before its commit
    (FrameWriter.add_derived), and the name of its step in
    :func:`precompute_steps`."""

    P_LANES = "p_lanes"
    M_LANES = "m_lanes"
    GOROUTINES = "goroutines"
    RANGES = "ranges"


#: ``ref`` of a shape: row * REF_SOURCES + source, so one int finds a row again.
SRC_INTERVAL, SRC_RUN, SRC_RANGE = 0, 1, 2
REF_SOURCES = 4


def ref_dtype(frames: TraceFrames) -> type[np.signedinteger[Any]]:
    """int32 when every row's ref fits (half the bytes of the stored lane
    sets' largest column), else int64."""
    rows = max(len(frames.intervals), len(frames.proc_runs))
    return np.int32 if rows * REF_SOURCES < 2**31 else np.int64


def waiting_category(reason: str) -> int:
    """The Waiting sub-category of one of Go's block reasons."""
    r = reason.lower()
    if r == "network":
        return CAT["Waiting: network"]
    if r.startswith("sync") or "mutex" in r or "lock" in r:
        return CAT["Waiting: sync"]
    if r.startswith("chan") or r == "select":
        return CAT["Waiting: chan/select"]
    if r == "sleep":
        return CAT["Waiting: sleep"]
    if "gc" in r:
        return CAT["Waiting: GC"]
    return CAT["Waiting: other"]


def category_of(to_state: str, reason: str) -> int:
    """Display category of an interval in state ``to_state``; -1: not drawn
    (NotExist, Undetermined, a proc's Running: its goroutines are drawn)."""
    if to_state == "Running":
        return CAT["Running"]
    if to_state == "Runnable":
        return CAT["Runnable"]
    if to_state == "Syscall":
        return CAT["Syscall"]
    if to_state == "Waiting":
        return waiting_category(reason)
    if to_state == "Idle":
        return CAT["Idle"]
    return -1


@dataclass
class LaneSet:
    """Lanes over flat arrays: lane ``i`` (id ``ids[i]``) owns rows ``lo[i]:hi[i]``.

    ``start``/``end`` are ns, ``cat`` display categories (-1: not drawn),
    ``ref`` the row's source reference (row * REF_SOURCES + source).
    """

    ids: I64
    lo: I64
    hi: I64
    start: I64
    end: I64
    cat: I8
    ref: npt.NDArray[np.signedinteger[Any]]  # int32 when it fits (ref_dtype)
    index: LaneSetIndex | None = None


@dataclass
class LaneSetIndex:
    """Summaries that let a window be reduced without touching each of its rows
    (for lane sets whose lanes never overlap themselves, see
    :func:`ingest.views.timeline_lod.reduce_indexed`).

    ``block_max[j]``: the longest row among rows ``j*BLOCK .. (j+1)*BLOCK-1``;
    ``cum[j, c]``: the ns of category ``cats[c]`` in rows ``0 .. j*BLOCK-1``
    (block by block: a 64th of a row-by-row prefix sum, which was 40 MB of a
    2.5 M-row lane set; :meth:`cum_at` adds the rows of the last block).
    """

    block_max: I64
    cats: I64
    cum: I64

    def cum_at(self, ls: LaneSet, rows: I64) -> I64:
        """``[ns of each category in rows 0 .. r-1 for r in rows]`` (len(rows) x cats)."""
        j = rows // BLOCK
        out = self.cum[j]  # a copy (fancy indexing)
        first = j * BLOCK
        k = rows - first  # rows of the last block to add, 0 .. BLOCK-1
        if len(rows) and int(k.max()) > 0:
            width = int(k.max())
            r = first[:, None] + np.arange(width)
            take = np.arange(width) < k[:, None]
            r = np.where(take, r, 0)
            dur = np.where(take, ls.end[r] - ls.start[r], 0)
            cat = ls.cat[r]
            for c, code in enumerate(self.cats.tolist()):
                out[:, c] += np.where(cat == code, dur, 0).sum(axis=1)
        return out


#: Rows per block of LaneSetIndex.block_max.
BLOCK = 64


def build_index(ls: LaneSet) -> LaneSet:
    """``ls`` without empty rows and with its :class:`LaneSetIndex` (none
    when rows of a lane overlap: those are reduced row by row instead)."""
    keep = (ls.end > ls.start) & (ls.cat >= 0)
    if not keep.all():
        idx = np.flatnonzero(keep)
        lo = np.searchsorted(idx, ls.lo).astype(np.int64)
        hi = np.searchsorted(idx, ls.hi).astype(np.int64)
        ls = LaneSet(ls.ids, lo, hi, ls.start[idx], ls.end[idx], ls.cat[idx], ls.ref[idx])
    ext = optional_extension("ingest.derive._lanesets")
    ls.index = _block_index_c(ext, ls) if ext is not None else _block_index_numpy(ls)
    return ls


def _block_index_c(ext: Any, ls: LaneSet) -> LaneSetIndex | None:
    """The index in one pass by ``ingest.derive._lanesets`` (numpy's form makes ~10
    over the rows: 0.03-0.09 s a lane set on the benchmark trace); None for
    overlapping rows, as numpy's."""
    got = ext.block_index(ls.start, ls.end, ls.cat, ls.lo, BLOCK)
    if got is None:
        return None
    block_max, cats, cum = (np.frombuffer(a, np.int64) for a in got)
    return LaneSetIndex(block_max, cats, cum.reshape(-(-len(ls.start) // BLOCK) + 1, len(cats)))


def _block_index_numpy(ls: LaneSet) -> LaneSetIndex | None:
    n = len(ls.start)
    same_lane = np.ones(max(n - 1, 0), dtype=bool)
    same_lane[ls.lo[1:][ls.lo[1:] > 0] - 1] = False
    if n:
        same_lane &= ls.end[:-1] > ls.start[1:]
        if bool(same_lane.any()):
            return None
    del same_lane
    cats = np.unique(ls.cat).astype(np.int64)
    nblocks = -(-n // BLOCK)
    # The durations, padded to whole blocks (the padding lasts 0 ns).
    dur = np.zeros(nblocks * BLOCK, np.int64)
    np.subtract(ls.end, ls.start, out=dur[:n])
    blocks = dur.reshape(nblocks, BLOCK)
    block_max = blocks.max(axis=1) if nblocks else np.zeros(0, np.int64)
    cum = np.zeros((nblocks + 1, len(cats)), np.int64)
    cat = np.full(nblocks * BLOCK, -1, np.int8)
    cat[:n] = ls.cat
    cat_blocks = cat.reshape(nblocks, BLOCK)
    for j, c in enumerate(cats.tolist()):
        np.cumsum(np.where(cat_blocks == c, blocks, 0).sum(axis=1), out=cum[1:, j])
    return LaneSetIndex(block_max.astype(np.int64), cats, cum)


@dataclass
class LaneIndex:
    """Where each goroutine's and proc's rows are in ``frames.intervals``.

    Rows are ordered by (id, resource), so the two resources interleave: the
    index is built from the rows themselves, one pass.
    """

    g_ids: I64
    g_lo: I64
    g_hi: I64
    p_ids: I64
    p_lo: I64
    p_hi: I64

    def goroutine_rows(self, goid: int) -> slice:
        i = int(np.searchsorted(self.g_ids, goid))
        if i >= len(self.g_ids) or self.g_ids[i] != goid:
            return slice(0, 0)
        return slice(int(self.g_lo[i]), int(self.g_hi[i]))


def kind_categories(frames: TraceFrames) -> I8:
    """Display category per kind code (indexable by ``intervals.kind``)."""
    top = max(frames.kinds, default=0) + 1
    out = np.full(top, -1, dtype=np.int8)
    for code, k in frames.kinds.items():
        out[code] = category_of(k.to_state, k.reason)
    return out


def lane_index(frames: TraceFrames) -> LaneIndex:
    """The goroutine and proc lanes of ``frames.intervals`` (cached)."""
    def build() -> LaneIndex:
        rid = frames.intervals["rid"]
        res = frames.resource
        n = len(rid)
        if n == 0:
            z = np.zeros(0, np.int64)
            return LaneIndex(z, z, z, z, z, z)
        cut = np.flatnonzero((rid[1:] != rid[:-1]) | (res[1:] != res[:-1])) + 1
        lo = np.r_[0, cut].astype(np.int64)
        hi = np.r_[cut, n].astype(np.int64)
        ids = rid[lo].astype(np.int64)
        is_g = res[lo] == models.GOROUTINE
        gi, pi = np.flatnonzero(is_g), np.flatnonzero(~is_g)
        # Ordered by id within each resource already (rows are sorted by id).
        return LaneIndex(ids[gi], lo[gi], hi[gi], ids[pi], lo[pi], hi[pi])
    return cached(frames, "lane_index", build)


def _group_sorted(key: I64, start: I64) -> tuple[I64, I64, I64, I64]:
    """(order, lane ids, lo, hi) of rows sorted by (key, start).

    Two passes instead of lexsort: a quicksort by time, then a stable sort by
    the lane's small code (a radix sort for 16-bit codes): several times faster
    on millions of rows.
    """
    if not len(key):
        z = np.zeros(0, np.int64)
        return z, z, z, z
    code, uniq = _lane_codes(key)
    order = _lane_time_order(code, start, len(uniq))
    lo, hi = _code_bounds(code, len(uniq))
    return order.astype(np.int64, copy=False), uniq, lo, hi


def _lane_codes(key: I64) -> tuple[npt.NDArray[np.integer[Any]], I64]:
    """(code, lane ids): each row's lane as 0..lanes-1 (int16 where the ids
    span less than 2**15), and the distinct ids in order."""
    low, high = int(key.min()), int(key.max())
    if high - low < 2**15:
        # Lane ids are small (procs, threads): the code is the id's offset,
        # no sort needed to find the distinct ones.
        code = (key - low).astype(np.int16)
        present = np.flatnonzero(np.bincount(code, minlength=high - low + 1))
        uniq = present + low
        if len(present) < high - low + 1:
            remap = np.zeros(high - low + 1, np.int16)
            remap[present] = np.arange(len(present), dtype=np.int16)
            code = remap[code]
        return code, uniq.astype(np.int64)
    uniq = np.unique(key).astype(np.int64)
    return np.searchsorted(uniq, key).astype(np.int32), uniq


def _code_bounds(code: npt.NDArray[np.integer[Any]], lanes: int) -> tuple[I64, I64]:
    """(lo, hi) of each lane's rows once they are sorted by code."""
    counts = np.bincount(code, minlength=lanes).astype(np.int64)
    hi = np.cumsum(counts)
    return hi - counts, hi


def _group_in_time_order(key: I64, start: I64) -> tuple[I64, I64, I64, I64, I64]:
    """:func:`_group_sorted` for rows given in time order, which grouping by
    lane keeps (a stable radix sort by the lane's code, no sort by time);
    (order, lane ids, lo, hi, start[order]). Rows found out of time order
    within a lane are sorted by time there after all."""
    if not len(key):
        z = np.zeros(0, np.int64)
        return z, z, z, z, start[:0]
    code, uniq = _lane_codes(key)
    order = np.argsort(code, kind="stable")
    lo, hi = _code_bounds(code, len(uniq))
    start = start[order]
    back = start[1:] < start[:-1]
    back[hi[:-1] - 1] = False  # one lane's end against the next lane's start
    if back.any():
        again = _lane_time_order(code[order], start, len(uniq))
        order, start = order[again], start[again]
    return order.astype(np.int64, copy=False), uniq, lo, hi, start


def _trace_order(seq: npt.NDArray[np.integer[Any]], rows: I64) -> I64:
    """``rows`` of the intervals in the order of their transitions in the
    trace (their ``seq``, Go's order: time order on each thread), by placing
    each row at its seq rather than sorting; ``rows`` as given when their
    seqs are not distinct."""
    if not len(rows):
        return rows
    at = seq[rows]
    slot = np.full(int(at.max()) + 1, -1, rows.dtype)
    slot[at] = rows
    del at
    placed = slot[slot >= 0]
    return placed if len(placed) == len(rows) else rows


def _lane_time_order(code: npt.NDArray[np.integer[Any]], start: I64, lanes: int) -> I64:
    """The rows sorted by (lane code, start). One sort of a combined key
    (the code in the high bits, the time since the first start below) when
    the trace's span leaves room for it: half the temporaries of sorting by
    time and then, stably, by code (a lane set of 2.9 M rows: ~30 MB less)."""
    bits = max(lanes - 1, 1).bit_length()
    t0 = int(start.min())
    if int(start.max()) - t0 < 2 ** (63 - bits):
        key = code.astype(np.int64)
        key <<= 63 - bits
        key += start
        key -= t0
        order: I64 = np.argsort(key)
        return order
    by_time = np.argsort(start)
    order = by_time[np.argsort(code[by_time], kind="stable")]
    return order


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
        bytes([models.STATE_CODE["Idle"], CAT["Running"], CAT["Idle"], REF_SOURCES, SRC_RUN,
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
    """Per proc: the goroutines it ran (Running) and its Idle intervals (cached)."""
    def build() -> LaneSet:
        return _p_lanes_c(frames) or _p_lanes_numpy(frames)
    return cached(frames, LaneSetKey.P_LANES, build, persist=(LaneSet, LaneSetIndex))


def _p_lanes_numpy(frames: TraceFrames) -> LaneSet:
    runs = frames.proc_runs
    iv = frames.intervals
    prows = _proc_rows(frames)
    idle = prows[frames.state[prows] == models.STATE_CODE["Idle"]]
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
    order, ids, lo, hi = _group_sorted(key, start)
    del key
    # One column reordered at a time: one copy in memory, not four.
    start = start[order]
    end = end[order]
    cat = cat[order]
    ref = ref[order]
    del order
    return build_index(LaneSet(ids, lo, hi, start, end, cat, ref))


def m_lanes(frames: TraceFrames) -> LaneSet:
    """Per thread: the goroutine Running/Syscall intervals begun on it (cached)."""
    def build() -> LaneSet:
        return _m_lanes_c(frames) or _build_m_lanes(frames)
    return cached(frames, LaneSetKey.M_LANES, build, persist=(LaneSet, LaneSetIndex))


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
                          bytes([models.RUNNING, models.SYSCALL]))
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
        bytes([models.SYSCALL, CAT["Syscall"], CAT["Running"], REF_SOURCES, SRC_INTERVAL,
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
    rows = np.flatnonzero((frames.resource == models.GOROUTINE)
                          & ((st == models.RUNNING) | (st == models.SYSCALL))
                          & (iv["m"] >= 0)).astype(ref_dtype(frames))
    # Taken in Go's order, which is time order on each thread, the rows need
    # grouping by thread but no sort by time (the sort took 0.25 s of 0.42
    # on the benchmark trace).
    rows = _trace_order(iv["seq"], rows)
    # Each mapped column let go once read (release_pages): a lane set of
    # 2.9 M rows otherwise holds 100 MB of them until it is done.
    release_pages(iv["seq"])
    m = iv["m"][rows]
    release_pages(iv["m"])
    start = iv["start_ts"][rows]
    release_pages(iv["start_ts"])
    order, ids, lo, hi, start = _group_in_time_order(m, start)
    del m
    rows = rows[order]
    del order
    cat = np.where(st[rows] == models.SYSCALL, np.int8(CAT["Syscall"]),
                   np.int8(CAT["Running"]))
    end = iv["end_ts"][rows]
    release_pages(iv["end_ts"])
    ref = rows  # the refs made in place: one array, not two
    del rows
    ref *= REF_SOURCES
    ref += SRC_INTERVAL
    return build_index(LaneSet(ids, lo, hi, start, end, cat, ref))


def goroutine_laneset(frames: TraceFrames, goid: int, lo: int, hi: int) -> LaneSet:
    """One goroutine's rows ``lo:hi`` of ``frames.intervals`` as an indexed lane
    set of one lane (cached per goroutine: worth it for long-lived ones)."""
    def build() -> LaneSet:
        iv = frames.intervals
        rows = np.arange(lo, hi, dtype=np.int64)
        cat = kind_categories(frames)[iv["kind"][lo:hi]]
        return build_index(LaneSet(np.array([goid], np.int64), np.array([0], np.int64),
                                   np.array([hi - lo], np.int64), iv["start_ts"][lo:hi],
                                   iv["end_ts"][lo:hi], cat,
                                   rows * REF_SOURCES + SRC_INTERVAL))
    return cached(frames, f"g:{goid}:{lo}:{hi}", build)


@dataclass
class Goroutines:
    """The goroutine lanes' table: grouping by start function, lifetimes."""

    goid: I64
    group: I64  # index into names
    names: list[str]  # start functions ("" unknown), ordered by goroutine count, desc
    alive_lo: I64  # first row's start
    alive_hi: I64  # end of the last row that is not NotExist
    lo: I64  # rows in frames.intervals
    hi: I64


def goroutine_table(engine: Engine, frames: TraceFrames) -> Goroutines:
    """Goroutines with their start-function group and lifetime (cached)."""
    def build() -> Goroutines:
        idx = lane_index(frames)
        g = models.goroutines
        with engine.connect() as conn:
            # Straight through the DB-API cursor: 100k+ rows of SQLAlchemy Row
            # objects would cost more than the query.
            cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cur.execute(f"SELECT goid, start_function FROM {g.name} "
                            f"WHERE trace_id = {int(frames.trace_id)} ORDER BY goid")
                rows = cur.fetchall()
            finally:
                cur.close()
        sql_goid = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        iv = frames.intervals
        start, end = iv["start_ts"], iv["end_ts"]
        n = len(idx.g_ids)
        if n:
            last = idx.g_hi - 1
            gone = frames.state[last] == models.STATE_CODE["NotExist"]
            alive_lo = start[idx.g_lo].astype(np.int64)
            alive_hi = np.where(gone, start[last], end[last]).astype(np.int64)
        else:
            alive_lo = alive_hi = np.zeros(0, np.int64)
        return goroutines_of(idx.g_ids, sql_goid, [fn for _, fn in rows], idx.g_lo, idx.g_hi,
                             alive_lo, alive_hi)
    return cached(frames, LaneSetKey.GOROUTINES, build, persist=(Goroutines,))


def goroutines_of(goids: I64, fn_goids: I64, functions: list[str | None], lo: I64, hi: I64,
                  alive_lo: I64, alive_hi: I64) -> Goroutines:
    """The goroutine table of the goroutines ``goids`` (ascending; their rows
    ``lo:hi`` of the intervals, alive from ``alive_lo`` to ``alive_hi``), given
    the start function of each goroutine in ``fn_goids`` (ascending)."""
    code_of: dict[str, int] = {}
    sql_code = np.fromiter((code_of.setdefault(fn or "", len(code_of)) for fn in functions),
                           dtype=np.int64, count=len(functions))
    pos = np.searchsorted(fn_goids, goids)
    pos_c = np.minimum(pos, max(len(fn_goids) - 1, 0))
    found = (pos < len(fn_goids)) & (fn_goids[pos_c] == goids) if len(functions) else \
        np.zeros(len(goids), dtype=bool)
    unknown = code_of.setdefault("", len(code_of))
    raw = np.where(found, sql_code[pos_c], unknown) if len(functions) else \
        np.full(len(goids), unknown, np.int64)
    first_names = list(code_of)
    counts = np.bincount(raw, minlength=len(first_names))
    # Groups by goroutine count (desc), unknown start function last.
    rank = sorted(range(len(first_names)), key=lambda c: (
        counts[c] == 0, first_names[c] == "", -int(counts[c]), first_names[c]))
    names = [first_names[c] for c in rank]
    remap = np.empty(len(first_names), np.int64)
    remap[rank] = np.arange(len(rank))
    return Goroutines(np.asarray(goids, np.int64), remap[raw], names,
                      np.asarray(alive_lo, np.int64), np.asarray(alive_hi, np.int64),
                      np.asarray(lo, np.int64), np.asarray(hi, np.int64))


@dataclass
class Ranges:
    """GC/STW/sweep/assist ranges as lanes (one lane per kind, by start time)."""

    lanes: LaneSet  # ids: index into RANGE_LANES
    range_id: I64  # ranges.id of each row (for details)
    g: I64


def range_lanes(engine: Engine, frames: TraceFrames) -> Ranges:
    """The trace's ranges of kinds gc, stw, sweep and assist (cached)."""
    def build() -> Ranges:
        r = models.ranges
        with engine.connect() as conn:
            rows = conn.execute(select(r.c.id, r.c.kind, r.c.start_ts, r.c.end_ts, r.c.g)
                                .where(r.c.trace_id == frames.trace_id,
                                       r.c.kind.in_([k for k, _ in RANGE_LANES]))
                                .order_by(r.c.id)).all()
        return ranges_of([x.id for x in rows], [x.kind for x in rows],
                         [x.start_ts for x in rows], [x.end_ts for x in rows],
                         [x.g for x in rows], frames.first_ts, frames.last_ts)
    return cached(frames, LaneSetKey.RANGES, build, persist=(Ranges, LaneSet, LaneSetIndex))


def ranges_of(rid: Sequence[int], kind: Sequence[str], start_ts: Sequence[int | None],
              end_ts: Sequence[int | None], g: Sequence[int], first_ts: int,
              last_ts: int) -> Ranges:
    """:func:`range_lanes`' value from the ranges table's columns (rows in id
    order; those of other kinds are left out): the loader makes it from the
    columns it stores, the views from the database."""
    kinds = [k for k, _ in RANGE_LANES]
    keep = [i for i, k in enumerate(kind) if k in kinds]
    lane = np.array([kinds.index(kind[i]) for i in keep], dtype=np.int64)
    start = np.array([first_ts if start_ts[i] is None else start_ts[i] for i in keep],
                     dtype=np.int64)
    end = np.array([last_ts if end_ts[i] is None else end_ts[i] for i in keep],
                   dtype=np.int64)
    ids = np.array([rid[i] for i in keep], dtype=np.int64)
    gs = np.array([g[i] for i in keep], dtype=np.int64)
    order, lanes, lo, hi = _group_sorted(lane, start)
    cats = np.array([CAT[label] for _, label in RANGE_LANES], dtype=np.int8)
    cat = cats[lane[order]] if len(order) else np.zeros(0, np.int8)
    ref = order * REF_SOURCES + SRC_RANGE  # row in the arrays below
    return Ranges(LaneSet(lanes, lo, hi, start[order], end[order], cat.astype(np.int8),
                          ref.astype(np.int64)), ids, gs)


def precompute_steps(engine: Engine) -> dict[LaneSetKey, Callable[[TraceFrames], object]]:
    """The lane sets every timeline mode needs, one builder each, by the key
    each is cached under: the loader runs them right after a trace is stored
    (ingest.load.pipeline), skipping those it staged itself, so the first
    view of a new trace answers without building them."""
    return {
        LaneSetKey.P_LANES: p_lanes,
        LaneSetKey.M_LANES: m_lanes,
        LaneSetKey.GOROUTINES: lambda f: goroutine_table(engine, f),
        LaneSetKey.RANGES: lambda f: range_lanes(engine, f),
    }
