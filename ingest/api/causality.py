"""JSON API of the timeline's causality panels (docs/causality.md).

- ``GET /api/traces/<id>/flows?ref=<ref>`` or ``?g=<goid>[&t=<ns>]``: who woke
  the span and whom it woke (:func:`ingest.views.flows.flows`); ``limit``
  bounds the ``woke`` list;
- ``GET /api/traces/<id>/search?q=<text>[&t1=&t2=&offset=&limit=&at=&state=]``: the
  goroutine spans matching a goroutine id, a start function or a stack
  function, in time order, paged (:func:`ingest.views.search.search`);
- ``GET /api/traces/<id>/area?t1=&t2=&lane=p:0&lane=g:17&lane=group:NAME...``: time
  per state, goroutine group and function of those lanes in the window
  (:func:`ingest.views.area.area`);
- ``GET /api/traces/<id>/critical-path?g=<goid>[&t1=&t2=]`` or ``?task=<id>``:
  the chain of wake-ups the goroutine's or task's time depended on
  (:func:`ingest.views.critical_path.critical_path`).

A bad parameter answers 400, an unknown trace, span or goroutine 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from ingest.api.blueprint import ingest_state
from ingest.api.params import BadParam, answer, checked, int_param, window
from ingest.derive.frames import TraceFrames
from ingest.views import flows as flows_view
from ingest.views import search as search_view
from ingest.views.area import BadLanes, area, parse_lanes
from ingest.views.critical_path import critical_path

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


@bp.get("/api/traces/<int:trace_id>/search")
def search_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        limit = int_param("limit", search_view.DEFAULT_LIMIT, 1, search_view.MAX_LIMIT)
        try:
            return search_view.search(engine, f, request.args.get("q", ""), t1, t2,
                                      int_param("offset", None, 0),
                                      limit or search_view.DEFAULT_LIMIT, int_param("at"),
                                      request.args.get("state") or None)
        except search_view.BadQuery as e:
            raise BadParam(str(e)) from None

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/area")
def area_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        # One lane per ``lane`` parameter: a start function may hold commas.
        specs = [v for v in request.args.getlist("lane") if v]
        try:
            lanes = parse_lanes(specs)
        except BadLanes as e:
            raise BadParam(str(e)) from None
        return area(engine, f, f.first_ts if t1 is None else t1,
                    f.last_ts if t2 is None else t2, lanes)

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/critical-path")
def critical_path_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        return critical_path(engine, f, int_param("g"), t1, t2, int_param("task"))

    return answer(trace_id, work)
