"""Exact order statistics per group without sorting, fed a chunk at a time.

Values are cut into narrow buckets whose order is the values' order (a
value's bucket never exceeds a larger value's): the bits of ``value - lo`` as
a float, exponent and top SUB_BITS mantissa bits, so 2**SUB_BITS buckets per
power of two. A first pass counts the values per (group, bucket); the bucket
holding each wanted rank, and the rank within it, follow from the cumulative
counts; a second pass keeps only the values of those few buckets, and each
bucket's values are partitioned. Linear time, and memory of a chunk's size:
on the 200 MB trace a whole-array pass allocated hundreds of MB, whose first
touch in a new process cost more than the arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.cache import Steps

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Arr = npt.NDArray[Any]

#: Buckets per power of two (each under 1.6% wide).
SUB_BITS = 6
#: (group, bucket) counters allocated at most; more groups take another path.
MAX_CELLS = 1 << 22
#: Values per chunk of the callers' passes.
CHUNK = 1 << 20


def buckets_of(w: I64) -> I64:
    """The bucket of each non-negative ``w`` (ints): float conversion rounds
    monotonically, and a non-negative float's bits order as its value."""
    b = np.asarray(w, dtype=np.float64).view(np.int64) >> (52 - SUB_BITS)
    b -= (1023 << SUB_BITS) - 1  # 1 -> bucket 1; 0 -> below, clipped to 0
    np.maximum(b, 0, out=b)
    return b


def chunks(n: int, size: int | None = None) -> list[slice]:
    """``range(n)`` cut into slices of ``size`` (default CHUNK)."""
    step = size or CHUNK
    return [slice(a, min(a + step, n)) for a in range(0, n, step)] or [slice(0, 0)]


def lane_chunks(off: I64, n: int, size: int) -> list[tuple[int, int]]:
    """Rows 0..n in chunks of about ``size``, cut between lanes (``off``:
    each lane's first row, then n): no lane is split."""
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < n:
        hi = int(off[min(int(np.searchsorted(off, lo + size)), len(off) - 1)])
        out.append((lo, max(hi, min(lo + size, n))))
        lo = out[-1][1]
    return out


class GroupQuantiles:
    """Values of ``n_groups`` groups (codes 0..n-1), all in [lo, lo + span]:
    feed every chunk to :meth:`count`, then :meth:`plan` the ranks wanted,
    feed every chunk again to :meth:`collect`, then read :meth:`picks`."""

    def __init__(self, n_groups: int, lo: int, span: int) -> None:
        self.n = n_groups
        self.lo = lo
        self.nb = int(buckets_of(np.array([max(span, 0)], np.int64))[0]) + 1
        self.cells = np.zeros(n_groups * self.nb, np.int64)
        self.sums = np.zeros(n_groups, np.float64)
        self._code = np.zeros(0, np.int32)
        self._pairs = np.zeros(0, np.int64)
        self._picks: list[tuple[I64, I64, I64]] = []
        self._cand: list[tuple[npt.NDArray[np.int32], I64]] = []

    def grow(self, n_groups: int) -> None:
        """Room for group codes up to ``n_groups - 1`` (before :meth:`plan`)."""
        if n_groups > self.n:
            more = n_groups - self.n
            self.cells = np.concatenate([self.cells, np.zeros(more * self.nb, np.int64)])
            self.sums = np.concatenate([self.sums, np.zeros(more, np.float64)])
            self.n = n_groups

    @staticmethod
    def fits(n_groups: int, span: int) -> bool:
        """Whether the counters of ``n_groups`` groups over ``span`` stay small."""
        nb = int(buckets_of(np.array([max(span, 0)], np.int64))[0]) + 1
        return n_groups * nb <= MAX_CELLS

    def _cells_of(self, g: I64 | None, b: I64) -> I64:
        if g is None or self.n == 1:
            return b
        return np.asarray(g, dtype=np.int64) * self.nb + b

    def count(self, g: I64 | None, w: I64, b: I64, weights: F64) -> None:
        """Pass 1: a chunk's group codes (None: one group), values minus lo,
        their buckets and the values as floats (summed per group)."""
        self.cells += np.bincount(self._cells_of(g, b), minlength=len(self.cells))
        if g is None or self.n == 1:
            # Integer-valued floats: exact in any order while below 2**53.
            self.sums[0] += float(np.sum(weights))
        else:
            self.sums += np.bincount(g, weights=weights, minlength=self.n)

    @property
    def counts(self) -> I64:
        """Values per group."""
        return np.asarray(self.cells.reshape(self.n, self.nb).sum(axis=1), dtype=np.int64)

    def plan(self, ranks: list[I64]) -> None:
        """The ranks (0-based, one per group, in each group's sorted order)
        whose values :meth:`picks` returns; empty groups are skipped."""
        cells = self.cells.reshape(self.n, self.nb)
        cum = np.cumsum(cells, axis=1)
        gi = np.flatnonzero(cum[:, -1] > 0) if self.nb else np.zeros(0, np.int64)
        self._picks = []
        for r in ranks:
            rr = np.asarray(r, dtype=np.int64)[gi]
            bucket = np.count_nonzero(cum[gi] <= rr[:, None], axis=1)
            within = rr - (cum[gi, bucket] - cells[gi, bucket])
            self._picks.append((gi, gi * self.nb + bucket, within))
        pairs = np.concatenate([p for _, p, _ in self._picks]) if self._picks else \
            np.zeros(0, np.int64)
        self._pairs = distinct(pairs)
        self._code = np.full(len(self.cells), -1, dtype=np.int32)
        self._code[self._pairs] = np.arange(len(self._pairs), dtype=np.int32)
        self._cand = []

    def collect(self, g: I64 | None, w: I64, b: I64) -> None:
        """Pass 2: the same chunk as in :meth:`count`; keeps the values of the
        planned buckets."""
        c = self._code[self._cells_of(g, b)]
        at = np.flatnonzero(c >= 0)
        self._cand.append((c[at], np.asarray(w)[at]))

    def picks(self) -> list[I64]:
        """Per planned rank array, each group's value of that rank (0 for
        empty groups)."""
        cc = np.concatenate([c for c, _ in self._cand]) if self._cand else \
            np.zeros(0, np.int32)
        cw = np.concatenate([w for _, w in self._cand]) if self._cand else \
            np.zeros(0, np.int64)
        self._cand = []
        # A stable radix sort of the few pair codes: each pair's values in a row.
        order = np.argsort(cc.astype(np.int16) if len(self._pairs) < 2**15 else cc,
                           kind="stable")
        cw = cw[order]
        off = np.concatenate([[0], np.cumsum(np.bincount(cc, minlength=len(self._pairs)))])
        wanted: list[set[int]] = [set() for _ in self._pairs]
        for _, pair, within in self._picks:
            for c, k in zip(np.searchsorted(self._pairs, pair).tolist(), within.tolist(),
                            strict=True):
                wanted[c].add(k)
        value: dict[tuple[int, int], int] = {}
        for c, ks in enumerate(wanted):
            part = cw[int(off[c]):int(off[c + 1])]
            if ks:
                value.update(((c, k), v) for k, v in zip(sorted(ks), _select(part, sorted(ks)),
                                                        strict=True))
        out = []
        for gi, pair, within in self._picks:
            res = np.zeros(self.n, np.int64)
            res[gi] = [value[(c, k)] for c, k in zip(np.searchsorted(self._pairs, pair).tolist(),
                                                     within.tolist(), strict=True)]
            out.append(res + self.lo)
        return out


def _select(v: I64, ks: list[int]) -> list[int]:
    """The values of 0-based ranks ``ks`` (ascending) of ``v`` in sorted order.

    A bucket's values span a narrow range, often a handful of distinct
    values, on which numpy's partition can take quadratic steps (286,920
    latencies of two values: 45 ms): counted instead when the range is small."""
    lo, hi = int(v.min()), int(v.max())
    if hi - lo < 1 << 16:
        cum = np.cumsum(np.bincount(v - lo, minlength=hi - lo + 1))
        return (np.searchsorted(cum, ks, side="right") + lo).tolist()  # type: ignore[no-any-return]
    return [int(x) for x in np.partition(v, ks)[ks].tolist()]


def distinct(a: I64) -> I64:
    """The distinct values of ``a``, ascending (np.unique imports numpy.ma on
    its first call: 50 ms of a server's first request)."""
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def one_pass(g: I64 | None, values: Arr, n_groups: int, ranks: Callable[[I64], list[I64]]
             ) -> tuple[list[I64], I64, F64] | None:
    """:class:`GroupQuantiles` over in-memory ``values`` (chunked): the
    picks of ``ranks(counts per group)``, the counts and the float sums per
    group; None when the groups' counters would be too many."""
    v = np.asarray(values, dtype=np.int64)
    if len(v) == 0:
        return None
    lo = int(v.min())
    span = int(v.max()) - lo
    if not GroupQuantiles.fits(n_groups, span):
        return None
    q = GroupQuantiles(n_groups, lo, span)
    parts = chunks(len(v))
    for s in parts:
        w = v[s] - lo
        q.count(None if g is None else g[s], w, buckets_of(w), v[s].astype(np.float64))
    q.plan(ranks(q.counts))
    for s in parts:
        w = v[s] - lo
        q.collect(None if g is None else g[s], w, buckets_of(w))
    return q.picks(), q.counts, q.sums


def step_parts(steps: Steps, size: int) -> Iterator[tuple[int, I64]]:
    """(first index, values) of each ``size`` values of ``steps`` in order:
    :meth:`ingest.derive.cache.Steps.values` a part at a time (whole, 8
    bytes a value: 190 MB of the 1 GB trace's samples)."""
    top = int(np.iinfo(steps.step.dtype).max) if len(steps.step) else 0
    prev, big = steps.first, 0  # the value before the part, the big steps used
    for a in range(0, steps.n, size):
        b = min(steps.n, a + size)
        d = np.empty(b - a, np.int64)
        lo = max(a, 1)  # step i - 1 leads to value i; value 0 is ``first``
        d[lo - a:] = steps.step[lo - 1:b - 1]
        if a == 0:
            d[0] = steps.first
        else:
            d[0] += prev
        if len(steps.big):
            out = np.flatnonzero(steps.step[lo - 1:b - 1] == top)
            d[lo - a + out] = steps.big[big:big + len(out)]
            big += len(out)
            if a and len(out) and out[0] == 0:
                d[0] += prev
        np.cumsum(d, out=d)
        prev = int(d[-1])
        yield a, d
