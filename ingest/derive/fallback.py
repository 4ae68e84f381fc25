"""The numpy forms of the interval order and the reductions in ingest.derive.intervals.

Each is what its C counterpart (``ingest/csrc/intervalorder.c``,
``ingest/csrc/summaries.c``) computes, in numpy: used when the extension is not
built, when the columns are not the compact types, or with ``GMPSCOPE_PURE=1``;
tests/ingest/derive/test_derive_c.py compares the two forms on every test trace. The numpy
form of the intervals' ends lives with :class:`Ordered`, which makes them, in
ingest.derive.interval_order (imported here; it imports neither form).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ingest.codes import GOROUTINE, PROC, RESOURCE_NAMES, STATE_NAMES
from ingest.columns import Transitions, narrow_ids
from ingest.derive.interval_order import (
    I64,
    IDLE,
    NOT_EXIST,
    RUNNING,
    SUMMED_STATES,
    SYSCALL,
    Arr,
    Ordered,
    interval_ends_numpy,
    nearest_rank,
)


def order_intervals_numpy(tr: Transitions, last_ts: int) -> Ordered:
    """:func:`ingest.derive.intervals.order_intervals` by numpy's stable sort."""
    n = len(tr)
    key = tr.rid.astype(np.int64)
    if n and int(key.max()) < 2**30 and int(key.min()) >= 0:
        # Resource-major (all goroutines, then all procs), then id, then Go's
        # order: one stable sort of a 32-bit key halves its memory and time.
        k32 = key.astype(np.int32) + tr.res.astype(np.int32) * np.int32(2**30)
        order = np.argsort(k32, kind="stable")
        del k32
    else:
        # Never seen in Go's output, but keep the grouping right if it happens.
        order = np.lexsort((np.arange(n), key, tr.res)).astype(np.int64)
    del key
    if n < 2**31:
        order = order.astype(np.int32)
    rid_s = tr.rid[order]
    res_s = tr.res[order]
    last = np.empty(n, dtype=bool)
    if n:
        last[:-1] = (rid_s[1:] != rid_s[:-1]) | (res_s[1:] != res_s[:-1])
        last[-1] = True
    del rid_s, res_s
    end = interval_ends_numpy(order, tr.ts, last, last_ts)
    first = np.empty(n, dtype=bool)
    if n:
        first[0] = True
        first[1:] = last[:-1]
    starts = np.flatnonzero(first).astype(np.int64)
    return Ordered(order=order, first=first, last=last, starts=starts, ts=tr.ts,
                   last_ts=int(last_ts), _end=end)


def _group_sum(values: Arr, starts: I64) -> I64:
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(values.astype(np.int64, copy=False), starts)


def run_sums_numpy(tr: Transitions, o: Ordered) -> tuple[dict[int, I64], I64, I64]:
    """:func:`ingest.derive.intervals.run_sums` in numpy."""
    order, starts = o.order, o.starts
    n = len(order)
    ts_s = tr.ts[order]
    to_s = tr.to[order]
    dur = o.end - ts_s
    lasts = np.append(starts[1:], n) - 1
    sums = {}
    masked = np.empty_like(dur)
    for st in SUMMED_STATES:
        np.multiply(dur, to_s == st, out=masked)  # no second full-size temporary
        sums[st] = _group_sum(masked, starts)
    del dur, masked
    big = np.iinfo(np.int64).max
    # First transition out of NotExist and last one into it, per resource:
    # search the (few) such positions instead of masking whole columns.
    born = np.flatnonzero(tr.frm[order] == NOT_EXIST)
    created_idx = np.full(len(starts), big, dtype=np.int64)
    if len(born):
        j = np.searchsorted(born, starts)
        jj = np.minimum(j, len(born) - 1)
        ok = (j < len(born)) & (born[jj] <= lasts)
        created_idx[ok] = born[jj[ok]]
    died = np.flatnonzero(to_s == NOT_EXIST)
    ended = np.full(len(starts), -1, dtype=np.int64)
    if len(died):
        k = np.searchsorted(died, lasts, side="right") - 1
        kk = np.maximum(k, 0)
        ok = (k >= 0) & (died[kk] >= starts)
        ended[ok] = ts_s[died[kk[ok]]]
    return sums, created_idx, ended


def thread_sums_numpy(tr: Transitions, o: Ordered) -> tuple[I64, ...]:
    """:func:`ingest.derive.intervals.thread_sums` in numpy."""
    n = len(tr)
    by_m = np.argsort(tr.m, kind="stable")
    m_sorted = tr.m[by_m]
    skip = int(np.searchsorted(m_sorted, 0))  # -1: no thread
    by_m, m_sorted = by_m[skip:], m_sorted[skip:]
    bounds = np.flatnonzero(np.diff(m_sorted)) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64) if len(by_m) else bounds
    uniq = m_sorted[starts].astype(np.int64)
    ends = np.append(starts[1:], len(by_m)) - 1 if len(by_m) else starts
    # Transitions are in time order, so the first and last of each group in
    # the stable sort are the thread's first and last transitions.
    first = tr.ts[by_m[starts]] if len(by_m) else np.zeros(0, dtype=np.int64)
    last = tr.ts[by_m[ends]] if len(by_m) else np.zeros(0, dtype=np.int64)
    ntrans = ((ends - starts + 1) if len(by_m) else np.zeros(0, dtype=np.int64)).astype(np.int64)
    group = np.full(n, -1, dtype=np.int32)
    group[by_m] = np.repeat(np.arange(len(uniq), dtype=np.int32), ntrans)
    del by_m, m_sorted
    order = o.order
    st_s = tr.to[order]
    gsel = tr.res[order] == GOROUTINE
    sums = {}
    for state in (RUNNING, SYSCALL):
        idx = np.flatnonzero(gsel & (st_s == state))
        grp = group[order[idx]]
        ok = grp >= 0
        dur = (o.end[idx] - tr.ts[order[idx]])[ok]
        sums[state] = (np.bincount(grp[ok], weights=dur, minlength=len(uniq)),
                       np.bincount(grp[ok], minlength=len(uniq)))
    return (uniq, first.astype(np.int64), last.astype(np.int64), ntrans,
            np.rint(sums[RUNNING][0]).astype(np.int64),
            np.rint(sums[SYSCALL][0]).astype(np.int64), sums[SYSCALL][1].astype(np.int64))


def syscall_rows_numpy(tr: Transitions, o: Ordered) -> tuple[Arr, ...] | None:
    """:func:`ingest.derive.intervals.syscall_rows` in numpy."""
    order = o.order
    n = len(order)
    res_s = tr.res[order]
    to_s = tr.to[order]
    sel = np.flatnonzero((res_s == GOROUTINE) & (to_s == SYSCALL))
    del res_s
    if len(sel) == 0:
        return None
    has_next = ~o.last[sel]
    nxt = np.minimum(sel + 1, n - 1)
    next_state = np.where(has_next, to_s[nxt], -1).astype(np.int8)
    del to_s
    seq = order[sel]
    p_entry = tr.p[seq].astype(np.int64)
    p_after = tr.p[order[nxt]].astype(np.int64)
    p_lost = has_next & ((next_state != RUNNING) | (p_after != p_entry))
    start = tr.ts[seq]
    end = o.end[sel]
    stolen_ts = np.full(len(sel), -1, dtype=np.int64)
    stolen_m = np.full(len(sel), -1, dtype=np.int64)
    for p, (sts, sms) in _proc_steals(tr, o).items():
        cand = np.flatnonzero(p_lost & (p_entry == p))
        if len(cand) == 0:
            continue
        j = np.searchsorted(sts, start[cand], side="left")
        ok = j < len(sts)
        jj = np.minimum(j, len(sts) - 1)
        ok &= sts[jj] <= end[cand]
        stolen_ts[cand[ok]] = sts[jj[ok]]
        stolen_m[cand[ok]] = sms[jj[ok]]
    # Rows, Ps and Ms in 32 bits where they fit, as the C reduction gives them.
    return (narrow_ids(sel), next_state, narrow_ids(p_entry), p_lost, stolen_ts,
            narrow_ids(stolen_m))


def _proc_steals(tr: Transitions, o: Ordered) -> dict[int, tuple[Arr, Arr]]:
    """P -> (times, stealing Ms) of Running->Idle transitions made by an M
    other than the one that last made the P Running."""
    order = o.order
    pidx = np.flatnonzero(tr.res[order] == PROC)
    out: dict[int, tuple[Arr, Arr]] = {}
    if len(pidx) < 2:
        return out
    seqs = order[pidx]
    rid = tr.rid[seqs]
    m = tr.m[seqs]
    to = tr.to[seqs]
    frm = tr.frm[seqs]
    prev_same = np.zeros(len(seqs), dtype=bool)
    prev_same[1:] = rid[1:] == rid[:-1]
    holder = np.full(len(seqs), -1, dtype=np.int64)
    holder[1:] = np.where(prev_same[1:] & (to[:-1] == RUNNING), m[:-1], -1)
    steal = (frm == RUNNING) & (to == IDLE) & (holder >= 0) & (m != holder)
    for p in np.unique(rid[steal]).tolist():
        sel = steal & (rid == p)
        out[int(p)] = (tr.ts[seqs[sel]], m[sel].astype(np.int64))
    return out


def state_edges_numpy(tr: Transitions, o: Ordered) -> list[tuple[Any, ...]]:
    """:func:`ingest.derive.intervals.state_edges` in numpy."""
    order = o.order
    n = len(order)
    if n == 0:
        return []
    edge = (tr.res[order].astype(np.int16) * 8 + tr.frm[order]) * 8 + tr.to[order]
    # Time since the previous row, computed in place from the end backwards
    # (one array of the trace's length, not two).
    dwell = np.asarray(tr.ts[order], dtype=np.int64)
    step = 1 << 20
    for b in range(n, 1, -step):
        a = max(1, b - step)
        dwell[a:b] -= dwell[a - 1:b - 1]
    dwell[0] = -1
    dwell[o.first] = -1
    out: list[tuple[Any, ...]] = []
    for code in np.unique(edge).tolist():
        mask = edge == code
        cnt = int(mask.sum())
        d = dwell[mask]
        d = np.sort(d[d >= 0])
        rest, to = divmod(code, 8)
        res, frm = divmod(rest, 8)
        if len(d):
            out.append((RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to], cnt, len(d),
                        float(d.mean()), nearest_rank(d, 0.5), nearest_rank(d, 0.99),
                        int(d[-1])))
        else:
            out.append((RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to], cnt, 0,
                        None, None, None, None))
    return out
