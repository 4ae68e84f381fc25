"""The timeline's lanes: display categories, the lane set type, and the
per-trace lane index.

A *lane set* is a group of lanes whose intervals sit in flat arrays, each
lane's rows contiguous and ordered by start time, as the level-of-detail
reduction (:mod:`ingest.views.timeline_lod`) wants them:

- P lanes: the goroutines that ran on each proc (``proc_runs``) and the
  proc's Idle intervals, merged per proc; M lanes: the goroutine Running and
  Syscall intervals begun on each thread (:mod:`ingest.derive.proc_thread_lanes`);
- G lanes: the goroutine's own intervals (the frames' rows, no copy), and the
  goroutine table (:mod:`ingest.derive.goroutine_lanes`);
- the GC/STW/sweep/assist bands from the ``ranges`` table
  (:mod:`ingest.derive.range_lanes`).

They are built once per trace (:func:`ingest.derive.precompute.precompute_steps`,
right after a load) and kept next to the frames on disk and on the
:class:`~ingest.derive.frames.TraceFrames` object (:mod:`ingest.derive.cache`),
under their :class:`LaneSetKey`. The P and M sets keep only each row's ``ref``
and the block index (:class:`RowLanes`): their times and categories are read
through the refs from the frames' memory-mapped columns (:class:`RowTimes`,
:class:`RowCats`), which hold them already (a copy was 70-80% of the sets'
bytes: 385 MB of a 200 MB trace's caches).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from ingest.codes import GOROUTINE, STATE_CODE
from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames
from ingest.extensions import optional_extension

I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]
T = TypeVar("T", bound=np.generic)

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
    :func:`ingest.derive.precompute.precompute_steps`."""

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


class _ByRef:
    """Values of a lane set's rows read through their ``ref`` (row * REF_SOURCES
    + source) from per-source columns of the frames. Indexed like the array it
    stands for (an int, a slice, an array of rows of any shape): a subclass
    says how one source gives its rows' values (:meth:`_values`)."""

    dtype: type[np.integer[Any]] = np.int64

    def __init__(self, ref: npt.NDArray[np.signedinteger[Any]], by_source: dict[int, Any]) -> None:
        self.ref = ref
        self.by_source = by_source

    def __len__(self) -> int:
        return len(self.ref)

    def _values(self, source: Any, rows: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        raise NotImplementedError

    def _get(self, key: int | np.integer[Any] | slice | npt.NDArray[np.integer[Any]]
             ) -> int | npt.NDArray[Any]:
        if isinstance(key, int | np.integer):
            r = int(self.ref[key])
            one = np.array([r // REF_SOURCES], np.int64)
            return int(self._values(self.by_source[r % REF_SOURCES], one)[0])
        ref = np.asarray(self.ref[key], np.int64)
        row = ref // REF_SOURCES
        if len(self.by_source) == 1:
            (source,) = self.by_source.values()
            return np.asarray(self._values(source, row), self.dtype)
        src = ref % REF_SOURCES
        out = np.empty(ref.shape, self.dtype)
        for code, source in self.by_source.items():
            at = src == code
            out[at] = self._values(source, row[at])
        return out


class RowTimes(_ByRef):
    """The start (or end) times of a lane set's rows, read through their
    ``ref`` from the frames' memory-mapped columns they were taken from: the
    P and M lane sets keep no copy of them (two int64 columns, 70% of their
    bytes on disk). :func:`lane_search` finds times in it. ``by_source``:
    ref source -> (column, and the row of that column for each of the
    source's rows, None: the same row)."""

    def _values(self, source: Any, rows: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        col, via = source
        return np.asarray(col[rows if via is None else via[rows]])

    @overload
    def __getitem__(self, key: int | np.integer[Any]) -> int: ...

    @overload
    def __getitem__(self, key: slice | npt.NDArray[np.integer[Any]]) -> I64: ...

    def __getitem__(self, key: int | np.integer[Any] | slice | npt.NDArray[np.integer[Any]]
                    ) -> int | I64:
        return self._get(key)


class RowCats(_ByRef):
    """The display categories of a lane set's rows, from their ``ref``: per
    ref source, the category of the row's state in the frames (``state``
    column and a state -> category table), or one category for all its rows
    (``state`` None: ``table[0]``)."""

    dtype = np.int8

    def _values(self, source: Any, rows: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        state, table = source
        return np.full(rows.shape, table[0], np.int8) if state is None else table[state[rows]]

    @overload
    def __getitem__(self, key: int | np.integer[Any]) -> int: ...

    @overload
    def __getitem__(self, key: slice | npt.NDArray[np.integer[Any]]) -> I8: ...

    def __getitem__(self, key: int | np.integer[Any] | slice | npt.NDArray[np.integer[Any]]
                    ) -> int | I8:
        return self._get(key)


#: A lane set's times: an array, or its rows' times in the frames (RowTimes).
Times = I64 | RowTimes
#: A lane set's categories: an array, or its rows' in the frames (RowCats).
Cats = I8 | RowCats


def lane_search(col: Times, lo: int, hi: int, values: I64 | int, side: str) -> I64:
    """``lo + np.searchsorted(col[lo:hi], values, side)`` (rows ``lo:hi`` in
    time order), without reading the rows of a RowTimes between: a binary
    search of all the values at once, a gather per step."""
    v = np.atleast_1d(np.asarray(values, np.int64))
    if isinstance(col, np.ndarray):
        found: I64 = np.searchsorted(col[lo:hi], v, side=side)  # type: ignore[call-overload]
        return lo + found
    a = np.full(v.shape, lo, np.int64)
    b = np.full(v.shape, hi, np.int64)
    live = np.flatnonzero(a < b)
    while len(live):
        mid = (a[live] + b[live]) // 2
        x = col[mid]
        right = x < v[live] if side == "left" else x <= v[live]
        a[live[right]] = mid[right] + 1
        b[live[~right]] = mid[~right]
        live = live[a[live] < b[live]]
    return a


@dataclass
class LaneSet:
    """Lanes over flat arrays: lane ``i`` (id ``ids[i]``) owns rows ``lo[i]:hi[i]``.

    ``start``/``end`` are ns, ``cat`` display categories (-1: not drawn): arrays,
    or the rows' own in the frames (:class:`RowTimes`, :class:`RowCats`);
    ``ref`` the row's source reference (row * REF_SOURCES + source).
    """

    ids: I64
    lo: I64
    hi: I64
    start: Times
    end: Times
    cat: Cats
    ref: npt.NDArray[np.signedinteger[Any]]  # int32 when it fits (ref_dtype)
    index: LaneSetIndex | None = None


@dataclass
class RowLanes:
    """A lane set as kept on disk when its rows' times and categories are
    theirs in the frames (the P and M sets): :class:`LaneSet` without
    ``start``, ``end`` and ``cat``."""

    ids: I64
    lo: I64
    hi: I64
    ref: npt.NDArray[np.signedinteger[Any]]
    index: LaneSetIndex | None = None


@dataclass
class RowSource:
    """Where the rows of one ref source are in the frames: their start and
    end columns (at ``via[row]`` when given: a proc run's interval row), and
    their category: ``cat`` of their ``state`` (a state code -> category
    table), or ``cat[0]`` for every row when ``state`` is None."""

    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    state: npt.NDArray[np.int8] | None
    cat: I8
    via: npt.NDArray[np.integer[Any]] | None = None


def kept_rows(ls: LaneSet) -> RowLanes:
    """``ls`` as kept: its times and categories are its rows' in the frames
    (the builders take them from there; tests/ingest/derive/test_derived_cache.py
    checks it)."""
    return RowLanes(ls.ids, ls.lo, ls.hi, ls.ref, ls.index)


def read_rows(kept: RowLanes, sources: dict[int, RowSource]) -> LaneSet:
    """The lane set ``kept`` stands for, its rows read from ``sources`` (by ref source)."""
    ref = _plain(kept.ref)
    return LaneSet(kept.ids, kept.lo, kept.hi,
                   RowTimes(ref, {k: (_plain(s.start), _via(s)) for k, s in sources.items()}),
                   RowTimes(ref, {k: (_plain(s.end), _via(s)) for k, s in sources.items()}),
                   RowCats(ref, {k: (s.state, s.cat) for k, s in sources.items()}),
                   ref, kept.index)


def _via(s: RowSource) -> npt.NDArray[np.integer[Any]] | None:
    return None if s.via is None else _plain(s.via)


def _plain(a: npt.NDArray[T]) -> npt.NDArray[T]:
    """A memory-mapped array as a plain view of the same pages: indexing a
    numpy.memmap makes a memmap of each result (~20 us a call; the gathers
    of one timeline request make thousands). Its pages are still handed
    back through the mapping's owner (release_pages)."""
    return a.view(np.ndarray) if isinstance(a, np.memmap) else a


def state_categories() -> I8:
    """Display category per state code of the rows the P and M lane sets
    draw (Running, Syscall, a proc's Idle); -1 for the others."""
    out = np.full(max(STATE_CODE.values()) + 1, -1, np.int8)
    for name in ("Running", "Syscall", "Idle"):
        out[STATE_CODE[name]] = CAT[name]
    return out


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
        """``[ns of each category in rows 0 .. r-1 for r in rows]`` (len(rows) x cats).

        From the block sums, with the rows between ``r`` and the nearer block
        edge added or taken away: at most BLOCK/2 rows read for each distinct
        ``r`` (a lane set's rows may be read through the frames: a gather
        each, RowTimes)."""
        uniq, back = np.unique(rows, return_inverse=True)
        n = len(ls.ref)
        j = uniq // BLOCK
        k = uniq - j * BLOCK  # rows of its block before r
        up = (k > BLOCK // 2) & ((j + 1) * BLOCK <= n)  # nearer the next edge: take away
        j = j + up
        out = self.cum[j]  # a copy (fancy indexing)
        lo = np.where(up, uniq, j * BLOCK)
        count = np.where(up, j * BLOCK - uniq, k)
        if int(count.sum()):
            owner = np.repeat(np.arange(len(uniq)), count)
            starts = np.cumsum(count) - count
            r = np.repeat(lo, count) + (np.arange(len(owner)) - starts[owner])
            dur = ls.end[r] - ls.start[r]
            dur[up[owner]] *= -1
            cat = ls.cat[r]
            has = np.flatnonzero(count)
            for c, code in enumerate(self.cats.tolist()):
                out[has, c] += np.add.reduceat(np.where(cat == code, dur, 0), starts[has])
        return np.asarray(out[back.reshape(-1)], np.int64)


#: Rows per block of LaneSetIndex.block_max.
BLOCK = 64


def build_index(ls: LaneSet) -> LaneSet:
    """``ls`` without empty rows and with its :class:`LaneSetIndex` (none
    when rows of a lane overlap: those are reduced row by row instead)."""
    if isinstance(ls.start, RowTimes) or isinstance(ls.end, RowTimes) or \
            isinstance(ls.cat, RowCats):
        raise TypeError("build_index wants a lane set holding its rows")
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
    cats = np.unique(ls.cat[:n]).astype(np.int64)
    nblocks = -(-n // BLOCK)
    # The durations, padded to whole blocks (the padding lasts 0 ns).
    dur = np.zeros(nblocks * BLOCK, np.int64)
    dur[:n] = ls.end[:n]
    dur[:n] -= ls.start[:n]
    blocks = dur.reshape(nblocks, BLOCK)
    block_max = blocks.max(axis=1) if nblocks else np.zeros(0, np.int64)
    cum = np.zeros((nblocks + 1, len(cats)), np.int64)
    cat = np.full(nblocks * BLOCK, -1, np.int8)
    cat[:n] = ls.cat[:n]
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
        is_g = res[lo] == GOROUTINE
        gi, pi = np.flatnonzero(is_g), np.flatnonzero(~is_g)
        # Ordered by id within each resource already (rows are sorted by id).
        return LaneIndex(ids[gi], lo[gi], hi[gi], ids[pi], lo[pi], hi[pi])
    return cached(frames, "lane_index", build)
