"""The timeline's range lanes: the GC/STW/sweep/assist bands of the ``ranges``
table, one lane per kind. The loader makes them from the columns it stores
(:func:`ranges_of`), the views from the database (:func:`range_lanes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames
from ingest.derive.lane_grouping import group_sorted
from ingest.derive.lanesets import (
    CAT,
    I64,
    RANGE_LANES,
    REF_SOURCES,
    SRC_RANGE,
    LaneSet,
    LaneSetIndex,
    LaneSetKey,
)
from ingest.store.coded_models import CodedQuery


@dataclass
class Ranges:
    """GC/STW/sweep/assist ranges as lanes (one lane per kind, by start time)."""

    lanes: LaneSet  # ids: index into RANGE_LANES
    range_id: I64  # ranges.id of each row (for details)
    g: I64


def range_lanes(engine: Engine, frames: TraceFrames) -> Ranges:
    """The trace's ranges of kinds gc, stw, sweep and assist (cached)."""
    def build() -> Ranges:
        # From the ranges' coded table: the kinds matched once, not per row;
        # the rows taken a batch at a time into arrays (a Row object each
        # held 0.7 GB on the 1 GB benchmark trace).
        q = CodedQuery("ranges", frames.trace_id)
        stmt = (q.select(("id", "kind", "start_ts", "end_ts", "g"))
                .where(q.codes("kind", [k for k, _ in RANGE_LANES])).order_by(q.col("id")))
        lane_of = {k: i for i, (k, _) in enumerate(RANGE_LANES)}
        parts: list[tuple[I64, ...]] = []
        with engine.connect() as conn:
            result = conn.execution_options(yield_per=_FETCH_ROWS).execute(stmt)
            for batch in result.partitions():
                rid, kind, start, end, g = zip(*batch, strict=True)
                parts.append((np.array(rid, np.int64),
                              np.array([lane_of[k] for k in kind], np.int64),
                              _times(start, frames.first_ts), _times(end, frames.last_ts),
                              np.array(g, np.int64)))
        cols = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
                for i in range(5)]
        return _ranges(*cols)
    return cached(frames, LaneSetKey.RANGES, build, persist=(Ranges, LaneSet, LaneSetIndex))


#: Range rows fetched from the database a batch.
_FETCH_ROWS = 1 << 16


def _times(values: tuple[int | None, ...], missing: int) -> I64:
    """Times as int64, ``missing`` for None (a range open at either end)."""
    if None in values:
        return np.array([missing if v is None else v for v in values], np.int64)
    return np.array(values, np.int64)


def ranges_of(rid: Sequence[int], kind: Sequence[str], start_ts: Sequence[int | None],
              end_ts: Sequence[int | None], g: Sequence[int], first_ts: int,
              last_ts: int) -> Ranges:
    """:func:`range_lanes`' value from the ranges table's columns (rows in id
    order; those of other kinds are left out): the loader makes it from the
    columns it stores, the views from the database."""
    kinds = [k for k, _ in RANGE_LANES]
    keep = [i for i, k in enumerate(kind) if k in kinds]
    lane = np.array([kinds.index(kind[i]) for i in keep], dtype=np.int64)
    start = np.array([first_ts if start_ts[i] is None else start_ts[i] for i in keep],
                     dtype=np.int64)
    end = np.array([last_ts if end_ts[i] is None else end_ts[i] for i in keep],
                   dtype=np.int64)
    ids = np.array([rid[i] for i in keep], dtype=np.int64)
    gs = np.array([g[i] for i in keep], dtype=np.int64)
    return _ranges(ids, lane, start, end, gs)


def _ranges(ids: I64, lane: I64, start: I64, end: I64, gs: I64) -> Ranges:
    """The ranges (in id order) as lanes by kind (``lane``: index into RANGE_LANES)."""
    order, lanes, lo, hi = group_sorted(lane, start)
    cats = np.array([CAT[label] for _, label in RANGE_LANES], dtype=np.int8)
    cat = cats[lane[order]] if len(order) else np.zeros(0, np.int8)
    ref = order * REF_SOURCES + SRC_RANGE  # row in the arrays below
    return Ranges(LaneSet(lanes, lo, hi, start[order], end[order], cat.astype(np.int8),
                          ref.astype(np.int64)), ids, gs)
