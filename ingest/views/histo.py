"""Binning helpers shared by the analysis views: log-scaled duration
histograms, time bins chosen from a trace's span, and nearest-rank
percentiles per group. Pure numpy, no database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ingest.views.quantiles import distinct, one_pass

T = TypeVar("T")


class Releasable(Protocol):
    """Frames whose mapped pages can be handed back."""

    def release(self) -> None: ...


I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Arr = npt.NDArray[Any]

#: Log histograms use this many bins per power of ten.
BINS_PER_DECADE = 4
#: Time bins aim at about this many bins over the span.
TARGET_TIME_BINS = 100
_NICE = (1, 2, 5)
#: The percentiles of group_percentiles and summary.
QS = (0.5, 0.9, 0.99)


def released(frames: Releasable, build: Callable[[], T]) -> T:
    """``build()``, then the pages it mapped of ``frames`` handed back
    (:meth:`ingest.derive.frames.TraceFrames.release`): an analysis view's
    build reads whole columns, which a worker would otherwise keep."""
    try:
        return build()
    finally:
        frames.release()


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
    lo, edges = log_bins(pos.min(), pos.max())
    return log_result(edges, log_counts(pos, lo, len(edges) - 1), zero)


def log_bins(pos_min: Any, pos_max: Any) -> tuple[int, F64]:
    """(exponent of the first bin, edges) of :func:`log_histogram` for
    positive values from ``pos_min`` to ``pos_max`` (numpy ints)."""
    lo = int(np.floor(np.log10(pos_min) * BINS_PER_DECADE))
    hi = int(np.floor(np.log10(pos_max) * BINS_PER_DECADE)) + 1
    k = np.arange(lo, hi + 1)
    return lo, np.asarray(10.0 ** (k / BINS_PER_DECADE), dtype=np.float64)


def log_counts(pos: I64, lo: int, n_bins: int) -> I64:
    """Counts of positive values ``pos`` in :func:`log_bins`' bins."""
    # Bin by integer exponent, not by float edges, so an exact power of ten
    # always lands in the bin it starts.
    idx = np.floor(np.log10(pos) * BINS_PER_DECADE + 1e-9).astype(np.int64) - lo
    np.clip(idx, 0, n_bins - 1, out=idx)
    return np.bincount(idx, minlength=n_bins)


def log_result(edges: F64, counts: I64, zero: int) -> dict[str, Any]:
    """:func:`log_histogram`'s answer from its edges, counts and zeros."""
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
        return uniq.astype(np.int64), inv.reshape(-1).astype(np.int64, copy=False)
    present = np.bincount(v - lo, minlength=hi - lo + 1) > 0
    code_of = np.cumsum(present, dtype=np.int64) - 1
    return (np.flatnonzero(present).astype(np.int64) + lo,
            code_of[v - lo])  # int64 already: no copy (of 16 M codes on the 1 GB trace)


def order_statistics(values: Arr, ranks: I64) -> I64:
    """The values of 0-based ``ranks`` in sorted order, without sorting (by
    value buckets, :mod:`ingest.views.quantiles`; else one partition)."""
    v = np.asarray(values)
    r = np.asarray(ranks, dtype=np.int64)
    if len(r) == 0:
        return np.zeros(0, np.int64)
    got = one_pass(None, v, 1, lambda _: [r[i:i + 1] for i in range(len(r))])
    if got is not None:
        return np.concatenate(got[0])
    return np.asarray(np.partition(v, distinct(r))[r], dtype=np.int64)


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
                      qs: tuple[float, ...] = QS,
                      by_value: I64 | None = None) -> dict[str, Any]:
    """Nearest-rank percentiles, max, count and sum of ``values`` per group
    code in [0, n_groups); groups without values get None. Linear time, no
    sort (:mod:`ingest.views.quantiles`); ``by_value``, an argsort of
    ``values``, is used when given."""
    v = np.asarray(values, dtype=np.int64)
    g = np.asarray(group, dtype=np.int64)
    if by_value is None:
        got = one_pass(g, v, n_groups, lambda count: percentile_ranks(count, qs))
        if got is not None:
            return percentile_dict(got[1], got[2], got[0], qs)
    count = np.bincount(g, minlength=n_groups)
    sums = np.asarray(np.bincount(g, weights=v, minlength=n_groups), dtype=np.float64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    picks = _group_order_stats(g, v, n_groups, start, count, percentile_ranks(count, qs),
                               by_value)
    return percentile_dict(count, sums, picks, qs)


def percentile_ranks(count: I64, qs: tuple[float, ...] = QS) -> list[I64]:
    """Per group of ``count`` values: the 0-based rank of each nearest-rank
    percentile of ``qs``, then of the max."""
    ranks = [np.maximum(1, np.ceil(q * count).astype(np.int64)) - 1 for q in qs]
    ranks.append(np.asarray(count, dtype=np.int64) - 1)
    return ranks


def percentile_dict(count: I64, sums: F64, picks: list[I64],
                    qs: tuple[float, ...] = QS) -> dict[str, Any]:
    """:func:`group_percentiles`' answer: count, sum, the percentiles of
    ``qs`` and the max (``picks``, per :func:`percentile_ranks`)."""
    has = (np.asarray(count) > 0).tolist()
    out: dict[str, Any] = {"count": np.asarray(count).tolist(),
                           "sum": np.asarray(sums).round().astype(np.int64).tolist()}
    names = [f"p{round(q * 100):d}" for q in qs] + ["max"]
    for name, vals in zip(names, picks, strict=True):
        out[name] = [int(x) if h else None for x, h in zip(vals.tolist(), has, strict=True)]
    return out


def _group_order_stats(g: I64, v: I64, n_groups: int, start: I64, count: I64,
                       ranks: list[I64], by_value: I64 | None) -> list[I64]:
    """For each array of ``ranks`` (one rank per group), the group's value of
    that rank in sorted order (anything for empty groups): values keyed by
    (group, value) into one int64 (the group in the high bits) and
    partitioned around the wanted positions; a sort when given ``by_value``
    or when the keys would not fit in 63 bits."""
    has = count > 0
    if len(v) == 0:
        return [np.zeros(n_groups, np.int64) for _ in ranks]
    lo = int(v.min())
    span_bits = (int(v.max()) - lo).bit_length()
    group_bits = max(n_groups - 1, 1).bit_length()
    if by_value is None and span_bits + group_bits <= 62:
        key = (g << span_bits) | (v - lo)
        pos = [np.clip(start + r, 0, len(v) - 1) for r in ranks]
        kth = distinct(np.concatenate([p[has] for p in pos]))
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


def summary(values: Arr, sorted_values: Arr | None = None) -> dict[str, Any]:
    """count, sum, mean, p50, p90, p99 and max of ``values`` (ns); picked
    from ``sorted_values`` when given, else without sorting."""
    v = np.asarray(values if sorted_values is None else sorted_values, dtype=np.int64)
    n = len(v)
    if n == 0:
        return summary_of(0, 0, 0.0, [])
    ranks = np.array([r[0] for r in percentile_ranks(np.array([n]))], np.int64)
    stats = v[ranks] if sorted_values is not None else order_statistics(v, ranks)
    # The mean of any order of the values: exact while their sum stays below 2**53.
    return summary_of(n, int(v.sum()), float(v.mean()), stats.tolist())


def summary_of(n: int, total: int, mean: float, picks: list[int]) -> dict[str, Any]:
    """:func:`summary`'s answer from the count, sum, mean and the picks of
    :func:`percentile_ranks` (p50, p90, p99, max)."""
    if n == 0:
        return {"count": 0, "sum_ns": 0, "mean_ns": None, "p50_ns": None, "p90_ns": None,
                "p99_ns": None, "max_ns": None}
    p50, p90, p99, mx = (int(x) for x in picks)
    return {"count": n, "sum_ns": total, "mean_ns": mean,
            "p50_ns": p50, "p90_ns": p90, "p99_ns": p99, "max_ns": mx}
