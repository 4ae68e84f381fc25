"""Download links for figures and tables, next to a graph or a table.

``export_links(trace_id, "timeline", {"mode": "p", "t1": ..., "t2": ...})``
renders "Download: SVG · PNG · HTML" (plus "Mermaid · DOT" for state graphs)
pointing at ``/api/traces/<id>/export``; ``table_links(trace_id, "syscalls")``
renders "CSV · Parquet" pointing at ``/api/traces/<id>/tables/<name>.csv|.parquet``.
Plain ``html.A`` links (a full request, not Dash routing); the server answers
with an attachment. A page whose options change in a callback returns a fresh
``export_links(...)`` as the children of a container (or updates ``href``s
with :func:`export_href`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from dash import html

FIGURE_FORMATS = (("svg", "SVG"), ("png", "PNG"), ("html", "HTML"))
GRAPH_TEXT_FORMATS = (("mermaid", "Mermaid"), ("dot", "DOT"))
TABLE_FORMATS = (("csv", "CSV"), ("parquet", "Parquet"))


def _is_state_diagram(diagram: str) -> bool:
    return diagram == "states" or diagram.startswith("states-")


def _clean(options: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (options or {}).items()
            if v is not None and v != "" and v is not False}


def export_href(trace_id: int, diagram: str, fmt: str,
                options: Mapping[str, Any] | None = None) -> str:
    """The export API URL of one diagram in one format (None/'' options dropped)."""
    query = {"diagram": diagram, "format": fmt, **_clean(options)}
    return f"/api/traces/{int(trace_id)}/export?{urlencode(query)}"


def table_href(trace_id: int, table: str, fmt: str, t1: int | None = None,
               t2: int | None = None) -> str:
    """The table download URL (csv or parquet), optionally bounded to [t1, t2)."""
    query = urlencode(_clean({"t1": t1, "t2": t2}))
    return f"/api/traces/{int(trace_id)}/tables/{table}.{fmt}" + (f"?{query}" if query else "")


def _links(items: list[tuple[str, str, str]], label: str, id_prefix: str | None,
           class_name: str) -> html.Div:
    children: list[Any] = [html.Span(label, className="export-label")]
    for i, (fmt, text, href) in enumerate(items):
        if i:
            children.append(html.Span(" · ", className="export-sep"))
        kw: dict[str, Any] = {"id": f"{id_prefix}-{fmt}"} if id_prefix else {}
        children.append(html.A(text, href=href, download="", className=f"export-{fmt}",
                               title=f"Download as {text}", **kw))
    return html.Div(children, className=class_name)


def export_links(trace_id: int, diagram: str, options: Mapping[str, Any] | None = None,
                 id_prefix: str | None = None) -> html.Div:
    """"Download: SVG · PNG · HTML" (and "Mermaid · DOT" for state graphs) of a diagram.

    ``id_prefix`` gives the links ids ``<prefix>-svg``, ``<prefix>-png``...
    """
    formats = list(FIGURE_FORMATS)
    if _is_state_diagram(diagram):
        formats += GRAPH_TEXT_FORMATS
    items = [(fmt, text, export_href(trace_id, diagram, fmt, options))
             for fmt, text in formats]
    return _links(items, "Download: ", id_prefix, "export-links")


def table_links(trace_id: int, table: str, t1: int | None = None, t2: int | None = None,
                id_prefix: str | None = None, label: str = "Table: ") -> html.Div:
    """"CSV · Parquet" downloads of one of the trace's tables."""
    items = [(fmt, text, table_href(trace_id, table, fmt, t1, t2))
             for fmt, text in TABLE_FORMATS]
    return _links(items, label, id_prefix, "export-links table-links")


def perfetto_href(trace_id: int) -> str:
    """The Perfetto export's URL (ingest.api.perfetto)."""
    return f"/api/traces/{int(trace_id)}/perfetto"


def perfetto_button(trace_id: int, id_: str | None = None) -> html.A:
    """A button downloading the whole trace for the Perfetto UI (docs/perfetto.md)."""
    kw: dict[str, Any] = {"id": id_} if id_ else {}
    return html.A("Export to Perfetto", href=perfetto_href(trace_id), download="",
                  className="button secondary export-perfetto",
                  title="Download the trace as a Perfetto protobuf trace (.pftrace) to open "
                  "in ui.perfetto.dev: a track per P, M and goroutine, wake-up flows, "
                  "counters", **kw)
