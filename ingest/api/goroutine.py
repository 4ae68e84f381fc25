"""JSON API of the goroutine page: one goroutine (docs/analysis.md).

- ``GET /api/traces/<id>/goroutines/<goid>[?offset=N&limit=N]``

A bad parameter answers 400, an unknown trace or goroutine 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from ingest.api.blueprint import ingest_state
from ingest.api.goroutines import MAX_LIMIT
from ingest.api.params import answer, checked, int_param
from ingest.derive.frames import TraceFrames
from ingest.views.goroutine import goroutine_detail

bp = checked(Blueprint("gmpscope_api_goroutine", __name__))


@bp.get("/api/traces/<int:trace_id>/goroutines/<int:goid>")
def goroutine_api(trace_id: int, goid: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        offset = int_param("offset", 0, 0)
        limit = int_param("limit", 200, 0, MAX_LIMIT)
        return goroutine_detail(engine, f, goid, offset or 0, limit or 0)

    return answer(trace_id, work)
