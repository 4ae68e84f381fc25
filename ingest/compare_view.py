"""Two traces side by side: key numbers with deltas, goroutine state graphs,
goroutines by state over time (each on its own time axis, from its start),
and scheduler latency percentiles where :mod:`ingest.sched_latency` exists.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from sqlalchemy import Engine

from ingest.frames import FrameStore
from ingest.overview import overview
from ingest.stategraph import to_json
from ingest.stategraph_frames import resource_graph

#: Key numbers compared (the rest of the overview's key numbers are labels).
NUMERIC_KEYS = ("duration_ns", "events", "transitions", "goroutines", "procs", "gomaxprocs",
                "threads", "gc_count", "stw_count", "stw_total_ns", "bytes_lost")


def deltas(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per numeric key: a, b, b - a and b / a (None where undefined)."""
    out = []
    for k in NUMERIC_KEYS:
        va, vb = a.get(k), b.get(k)
        both = isinstance(va, int | float) and isinstance(vb, int | float)
        fa = float(va) if both else 0.0  # type: ignore[arg-type]
        fb = float(vb) if both else 0.0  # type: ignore[arg-type]
        delta: float | None = fb - fa if both else None
        if delta is not None and isinstance(va, int) and isinstance(vb, int):
            delta = vb - va
        out.append({"key": k, "a": va, "b": vb, "delta": delta,
                    "ratio": fb / fa if both and fa else None})
    return out


def sched_latency(engine: Engine, frames: FrameStore, trace_id: int) -> Any:
    """Scheduler latency percentiles from ingest.sched_latency, or None when that
    module (written by another part of the project) is absent or has no
    ``percentiles(engine, frames, trace_id)``."""
    if importlib.util.find_spec("ingest.sched_latency") is None:
        return None
    mod = importlib.import_module("ingest.sched_latency")
    fn = getattr(mod, "percentiles", None)
    if fn is None:
        return None
    return fn(engine, frames.get(trace_id), trace_id)


def compare(engine: Engine, frames: FrameStore, a: int, b: int,
            bins: int = 120) -> dict[str, Any]:
    """Everything the compare page shows; LookupError when a trace is missing."""
    sides: dict[str, Any] = {}
    for label, tid in (("a", a), ("b", b)):
        fr = frames.get(tid)
        ov = overview(engine, fr, tid, bins=bins)
        first = ov["key"]["first_ts"]
        sides[label] = {
            "trace_id": tid,
            "key": ov["key"],
            "bins": {"edges_rel": [e - first for e in ov["bins"]["edges"]]},
            "goroutine_states": ov["goroutine_states"],
            "states": to_json(resource_graph(fr, "goroutine", split_reasons=True)),
            "sched_latency": sched_latency(engine, frames, tid),
        }
    return {"a": sides["a"], "b": sides["b"],
            "deltas": deltas(sides["a"]["key"], sides["b"]["key"])}
