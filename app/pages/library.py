"""The library: upload traces (chunked, in the background) and list, open, compare, delete.

Uploading is plain JavaScript (static/upload.js): a file of 1 GB cannot go through
a Dash callback (dcc.Upload reads it whole into the browser's memory and sends it as
base64). The script sends it in chunks to ``/api/uploads``, follows the ingest job at
``/api/jobs/<id>`` and then bumps ``library-refresh``, which re-renders the table here.
Deleting also goes through the JSON API from the script, with the bearer token the
user typed or the login's session cookie (the Dash callback endpoint takes the read
token, so no callback here ever writes: docs/security.md). The table reads
:func:`ingest.store.traces.list_traces`, the same query as ``GET /api/traces``.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from dash import ALL, Dash, Input, Output, dcc, html
from sqlalchemy import Engine

from app.components import fmt_count, fmt_ns
from app.context import ui_context
from ingest.live.demo import running_demo
from ingest.store.traces import count_live_windows, list_traces
from ingest.views.samples import hints_for

ROUTES = ("/",)
TITLE = "library"
#: Bytes per chunk the browser sends (the server takes up to ingest.api.chunked.MAX_CHUNK).
CHUNK_BYTES = 8 << 20


def fmt_bytes(n: int | None) -> str:
    """A byte count as a short human string (25.4 MB)."""
    if n is None:
        return "–"
    v = float(n)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{int(v)} B"


def fmt_limit(n: int) -> str:
    """The upload limit in the binary units it is usually set in (2 GiB)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift:,} {unit}"
    return fmt_bytes(n)


def fmt_when(iso: str | None) -> str:
    """An ingest time (ISO, UTC) as ``2026-12-02 15:20 UTC``."""
    if not iso:
        return "–"
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return iso


def _status(t: dict[str, Any]) -> Any:
    if t["status"] == "complete":
        return html.Span("complete", className="muted")
    lost = t["loss"]["bytes_lost"]
    return html.Span(f"damaged: {fmt_bytes(lost)} lost", className="bad",
                     title=t["loss"]["error"])


def _text(text: str) -> list[Any]:
    """Markdown's `code` spans as <code>, the rest as text (the samples' README lines)."""
    parts = re.split(r"`([^`]*)`", text)
    return [html.Code(p) if i % 2 else p for i, p in enumerate(parts) if p]


def sample_line(tid: int, hint: dict[str, Any]) -> Any:
    """A sample's line under its name: what it shows, and the page to open first."""
    return html.Div([
        *_text(hint["shows"]), html.Br(),
        html.Span("Click first: ", className="muted"),
        dcc.Link(hint["page"], href=hint["href"], className="sample-page"),
        *([" (", *_text(hint["hint"]), ")"] if hint["hint"] else []),
    ], className="sample-hint small", id=f"library-hint-{tid}")


def _row(t: dict[str, Any], hint: dict[str, Any] | None = None) -> html.Tr:
    tid = t["id"]
    duration = (t["last_ts"] - t["first_ts"]) if t["first_ts"] is not None and \
        t["last_ts"] is not None else None
    return html.Tr([
        html.Td(dcc.Checklist(id={"type": "library-pick", "index": tid},
                              options=[{"label": "", "value": tid}], value=[],
                              className="pick")),
        html.Td(str(tid), className="num"),
        html.Td([dcc.Link(t["name"], href=f"/traces/{tid}/overview", className="trace-link"),
                 *([sample_line(tid, hint)] if hint is not None else [])]),
        html.Td(t["go_version"]),
        html.Td(fmt_ns(duration), className="num"),
        html.Td(fmt_count(t["events"]), className="num"),
        html.Td(fmt_count(t["goroutines"]), className="num"),
        html.Td(fmt_bytes(t["size_bytes"]), className="num"),
        html.Td(_status(t)),
        html.Td(fmt_when(t["created_at"])),
        html.Td([
            dcc.Link("Open", href=f"/traces/{tid}/overview", className="button secondary"),
            html.Button("Delete", className="danger library-delete",
                        **{"data-trace-id": str(tid), "data-trace-name": t["name"]}),
        ], className="actions"),
    ], id=f"library-row-{tid}", className="trace-row")


HEADERS = (("", ""), ("id", "num"), ("name", ""), ("trace format", ""), ("duration", "num"),
           ("events", "num"), ("goroutines", "num"), ("size", "num"), ("status", ""),
           ("ingested", ""), ("", ""))


def trace_table(traces: list[dict[str, Any]],
                hints: dict[int, dict[str, Any]] | None = None) -> Any:
    """The table of stored traces (newest first), or a hint when there are none;
    ``hints``: the samples' lines by trace id (ingest/views/samples.py)."""
    if not traces:
        return html.P("No traces yet: drop a Go execution trace above "
                      "(from runtime/trace, go test -trace or /debug/pprof/trace).",
                      className="muted", id="library-empty")
    head = html.Thead(html.Tr([html.Th(h, className=c) for h, c in HEADERS]))
    hints = hints or {}
    return html.Table([head, html.Tbody([_row(t, hints.get(t["id"])) for t in traces])],
                      className="data library-table")


def layout(query: dict[str, str], **args: Any) -> Any:
    ctx = ui_context()
    limit = ctx.settings.max_upload
    # Read by upload.js: the chunk size to send and the limit to check before sending.
    zone_data: dict[str, Any] = {"data-chunk": str(CHUNK_BYTES), "data-limit": str(limit)}
    upload = html.Div([
        html.H3("Add traces"),
        html.Div([
            html.Div("Drop Go execution traces here", className="drop-title"),
            html.Div([html.Span("or ", className="muted"),
                      # upload.js puts the <input type=file> here (Dash has no file input
                      # that leaves the file in the browser).
                      html.Span(id="library-picker")]),
            html.Div(f"Up to {fmt_limit(limit)} per file; sent in "
                     f"{CHUNK_BYTES >> 20} MiB chunks, then decoded and loaded in the "
                     "background. Closing or reloading the tab stops an upload still being sent.",
                     className="muted small"),
        ], id="library-dropzone", className="dropzone", tabIndex="0", **zone_data),
        html.Div([
            html.Label("Token", htmlFor="library-token"),
            dcc.Input(id="library-token", type="password", persistence=True,
                      persistence_type="local", autoComplete="off",
                      style={"width": "340px"},
                      placeholder="write token, unless you logged in with it"),
        ], className="controls token"),
        # Filled by upload.js only (one row per file); no callback writes here.
        html.Div(id="library-progress", className="upload-list", role="status"),
    ], className="card")
    traces = html.Div([
        html.H3("Traces"),
        html.Div([
            html.Div(id="library-compare-box", children=_compare([])),
            html.A("JSON", href="/api/traces", className="muted", target="_blank"),
        ], className="controls"),
        # Messages of deletes (upload.js).
        html.Div(id="library-status", role="status"),
        html.Div(library_table(ctx.engine, ctx.settings.data_dir), id="library-table"),
    ], className="card")
    demo = running_demo(ctx.settings.data_dir)
    return html.Div([html.H2("Library"), *([demo_card(demo)] if demo else []), upload, traces,
                     dcc.Store(id="library-refresh")], className="library")


def demo_card(demo: dict[str, Any]) -> Any:
    """What the live demo ``make run`` started runs, and how to stop it
    (its note, ingest/live/demo.py)."""
    session = str(demo.get("session", "demo"))
    procs = [html.Li([html.Code(str(p.get("name", "?"))), f" (pid {p.get('pid')}): ",
                      str(p.get("what", "")), "" if p.get("alive") else " (not running)"])
             for p in demo["processes"]]
    return html.Div([
        html.H3("Live demo"),
        html.P([f"{demo.get('started_by', 'make run')} runs a real Go service and watches it: ",
                dcc.Link(f"open /live/{session}", href=f"/live/{session}",
                         id="library-demo-link"), "."]),
        html.Ul(procs),
        html.P(["To stop it: ", *_text(str(demo.get("stop", "")))], className="muted",
               id="library-demo-stop"),
    ], className="card", id="library-demo")


def library_table(engine: Engine, data_dir: Path) -> Any:
    """The trace table, without the windows of live sessions (they have their own
    pages; a service watched for a day keeps hundreds), saying how many it leaves out."""
    traces = list_traces(engine)
    table = trace_table(traces, hints_for(traces, data_dir))
    hidden = count_live_windows(engine)
    if not hidden:
        return table
    note = html.P([f"{hidden:,} windows of live sessions are not listed here: see ",
                   dcc.Link("Live", href="/live"), " (or ",
                   html.A("all traces as JSON", href="/api/traces?live_windows=1",
                          target="_blank"), ")."],
                  className="muted", id="library-live-note")
    return html.Div([table, note])


def _compare(picked: list[int]) -> Any:
    if len(picked) == 2:
        a, b = sorted(picked)
        return dcc.Link(f"Compare {a} and {b}", href=f"/compare?a={a}&b={b}",
                        className="button", id="library-compare")
    hint = ("Tick two traces to compare them." if len(picked) < 2
            else f"{len(picked)} ticked: tick exactly two to compare.")
    return html.Span(hint, className="muted", id="library-compare")


def register(dash_app: Dash) -> None:
    @dash_app.callback(Output("library-table", "children"), Input("library-refresh", "data"),
                       prevent_initial_call=True)
    def _refresh(_bump: Any) -> Any:
        ctx = ui_context()
        return library_table(ctx.engine, ctx.settings.data_dir)

    @dash_app.callback(Output("library-compare-box", "children"),
                       Input({"type": "library-pick", "index": ALL}, "value"))
    def _pick(values: list[list[int] | None]) -> Any:
        return _compare([v for vs in values for v in (vs or [])])
