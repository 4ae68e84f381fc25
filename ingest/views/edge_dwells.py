"""A state graph's edges from its transitions: per edge (a source and a
target state, coded ``source * len(names) + target``) the number of
transitions and the mean, median, 99th percentile and maximum of the known
dwell times (nearest rank), as :mod:`ingest.views.states` defines them.
Gathered part by part (:class:`EdgeDwells`), so that a whole-trace graph
needs no whole-trace temporaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.views.states import Edge

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]


def _rank(n: int, q: float) -> int:
    # nearest_rank's rank (1-based), to pick it out of unsorted values.
    return max(1, int(np.ceil(q * n)))


def edges_of(code: Arr, dwell: I64, names: list[str]) -> list[Edge]:
    """Edges from per-transition edge codes (``source * len(names) + target``)
    and dwell (-1: unknown)."""
    acc = EdgeDwells(names)
    acc.add(code, dwell)
    return acc.edges()


class EdgeDwells:
    """Transitions gathered part by part: per edge code, the count and the
    known dwell times, made into edges at the end (:meth:`edges`).

    The codes are a few hundred small integers: one stable radix sort of a
    part's codes groups its transitions (a sort of the dwell times, as
    lexsort made, took seconds on 20 M transitions), and each edge's
    percentiles are picked out by partitioning its own dwell times, joined
    one edge at a time.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.count: dict[int, int] = {}
        self.dwell: dict[int, list[I64]] = {}

    def add(self, code: Arr, dwell: I64) -> None:
        """Transitions with edge codes ``code`` and dwell ``dwell`` (-1 unknown)."""
        if not len(code):
            return
        width = len(self.names)
        order = np.argsort(code.astype(np.int16 if width * width < 2 ** 15 else np.int64,
                                       copy=False), kind="stable")
        code_s = code[order]
        bounds = np.flatnonzero(np.r_[True, code_s[1:] != code_s[:-1], True])
        heads = code_s[bounds[:-1]].tolist()
        del code_s
        dwell_s = dwell[order]
        del order
        for c, a, b in zip(heads, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            d = dwell_s[a:b]
            c = int(c)
            self.count[c] = self.count.get(c, 0) + b - a
            self.dwell.setdefault(c, []).append(d[d >= 0])

    def edges(self) -> list[Edge]:
        """The edges, most frequent first (emptying the gathered dwell times)."""
        width = len(self.names)
        edges: list[Edge] = []
        for c in sorted(self.count):
            parts = self.dwell.pop(c)
            d = parts[0] if len(parts) == 1 else np.concatenate(parts)
            del parts
            s, t = divmod(c, width)
            n = len(d)
            if not n:
                edges.append(Edge(self.names[s], self.names[t], self.count[c], 0,
                                  None, None, None, None))
                continue
            k50, k99 = _rank(n, 0.5) - 1, _rank(n, 0.99) - 1
            d.partition(sorted({k50, k99, n - 1}))
            # The exact integer total over the count, as state_edges has it.
            edges.append(Edge(self.names[s], self.names[t], self.count[c], n,
                              int(d.sum(dtype=np.int64)) / n,
                              int(d[k50]), int(d[k99]), int(d[n - 1])))
            del d
        edges.sort(key=lambda e: (-e.count, e.source, e.target))
        return edges
