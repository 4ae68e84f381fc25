"""The figure downloads of the UI server (``gmpscope serve``), a Flask blueprint.

- ``GET /api/traces/<id>/export?diagram=NAME&format=svg|png|html|mermaid|dot&...``:
  one diagram (names: ``GET /api/export/diagrams``) as an attachment; the other
  query parameters are the diagram's options (t1, t2, mode, resource, group...;
  width, height, scale size SVG/PNG). Mermaid and DOT are for state graphs.
- ``GET /api/export/diagrams``: the diagrams, tables and formats.

The figures are built with the app's registry and Plotly, so they live here, in
the app, and the ingest-only server (``gmpscope ingest-server``) never loads
Dash or Plotly; the table downloads are the ingest API's
(:mod:`ingest.api.tables`). Mounted by :func:`app.server.create_app` after the
ingest API. Errors are JSON: 400 for a bad parameter, 404 for an unknown trace,
503 when no Chromium can render an image.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, jsonify, request

from app.context import ui_context
from app.exporting import FORMATS, ExportError, export_diagram, is_state_diagram
from app.figures.registry import UnknownDiagram, collect
from app.figures.source import DiagramSource
from ingest.api.blueprint import error
from ingest.api.files import attachment, safe_filename
from ingest.views.tables import TABLES

bp = Blueprint("gmpscope_app_export", __name__)

#: Query parameters of /export that are not diagram options.
_EXPORT_PARAMS = ("diagram", "format")


def init_app(server: Flask) -> None:
    """Mount the figure downloads on the UI's Flask app."""
    server.register_blueprint(bp)


@bp.get("/api/export/diagrams")
def list_diagrams() -> Response:
    reg = collect()
    return jsonify({
        "diagrams": [{"name": n, "module": reg.modules[n],
                      "formats": [f for f in FORMATS
                                  if f in ("svg", "png", "html") or is_state_diagram(n)]}
                     for n in reg.names],
        "tables": list(TABLES),
        "table_formats": ["csv", "parquet"],
    })


@bp.get("/api/traces/<int:trace_id>/export")
def export_figure(trace_id: int) -> Response:
    diagram = request.args.get("diagram", "")
    fmt = request.args.get("format", "svg").lower()
    if not diagram:
        return error(400, "give ?diagram=NAME (GET /api/export/diagrams lists them)")
    options = {k: v for k, v in request.args.items() if k not in _EXPORT_PARAMS}
    ctx = ui_context()
    source = DiagramSource(engine=ctx.engine, frames=ctx.frames)
    try:
        out = export_diagram(source, trace_id, diagram, fmt, options)
    except UnknownDiagram as e:
        return error(400, str(e))
    except LookupError as e:
        return error(404, str(e.args[0]) if e.args else f"no trace with id {trace_id}")
    except ExportError as e:
        return error(503 if "Chromium" in str(e) else 400, str(e))
    except ValueError as e:
        return error(400, str(e))
    resp = Response(out.data, content_type=out.mimetype)
    return attachment(resp, safe_filename("gmpscope", trace_id, diagram, ext=out.extension))
