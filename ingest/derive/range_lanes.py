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
        # From the ranges' coded table: the kinds matched once, not per row.
        q = CodedQuery("ranges", frames.trace_id)
        with engine.connect() as conn:
            rows = conn.execute(q.select(("id", "kind", "start_ts", "end_ts", "g"))
                                .where(q.codes("kind", [k for k, _ in RANGE_LANES]))
                                .order_by(q.col("id"))).all()
        return ranges_of([x.id for x in rows], [x.kind for x in rows],
                         [x.start_ts for x in rows], [x.end_ts for x in rows],
                         [x.g for x in rows], frames.first_ts, frames.last_ts)
    return cached(frames, LaneSetKey.RANGES, build, persist=(Ranges, LaneSet, LaneSetIndex))


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
    order, lanes, lo, hi = group_sorted(lane, start)
    cats = np.array([CAT[label] for _, label in RANGE_LANES], dtype=np.int8)
    cat = cats[lane[order]] if len(order) else np.zeros(0, np.int8)
    ref = order * REF_SOURCES + SRC_RANGE  # row in the arrays below
    return Ranges(LaneSet(lanes, lo, hi, start[order], end[order], cat.astype(np.int8),
                          ref.astype(np.int64)), ids, gs)
