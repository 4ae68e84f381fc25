"""Level of detail for the timeline: a window's intervals reduced to at most a few
shapes per pixel.

The window ``[t1, t2)`` is cut into ``nb`` buckets (the plot's pixel columns).
Per lane, an interval at least one bucket long is a shape of its own (clipped
to the window). Runs of shorter intervals are grouped by the bucket where they
start, into one shape that spans them and carries their count and the time
spent in each category (its *mix*; the shape's colour is the dominant one);
neighbouring groups that touch and share the dominant category become one
shape. Every shape also carries its *covered* ns: how much of its span its
intervals cover (the union of its intervals, clipped to the window; all of a
single interval's span), so a merged shape of a mostly empty lane can be drawn
as what it is (``covered / (end - start)`` is the figure's bar height). A
lane then has at most one shape per bucket from groups and one per bucket from
long intervals, so a lane costs at most ``2 * nb`` shapes whatever
the number of intervals.

Everything is vectorised: the rows come in one batch, sorted by (lane, start),
and the reduction is a handful of numpy passes (cumsum, bincount, reduceat),
never a Python loop over intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ingest.derive.lanesets import BLOCK, NCAT, LaneSet, LaneSetIndex, lane_search

I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]


@dataclass
class Shapes:
    """Reduced shapes of one window, sorted by (lane, start).

    ``start``/``end`` are clipped to the window; ``n`` is how many intervals a
    shape stands for; ``ref`` the source row of a single interval (-1 for a
    merged shape); ``mix[i, c]`` the ns of category ``c`` inside shape ``i``
    (summed over its intervals, clipped to the window); ``covered`` the ns of
    ``[start, end)`` that at least one of its intervals covers (exact integer
    union: where a lane's intervals overlap, as in the assist lane, time is
    counted once; ``end - start`` for a single interval).
    """

    lane: I64
    start: I64
    end: I64
    cat: I64
    n: I64
    ref: I64
    mix: I64
    covered: I64

    def __len__(self) -> int:
        return len(self.lane)


_FIELDS = ("lane", "start", "end", "cat", "n", "ref", "mix", "covered")


def empty_shapes() -> Shapes:
    z = np.zeros(0, np.int64)
    return Shapes(z, z, z, z, z, z, np.zeros((0, NCAT), np.int64), z)


def concat_shapes(parts: list[Shapes]) -> Shapes:
    """Shapes of several reductions as one, sorted by (lane, start)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_shapes()
    cols = [np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS]
    order = np.lexsort((cols[1], cols[0]))
    return Shapes(*(c[order] for c in cols))


def bucket_of(t: I64, t1: int, t2: int, nb: int) -> I64:
    """Bucket index of times ``t`` in ``[t1, t2)`` cut into ``nb`` buckets.

    Bucket ``k`` is ``[t1 + ceil(k*span/nb), t1 + ceil((k+1)*span/nb))``:
    exact integer arithmetic, no float rounding at the edges.
    """
    return ((t - t1) * nb) // (t2 - t1)


def reduce_window(start: I64, end: I64, cat: npt.NDArray[np.integer], ref: I64, lane: I64,
                  t1: int, t2: int, nb: int) -> Shapes:
    """Reduce intervals (sorted by lane, then start) to shapes for ``nb`` buckets.

    Rows outside the window, empty rows and rows of category -1 are dropped.
    """
    if t2 <= t1 or nb < 1:
        raise ValueError("empty window")
    span = t2 - t1
    keep = (end > t1) & (start < t2) & (end > start) & (cat >= 0)
    if not keep.all():
        start, end, cat, ref, lane = (start[keep], end[keep], cat[keep], ref[keep],
                                      lane[keep])
    if not len(start):
        return empty_shapes()
    cs = np.maximum(start, t1)
    ce = np.minimum(end, t2)
    dur = ce - cs
    big = dur * nb >= span  # at least one bucket long
    bi = np.flatnonzero(big)
    parts = [_singles(lane[bi], cs[bi], ce[bi], cat[bi].astype(np.int64), ref[bi], dur[bi])]
    si = np.flatnonzero(~big)
    if len(si):
        parts.append(_groups(si, big, lane, cs, ce, dur, cat, ref, t1, t2, nb))
    return concat_shapes(parts)


def _singles(lane: I64, s: I64, e: I64, cat: I64, ref: I64, dur: I64) -> Shapes:
    mix = np.zeros((len(lane), NCAT), np.int64)
    mix[np.arange(len(lane)), cat] = dur
    return Shapes(lane, s, e, cat, np.ones(len(lane), np.int64), ref, mix, dur)


def _groups(si: I64, big: npt.NDArray[np.bool_], lane: I64, cs: I64, ce: I64, dur: I64,
            cat: npt.NDArray[np.integer], ref: I64, t1: int, t2: int, nb: int) -> Shapes:
    """Short intervals (rows ``si``) grouped per (lane, start bucket), then
    touching groups of the same dominant category merged."""
    s_lane = lane[si]
    s_cs = cs[si]
    key = s_lane * nb + bucket_of(s_cs, t1, t2, nb)
    # A long interval between two short ones of the same bucket (possible only
    # where a lane's intervals overlap) still separates them.
    bigs_before = np.cumsum(big)[si]
    new = np.empty(len(si), dtype=bool)
    new[0] = True
    new[1:] = (key[1:] != key[:-1]) | (bigs_before[1:] != bigs_before[:-1])
    first = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    ng = len(first)
    occ_f = np.bincount(gid * NCAT + cat[si], weights=dur[si], minlength=ng * NCAT)
    occ = np.rint(occ_f).astype(np.int64).reshape(ng, NCAT)
    cnt = np.diff(np.r_[first, len(si)]).astype(np.int64)
    g_lo = s_cs[first]
    g_hi = np.maximum.reduceat(ce[si], first)
    g_lane = s_lane[first]
    g_bigs = bigs_before[first]
    g_cov = _union_per_group(s_cs, ce[si], gid, first, t1, t2)
    dom = occ.argmax(axis=1)
    touch = ((g_lane[1:] == g_lane[:-1]) & (g_lo[1:] == g_hi[:-1]) & (dom[1:] == dom[:-1])
             & (g_bigs[1:] == g_bigs[:-1]))
    run = np.flatnonzero(np.r_[True, ~touch])
    m_cnt = np.add.reduceat(cnt, run)
    m_ref = np.where(m_cnt == 1, ref[si[first[run]]], -1)
    # Groups of one run touch end to start: their unions do not overlap.
    return Shapes(g_lane[run], g_lo[run], np.maximum.reduceat(g_hi, run),
                  dom[run].astype(np.int64), m_cnt, m_ref.astype(np.int64),
                  np.add.reduceat(occ, run, axis=0), np.add.reduceat(g_cov, run))


def _union_per_group(s: I64, e: I64, gid: I64, first: I64, t1: int, t2: int) -> I64:
    """ns covered by the union of each group's intervals ``[s, e)`` (rows
    sorted by group, then start; clipped to ``[t1, t2]``), in integers.

    Each row adds the part of it past the furthest end of the rows before it
    in its group: a running maximum per group, done as one running maximum
    over ``end + group * stride`` (a later group's values are always larger,
    so an earlier group's maximum never leaks into it).
    """
    span = t2 - t1
    ng = len(first)
    if ng * (span + 1) < 2 ** 62:
        stride, val = span + 1, e - t1
        back: I64 | None = None
    else:  # huge windows times many groups: ends by rank (same order), not by ns
        back, rank = np.unique(e, return_inverse=True)
        stride, val = len(back) + 1, rank.astype(np.int64)
    run = np.maximum.accumulate(val + gid * stride)
    prev = np.r_[np.int64(-1), run[:-1]] - gid * stride  # < 0: no earlier row in the group
    has = prev >= 0
    prev_end = np.full(len(s), t1, np.int64)
    if back is None:
        prev_end[has] = prev[has] + t1
    else:
        prev_end[has] = back[prev[has]]
    add = np.maximum(e - np.maximum(s, prev_end), 0)
    return np.add.reduceat(add, first).astype(np.int64)


def reduce_indexed(ls: LaneSet, lanes: list[tuple[int, int]], t1: int, t2: int,
                   nb: int) -> Shapes:
    """What :func:`reduce_window` gives for lanes ``(lane set index, lane no)``
    of an indexed lane set, without a pass over the window's rows.

    Each bucket's rows are found by binary search on the bucket edges, their
    time per category is a difference of prefix sums, and the long rows are
    found through the per-block maxima: the cost grows with ``nb`` and the
    number of long rows, not with the rows in the window.
    """
    if t2 <= t1 or nb < 1:
        raise ValueError("empty window")
    idx = ls.index
    if idx is None:
        raise ValueError("lane set has no index")
    span = t2 - t1
    k = np.arange(1, nb, dtype=np.int64)
    edges = t1 + (k * span + nb - 1) // nb  # E_1 .. E_{nb-1}
    cat_col = np.full(NCAT, -1, np.int64)
    cat_col[idx.cats] = np.arange(len(idx.cats))
    parts: list[Shapes] = []
    for i, lane_no in lanes:
        lo, hi = int(ls.lo[i]), int(ls.hi[i])
        a = max(lo, int(lane_search(ls.start, lo, hi, t1, "right")[0]) - 1)
        if a < hi and ls.end[a] <= t1:
            a += 1
        b = int(lane_search(ls.start, lo, hi, t2, "left")[0])
        if b <= a:
            continue
        parts.extend(_indexed_lane(ls, idx, a, b, lane_no, t1, t2, nb, edges, cat_col))
    return concat_shapes(parts)


def _indexed_lane(ls: LaneSet, idx: LaneSetIndex, a: int, b: int, lane_no: int, t1: int,
                  t2: int, nb: int, edges: I64, cat_col: I64) -> list[Shapes]:
    span = t2 - t1
    start, end = ls.start, ls.end

    def clipped_dur(r: I64) -> I64:
        return np.minimum(end[r], t2) - np.maximum(start[r], t1)

    # Long rows: only blocks whose longest row is long can hold one.
    ja, jb = a // BLOCK, (b - 1) // BLOCK
    blocks = np.flatnonzero(idx.block_max[ja:jb + 1] * nb >= span) + ja
    cand = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
    cand = cand[(cand >= a) & (cand < b)]
    big_rows = cand[clipped_dur(cand) * nb >= span]
    is_big_at = np.zeros(b - a + 1, dtype=bool)
    is_big_at[big_rows - a] = True
    out: list[Shapes] = []
    if len(big_rows):
        s = np.maximum(start[big_rows], t1)
        e = np.minimum(end[big_rows], t2)
        out.append(_singles(np.full(len(big_rows), lane_no, np.int64), s, e,
                            ls.cat[big_rows].astype(np.int64), ls.ref[big_rows], e - s))
    # Rows [r0[k], r1[k]) start in bucket k (the first row's clipped start is t1).
    bounds = np.r_[a, lane_search(start, a, b, edges, "left"), b].astype(np.int64)
    r0, r1 = bounds[:-1], bounds[1:]
    # A long row is the last of its bucket (the next row starts a bucket later).
    r1 = r1 - is_big_at[np.maximum(r1 - 1, a) - a] * (r1 > r0)
    nonempty = np.flatnonzero(r1 > r0)
    if not len(nonempty):
        return out
    r0, r1 = r0[nonempty], r1[nonempty]
    ng = len(r0)
    occ = np.zeros((ng, NCAT), np.int64)
    both = idx.cum_at(ls, np.concatenate([r1, r0]))
    occ[:, idx.cats] = both[:ng] - both[ng:]
    # The window cuts the first and the last row.
    if start[a] < t1:
        occ[r0 == a, int(ls.cat[a])] -= t1 - int(start[a])
    if end[b - 1] > t2:
        occ[r1 == b, int(ls.cat[b - 1])] -= int(end[b - 1]) - t2
    g_lo = np.maximum(start[r0], t1)
    g_hi = np.minimum(end[r1 - 1], t2)
    cnt = (r1 - r0).astype(np.int64)
    # The rows of P, M and G lanes do not overlap: a bucket's covered time is
    # its rows' time (bounded by its span all the same).
    cov = np.minimum(occ.sum(axis=1), g_hi - g_lo)
    dom = occ.argmax(axis=1)
    touch = (g_lo[1:] == g_hi[:-1]) & (dom[1:] == dom[:-1])
    run = np.flatnonzero(np.r_[True, ~touch])
    m_cnt = np.add.reduceat(cnt, run)
    m_ref = np.where(m_cnt == 1, ls.ref[r0[run]], -1).astype(np.int64)
    run_end = np.r_[run[1:], ng] - 1
    out.append(Shapes(np.full(len(run), lane_no, np.int64), g_lo[run], g_hi[run_end],
                      dom[run].astype(np.int64), m_cnt, m_ref,
                      np.add.reduceat(occ, run, axis=0), np.add.reduceat(cov, run)))
    return out
