"""Binning helpers shared by the analysis views: log-scaled duration
histograms, time bins chosen from a trace's span, and nearest-rank
percentiles per group. Pure numpy, no database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

#: Log histograms use this many bins per power of ten.
BINS_PER_DECADE = 4
#: Time bins aim at about this many bins over the span.
TARGET_TIME_BINS = 100
_NICE = (1, 2, 5)


def log_histogram(values: Arr) -> dict[str, Any]:
    """Counts of ``values`` (ns, >= 0) in bins whose edges are powers of
    10^(1/BINS_PER_DECADE) ns; zero-length values go into a first bin [0, 1).

    Returns ``edges`` (len n+1, ns, floats) and ``counts`` (len n).
    """
    v = np.asarray(values, dtype=np.int64)
    if len(v) == 0:
        return {"edges": [], "counts": [], "zero": 0}
    pos = v[v > 0]
    zero = int(len(v) - len(pos))
    if len(pos) == 0:
        return {"edges": [0.0, 1.0], "counts": [zero], "zero": zero}
    lo = int(np.floor(np.log10(pos.min()) * BINS_PER_DECADE))
    hi = int(np.floor(np.log10(pos.max()) * BINS_PER_DECADE)) + 1
    k = np.arange(lo, hi + 1)
    edges = 10.0 ** (k / BINS_PER_DECADE)
    # Bin by integer exponent, not by float edges, so an exact power of ten
    # always lands in the bin it starts.
    idx = np.floor(np.log10(pos) * BINS_PER_DECADE + 1e-9).astype(np.int64) - lo
    idx = np.clip(idx, 0, len(edges) - 2)
    counts = np.bincount(idx, minlength=len(edges) - 1)
    out_edges = edges.tolist()
    out_counts = counts.tolist()
    if zero:
        out_edges = [0.0, *out_edges]
        out_counts = [zero, *out_counts]
        # The zero bin is [0, 1): its right edge must meet the next bin's left.
        out_edges[1] = max(out_edges[1], 1.0)
    return {"edges": out_edges, "counts": out_counts, "zero": zero}


def nice_width(span: int, target: int = TARGET_TIME_BINS) -> int:
    """A round bin width (1, 2 or 5 times a power of ten ns) giving about
    ``target`` bins over ``span`` ns."""
    raw = max(1.0, span / max(target, 1))
    exp = int(np.floor(np.log10(raw)))
    for m in (*_NICE, 10):
        w = m * 10**exp
        if w >= raw:
            return int(w)
    return int(10 ** (exp + 1))  # pragma: no cover - the loop always returns


def time_bins(first_ts: int, last_ts: int, target: int = TARGET_TIME_BINS) -> I64:
    """Bin edges from first_ts (inclusive) past last_ts, of a nice width."""
    span = max(1, last_ts - first_ts)
    w = nice_width(span, target)
    n = int(np.ceil((span + 1) / w))
    return first_ts + w * np.arange(n + 1, dtype=np.int64)


def bin_index(ts: Arr, edges: I64) -> I64:
    """Index of the time bin of each ``ts`` (clipped into range)."""
    e = np.asarray(edges, dtype=np.int64)
    ts = np.asarray(ts)
    if len(e) >= 2 and e[1] > e[0] and bool((np.diff(e) == e[1] - e[0]).all()):
        # time_bins' edges are evenly spaced: a division, not a binary search
        # per value (the same index: ts >= e0 + w*k exactly when (ts - e0) // w >= k).
        idx: I64 = np.asarray((ts - e[0]) // (e[1] - e[0]), dtype=np.int64)
    else:
        idx = np.asarray(np.searchsorted(e, ts, side="right") - 1, dtype=np.int64)
    return np.clip(idx, 0, len(e) - 2, out=idx)


@dataclass
class ValueBuckets:
    """Values cut into narrow buckets whose order is the values' order (a
    value's bucket never exceeds a larger value's): from the bits of the
    value as a float, 2**SUB_BITS buckets per power of two. Computed once
    and shared by every order statistic of the same values."""

    lo: int  # the smallest value
    w: I64  # value - lo
    vf: npt.NDArray[np.float64]  # the values as floats (sums' weights)
    b: I64  # bucket of each value
    n: int  # number of buckets


#: Buckets per power of two of :class:`ValueBuckets` (each under 1.6% wide).
SUB_BITS = 6


def value_buckets(values: Arr) -> ValueBuckets:
    """:class:`ValueBuckets` of ``values`` (ints)."""
    v = np.asarray(values, dtype=np.int64)
    vf = v.astype(np.float64)
    if len(v) == 0:
        return ValueBuckets(0, v, vf, np.zeros(0, np.int64), 1)
    lo = int(v.min())
    # Float conversion and subtraction round monotonically, and a
    # non-negative float's bits order as its value: exponent and top
    # mantissa bits make the bucket.
    b = (vf - float(lo)).view(np.int64) >> (52 - SUB_BITS)
    b -= (1023 << SUB_BITS) - 1  # 1 -> bucket 1; 0 -> below, clipped to 0
    np.maximum(b, 0, out=b)
    return ValueBuckets(lo, v - lo, vf, b, int(b.max()) + 1)


def count_at_or_before(ts: Arr, points: I64) -> I64:
    """How many of ``ts`` are at or before each of ``points`` (ascending):
    counted per step when the points are evenly spaced (time_bins' edges),
    else by a sort."""
    t = np.asarray(ts, dtype=np.int64)
    pts = np.asarray(points, dtype=np.int64)
    k = len(pts)
    if k >= 2 and pts[1] > pts[0] and bool((np.diff(pts) == pts[1] - pts[0]).all()):
        w = int(pts[1] - pts[0])
        # t <= p0 + w*j exactly when ceil((t - p0) / w) <= j.
        step = -((int(pts[0]) - t) // w)
        return np.cumsum(np.bincount(np.clip(step, 0, k), minlength=k + 1)[:k]).astype(np.int64)
    return np.searchsorted(np.sort(t), pts, side="right").astype(np.int64)


def dense_codes(ids: Arr) -> tuple[I64, I64]:
    """``np.unique(ids, return_inverse=True)`` of integer ids: by a table
    when their range is small (stack ids, goids), else by a sort."""
    v = np.asarray(ids)
    if len(v) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = int(v.min()), int(v.max())
    if hi - lo > 4 * len(v) + (1 << 20):
        uniq, inv = np.unique(v, return_inverse=True)
        return uniq.astype(np.int64), inv.reshape(-1).astype(np.int64)
    present = np.bincount(v - lo, minlength=hi - lo + 1) > 0
    code_of = np.cumsum(present) - 1
    return np.flatnonzero(present).astype(np.int64) + lo, code_of[v - lo].astype(np.int64)


def order_statistics(values: Arr, ranks: I64, buckets: ValueBuckets | None = None) -> I64:
    """The values of 0-based ``ranks`` in sorted order, without sorting: by
    the values' buckets (:func:`value_buckets`, given or made), else one
    partition around all of them (both linear time)."""
    v = np.asarray(values)
    r = np.asarray(ranks, dtype=np.int64)
    if len(r) == 0:
        return np.zeros(0, np.int64)
    vb = buckets if buckets is not None else value_buckets(v)
    one = np.array([len(v)], np.int64)
    got = _bucket_order_stats(np.zeros(0, np.int64), vb, 1, one, [r[i:i + 1]
                                                                  for i in range(len(r))])
    if got is not None:
        return np.concatenate(got)
    return np.asarray(np.partition(v, _distinct(r))[r], dtype=np.int64)


def _distinct(a: I64) -> I64:
    """The distinct values of ``a``, ascending (np.unique imports numpy.ma on
    first use: 50 ms of a first request)."""
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def _bucket_order_stats(g: I64, vb: ValueBuckets, n_groups: int, count: I64,
                        ranks: list[I64]) -> list[I64] | None:
    """For each array of ``ranks`` (one rank per group code ``g``; g unused
    when there is one group), the group's value of that rank in sorted
    order (0 for empty groups); None when there would be too many
    (group, bucket) pairs to count (then partition or sort).

    Count the values per (group, bucket): the bucket holding a rank, and the
    rank within it, follow from the cumulative counts; only the values of
    those few buckets are gathered, and each bucket's partitioned."""
    nb = vb.n
    if n_groups * nb > 1 << 22:
        return None
    gb = vb.b if n_groups == 1 else g * nb + vb.b
    cnt = np.bincount(gb, minlength=n_groups * nb).reshape(n_groups, nb)
    cum = np.cumsum(cnt, axis=1)
    gi = np.flatnonzero(count > 0)
    picks = []
    for r in ranks:
        rr = r[gi]
        bucket = np.count_nonzero(cum[gi] <= rr[:, None], axis=1)
        within = rr - (cum[gi, bucket] - cnt[gi, bucket])
        picks.append((gi * nb + bucket, within))
    pairs = _distinct(np.concatenate([pair for pair, _ in picks]))
    code = np.full(n_groups * nb, -1, dtype=np.int32)
    code[pairs] = np.arange(len(pairs), dtype=np.int32)
    cand = np.flatnonzero(code[gb] >= 0)
    cc = code[gb[cand]]
    # Radix sort of the few pair codes (stable): each pair's values in a row.
    order = np.argsort(cc.astype(np.int16) if len(pairs) < 2**15 else cc, kind="stable")
    cv = vb.w[cand[order]]
    off = np.concatenate([[0], np.cumsum(np.bincount(cc, minlength=len(pairs)))])
    wanted: list[list[int]] = [[] for _ in pairs]
    for pair, within in picks:
        for c, k in zip(np.searchsorted(pairs, pair).tolist(), within.tolist(), strict=True):
            wanted[c].append(k)
    for c, ks in enumerate(wanted):
        lo, hi = int(off[c]), int(off[c + 1])
        cv[lo:hi] = np.partition(cv[lo:hi], sorted(set(ks)))
    out = []
    for pair, within in picks:
        res = np.zeros(n_groups, np.int64)
        res[gi] = cv[off[np.searchsorted(pairs, pair)] + within] + vb.lo
        out.append(res)
    return out


def top_indices(values: Arr, k: int) -> I64:
    """Indices of the ``k`` largest values, largest first, ties by index: the
    same as ``np.argsort(-values, kind="stable")[:k]``, in linear time."""
    v = np.asarray(values)
    n = len(v)
    k = max(0, min(k, n))
    if k == 0:
        return np.zeros(0, np.int64)
    if 4 * k >= n:
        return np.argsort(-v, kind="stable")[:k].astype(np.int64)
    cut = np.partition(v, n - k)[n - k]  # the k-th largest
    above = np.flatnonzero(v > cut)
    cand = np.concatenate([above, np.flatnonzero(v == cut)[:k - len(above)]])
    return cand[np.lexsort((cand, -v[cand]))].astype(np.int64)


def group_percentiles(group: I64, values: Arr, n_groups: int,
                      qs: tuple[float, ...] = (0.5, 0.9, 0.99),
                      by_value: I64 | None = None,
                      buckets: ValueBuckets | None = None) -> dict[str, Any]:
    """Nearest-rank percentiles, max, count and sum of ``values`` per group
    code in [0, n_groups); groups without values get None. Linear time, no
    sort (:func:`_group_order_stats`): ``buckets``, the values'
    :func:`value_buckets` when the caller has them, are shared, and
    ``by_value``, an argsort of ``values``, is used when given."""
    v = np.asarray(values, dtype=np.int64)
    g = np.asarray(group, dtype=np.int64)
    count = np.bincount(g, minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    has = count > 0
    out: dict[str, Any] = {"count": count.tolist(),
                           "sum": np.bincount(g, weights=v if buckets is None else buckets.vf,
                                              minlength=n_groups)
                           .round().astype(np.int64).tolist()}
    # Rank (within the group's sorted values) of each percentile, then the max.
    ranks = [np.maximum(1, np.ceil(q * count).astype(np.int64)) - 1 for q in qs]
    ranks.append(count - 1)
    picked = _group_order_stats(g, v, n_groups, start, count, ranks, by_value, buckets)
    names = [f"p{round(q * 100):d}" for q in qs] + ["max"]
    for name, vals in zip(names, picked, strict=True):
        out[name] = [int(x) if h else None for x, h in zip(vals.tolist(), has.tolist(),
                                                           strict=True)]
    return out


def _group_order_stats(g: I64, v: I64, n_groups: int, start: I64, count: I64,
                       ranks: list[I64], by_value: I64 | None,
                       buckets: ValueBuckets | None) -> list[I64]:
    """For each array of ``ranks`` (one rank per group), the group's value of
    that rank in sorted order (anything for empty groups).

    By the values' buckets (:func:`_bucket_order_stats`); else values keyed
    by (group, value) into one int64 (the group in the high bits) and
    partitioned around the wanted positions; else a sort (keys that would
    not fit in 63 bits)."""
    has = count > 0
    if len(v) == 0:
        return [np.zeros(n_groups, np.int64) for _ in ranks]
    if by_value is None:
        got = _bucket_order_stats(g, buckets if buckets is not None else value_buckets(v),
                                  n_groups, count, ranks)
        if got is not None:
            return got
    lo = int(v.min())
    span_bits = (int(v.max()) - lo).bit_length()
    group_bits = max(n_groups - 1, 1).bit_length()
    if by_value is None and span_bits + group_bits <= 62:
        key = (g << span_bits) | (v - lo)
        pos = [np.clip(start + r, 0, len(v) - 1) for r in ranks]
        kth = _distinct(np.concatenate([p[has] for p in pos]))
        part = np.partition(key, kth)
        mask = (1 << span_bits) - 1
        return [(part[p] & mask) + lo for p in pos]
    if by_value is None:
        by_value = np.argsort(v, kind="stable")
    # Stable sort of the (small) group codes over the value order: values
    # sorted within each group. Codes below 2**15 sort by radix in O(n).
    small = np.int16 if n_groups < 2**15 else np.int64
    order = by_value[np.argsort(g.astype(small)[by_value], kind="stable")]
    vs = v[order]
    return [vs[np.clip(start + r, 0, len(vs) - 1)] for r in ranks]


def nearest_rank(sorted_values: Arr, q: float) -> int | None:
    """The nearest-rank q-quantile of sorted values, None when empty."""
    if len(sorted_values) == 0:
        return None
    k = max(1, int(np.ceil(q * len(sorted_values))))
    return int(sorted_values[k - 1])


def summary(values: Arr, sorted_values: Arr | None = None,
            buckets: ValueBuckets | None = None) -> dict[str, Any]:
    """count, sum, mean, p50, p90, p99 and max of ``values`` (ns); picked
    from ``sorted_values`` when given, else without sorting (``buckets``:
    the values' :func:`value_buckets`, when the caller has them)."""
    return summary_and_ranks(values, np.zeros(0, np.int64), sorted_values, buckets)[0]


def summary_and_ranks(values: Arr, ranks: I64, sorted_values: Arr | None = None,
                      buckets: ValueBuckets | None = None) -> tuple[dict[str, Any], I64]:
    """:func:`summary`, and the values of 0-based ``ranks`` in sorted order
    (picked together: one pass for both)."""
    v = np.asarray(values if sorted_values is None else sorted_values, dtype=np.int64)
    n = len(v)
    if n == 0:
        return ({"count": 0, "sum_ns": 0, "mean_ns": None, "p50_ns": None, "p90_ns": None,
                 "p99_ns": None, "max_ns": None}, np.zeros(0, np.int64))
    qs = (0.5, 0.9, 0.99)
    want = np.concatenate([[max(1, int(np.ceil(q * n))) - 1 for q in qs], [n - 1],
                           np.asarray(ranks, dtype=np.int64)]).astype(np.int64)
    stats = v[want] if sorted_values is not None else order_statistics(v, want, buckets)
    p50, p90, p99, mx = (int(x) for x in stats[:4].tolist())
    # The mean of any order of the values: exact while their sum stays below 2**53.
    return ({"count": n, "sum_ns": int(v.sum()), "mean_ns": float(v.mean()),
             "p50_ns": p50, "p90_ns": p90, "p99_ns": p99, "max_ns": mx},
            np.asarray(stats[4:], dtype=np.int64))
