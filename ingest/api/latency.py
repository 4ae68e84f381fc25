"""JSON API of the latency page: Runnable-to-Running latency (docs/analysis.md).

- ``GET /api/traces/<id>/latency[?t1=&t2=&worst=N]``

``t1``/``t2`` are absolute trace ns; a bad parameter answers 400, an unknown trace 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from ingest.api.goroutines import MAX_LIMIT
from ingest.api.params import answer, checked, int_param, window
from ingest.derive.frames import TraceFrames
from ingest.views.latency import latency_report

bp = checked(Blueprint("gmpscope_api_latency", __name__))


@bp.get("/api/traces/<int:trace_id>/latency")
def latency_api(trace_id: int) -> Response:
    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        return latency_report(f, t1, t2, int_param("worst", 50, 0, MAX_LIMIT) or 0)

    return answer(trace_id, work)
