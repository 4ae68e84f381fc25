"""The trace as it was stored: ``GET /api/traces/<id>/trace``.

Streams the kept raw copy (ingest.load.raw_copy), decompressed, byte for byte
the file that was ingested, so that it can be opened in ``go tool trace`` or
gotraceui. 404 (JSON) for an unknown trace, or one whose raw copy is not
kept (a decoded Parquet directory has none).
"""

from __future__ import annotations

from pathlib import PurePath

from flask import Blueprint, Response, current_app, stream_with_context

from ingest.api.blueprint import error, ingest_state
from ingest.api.files import attachment, safe_filename
from ingest.load.raw_copy import kept_path, read_raw
from ingest.store.traces import get_trace

bp = Blueprint("gmpscope_api_raw", __name__)


@bp.get("/api/traces/<int:trace_id>/trace")
def raw_trace(trace_id: int) -> Response:
    """The raw trace file of ``trace_id``, as an attachment."""
    st = ingest_state(current_app)
    row = get_trace(st.engine, trace_id)
    if row is None:
        return error(404, f"no trace with id {trace_id}")
    path = kept_path(st.config.data_dir, str(row["sha256"]))
    if path is None:
        return error(404, f"trace {trace_id}: no raw trace file is kept "
                          f"(it was loaded as {row['source']})")
    resp = Response(stream_with_context(read_raw(path)), mimetype="application/octet-stream")
    stem = PurePath(str(row["name"])).name.removesuffix(".trace") or f"trace-{trace_id}"
    return attachment(resp, safe_filename(stem, ext="trace"))
