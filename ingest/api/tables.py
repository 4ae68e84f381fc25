"""Downloads: the tables of a trace as files.

- ``GET /api/traces/<id>/tables/<name>.csv`` and ``.parquet``, names in
  :data:`ingest.views.tables.TABLES`; ``?t1=&t2=`` (trace ns) bound the
  time-bounded ones. CSV is streamed row batch by row batch; Parquet is written
  batch by batch to a temporary file, then sent. CSV text cells that a
  spreadsheet would take for a formula get a leading ``'`` (see
  :mod:`ingest.views.tables`).

Figures are the UI's: ``GET /api/traces/<id>/export`` and ``GET /api/export/diagrams``
are served by ``app.export_api`` (``gmpscope serve`` only).

Errors are JSON: 400 for a bad parameter, 404 for an unknown trace or table.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from flask import (
    Blueprint,
    Response,
    current_app,
    request,
    send_file,
    stream_with_context,
)

from ingest.api.blueprint import error, ingest_state
from ingest.api.files import attachment, safe_filename
from ingest.views import tables as et

bp = Blueprint("gmpscope_api_tables", __name__)


def _window() -> tuple[int | None, int | None]:
    out: list[int | None] = []
    for key in ("t1", "t2"):
        raw = request.args.get(key, "")
        try:
            out.append(int(raw) if raw != "" else None)
        except ValueError:
            raise _BadParam(f"{key} must be trace ns (an integer), not {raw!r}") from None
    return out[0], out[1]


class _BadParam(ValueError):
    pass


@bp.errorhandler(_BadParam)
def _bad_param(e: _BadParam) -> Response:
    return error(400, str(e))


def _table_request(trace_id: int, name: str) -> tuple[int | None, int | None] | Response:
    t1, t2 = _window()
    try:
        et.check_request(ingest_state(current_app).engine, trace_id, name, t1, t2)
    except LookupError as e:
        return error(404, str(e.args[0]) if e.args else "not found")
    except ValueError as e:
        return error(400, str(e))
    return t1, t2


def _table_filename(trace_id: int, name: str, ext: str, window: tuple[Any, Any]) -> str:
    parts: list[object] = ["gmpscope", trace_id, name]
    if window != (None, None):
        parts += [window[0] if window[0] is not None else "start",
                  window[1] if window[1] is not None else "end"]
    return safe_filename(*parts, ext=ext)


@bp.get("/api/traces/<int:trace_id>/tables/<name>.csv")
def table_csv(trace_id: int, name: str) -> Response:
    window = _table_request(trace_id, name)
    if isinstance(window, Response):
        return window
    engine = ingest_state(current_app).engine
    chunks = et.iter_csv(engine, trace_id, name, *window)
    resp = Response(stream_with_context(chunks), content_type="text/csv; charset=utf-8")
    return attachment(resp, _table_filename(trace_id, name, "csv", window))


@bp.get("/api/traces/<int:trace_id>/tables/<name>.parquet")
def table_parquet(trace_id: int, name: str) -> Response:
    window = _table_request(trace_id, name)
    if isinstance(window, Response):
        return window
    st = ingest_state(current_app)
    st.config.tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="export-", suffix=".parquet", dir=st.config.tmp_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            et.write_parquet(st.engine, trace_id, name, f, *window)
        handle = open(tmp, "rb")  # noqa: SIM115 - send_file closes it
    finally:
        # Unlinked at once: the open handle keeps the data until the response is sent.
        os.unlink(tmp)
    resp = send_file(handle, mimetype="application/vnd.apache.parquet", as_attachment=True,
                     download_name=_table_filename(trace_id, name, "parquet", window),
                     max_age=0)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp
