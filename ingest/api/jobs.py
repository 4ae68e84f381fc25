"""JSON API of chunked uploads and background ingest jobs (docs/upload.md).

::

    POST   /api/uploads?name=N&size=BYTES    -> 201 {upload_id, ...}
    PUT    /api/uploads/<id>?offset=N         body: the chunk -> {received, size}
    GET    /api/uploads/<id>                  -> {received, size} (resume from received)
    DELETE /api/uploads/<id>                  -> {deleted: true}
    POST   /api/uploads/<id>/complete         -> 202 {job_id}
    GET    /api/jobs/<job_id>                 -> {state, stage, done, total, trace_id, error}
    GET    /api/jobs                          -> {jobs: [...]} (recent, newest first)

Reads and writes need a token when one is configured, as everywhere
(ingest/api/auth.py). The job runner is created when this blueprint is mounted and kept in
``app.extensions`` (no module state).
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState

from ingest.api import blueprint as api
from ingest.api.chunked import Session, Sessions
from ingest.api.job_runner import STALE_MESSAGE, JobRunner
from ingest.api.uploads import BadUpload

EXTENSION = "gmpscope_jobs"

bp = Blueprint("gmpscope_api_jobs", __name__)


def _setup(state: BlueprintSetupState) -> None:
    ingest = api.ingest_state(state.app)  # type: ignore[arg-type]  # a Flask app here
    state.app.extensions[EXTENSION] = JobRunner(ingest.config, ingest.engine)


bp.record_once(_setup)


def job_runner(app: Flask) -> JobRunner:
    """The JobRunner of ``app``."""
    runner: JobRunner = app.extensions[EXTENSION]
    return runner


def _sessions() -> Sessions:
    cfg = api.ingest_state(current_app).config
    return Sessions(cfg.tmp_dir, cfg.max_upload)


api.json_errors(bp)


def _int_arg(name: str) -> int:
    raw = request.args.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise BadUpload(f"{name} must be an integer number of bytes, not {raw[:40]!r}") from None


@bp.post("/api/uploads")
def create_upload() -> tuple[Response, int]:
    """Open a chunked upload of ``size`` bytes named ``name``."""
    s = _sessions().create(request.args.get("name", ""), _int_arg("size"))
    return jsonify(s.as_json()), 201


@bp.put("/api/uploads/<upload_id>")
def put_chunk(upload_id: str) -> Response:
    """One chunk at ``offset`` (where the upload stands, or a retry of the last one)."""
    s = _sessions().write(upload_id, _int_arg("offset"), request.content_length,
                          request.stream)
    return jsonify(s.as_json())


@bp.get("/api/uploads/<upload_id>")
def get_upload(upload_id: str) -> Response:
    return jsonify(_sessions().get(upload_id).as_json())


@bp.delete("/api/uploads/<upload_id>")
def delete_upload(upload_id: str) -> Response:
    _sessions().abort(upload_id)
    return jsonify({"upload_id": upload_id, "deleted": True})


@bp.post("/api/uploads/<upload_id>/complete")
def complete_upload(upload_id: str) -> tuple[Response, int]:
    """Hand the finished upload to a background ingest job."""
    sessions = _sessions()
    runner = job_runner(current_app)

    def start(s: Session, spool: Path) -> str:
        job = runner.submit(s.name, spool, s.size, cleanup=lambda: sessions.finish(s.id))
        return job.id

    def dead(job_id: str) -> bool:
        job = runner.status(job_id)
        return job is None or job.error == STALE_MESSAGE

    s = sessions.complete(upload_id, start, dead)
    return jsonify({**s.as_json(), "job_id": s.job_id}), 202


@bp.get("/api/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    job = job_runner(current_app).status(job_id)
    if job is None:
        return api.error(404, f"no job {job_id[:40]!r}")
    return jsonify(api.jsonable(job.as_json()))


@bp.get("/api/jobs")
def list_jobs() -> Response:
    runner = job_runner(current_app)
    jobs = [runner.status(j.id) for j in runner.files.recent()[:50]]
    return jsonify({"jobs": [api.jsonable(j.as_json()) for j in jobs if j is not None]})

