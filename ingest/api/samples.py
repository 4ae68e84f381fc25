"""JSON API of the sample traces' lines (the library page's hints).

::

    GET /api/samples -> {samples: [{id, name, path, shows, page, hint, href}]}

One entry per stored trace that is a sample ``gmpscope serve --samples DIR`` loaded
(ingest/views/samples.py), newest first as ``GET /api/traces``. Mounted by the
explorer (app/server.py), whose library page shows the same lines.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ingest.api import blueprint as api
from ingest.store.traces import list_traces
from ingest.views.samples import hints_for

bp = Blueprint("gmpscope_api_samples", __name__)
api.json_errors(bp)


@bp.get("/api/samples")
def samples() -> Response:
    state = api.ingest_state(current_app)
    traces = list_traces(state.engine)
    hints = hints_for(traces, state.config.data_dir)
    return jsonify({"samples": [{"id": t["id"], "name": t["name"], **hints[t["id"]]}
                                for t in traces if t["id"] in hints]})
