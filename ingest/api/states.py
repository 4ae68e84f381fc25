"""JSON API of the states page.

- ``GET /api/traces/<id>/states?resource=goroutine|proc|thread&group=&t1=&t2=
  &split_reasons=1&format=json|mermaid|dot``: a state graph
  (:mod:`ingest.views.states_frames`); mermaid and dot are text/plain.
- ``GET /api/traces/<id>/states/groups``: goroutine groups for the filter.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.api.params import checked, flag, int_param
from ingest.views.states import render
from ingest.views.states_frames import goroutine_groups, graph_for

bp = checked(Blueprint("gmpscope_api_states", __name__))


FORMATS = ("json", "mermaid", "dot")


@bp.get("/api/traces/<int:trace_id>/states")
def get_states(trace_id: int) -> Response:
    st = ingest_state(current_app)
    resource = request.args.get("resource", "goroutine")
    fmt = request.args.get("format", "json")
    if fmt not in FORMATS:
        return error(400, f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    try:
        graph = graph_for(st.engine, st.frames, trace_id, resource,
                          group=request.args.get("group"),
                          t1=int_param("t1"), t2=int_param("t2"),
                          split_reasons=flag("split_reasons"))
    except ValueError as e:
        return error(400, str(e))
    except LookupError as e:
        return error(404, str(e))
    out = render(graph, fmt)
    if isinstance(out, str):
        return Response(out, mimetype="text/plain")
    return jsonify(jsonable(out))


@bp.get("/api/traces/<int:trace_id>/states/groups")
def get_state_groups(trace_id: int) -> Response:
    st = ingest_state(current_app)
    frames = st.frames.get(trace_id)  # 404 for an unknown trace
    return jsonify({"groups": goroutine_groups(st.engine, frames)})
