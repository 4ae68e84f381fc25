"""Caches the loader makes from a derived table's columns as they go by.

Each table (or part of one) is in memory once, while it is stored; a view
that needs a layout of it (the timeline's GC bands, the overview's counters,
the annotations' index) would otherwise read it back from the database on its
first request (seconds on a 200 MB trace). A table that comes in parts has
its caches made of the parts as they go by, finished at its last one. What
is made here is staged with the frames being written
(``FrameWriter.add_derived``) and moves with them at the commit. Only
caches: a failure is logged and the view builds it later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ingest.columns import Nullable
from ingest.derive.frame_writer import FrameWriter
from ingest.derive.lanesets import LaneSetKey
from ingest.timings import Timings

log = logging.getLogger(__name__)


class _Whole:
    """A cache made of a table that comes whole (one part), made at once."""

    def __init__(self, build: Callable[[dict[str, Any], dict[str, Any]],
                                       tuple[str, Any] | None],
                 trace_row: dict[str, Any]) -> None:
        self._build = build
        self._trace_row = trace_row
        self._made: tuple[str, Any] | None = None
        self._parts = 0

    def add(self, cols: dict[str, Any]) -> None:
        self._parts += 1
        if self._parts > 1:
            raise ValueError("this cache's table comes whole")
        self._made = self._build(cols, self._trace_row)

    def finish(self) -> tuple[str, Any] | None:
        made, self._made = self._made, None
        return made


class _Parts:
    """A cache made of a table's parts (ingest.derive's ``...Parts``)."""

    def __init__(self, parts: Any) -> None:
        self._parts = parts

    def add(self, cols: dict[str, Any]) -> None:
        self._parts.add(cols)

    def finish(self) -> tuple[str, Any] | None:
        return self._parts.key, self._parts.finish()


def _range_lanes(cols: dict[str, Any], trace_row: dict[str, Any]) -> tuple[str, Any]:
    from ingest.derive.range_lanes import ranges_of

    value = ranges_of(cols["id"], list(cols["kind"]), _with_none(cols["start_ts"]),
                      _with_none(cols["end_ts"]), cols["g"], int(trace_row["first_ts"] or 0),
                      int(trace_row["last_ts"] or 0))
    return LaneSetKey.RANGES, value


def _tasks_index(cols: dict[str, Any], _trace_row: dict[str, Any]) -> tuple[str, Any] | None:
    from ingest.derive.annotation_index import index_of_table

    return index_of_table("tasks", cols)


def _counters() -> _Parts:
    from ingest.derive.overview_counters import CounterParts

    return _Parts(CounterParts())


def _regions_index() -> _Parts:
    from ingest.derive.annotation_parts import RegionIndexParts

    return _Parts(RegionIndexParts())


def _logs_index() -> _Parts:
    from ingest.derive.annotation_parts import LogIndexParts

    return _Parts(LogIndexParts())


#: What is made of each table, in the order it is made: a new maker per load.
MAKERS: dict[str, tuple[Callable[[dict[str, Any]], _Whole | _Parts], ...]] = {
    "ranges": (lambda row: _Whole(_range_lanes, row),),
    "metrics": (lambda _row: _counters(),),
    "tasks": (lambda row: _Whole(_tasks_index, row),),
    "regions": (lambda _row: _regions_index(),),
    "logs": (lambda _row: _logs_index(),),
}


class StagedCaches:
    """The caches of the tables as they go by (a table may come in parts, one
    after another): each is made when its table's last part has gone by
    (the next table begins, or :meth:`finish`) and staged with the frames."""

    def __init__(self, frames: FrameWriter, trace_row: dict[str, Any],
                 timings: Timings) -> None:
        self.frames = frames
        self.trace_row = trace_row
        self.timings = timings
        self._table: str | None = None
        self._makers: list[_Whole | _Parts] = []

    def add(self, table: str, cols: dict[str, Any]) -> set[str]:
        """Take in a part of ``table``; the keys staged (of the table before)."""
        staged = set()
        if table != self._table:
            staged = self.finish()
            self._table = table
            self._makers = [make(self.trace_row) for make in MAKERS.get(table, ())]
        for maker in list(self._makers):
            with self.timings.phase(f"cache {table}"):
                try:
                    maker.add(cols)
                except Exception:  # noqa: BLE001 - a cache never fails a load
                    log.exception("a cache of %s not staged; built when first viewed", table)
                    self._makers.remove(maker)
        return staged

    def finish(self) -> set[str]:
        """Make and stage the caches of the table taken in last; the keys staged."""
        staged: set[str] = set()
        makers, self._makers = self._makers, []
        for maker in makers:
            with self.timings.phase(f"cache {self._table}"):
                try:
                    made = maker.finish()
                except Exception:  # noqa: BLE001 - a cache never fails a load
                    log.exception("a cache of %s not staged; built when first viewed",
                                  self._table)
                    continue
            if made is not None and self.frames.add_derived(made[0], made[1]):
                staged.add(made[0])
        self._table = None
        return staged


def _with_none(col: Any) -> list[Any]:
    """A Nullable column as a list with None for NULL."""
    if isinstance(col, Nullable):
        return [None if n else v for v, n in zip(col.values.tolist(), col.null.tolist(),
                                                  strict=True)]
    return list(col)
