"""The Perfetto export of a trace.

- ``GET /api/traces/<id>/perfetto``: the trace as a Perfetto protobuf trace
  (track events: a track per P, per M and per goroutine under its group,
  wake-up flows, counters), streamed as it is encoded
  (:func:`ingest.views.perfetto.stream`); an attachment named
  ``gmpscope-<id>-perfetto.pftrace``. 404 (JSON) for an unknown trace.

Served by both servers (``gmpscope serve`` and ``gmpscope ingest-server``):
it needs no Plotly. docs/perfetto.md says what is in the file.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, stream_with_context

from ingest.api.blueprint import error, ingest_state
from ingest.api.files import attachment, safe_filename
from ingest.derive.frames import TraceNotFound
from ingest.views import perfetto

bp = Blueprint("gmpscope_api_perfetto", __name__)

#: What a Perfetto trace file is sent as (Perfetto's own name for the format).
MIMETYPE = "application/x-protobuf"


@bp.get("/api/traces/<int:trace_id>/perfetto")
def perfetto_trace(trace_id: int) -> Response:
    st = ingest_state(current_app)
    try:
        frames = st.frames.get(trace_id)
    except TraceNotFound:
        return error(404, f"no trace with id {trace_id}")
    chunks = perfetto.stream(st.engine, frames)
    resp = Response(stream_with_context(chunks), content_type=MIMETYPE)
    return attachment(resp, safe_filename("gmpscope", trace_id, "perfetto", ext="pftrace"))
