"""JSON API of off-CPU time under the runtime (docs/offcpu.md): the kernel's
scheduling of a trace's threads, recorded with sched.parquet.

- ``GET /api/traces/<id>/offcpu``: the recording's summary (per M, top goroutines);
- ``GET /api/traces/<id>/offcpu/threads[?t1=&t2=&m=]``: each M's on-CPU /
  waiting / asleep spans in the window (the recording's by default);
- ``GET /api/traces/<id>/offcpu/lanes?t1=&t2=&px=``: per M lane, ns per column
  in each state and Running-while-off-CPU ns (the timeline's M lanes);
- ``GET /api/traces/<id>/goroutines/<goid>/offcpu``: one goroutine's Running
  time while its M was off-CPU.

``t1``/``t2`` are absolute trace ns. A bad parameter answers 400; an unknown
trace, or a trace without a scheduling recording, 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from ingest.api.blueprint import ingest_state
from ingest.api.params import BadParam, answer, checked, int_param, window
from ingest.derive.frames import TraceFrames
from ingest.views import offcpu

bp = checked(Blueprint("gmpscope_api_offcpu", __name__))
MAX_PX = 10_000


def _need(found: dict[str, Any] | None, trace_id: int) -> dict[str, Any]:
    if found is None:
        raise LookupError(f"trace {trace_id} has no scheduling recording (sched.parquet)")
    return found


def _window(trace_id: int) -> tuple[int, int]:
    engine = ingest_state(current_app).engine
    rec = _need(offcpu.recording(engine, trace_id), trace_id)
    t1, t2 = window()
    lo = t1 if t1 is not None else rec.get("first_ts")
    hi = t2 if t2 is not None else rec.get("last_ts")
    if lo is None or hi is None:
        raise LookupError(f"trace {trace_id}: its scheduling recording could not be aligned")
    if hi <= lo:
        raise BadParam("t2 must be greater than t1")
    return int(lo), int(hi)


@bp.get("/api/traces/<int:trace_id>/offcpu")
def offcpu_summary_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        return _need(offcpu.offcpu_summary(engine, trace_id), trace_id)

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/offcpu/threads")
def offcpu_threads_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = _window(trace_id)
        return offcpu.thread_states(engine, trace_id, t1, t2, int_param("m"))

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/offcpu/lanes")
def offcpu_lanes_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = _window(trace_id)
        return offcpu.offcpu_lanes(engine, trace_id, t1, t2, int_param("px", 1000, 1, MAX_PX)
                                   or 1000)

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/goroutines/<int:goid>/offcpu")
def goroutine_offcpu_api(trace_id: int, goid: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        return _need(offcpu.goroutine_offcpu(engine, trace_id, goid), trace_id)

    return answer(trace_id, work)
