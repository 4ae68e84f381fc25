"""pprof profiles of a trace as files (docs/pprof.md).

- ``GET /api/traces/<id>/pprof?type=net|sync|syscall|sched|chan|lock|cpu[&t1=&t2=]``:
  the gzipped profile.proto file (``go tool pprof`` reads it), as a download;
  ``&format=json`` answers the same profile as JSON (sample types, locations,
  samples, totals) instead.

``t1``/``t2`` are absolute trace ns. A bad parameter answers 400 (JSON), an
unknown trace 404.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.api.files import attachment, safe_filename
from ingest.api.params import BadParam, checked, window
from ingest.derive.frames import TraceNotFound
from ingest.views.histo import released
from ingest.views.pprof import TYPES, profile
from ingest.views.pprof_proto import encode

bp = checked(Blueprint("gmpscope_api_pprof", __name__))


def profile_type() -> str:
    """The ``type`` query parameter, checked (400 for another)."""
    kind = request.args.get("type", "")
    if kind not in TYPES:
        raise BadParam(f"type must be one of {', '.join(TYPES)}, not {kind!r}")
    return kind


@bp.get("/api/traces/<int:trace_id>/pprof")
def pprof_file(trace_id: int) -> Response:
    kind = profile_type()
    t1, t2 = window()
    fmt = request.args.get("format", "pprof")
    if fmt not in ("pprof", "json"):
        raise BadParam(f"format must be pprof or json, not {fmt!r}")
    state = ingest_state(current_app)
    try:
        frames = state.frames.get(trace_id)
    except TraceNotFound:
        return error(404, f"no trace with id {trace_id}")
    prof = released(frames, lambda: profile(state.engine, frames, kind, t1, t2))
    if fmt == "json":
        return jsonify(jsonable(prof.as_json()))
    parts: list[object] = ["trace", trace_id, kind]
    if (t1, t2) != (None, None):
        parts += [t1 if t1 is not None else "start", t2 if t2 is not None else "end"]
    resp = Response(encode(prof), mimetype="application/octet-stream")
    return attachment(resp, safe_filename(*parts, ext="pb.gz"))
