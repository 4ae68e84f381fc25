"""JSON API of the goroutines page (docs/analysis.md documents every field).

- ``GET /api/traces/<id>/goroutine-groups[?group=NAME&limit=N&sort=KEY]``

A bad parameter answers 400, an unknown trace or group 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from ingest.api.blueprint import ingest_state
from ingest.api.params import BadParam, answer, checked, int_param
from ingest.derive.frames import TraceFrames
from ingest.views.goroutines import MEMBER_SORTS, goroutine_groups

bp = checked(Blueprint("gmpscope_api_goroutines", __name__))


#: Upper bound of the list-size parameters.
MAX_LIMIT = 10_000


@bp.get("/api/traces/<int:trace_id>/goroutine-groups")
def goroutine_groups_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        limit = int_param("limit", 1000, 0, MAX_LIMIT)
        sort = request.args.get("sort", "goid")
        if sort not in MEMBER_SORTS:
            raise BadParam(f"sort must be one of {', '.join(MEMBER_SORTS)}, not {sort!r}")
        return goroutine_groups(engine, f, request.args.get("group"), limit or 0, sort)

    return answer(trace_id, work)
