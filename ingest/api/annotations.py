"""JSON API of the annotations page.

- ``GET /api/traces/<id>/annotations``: task types, a page of tasks, regions by
  name, a page of logs (:mod:`ingest.views.annotations`). Every part is
  bounded, whatever the trace's size, and read from the trace's annotation
  index (:mod:`ingest.derive.annotation_index`). Parameters (a bad one answers 400):

  - tasks: ``task_limit`` (0-5000, default 200) rows from ``task_offset``
    (>= 0, default 0), of type ``task_name`` when given (exact; present and
    empty means the unnamed tasks), ``task_sort`` ``duration`` (longest first,
    the default) or ``start``;
  - logs: ``category`` (exact), ``text`` (a literal substring of category or
    message), ``g``, ``task`` (a task id), ``limit`` (0-5000, default 1000)
    rows from ``offset`` (>= 0).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import ingest_state, jsonable
from ingest.api.params import BadParam, checked, int_param
from ingest.views.annotations import (
    LOG_LIMIT,
    MAX_LOGS,
    MAX_TASK_LIMIT,
    TASK_LIMIT,
    TASK_SORTS,
    annotations_data,
)

bp = checked(Blueprint("gmpscope_api_annotations", __name__))


@bp.get("/api/traces/<int:trace_id>/annotations")
def get_annotations(trace_id: int) -> Response:
    st = ingest_state(current_app)
    sort = request.args.get("task_sort") or "duration"
    if sort not in TASK_SORTS:
        raise BadParam(f"task_sort must be one of {', '.join(TASK_SORTS)}, not {sort!r}")
    params: dict[str, Any] = {
        "task_limit": int_param("task_limit", TASK_LIMIT, 0, MAX_TASK_LIMIT),
        "task_offset": int_param("task_offset", 0, 0),
        "task_name": request.args.get("task_name"),
        "task_sort": sort,
        "category": request.args.get("category"),
        "text": request.args.get("text") or None,
        "g": int_param("g"),
        "task_id": int_param("task"),
        "limit": int_param("limit", LOG_LIMIT, 0, MAX_LOGS),
        "offset": int_param("offset", 0, 0),
    }
    frames = st.frames.get(trace_id)  # an unknown trace: 404 (checked)
    return jsonify(jsonable(annotations_data(st.engine, trace_id, frames, **params)))
