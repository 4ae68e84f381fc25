"""JSON API of the overview, state graph, annotations and compare pages.

- ``GET /api/traces/<id>/overview?bins=N&points=N&t1=&t2=``: key numbers,
  goroutines by state and threads over time (time-weighted averages per bin),
  heap and GOMAXPROCS counters reduced to at most ``points`` min/max buckets,
  GC and STW bands (narrow ones as coverage per bucket), over the window
  ``[t1, t2]`` (:mod:`ingest.views.overview`).
- ``GET /api/traces/<id>/states?resource=goroutine|proc|thread&group=&t1=&t2=
  &split_reasons=1&format=json|mermaid|dot``: a state graph
  (:mod:`ingest.views.states_frames`); mermaid and dot are text/plain.
- ``GET /api/traces/<id>/states/groups``: goroutine groups for the filter.
- ``GET /api/traces/<id>/annotations?category=&text=&g=&task=&limit=``: tasks,
  regions by name, logs (:mod:`ingest.views.annotations`).
- ``GET /api/compare?a=ID&b=ID``: two traces side by side
  (:mod:`ingest.views.compare`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.derive.frames import TraceNotFound
from ingest.views.annotations import MAX_LOGS, annotations_data
from ingest.views.compare import compare
from ingest.views.counters import DEFAULT_BUCKETS
from ingest.views.overview import DEFAULT_BINS, overview
from ingest.views.states import goroutine_groups, render
from ingest.views.states_frames import graph_for

bp = Blueprint("gmpscope_api_views", __name__)

FORMATS = ("json", "mermaid", "dot")


class BadParam(ValueError):
    """A query parameter that is not what the endpoint takes."""


def int_arg(name: str, default: int | None = None) -> int | None:
    """An optional integer query parameter; BadParam when not an integer."""
    raw = request.args.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadParam(f"{name} must be an integer, not {raw!r}") from None


def flag_arg(name: str) -> bool:
    return request.args.get(name, "").lower() in ("1", "true", "yes", "on")


@bp.errorhandler(BadParam)
def _bad_param(e: BadParam) -> Response:
    return error(400, str(e))


@bp.errorhandler(TraceNotFound)
def _no_trace(e: TraceNotFound) -> Response:
    return error(404, f"no trace with id {e.args[0] if e.args else '?'}")


def _state() -> Any:
    return ingest_state(current_app)


@bp.get("/api/traces/<int:trace_id>/overview")
def get_overview(trace_id: int) -> Response:
    st = _state()
    bins = int_arg("bins", DEFAULT_BINS) or DEFAULT_BINS
    points = int_arg("points", DEFAULT_BUCKETS) or DEFAULT_BUCKETS
    t1, t2 = int_arg("t1"), int_arg("t2")
    try:
        data = overview(st.engine, st.frames.get(trace_id), trace_id, bins=bins,
                        t1=t1, t2=t2, points=points)
    except LookupError:
        return error(404, f"no trace with id {trace_id}")
    except ValueError as e:
        return error(400, str(e))
    return jsonify(jsonable(data))


def states_response(trace_id: int) -> Response:
    """The /states answer (also serves the older /stategraph route's parameters)."""
    st = _state()
    resource = request.args.get("resource", "goroutine")
    fmt = request.args.get("format", "json")
    if fmt not in FORMATS:
        return error(400, f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    group = request.args.get("group")
    try:
        graph = graph_for(st.engine, st.frames, trace_id, resource,
                          group=group,
                          t1=int_arg("t1"), t2=int_arg("t2"),
                          split_reasons=flag_arg("split_reasons"))
    except ValueError as e:
        return error(400, str(e))
    except LookupError as e:
        return error(404, str(e))
    out = render(graph, fmt)
    if isinstance(out, str):
        return Response(out, mimetype="text/plain")
    return jsonify(jsonable(out))


@bp.get("/api/traces/<int:trace_id>/states")
def get_states(trace_id: int) -> Response:
    return states_response(trace_id)


@bp.get("/api/traces/<int:trace_id>/states/groups")
def get_state_groups(trace_id: int) -> Response:
    st = _state()
    st.frames.get(trace_id)  # 404 for an unknown trace
    return jsonify({"groups": goroutine_groups(st.engine, trace_id)})


@bp.get("/api/traces/<int:trace_id>/annotations")
def get_annotations(trace_id: int) -> Response:
    st = _state()
    filters: dict[str, Any] = {
        "category": request.args.get("category"),
        "text": request.args.get("text") or None,
        "g": int_arg("g"),
        "task_id": int_arg("task"),
        "limit": int_arg("limit", MAX_LOGS),
    }
    try:
        data = annotations_data(st.engine, trace_id, **filters)
    except LookupError as e:
        return error(404, str(e))
    return jsonify(jsonable(data))


@bp.get("/api/compare")
def get_compare() -> Response:
    st = _state()
    a, b = int_arg("a"), int_arg("b")
    if a is None or b is None:
        return error(400, "give two trace ids: /api/compare?a=ID&b=ID")
    return jsonify(jsonable(compare(st.engine, st.frames, a, b)))
