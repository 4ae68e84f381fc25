"""JSON API of the annotations page.

- ``GET /api/traces/<id>/annotations?category=&text=&g=&task=&limit=``: tasks,
  regions by name, logs (:mod:`ingest.views.annotations`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.api.params import checked, int_param
from ingest.views.annotations import MAX_LOGS, annotations_data

bp = checked(Blueprint("gmpscope_api_annotations", __name__))


@bp.get("/api/traces/<int:trace_id>/annotations")
def get_annotations(trace_id: int) -> Response:
    st = ingest_state(current_app)
    filters: dict[str, Any] = {
        "category": request.args.get("category"),
        "text": request.args.get("text") or None,
        "g": int_param("g"),
        "task_id": int_param("task"),
        "limit": int_param("limit", MAX_LOGS),
    }
    try:
        data = annotations_data(st.engine, trace_id, **filters)
    except LookupError as e:
        return error(404, str(e))
    return jsonify(jsonable(data))
