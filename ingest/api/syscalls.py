"""JSON API of the syscalls page: syscalls and netpoller waits (docs/analysis.md).

- ``GET /api/traces/<id>/syscalls/summary[?t1=&t2=&top=N]``
- ``GET /api/traces/<id>/netpoll[?t1=&t2=&top=N]``

``t1``/``t2`` are absolute trace ns; a bad parameter answers 400, an unknown trace 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app

from ingest.api.blueprint import ingest_state
from ingest.api.params import answer, checked, int_param, window
from ingest.derive.frames import TraceFrames
from ingest.views.syscalls import netpoll_summary, syscall_summary

bp = checked(Blueprint("gmpscope_api_syscalls", __name__))


#: Upper bound of ``top``.
MAX_TOP = 100


def _summary(trace_id: int, summarize: Callable[..., dict[str, Any]]) -> Response:
    """``summarize(engine, frames, t1, t2, top)`` of the trace's window, as JSON."""
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        return summarize(engine, f, t1, t2, int_param("top", 10, 1, MAX_TOP) or 10)

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/syscalls/summary")
def syscalls_api(trace_id: int) -> Response:
    return _summary(trace_id, syscall_summary)


@bp.get("/api/traces/<int:trace_id>/netpoll")
def netpoll_api(trace_id: int) -> Response:
    return _summary(trace_id, netpoll_summary)
