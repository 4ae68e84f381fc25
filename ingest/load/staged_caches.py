"""Caches the loader makes from a derived table's columns as they go by.

Each table is in memory once, while it is stored; a view that needs a layout
of it (the timeline's GC bands, the overview's counters, the annotations'
index) would otherwise read it back from the database on its first request
(seconds on a 200 MB trace). What is made here is staged with the frames
being written (``FrameWriter.add_derived``) and moves with them at the
commit. Only caches: a failure is logged and the view builds it later.
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

#: A builder: (the table's columns, the trace's row) -> (cache key, value), or None.
Builder = Callable[[dict[str, Any], dict[str, Any]], "tuple[str, Any] | None"]


def _range_lanes(cols: dict[str, Any], trace_row: dict[str, Any]) -> tuple[str, Any]:
    from ingest.derive.range_lanes import ranges_of

    value = ranges_of(cols["id"], list(cols["kind"]), _with_none(cols["start_ts"]),
                      _with_none(cols["end_ts"]), cols["g"], int(trace_row["first_ts"] or 0),
                      int(trace_row["last_ts"] or 0))
    return LaneSetKey.RANGES, value


def _counters(cols: dict[str, Any], _trace_row: dict[str, Any]) -> tuple[str, Any]:
    from ingest.derive.overview_counters import COUNTERS_KEY, counters_of

    return COUNTERS_KEY, counters_of(cols)


def _annotation_index(table: str) -> Builder:
    def build(cols: dict[str, Any], _trace_row: dict[str, Any]) -> tuple[str, Any] | None:
        from ingest.derive.annotation_index import index_of_table

        return index_of_table(table, cols)
    return build


#: What is made of each table, in the order it is made.
BUILDERS: dict[str, tuple[Builder, ...]] = {
    "ranges": (_range_lanes,),
    "metrics": (_counters,),
    "tasks": (_annotation_index("tasks"),),
    "regions": (_annotation_index("regions"),),
    "logs": (_annotation_index("logs"),),
}


def stage_caches(frames: FrameWriter, table: str, cols: dict[str, Any],
                 trace_row: dict[str, Any], timings: Timings) -> set[str]:
    """Make and stage the caches of ``table``; the keys staged."""
    staged: set[str] = set()
    for build in BUILDERS.get(table, ()):
        with timings.phase(f"cache {table}"):
            try:
                made = build(cols, trace_row)
            except Exception:  # noqa: BLE001 - a cache never fails a load
                log.exception("a cache of %s not staged; built when first viewed", table)
                continue
            if made is not None and frames.add_derived(made[0], made[1]):
                staged.add(made[0])
    return staged


def _with_none(col: Any) -> list[Any]:
    """A Nullable column as a list with None for NULL."""
    if isinstance(col, Nullable):
        return [None if n else v for v, n in zip(col.values.tolist(), col.null.tolist(),
                                                  strict=True)]
    return list(col)
