"""The ingest HTTP API as a Flask blueprint.

``init_app(app, config)`` mounts it on any Flask app (the standalone
``gmpscope ingest-server`` and, later, the Flask server inside the Dash UI) and keeps
the database engine on that app, in ``app.extensions``: no module-level state.

Every answer under ``/api/`` and ``/healthz`` is JSON, errors included
(``{"error": "..."}``). Uploads are streamed to a temporary file in the data
directory (see :mod:`ingest.api.uploads`), then loaded in one transaction by
:mod:`ingest.load.pipeline`; the temporary files are always removed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from werkzeug.exceptions import HTTPException

from ingest.api import auth, uploads
from ingest.api.chunked import clean_name
from ingest.api.warm import warm_in_background
from ingest.config import Settings
from ingest.derive.frames import FrameStore
from ingest.load.delete import delete_trace
from ingest.load.pipeline import IngestError, IngestResult, ingest_trace_file, load_parquet_dir
from ingest.store.retries import with_retries
from ingest.store.traces import get_trace, list_traces, trace_summary
from ingest.views.states import render, state_graph

log = logging.getLogger("gmpscope.ingest.api")

EXTENSION = "gmpscope_ingest"
#: Extracted archives may hold this many times the upload limit (see uploads.MAX_EXPANSION),
#: and at least this much, so that a small limit still admits a real decoded directory.
MIN_EXTRACT_BYTES = 64 << 20

bp = Blueprint("gmpscope_ingest", __name__)

#: The JSON APIs behind the explorer's pages (every page is also a JSON API),
#: one blueprint module each, mounted with this one.
VIEW_APIS = (
    "ingest.api.timeline",
    "ingest.api.causality",
    "ingest.api.jobs",
    "ingest.api.overview",
    "ingest.api.states",
    "ingest.api.annotations",
    "ingest.api.compare",
    "ingest.api.goroutines",
    "ingest.api.goroutine",
    "ingest.api.syscalls",
    "ingest.api.latency",
    "ingest.api.pprof",
    "ingest.api.flame",
    "ingest.api.tables",
    "ingest.api.perfetto",
    "ingest.api.raw",
    "ingest.api.diagnose",
    "ingest.api.live",
    "ingest.api.poller",
    "ingest.api.offcpu",
    "ingest.api.sql",
)

@dataclass
class IngestState:
    """What the API needs, kept on the Flask app."""

    config: Settings
    engine: Engine
    frames: FrameStore

    @property
    def upload_dir(self) -> Path:
        return self.config.tmp_dir


def init_app(app: Flask, config: Settings, engine: Engine) -> None:
    """Mount the API on ``app`` with its settings and database engine."""
    app.extensions[EXTENSION] = IngestState(config=config, engine=engine,
                                            frames=FrameStore(engine, config.data_dir))
    # Every route of the app, this API's and whatever the host app adds (the Dash
    # UI), needs a token when one is configured: reads too (ingest/api/auth.py).
    auth.init_app(app, config)
    app.register_blueprint(bp)
    for module in VIEW_APIS:
        app.register_blueprint(importlib.import_module(module).bp)
    # Routing errors (404 for an unknown path, 405) happen before any blueprint
    # is chosen, so they need an app-level handler; it answers JSON only for our
    # paths and leaves the rest of a host app (the Dash UI) alone.
    app.register_error_handler(HTTPException, _app_http_error)
    app.teardown_request(_release_frames)


def _release_frames(_exc: BaseException | None) -> None:
    """After every request (the Dash UI's too): the pages of the frames it
    mapped go back to the page cache and the C heap is trimmed, or each
    worker keeps what every view read as its own memory (1.6 GB after every
    page of the 200 MB benchmark trace; 313 MB with this)."""
    state = current_app.extensions.get(EXTENSION)
    if isinstance(state, IngestState):
        state.frames.release_all()


def ingest_state(app: Flask) -> IngestState:
    """The IngestState mounted on ``app``."""
    state: IngestState = app.extensions[EXTENSION]
    return state


def _state() -> IngestState:
    state: IngestState = current_app.extensions[EXTENSION]
    return state


# --------------------------------------------------------------------------
# errors


def error(status: int, message: str) -> Response:
    resp = jsonify({"error": message})
    resp.status_code = status
    if status == 413:
        # The unread rest of an oversized body is not worth reading: close the
        # connection instead of draining it for keep-alive.
        resp.headers["Connection"] = "close"
    return resp


def _is_ours() -> bool:
    return request.path.startswith("/api/") or request.path == "/healthz"


def _app_http_error(e: HTTPException) -> Response | HTTPException:
    if not _is_ours():
        return e
    return error(e.code or 500, e.description or e.name)


def json_errors(blueprint: Blueprint, *, lookups: bool = False, values: bool = False) -> None:
    """Answer ``blueprint``'s errors as JSON: HTTP errors with their status, a bad
    upload with its own, a trace that cannot be loaded with 400; with ``lookups`` a
    LookupError (an unknown id) is 404, with ``values`` a ValueError is 400."""

    def http_error(e: HTTPException) -> Response:
        return error(e.code or 500, e.description or e.name)

    def upload_error(e: uploads.UploadError) -> Response:
        return error(e.status, e.message)

    def ingest_error(e: IngestError) -> Response:
        return error(400, str(e))

    def not_found(e: LookupError) -> Response:
        return error(404, str(e.args[0]) if e.args else "not found")

    def bad_value(e: ValueError) -> Response:
        return error(400, str(e))

    blueprint.register_error_handler(HTTPException, http_error)
    blueprint.register_error_handler(uploads.UploadError, upload_error)
    blueprint.register_error_handler(IngestError, ingest_error)
    if lookups:
        blueprint.register_error_handler(LookupError, not_found)
    if values:
        blueprint.register_error_handler(ValueError, bad_value)


json_errors(bp)


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (or what it wraps) says the disk or the database is full."""
    import errno

    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "database or disk is full" in str(cur) or "No space left on device" in str(cur):
            return True
        cur = getattr(cur, "orig", None) or cur.__cause__ or cur.__context__
    return False


@bp.errorhandler(Exception)
def _internal_error(e: Exception) -> Response:
    if disk_full(e):
        log.error("disk full on %s %s: %s", request.method, request.path, e)
        return error(507, "the server's disk is full: nothing was stored; free space and "
                     "send it again")
    log.exception("internal error on %s %s", request.method, request.path)
    return error(500, f"internal error: {type(e).__name__}")


# --------------------------------------------------------------------------
# JSON


def jsonable(value: Any) -> Any:
    """Dataclasses, rows, mappings, datetimes, bytes and sets to plain JSON values."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "_asdict"):  # SQLAlchemy Row, namedtuple
        return jsonable(value._asdict())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def _result_json(r: IngestResult) -> dict[str, Any]:
    return {"id": r.id, "sha256": r.sha256, "go_version": r.go_version,
            "events": r.events, "goroutines": r.goroutines}


# --------------------------------------------------------------------------
# uploads


def _spool_body(dest: Path, limit: int) -> tuple[uploads.Spooled, str]:
    """Stream the request body (raw or the multipart ``file`` field) to ``dest``.

    Returns what was written and the name to give the trace, cleaned as every
    door cleans it (``clean_name``: a label, never a path).
    """
    uploads.check_declared_length(request.content_length, limit)
    name = request.args.get("name", "")
    stream = request.stream
    if request.mimetype == "multipart/form-data":
        boundary = request.mimetype_params.get("boundary", "")
        if not boundary:
            raise uploads.BadUpload("multipart body without a boundary")
        form = uploads.spool_multipart(stream, boundary.encode("latin-1"), dest, limit)
        spooled: uploads.Spooled = form
        name = name or form.fields.get("name", "") or form.filename
    else:
        spooled = uploads.spool_raw(stream, dest, limit)
    if spooled.size == 0:
        raise uploads.BadUpload("empty upload: send the trace as the request body or as "
                                f"the multipart field {uploads.FILE_FIELD!r}")
    return spooled, clean_name(name)


def _answer(result: IngestResult) -> tuple[Response, int]:
    if result.created:
        state = _state()
        warm_in_background(state.engine, state.config.data_dir, result.id)
    return jsonify(_result_json(result)), (201 if result.created else 200)


@bp.post("/api/traces")
def upload_trace() -> tuple[Response, int]:
    """A raw Go execution trace: body or multipart field ``file``."""
    state = _state()
    with uploads.temp_path(state.upload_dir, ".trace") as path:
        spooled, name = _spool_body(path, state.config.max_upload)
        engine, data_dir = state.engine, state.config.data_dir
        result = with_retries(lambda: ingest_trace_file(
            engine, path, name or f"upload-{spooled.sha256[:12]}", data_dir=data_dir,
            sha256=spooled.sha256))
    return _answer(result)


@bp.post("/api/traces/parquet")
def upload_parquet() -> tuple[Response, int]:
    """A zip or tar(.gz) of a decoded Parquet directory (``gmpscope decode -o DIR``)."""
    state = _state()
    limit = state.config.max_upload
    with uploads.temp_path(state.upload_dir, ".archive") as path:
        _, name = _spool_body(path, limit)
        with uploads.temp_dir(state.upload_dir) as root:
            max_bytes = max(limit * uploads.MAX_EXPANSION, MIN_EXTRACT_BYTES)
            uploads.extract_archive(path, root, max_bytes=max_bytes)
            path.unlink()  # free the space before loading
            decoded = uploads.find_decoded_dir(root)
            engine = state.engine
            try:
                result = with_retries(lambda: load_parquet_dir(
                    engine, decoded, name or None, data_dir=_state().config.data_dir))
            except IngestError as e:
                # The storage layer names the directory; ours is a temporary one.
                msg = str(e).replace(str(decoded), "archive").replace(str(root), "archive")
                raise uploads.BadUpload(msg) from None
    return _answer(result)


# --------------------------------------------------------------------------
# reading


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    try:
        with _state().engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as e:
        return jsonify({"status": "error", "error": f"database: {type(e.orig).__name__}"}), 503
    return jsonify({"status": "ok"}), 200


@bp.get("/api/traces")
def trace_list() -> Response:
    """Stored traces, newest first; ``?live_windows=1`` adds the live sessions' windows."""
    live = request.args.get("live_windows", "0").lower() in ("1", "true", "yes")
    return jsonify({"traces": jsonable(list_traces(_state().engine, live_windows=live))})


def _not_found(trace_id: int) -> Response:
    return error(404, f"no trace with id {trace_id}")


@bp.get("/api/traces/<int:trace_id>")
def trace_detail(trace_id: int) -> Response:
    try:
        summary = trace_summary(_state().engine, trace_id)
    except LookupError:
        summary = None
    if summary is None:
        return _not_found(trace_id)
    return jsonify(jsonable(summary))


@bp.delete("/api/traces/<int:trace_id>")
def remove_trace(trace_id: int) -> Response:
    engine = _state().engine
    try:
        data_dir = _state().config.data_dir
        deleted = with_retries(lambda: delete_trace(engine, trace_id, data_dir))
    except LookupError:
        deleted = False
    if not deleted:
        return _not_found(trace_id)
    return jsonify({"id": trace_id, "deleted": True})


STATEGRAPH_RESOURCES = ("goroutine", "proc")
STATEGRAPH_FORMATS = ("json", "mermaid", "dot")


@bp.get("/api/traces/<int:trace_id>/stategraph")
def get_stategraph(trace_id: int) -> Response:
    resource = request.args.get("resource", "goroutine")
    fmt = request.args.get("format", "json")
    if resource not in STATEGRAPH_RESOURCES:
        return error(400, f"resource must be one of {', '.join(STATEGRAPH_RESOURCES)}, "
                          f"not {resource!r}")
    if fmt not in STATEGRAPH_FORMATS:
        return error(400, f"format must be one of {', '.join(STATEGRAPH_FORMATS)}, not {fmt!r}")
    engine = _state().engine
    if get_trace(engine, trace_id) is None:
        return _not_found(trace_id)
    out = render(state_graph(engine, trace_id, resource), fmt)
    if isinstance(out, str):
        return Response(out, mimetype="text/plain")
    return jsonify(jsonable(out))
