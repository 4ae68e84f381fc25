"""JSON API of the timeline view.

- ``GET /api/traces/<id>/timeline?mode=p|m|g&t1=&t2=&px=&offset=&limit=&group=&g=&m=&p=&cap=``:
  lanes and level-of-detail shapes of a window (t1/t2 absolute trace ns,
  default the whole trace), column-oriented (see :func:`ingest.views.timeline.timeline`;
  each shape's ``cover`` is the share of its span its intervals cover);
- ``GET /api/traces/<id>/timeline/lanes?mode=&group=&offset=&limit=&g=&m=&p=``: a
  range of the mode's lane list (every lane, in drawing order), its total and groups
  (:func:`ingest.views.timeline_tiles.lanes_page`);
- ``GET /api/traces/<id>/timeline/tiles?mode=&group=&level=&index=&lanes=a-b[&format=json]``:
  one tile of the level of detail as a binary body of typed columns
  (``application/octet-stream``, :func:`ingest.views.timeline_tiles.encode_tile`) or JSON;
- ``GET /api/traces/<id>/span?ref=<ref>``: what one shape stands for (interval,
  proc run or range) with its stack frames.

Errors are JSON: 404 for an unknown trace or ref, 400 for bad parameters.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state
from ingest.derive.frames import TraceNotFound
from ingest.views.timeline import BadRequest, parse_params, span_details, timeline
from ingest.views.timeline_tiles import encode_tile, lanes_page, tile, tile_json

bp = Blueprint("gmpscope_api_timeline", __name__)


@bp.get("/api/traces/<int:trace_id>/timeline")
def get_timeline(trace_id: int) -> Response:
    state = ingest_state(current_app)
    try:
        params = parse_params(request.args.to_dict())
        frames = state.frames.get(trace_id)
        return jsonify(timeline(state.engine, frames, params))
    except TraceNotFound:
        return error(404, f"no trace {trace_id}")
    except BadRequest as e:
        return error(400, str(e))


@bp.get("/api/traces/<int:trace_id>/timeline/lanes")
def get_lanes(trace_id: int) -> Response:
    state = ingest_state(current_app)
    try:
        frames = state.frames.get(trace_id)
        return jsonify(lanes_page(state.engine, frames, request.args.to_dict()))
    except TraceNotFound:
        return error(404, f"no trace {trace_id}")
    except BadRequest as e:
        return error(400, str(e))


@bp.get("/api/traces/<int:trace_id>/timeline/tiles")
def get_tile(trace_id: int) -> Response:
    state = ingest_state(current_app)
    args = request.args.to_dict()
    try:
        frames = state.frames.get(trace_id)
        t = tile(state.engine, frames, args)
    except TraceNotFound:
        return error(404, f"no trace {trace_id}")
    except BadRequest as e:
        return error(400, str(e))
    if args.get("format") == "json":
        return jsonify(tile_json(t))
    resp = Response(encode_tile(t), mimetype="application/octet-stream")
    # A tile of a stored trace never changes: the browser may keep it.
    resp.headers["Cache-Control"] = "private, max-age=3600"
    return resp


@bp.get("/api/traces/<int:trace_id>/span")
def get_span(trace_id: int) -> Response:
    state = ingest_state(current_app)
    raw = request.args.get("ref", "")
    try:
        ref = int(raw)
    except ValueError:
        return error(400, "ref must be an integer (a shape's ref from the timeline)")
    try:
        frames = state.frames.get(trace_id)
        return jsonify(span_details(state.engine, frames, ref))
    except TraceNotFound:
        return error(404, f"no trace {trace_id}")
    except LookupError as e:
        return error(404, str(e))
