"""The annotations' index of a table the loader stores in parts.

A big trace's regions and logs are derived and stored a part at a time
(:mod:`ingest.load.eventrows`), so their parts of the index
(:mod:`ingest.derive.annotation_index`) are made from the parts as they go
by: each part keeps only the few narrow columns the index needs (a region's
name code, duration, task and goroutine: about 26 bytes a row, not the
table's 60), and :meth:`finish` makes the index of them all, equal to the
one :func:`~ingest.derive.annotation_index.index_of_table` makes of the
whole table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.annotation_index import (
    LOGS_KEY,
    REGIONS_KEY,
    LogIndex,
    RegionIndex,
    _ints,
    _log_index,
    _Names,
    _region_index,
)

Arr = npt.NDArray[Any]


def _small(a: Arr) -> Arr:
    """Integer ids as int32 while they fit (joined parts widen again if one
    does not)."""
    if len(a) and a.dtype == np.int64 and -2**31 <= int(a.min()) and int(a.max()) < 2**31:
        return a.astype(np.int32)
    return a


def _join(parts: list[Arr], dtype: Any) -> Arr:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


class LogIndexParts:
    """The logs' index from the ``logs`` table's parts."""

    key = LOGS_KEY

    def __init__(self) -> None:
        self._names = _Names()
        self._cols: dict[str, list[Arr]] = {"code": [], "task": [], "null": [], "g": []}

    def add(self, cols: Mapping[str, Any]) -> None:
        """Take in one part's columns (``category``, ``task_id``, ``g``)."""
        task, null = _ints(cols["task_id"])
        for name, a in (("code", self._names.encode(cols["category"])),
                        ("task", _small(task)), ("null", null),
                        ("g", _small(_ints(cols["g"])[0]))):
            self._cols[name].append(a)

    def finish(self) -> LogIndex:
        c, self._cols = self._cols, {}
        code, ordered = self._names.finish(_join(c.pop("code"), np.int32))
        task = _join(c.pop("task"), np.int64).astype(np.int64)
        null = _join(c.pop("null"), bool)
        g = _join(c.pop("g"), np.int64).astype(np.int64)
        return _log_index(code, ordered, (task, null), g)


class RegionIndexParts:
    """The regions' index from the ``regions`` table's parts."""

    key = REGIONS_KEY

    def __init__(self) -> None:
        self._names = _Names()
        self._cols: dict[str, list[Arr]] = {
            "code": [], "timed": [], "dur": [], "task": [], "task_null": [], "g": []}
        self._g_type: Any = None

    def add(self, cols: Mapping[str, Any]) -> None:
        """Take in one part's columns (``name``, ``task_id``, ``g``,
        ``start_ts``, ``end_ts``)."""
        s, s_null = _ints(cols["start_ts"])
        e, e_null = _ints(cols["end_ts"])
        timed = ~s_null & ~e_null
        dur = e - s
        dur[~timed] = 0
        del s, s_null, e, e_null
        task, task_null = _ints(cols["task_id"])
        g = cols["g"]
        # Goroutine ids in the loader's own type (region_index_of keeps it).
        g = g if isinstance(g, np.ndarray) and g.dtype.kind == "i" else _ints(g)[0]
        self._g_type = g.dtype
        for name, a in (("code", self._names.encode(cols["name"])), ("timed", timed),
                        ("dur", dur), ("task", _small(task)), ("task_null", task_null),
                        ("g", g)):
            self._cols[name].append(a)

    def finish(self) -> RegionIndex:
        c, self._cols = self._cols, {}
        out: dict[str, Any] = {}
        out["code"], ordered = self._names.finish(_join(c.pop("code"), np.int32))
        out["timed"] = _join(c.pop("timed"), bool)
        out["dur"] = _join(c.pop("dur"), np.int64)
        out["task"] = _join(c.pop("task"), np.int64).astype(np.int64)
        out["task_null"] = _join(c.pop("task_null"), bool)
        out["g"] = _join(c.pop("g"), self._g_type or np.int64)
        return _region_index(out, ordered)
