"""JSON API of OS recordings (``gmpscope record``) and the poller page.

Writes (the write token when one is configured, like every write, ingest/api/auth.py):

- ``POST /api/traces/<id>/poller``: a zip or tar(.gz) of a recording directory
  (poller.parquet + meta.json) attached to stored trace ``id``; the alignment
  is measured against it. 201 with the alignment, 200 when already attached.
- ``POST /api/recordings``: a recording stored as a trace of its own; when the
  archive also holds the Go trace its meta.json names, that trace is ingested
  (or found by hash) and the recording attached to it instead.

Reads:

- ``GET /api/traces/<id>/poller``: everything the poller page shows
  (:func:`ingest.views.poller.poller_page`);
- ``GET /api/traces/<id>/poller/alignment``: method, offset, quality, counts;
- ``GET /api/traces/<id>/poller/os-syscalls?limit=N``: slowest calls, P handoffs;
- ``GET /api/traces/<id>/poller/marks?t1=&t2=&max=``: OS events on M lanes.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy import Engine

from ingest.api import blueprint as api
from ingest.api import uploads
from ingest.load.pipeline import IngestError
from ingest.load.poller import (
    POLLER_FILE,
    DirResult,
    default_name,
    ingest_recording_dir,
    read_recording,
)
from ingest.store.retries import with_retries
from ingest.store.traces import get_trace
from ingest.views.poller import (
    MAX_MARKS,
    SLOWEST,
    NoRecording,
    alignment,
    os_syscalls,
    poller_marks,
    poller_page,
)

bp = Blueprint("gmpscope_api_poller", __name__)


api.json_errors(bp, lookups=True)


def _int_arg(name: str, default: int | None = None) -> int | None:
    raw = request.args.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise uploads.BadUpload(f"{name} must be an integer, not {raw[:40]!r}") from None


def _recording_root(root: Path) -> Path:
    """The extracted directory holding poller.parquet (at the top or in one folder)."""
    found = [p.parent for p in root.rglob(POLLER_FILE) if p.is_file()]
    if len(found) == 1:
        return found[0]
    if not found:
        raise uploads.BadUpload(f"archive has no {POLLER_FILE}: not a recording directory "
                                "(what `gmpscope record -o DIR` writes)")
    raise uploads.BadUpload(f"archive has {len(found)} recordings; send one per upload")


def _store(attach: int | None) -> tuple[Response, int]:
    state = api.ingest_state(current_app)
    limit = state.config.max_upload
    with uploads.temp_path(state.upload_dir, ".archive") as path:
        _, name = api._spool_body(path, limit)
        with uploads.temp_dir(state.upload_dir) as root:
            max_bytes = max(limit * uploads.MAX_EXPANSION, api.MIN_EXTRACT_BYTES)
            uploads.extract_archive(path, root, max_bytes=max_bytes)
            path.unlink()
            rec_dir = _recording_root(root)
            resolved = root.resolve()

            def inside(p: Path) -> bool:
                # Never read a Go trace the upload's meta.json names elsewhere on the server.
                return p.resolve().is_relative_to(resolved)

            try:
                res: DirResult = with_retries(lambda: ingest_recording_dir(
                    state.engine, rec_dir, data_dir=state.config.data_dir, attach=attach,
                    name=name or (rec_dir.name if rec_dir != root else None) or
                    default_name(read_recording(rec_dir)), go_trace_ok=inside))
            except IngestError as e:
                msg = str(e).replace(str(rec_dir), "archive").replace(str(root), "archive")
                raise uploads.BadUpload(msg) from None
    created = res.attached.created if res.attached is not None else res.trace.created
    return jsonify(api.jsonable(res.as_dict())), (201 if created else 200)


@bp.post("/api/traces/<int:trace_id>/poller")
def attach(trace_id: int) -> tuple[Response, int]:
    """Attach an uploaded recording to a stored trace."""
    if get_trace(api.ingest_state(current_app).engine, trace_id) is None:
        return api.error(404, f"no trace {trace_id}"), 404
    return _store(trace_id)


@bp.post("/api/recordings")
def standalone() -> tuple[Response, int]:
    """Store an uploaded recording (as its own trace, or attached to its Go trace)."""
    return _store(None)


def _engine() -> Engine:
    return api.ingest_state(current_app).engine


@bp.get("/api/traces/<int:trace_id>/poller")
def page(trace_id: int) -> Response:
    try:
        return jsonify(api.jsonable(poller_page(_engine(), trace_id)))
    except NoRecording as e:
        return api.error(404, str(e))


@bp.get("/api/traces/<int:trace_id>/poller/alignment")
def get_alignment(trace_id: int) -> Response:
    try:
        return jsonify(api.jsonable(alignment(_engine(), trace_id)))
    except NoRecording as e:
        return api.error(404, str(e))


@bp.get("/api/traces/<int:trace_id>/poller/os-syscalls")
def get_os_syscalls(trace_id: int) -> Response:
    limit = _int_arg("limit", SLOWEST) or SLOWEST
    try:
        return jsonify(api.jsonable(os_syscalls(_engine(), trace_id, max(1, min(limit, 1000)))))
    except NoRecording as e:
        return api.error(404, str(e))


@bp.get("/api/traces/<int:trace_id>/poller/marks")
def get_marks(trace_id: int) -> Response:
    tr = get_trace(_engine(), trace_id)
    if tr is None:
        return api.error(404, f"no trace {trace_id}")
    t1 = _int_arg("t1", tr["first_ts"]) or 0
    t2 = _int_arg("t2", tr["last_ts"]) or 0
    if t2 <= t1:
        return api.error(400, "t2 must be greater than t1")
    n = _int_arg("max", MAX_MARKS) or MAX_MARKS
    return jsonify(api.jsonable(poller_marks(_engine(), trace_id, t1, t2 + 1,
                                             max(1, min(n, 20000)))))
