"""The lane sets a load builds right after it stores a trace, so the first
view of a new trace answers without building them (ingest.load.pipeline).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_groups
from ingest.derive.lanesets import LaneSetKey
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.derive.range_lanes import range_lanes


def precompute_steps(engine: Engine) -> dict[LaneSetKey, Callable[[TraceFrames], object]]:
    """The lane sets every timeline mode needs, one builder each, by the key
    each is cached under: the loader runs them right after a trace is stored
    (ingest.load.pipeline), skipping those it staged itself, so the first
    view of a new trace answers without building them."""
    return {
        LaneSetKey.P_LANES: p_lanes,
        LaneSetKey.M_LANES: m_lanes,
        LaneSetKey.GOROUTINES: lambda f: goroutine_groups(engine, f),
        LaneSetKey.RANGES: lambda f: range_lanes(engine, f),
    }
