"""JSON API of live sessions (docs/live.md, docs/api.md "Live sessions").

::

    POST /api/live/sessions/<name>/segments?seq=&start_ns=&end_ns=&target=&window=
         body: the raw trace of one window -> 201 {session, segment, trace_id, seconds}
         409 {"error", "state": "paused"} while the session is paused
    POST /api/live/sessions/<name>/segments/<segment>/os
         once the window's OS recording is attached to its trace (POST
         /api/traces/<id>/poller): its per-second OS numbers -> {seconds, totals}
    POST /api/live/sessions/<name>/status     {"message", "dropped", "target_failures"}
    POST /api/live/sessions/<name>/pause      -> the session
    POST /api/live/sessions/<name>/resume     -> the session
    DELETE /api/live/sessions/<name>          -> {deleted, traces}
    GET  /api/live/sessions                   -> {sessions: [...]}
    GET  /api/live/sessions/<name>            -> the session + counts
    GET  /api/live/sessions/<name>/seconds?since_ns=&limit=   -> {seconds: [...]}
    GET  /api/live/sessions/<name>/segments?limit=            -> {segments: [...]}
    GET  /api/live/demo                       -> {demo: the note of make run's demo, or null}

Reads and writes need a token when one is configured (ingest/api/auth.py). Mounting this blueprint
starts the retention job (:mod:`ingest.live.retention`) in the server process.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState

from ingest.api import blueprint as api
from ingest.api import uploads
from ingest.live import demo as live_demo
from ingest.live import os_stats as live_os
from ingest.live import retention as live_retention
from ingest.live import sessions as live
from ingest.store.retries import with_retries

bp = Blueprint("gmpscope_api_live", __name__)


def _setup(state: BlueprintSetupState) -> None:
    ingest = api.ingest_state(state.app)  # type: ignore[arg-type]  # a Flask app here
    live_retention.start(ingest.engine, ingest.config.data_dir,
                         live_retention.Retention.from_env())


bp.record_once(_setup)


api.json_errors(bp, lookups=True, values=True)


def _int_arg(name: str, default: int | None = None) -> int | None:
    raw = request.args.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {raw!r}") from None


@bp.post("/api/live/sessions/<name>/segments")
def post_segment(name: str) -> tuple[Response, int]:
    state = api.ingest_state(current_app)
    live.check_name(name)
    seq = _int_arg("seq", 0) or 0
    start_ns = _int_arg("start_ns", 0) or 0
    end_ns = _int_arg("end_ns", start_ns) or start_ns
    window = request.args.get("window", "")
    try:
        window_s = float(window) if window else None
    except ValueError:
        raise ValueError(f"window must be seconds, not {window!r}") from None
    dropped = _int_arg("dropped")
    failures = _int_arg("target_failures")
    target = request.args.get("target", "")
    note = request.args.get("note", "")
    if live.is_paused(state.engine, name):
        # Refused before the body is read: the collector sees it and stops pulling.
        return _paused(name)
    with uploads.temp_path(state.upload_dir, ".trace") as path:
        uploads.check_declared_length(request.content_length, state.config.max_upload)
        spooled = uploads.spool_raw(request.stream, path, state.config.max_upload)
        if spooled.size == 0:
            raise uploads.BadUpload("empty segment: send the window's raw trace as the body")
        try:
            out = with_retries(lambda: live.add_segment(
                state.engine, state.frames, state.config.data_dir, name, path,
                target=target, seq=seq, wall_start_ns=start_ns, wall_end_ns=end_ns,
                window_s=window_s, note=note, sha256=spooled.sha256, dropped=dropped,
                target_failures=failures))
        except live.SessionPaused:
            return _paused(name)
    return jsonify(out), 201


@bp.post("/api/live/sessions/<name>/segments/<int:segment>/os")
def post_segment_os(name: str, segment: int) -> Response:
    """Per-second OS numbers of a segment whose trace has its OS recording attached."""
    live.check_name(name)
    engine = api.ingest_state(current_app).engine
    return jsonify(with_retries(lambda: live_os.add_os_seconds(engine, name, segment)))


def _paused(name: str) -> tuple[Response, int]:
    resp = jsonify({"error": f"live session {name!r} is paused", "state": "paused"})
    return resp, 409


@bp.post("/api/live/sessions/<name>/status")
def post_status(name: str) -> Response:
    live.check_name(name)
    body: dict[str, Any] = request.get_json(silent=True) or {}
    state = api.ingest_state(current_app)

    def num(key: str) -> int | None:
        v = body.get(key)
        return int(v) if isinstance(v, int | float) else None

    with_retries(lambda: live.report_status(
        state.engine, name, str(body.get("target", "")), str(body.get("message", "")),
        dropped=num("dropped"), target_failures=num("target_failures")))
    return jsonify({"session": name, "ok": True})


@bp.post("/api/live/sessions/<name>/pause")
def pause(name: str) -> Response:
    return jsonify(live.set_state(api.ingest_state(current_app).engine, name, "paused"))


@bp.post("/api/live/sessions/<name>/resume")
def resume(name: str) -> Response:
    return jsonify(live.set_state(api.ingest_state(current_app).engine, name, "running"))


@bp.delete("/api/live/sessions/<name>")
def remove(name: str) -> Response:
    state = api.ingest_state(current_app)
    n = live.delete_session(state.engine, state.config.data_dir, name)
    return jsonify({"session": name, "deleted": True, "traces": n})


@bp.get("/api/live/sessions")
def sessions() -> Response:
    return jsonify({"sessions": api.jsonable(live.list_sessions(
        api.ingest_state(current_app).engine))})


@bp.get("/api/live/sessions/<name>")
def session(name: str) -> Response:
    engine = api.ingest_state(current_app).engine
    found = live.get_session(engine, name)
    if found is None:
        raise LookupError(f"no live session {name!r}")
    return jsonify(api.jsonable({**found, **live.session_counts(engine, name)}))


@bp.get("/api/live/sessions/<name>/seconds")
def seconds(name: str) -> Response:
    limit = max(1, min(_int_arg("limit", 600) or 600, 86400))
    rows = live.seconds_series(api.ingest_state(current_app).engine, name,
                               _int_arg("since_ns"), limit)
    return jsonify({"session": name, "seconds": api.jsonable(rows)})


@bp.get("/api/live/sessions/<name>/segments")
def segment_list(name: str) -> Response:
    limit = max(1, min(_int_arg("limit", 100) or 100, 10000))
    rows = live.segments(api.ingest_state(current_app).engine, name, limit)
    return jsonify({"session": name, "segments": api.jsonable(rows)})


@bp.get("/api/live/demo")
def demo() -> Response:
    """What ``make run``'s live demo runs and how to stop it (ingest/live/demo.py)."""
    return jsonify({"demo": live_demo.running_demo(api.ingest_state(current_app).config.data_dir)})
