"""Two traces side by side: key numbers with deltas, goroutine state graphs
(Waiting split by reason), goroutines by state over time (each on its own
time axis, from its start) and scheduler latency percentiles
(:mod:`ingest.views.latency`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from ingest.derive.frames import FrameStore
from ingest.views.latency import latency_report
from ingest.views.overview import DEFAULT_BINS, overview
from ingest.views.states import to_json
from ingest.views.states_frames import whole_trace_graph

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


def sched_latency(frames: FrameStore, trace_id: int) -> dict[str, Any]:
    """Runnable -> Running latency of the whole trace (:mod:`ingest.views.latency`):
    the summary (count, mean, p50, p90, p99, max) and the censored/pending counts."""
    r = latency_report(frames.get(trace_id), worst=0)
    return {**r["summary"], "censored": r["censored"], "pending": r["pending"]}


def compare(engine: Engine, frames: FrameStore, a: int, b: int,
            bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """Everything the compare page shows; LookupError when a trace is missing.

    At the overview's default bins and with the whole-trace state graph, each
    side reads the reports kept with its trace (a production-size trace's
    are seconds to build) instead of computing them again."""
    sides: dict[str, Any] = {}
    for label, tid in (("a", a), ("b", b)):
        fr = frames.get(tid)
        ov = overview(engine, fr, tid, bins=bins)
        sides[label] = {
            "trace_id": tid,
            "key": ov["key"],
            "bins": ov["bins"],
            "goroutine_states": ov["goroutine_states"],
            "gc_bands": ov["gc_bands"],
            "gc_coverage": ov["gc_coverage"],
            "states": to_json(whole_trace_graph(engine, fr, "goroutine", True)),
            "sched_latency": sched_latency(frames, tid),
        }
    return {"a": sides["a"], "b": sides["b"],
            "deltas": deltas(sides["a"]["key"], sides["b"]["key"])}
