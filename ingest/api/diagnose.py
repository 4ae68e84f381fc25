"""JSON API of the diagnostics (ingest.diagnose).

- ``GET /api/traces/<id>/findings[?format=json|markdown|text]``: the report
  (JSON: ``findings``, each with rule, severity, summary, measures, evidence
  and timeline links; and ``rules``, what each rule did), or its Markdown or
  text rendering. Thresholds come from the TOML file named by
  ``GMPSCOPE_DIAGNOSE_CONFIG`` (read on each request, so an edit applies at
  once); a broken file answers 500 with the reason.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.derive.frames import TraceNotFound
from ingest.diagnose import (
    ConfigError,
    config_from_env,
    diagnose,
    render_markdown,
    render_text,
    rule_defaults,
)

bp = Blueprint("gmpscope_api_diagnose", __name__)

FORMATS = ("json", "markdown", "text")


@bp.get("/api/traces/<int:trace_id>/findings")
def findings(trace_id: int) -> Response:
    fmt = request.args.get("format", "json")
    if fmt not in FORMATS:
        return error(400, f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    try:
        config = config_from_env(rule_defaults())
    except ConfigError as e:
        return error(500, f"diagnostics config: {e}")
    state = ingest_state(current_app)
    try:
        frames = state.frames.get(trace_id)
    except TraceNotFound:
        return error(404, f"no trace with id {trace_id}")
    report = diagnose(state.engine, frames, config)
    if fmt == "markdown":
        return Response(render_markdown(report), mimetype="text/markdown; charset=utf-8")
    if fmt == "text":
        return Response(render_text(report), mimetype="text/plain; charset=utf-8")
    return jsonify(jsonable(report))
