"""Binning helpers shared by the analysis views: log-scaled duration
histograms, time bins chosen from a trace's span, and nearest-rank
percentiles per group. Pure numpy, no database."""

from __future__ import annotations

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
    idx = np.searchsorted(edges, ts, side="right") - 1
    return np.clip(idx, 0, len(edges) - 2).astype(np.int64)


def group_percentiles(group: I64, values: Arr, n_groups: int,
                      qs: tuple[float, ...] = (0.5, 0.9, 0.99),
                      by_value: I64 | None = None) -> dict[str, Any]:
    """Nearest-rank percentiles, max, count and sum of ``values`` per group
    code in [0, n_groups); groups without values get None. ``by_value``, the
    argsort of ``values`` when the caller has it, saves a sort."""
    v = np.asarray(values, dtype=np.int64)
    if by_value is None:
        by_value = np.argsort(v, kind="stable")
    # Stable sort of the (small) group codes over the value order: values
    # sorted within each group. Codes below 2**15 sort by radix in O(n).
    small = np.int16 if n_groups < 2**15 else np.int64
    gcode = np.asarray(group, dtype=small)[by_value]
    order = by_value[np.argsort(gcode, kind="stable")]
    gs = np.asarray(group, dtype=np.int64)[order]
    vs = v[order]
    count = np.bincount(gs, minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    has = count > 0
    out: dict[str, Any] = {"count": count.tolist(),
                           "sum": np.bincount(gs, weights=vs, minlength=n_groups)
                           .round().astype(np.int64).tolist()}

    def pick(pos: I64) -> list[int | None]:
        vals = vs[np.clip(pos, 0, max(len(vs) - 1, 0))] if len(vs) else np.zeros(len(pos))
        return [int(x) if h else None for x, h in zip(vals.tolist(), has.tolist(), strict=True)]

    for q in qs:
        k = np.maximum(1, np.ceil(q * count).astype(np.int64)) - 1
        out[f"p{round(q * 100):d}"] = pick(start + k)
    out["max"] = pick(start + count - 1)
    return out


def nearest_rank(sorted_values: Arr, q: float) -> int | None:
    """The nearest-rank q-quantile of sorted values, None when empty."""
    if len(sorted_values) == 0:
        return None
    k = max(1, int(np.ceil(q * len(sorted_values))))
    return int(sorted_values[k - 1])


def summary(values: Arr, sorted_values: Arr | None = None) -> dict[str, Any]:
    """count, sum, mean, p50, p90, p99 and max of ``values`` (ns)."""
    v = np.sort(np.asarray(values, dtype=np.int64)) if sorted_values is None \
        else np.asarray(sorted_values, dtype=np.int64)
    n = len(v)
    return {"count": n, "sum_ns": int(v.sum()) if n else 0,
            "mean_ns": float(v.mean()) if n else None,
            "p50_ns": nearest_rank(v, 0.5), "p90_ns": nearest_rank(v, 0.9),
            "p99_ns": nearest_rank(v, 0.99), "max_ns": int(v[-1]) if n else None}
