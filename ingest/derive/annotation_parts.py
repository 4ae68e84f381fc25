"""The annotations' index of a table the loader stores in parts.

A big trace's regions and logs are derived and stored a part at a time
(:mod:`ingest.load.eventrows`), so their parts of the index
(:mod:`ingest.derive.annotation_index`) are made from the parts as they go
by: each part keeps only what the index counts (its names' counts, its timed
durations by name, its distinct (name, goroutine) and (task, goroutine)
pairs), and ``finish`` makes the index of them all, equal to the one
:func:`~ingest.derive.annotation_index.index_of_table` makes of the whole
table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.annotation_index import (
    LOGS_KEY,
    REGIONS_KEY,
    LogIndex,
    NameStats,
    RegionIndex,
    _ints,
    _Names,
    _narrow,
    _runs,
    _sorted_pairs,
    duration_stats,
    goroutines_per_name,
    pair_starts,
    per_task_of_pairs,
    task_pairs,
)

Arr = npt.NDArray[Any]


def _merged_pairs(parts: list[tuple[Arr, Arr, Arr]]) -> tuple[Arr, Arr, Arr]:
    """Pairs of several parts as one sorted distinct set, their rows summed."""
    t, g, n = (np.concatenate([np.zeros(0, np.int64), *(p[i] for p in parts)])
               for i in (0, 1, 2))
    order = np.lexsort((g, t))
    t, g, n = t[order], g[order], n[order]
    at = pair_starts(t, g)
    rows = np.add.reduceat(n, at) if len(at) else np.zeros(0, np.int64)
    return t[at], g[at], rows


class _Codes:
    """Names coded across parts (:class:`_Names`) and counted per raw code."""

    def __init__(self) -> None:
        self.names = _Names()
        self.count = np.zeros(0, np.int64)

    def encode(self, col: Any) -> Arr:
        raw = self.names.encode(col)
        k = len(self.names.names)
        if len(self.count) < k:
            self.count = np.r_[self.count, np.zeros(k - len(self.count), np.int64)]
        self.count += np.bincount(raw, minlength=k)
        return raw

    def finish(self) -> tuple[Arr, list[str], Arr]:
        """(raw code -> final code, the names in final order, the counts
        by final code)."""
        k = len(self.names.names)
        lut, ordered = self.names.finish(np.arange(k, dtype=np.int32))
        count = np.zeros(k, np.int64)
        count[lut] = self.count
        return lut, ordered, count


class LogIndexParts:
    """The logs' index from the ``logs`` table's parts: each part keeps its
    categories' counts and its distinct (task, goroutine) pairs."""

    key = LOGS_KEY

    def __init__(self) -> None:
        self._codes = _Codes()
        self._pairs: list[tuple[Arr, Arr, Arr]] = []

    def add(self, cols: Mapping[str, Any]) -> None:
        """Take in one part's columns (``category``, ``task_id``, ``g``)."""
        self._codes.encode(cols["category"])
        task, null = _ints(cols["task_id"])
        self._pairs.append(task_pairs(task, null, _ints(cols["g"])[0]))

    def finish(self) -> LogIndex:
        _, ordered, count = self._codes.finish()
        pairs, self._pairs = self._pairs, []
        return LogIndex(categories=ordered, count=_narrow(count),
                        tasks=per_task_of_pairs(*_merged_pairs(pairs)))


class RegionIndexParts:
    """The regions' index from the ``regions`` table's parts: each part keeps
    its names' counts, its timed rows' durations by name, and its distinct
    (name, goroutine) and (task, goroutine) pairs: about 8 bytes a timed row
    beside the pairs, not the table's 60."""

    key = REGIONS_KEY

    def __init__(self) -> None:
        self._codes = _Codes()
        self._durations: dict[int, list[Arr]] = {}
        self._name_g: list[tuple[Arr, Arr]] = []
        self._task_g: list[tuple[Arr, Arr, Arr]] = []

    def add(self, cols: Mapping[str, Any]) -> None:
        """Take in one part's columns (``name``, ``task_id``, ``g``,
        ``start_ts``, ``end_ts``)."""
        raw = self._codes.encode(cols["name"])
        s, s_null = _ints(cols["start_ts"])
        e, e_null = _ints(cols["end_ts"])
        timed = ~s_null & ~e_null
        dur = (e - s)[timed]
        t_raw = raw[timed]
        del s, s_null, e, e_null, timed
        # Codes of 16 bits are radix-sorted (5x faster than int32's merge sort).
        narrow = len(self._codes.names.names) < 2**15
        by_name = np.argsort(t_raw.astype(np.int16) if narrow else t_raw, kind="stable")
        t_raw, dur = t_raw[by_name], dur[by_name]
        starts = _runs(t_raw)
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(t_raw)], strict=True):
            self._durations.setdefault(int(t_raw[lo]), []).append(dur[lo:hi])
        del dur, t_raw
        g = _ints(cols["g"])[0]
        nc, ng = _sorted_pairs(raw, g)
        at = pair_starts(nc, ng)
        self._name_g.append((nc[at], ng[at]))
        del nc, ng, at
        task, task_null = _ints(cols["task_id"])
        self._task_g.append(task_pairs(task, task_null, g))

    def finish(self) -> RegionIndex:
        lut, ordered, count = self._codes.finish()
        k = len(ordered)
        durations, self._durations = self._durations, {}
        n_timed = np.zeros(k, np.int64)
        for raw, parts in durations.items():
            n_timed[lut[raw]] = sum(len(a) for a in parts)

        def groups() -> Iterator[tuple[int, Arr]]:
            # One name's durations joined and sorted at a time.
            for raw in list(durations):
                a = np.concatenate(durations.pop(raw))
                a.sort()
                yield int(lut[raw]), a

        stats = duration_stats(k, groups())
        name_g, self._name_g = self._name_g, []
        nc = np.concatenate([np.zeros(0, np.int64), *(lut[c] for c, _ in name_g)])
        ng = np.concatenate([np.zeros(0, np.int64), *(g for _, g in name_g)])
        del name_g
        nc, ng = _sorted_pairs(nc, ng)
        task_g, self._task_g = self._task_g, []
        return RegionIndex(
            stats=NameStats(names=ordered, count=_narrow(count), timed=_narrow(n_timed),
                            goroutines=goroutines_per_name(nc, ng, k), **stats),
            tasks=per_task_of_pairs(*_merged_pairs(task_g)))
