"""Counters reduced to a bounded number of points, as a waveform viewer does.

A counter (heap bytes, heap goal, GOMAXPROCS, ...) is a *step function*: its
value at time t is that of the last sample at or before t. To draw it over a
window ``[t1, t2)`` at any trace size, :func:`reduce_counter` splits the window
into at most ``buckets`` equal time buckets and keeps, per bucket that holds a
sample:

- ``ts``: the timestamp of the bucket's first sample,
- ``min`` and ``max``: the smallest and largest value the step function takes
  inside the bucket. That includes the value *carried in* from before the
  bucket (the last sample before it), which holds from the bucket's start to
  its first sample: a bucket whose one sample steps from 5 to 100 has min 5 and
  max 100. (A first sample exactly at the bucket's start leaves nothing
  carried in.)
- ``last``: the value at the bucket's end (its last sample's).

Buckets without a sample are left out: the function keeps the previous
bucket's ``last`` through them. So between the points ``i`` and ``i + 1`` the
step function stays within ``[min[i], max[i]]`` (the band drawn from ``ts[i]``
to ``ts[i + 1]`` contains it) and equals ``last[i]`` just before ``ts[i + 1]``;
a one-sample spike survives as its bucket's ``max`` (or ``min``) at any zoom.

The value carried into the window itself (the last sample before ``t1``)
becomes a sample at ``t1``, so a zoomed window starts with the counter's value
there. A window with at most ``buckets`` samples (that one included) passes
through unchanged: one point per sample, ``min == max == last == value``.

Pure numpy (``minimum.reduceat`` / ``maximum.reduceat`` over the buckets'
runs); no per-sample Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

#: Points per counter and view: a few per pixel of a wide figure.
DEFAULT_BUCKETS = 2000
MAX_BUCKETS = 10_000


@dataclass(frozen=True)
class Reduced:
    """A counter over a window: one entry per kept bucket (or per sample when
    ``reduced`` is False); ``samples`` counts the raw samples in the window."""

    ts: I64
    min: I64
    max: I64
    last: I64
    samples: int
    reduced: bool

    def to_json(self) -> dict[str, Any]:
        """``ts``, ``value`` (the last value: what a plain step line draws),
        ``min``, ``max``, ``samples``, ``reduced``."""
        return {"ts": self.ts.tolist(), "value": self.last.tolist(),
                "min": self.min.tolist(), "max": self.max.tolist(),
                "samples": self.samples, "reduced": self.reduced}


def bucket_edges(t1: int, t2: int, buckets: int) -> I64:
    """At most ``buckets`` equal integer-ns buckets over ``[t1, t2)`` (edges)."""
    buckets = max(1, min(int(buckets), MAX_BUCKETS))
    if t2 <= t1:
        t2 = t1 + 1
    return np.unique(np.linspace(t1, t2, buckets + 1).round().astype(np.int64))


def reduce_counter(ts: npt.ArrayLike, values: npt.ArrayLike, t1: int, t2: int,
                   buckets: int = DEFAULT_BUCKETS) -> Reduced:
    """The step counter ``values`` sampled at sorted ``ts``, over ``[t1, t2)``,
    reduced to at most ``buckets`` points (see the module's doc)."""
    buckets = max(1, min(int(buckets), MAX_BUCKETS))
    t = np.asarray(ts, dtype=np.int64)
    v = np.asarray(values, dtype=np.int64)
    if t.shape != v.shape:
        raise ValueError(f"ts and values differ in length: {t.shape} != {v.shape}")
    lo = int(np.searchsorted(t, t1, "left"))
    hi = int(np.searchsorted(t, t2, "left"))
    tw, vw = t[lo:hi], v[lo:hi]
    n = len(tw)
    if lo > 0 and (n == 0 or tw[0] > t1):  # the value carried into the window
        tw = np.concatenate([np.array([t1], np.int64), tw])
        vw = np.concatenate([v[lo - 1:lo], vw])
    if len(tw) <= buckets:
        return Reduced(tw, vw, vw.copy(), vw.copy(), n, False)
    edges = bucket_edges(t1, t2, buckets)
    b = np.searchsorted(edges, tw, "right") - 1  # bucket of each sample
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    ends = np.concatenate([starts[1:], [len(tw)]])
    mins = np.minimum.reduceat(vw, starts)
    maxs = np.maximum.reduceat(vw, starts)
    # Carried in: the sample before a bucket's first holds from the bucket's
    # start, unless the first sample is exactly at the start.
    carry = (starts > 0) & (tw[starts] > edges[b[starts]])
    prev = vw[np.maximum(starts - 1, 0)]
    mins = np.where(carry, np.minimum(mins, prev), mins)
    maxs = np.where(carry, np.maximum(maxs, prev), maxs)
    return Reduced(tw[starts], mins, maxs, vw[ends - 1], n, True)
