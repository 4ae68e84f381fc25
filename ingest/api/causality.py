"""JSON API of the timeline's causality panels (docs/causality.md).

- ``GET /api/traces/<id>/flows?ref=<ref>`` or ``?g=<goid>[&t=<ns>]``: who woke
  the span and whom it woke (:func:`ingest.views.flows.flows`); ``limit``
  bounds the ``woke`` list.

A bad parameter answers 400, an unknown trace, span or goroutine 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from ingest.api.blueprint import ingest_state
from ingest.api.params import answer, checked, int_param
from ingest.derive.frames import TraceFrames
from ingest.views import flows as flows_view

bp = checked(Blueprint("gmpscope_api_causality", __name__))


@bp.get("/api/traces/<int:trace_id>/flows")
def flows_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        row = flows_view.select_row(f, ref=int_param("ref"), goid=int_param("g"),
                                    t=int_param("t"))
        limit = int_param("limit", flows_view.DEFAULT_LIMIT, 0, flows_view.MAX_LIMIT)
        return flows_view.flows(engine, f, row, limit or 0)

    return answer(trace_id, work)
