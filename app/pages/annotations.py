"""User annotations: tasks (a tree by parent), regions by name, logs (filterable).
Every string the program wrote is shown as text, exactly. Data:
:mod:`ingest.annotations_view` (also ``GET /api/traces/<id>/annotations``)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html

from app.components import fmt_count, fmt_ns
from app.context import ui_context
from app.figures.annotations import regions_figure, tasks_figure
from app.pages._views import cfg
from app.router import PageError
from ingest.annotations_view import logs, region_stats, tasks
from ingest.queries import get_trace

ROUTES = ("/traces/<int:trace_id>/annotations",)
TITLE = "Tasks, regions & logs"
LOG_ROWS = 1000
#: Keeps newlines, tabs and long strings visible as they are.
TEXT_STYLE = {"whiteSpace": "pre-wrap", "wordBreak": "break-all"}


def _text(s: str | None) -> html.Span:
    if s == "":
        return html.Span("(empty)", className="muted")
    return html.Span(s or "", style=TEXT_STYLE, className="trace-string")


def _downloads(trace_id: int, table: str) -> html.Span:
    base = f"/api/traces/{trace_id}/tables/{table}"
    return html.Span([" · ", html.A("CSV", href=f"{base}.csv"), " · ",
                      html.A("Parquet", href=f"{base}.parquet")], className="muted")


def _g_link(trace_id: int, g: int | None) -> Any:
    if g is None or g < 0:
        return "–"
    return dcc.Link(str(g), href=f"/traces/{trace_id}/goroutines/{g}")


def task_table(trace_id: int, rows: list[dict[str, Any]], first_ts: int) -> html.Table:
    head = html.Tr([html.Th("task"), html.Th("name"), html.Th("start", className="num"),
                    html.Th("duration", className="num"), html.Th("goroutines"),
                    html.Th("regions", className="num"), html.Th("logs", className="num")])
    body = []
    for r in rows:
        gs = r["goroutines"]
        shown: list[Any] = []
        for g in gs[:6]:
            shown += [_g_link(trace_id, g), " "]
        if len(gs) > 6:
            shown.append(f"… ({len(gs)})")
        start = "before trace" if r["start_ts"] is None else fmt_ns(r["start_ts"] - first_ts)
        dur = fmt_ns(r["duration_ns"]) if r["duration_ns"] is not None else (
            "not ended" if r["end_ts"] is None else "–")
        body.append(html.Tr([
            html.Td(str(r["task_id"]), className="num"),
            html.Td(_text(r["name"]), style={"paddingLeft": f"{8 + 18 * r['depth']}px"}),
            html.Td(start, className="num"), html.Td(dur, className="num"),
            html.Td(shown), html.Td(fmt_count(r["regions"]), className="num"),
            html.Td(fmt_count(r["logs"]), className="num")]))
    return html.Table([html.Thead(head), html.Tbody(body)], className="data",
                      id="annotations-tasks-table")


def region_table(stats: list[dict[str, Any]]) -> html.Table:
    head = html.Tr([html.Th("region"), *(html.Th(h, className="num") for h in (
        "count", "timed", "total", "mean", "p50", "p99", "max", "goroutines"))])
    body = [html.Tr([html.Td(_text(s["name"])),
                     html.Td(fmt_count(s["count"]), className="num"),
                     html.Td(fmt_count(s["timed"]), className="num"),
                     html.Td(fmt_ns(s["total_ns"]), className="num"),
                     html.Td(fmt_ns(s["mean_ns"]), className="num"),
                     html.Td(fmt_ns(s["p50_ns"]), className="num"),
                     html.Td(fmt_ns(s["p99_ns"]), className="num"),
                     html.Td(fmt_ns(s["max_ns"]), className="num"),
                     html.Td(fmt_count(s["goroutines"]), className="num")]) for s in stats]
    return html.Table([html.Thead(head), html.Tbody(body)], className="data",
                      id="annotations-regions-table")


def log_table(trace_id: int, data: dict[str, Any], first_ts: int) -> html.Div:
    head = html.Tr([html.Th("time", className="num"), html.Th("goroutine"), html.Th("task"),
                    html.Th("category"), html.Th("message")])
    body = [html.Tr([html.Td(fmt_ns(r["ts"] - first_ts), className="num"),
                     html.Td(_g_link(trace_id, r["g"])),
                     html.Td("–" if r["task_id"] is None else str(r["task_id"])),
                     html.Td(_text(r["category"])), html.Td(_text(r["message"]))])
            for r in data["rows"]]
    note = f"{data['total']:,} log records match"
    if data["total"] > len(data["rows"]):
        note += f"; the first {len(data['rows']):,} are shown"
    return html.Div([html.P(note, className="muted", id="annotations-logs-count"),
                     html.Table([html.Thead(head), html.Tbody(body)], className="data",
                                id="annotations-logs-table")])


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    trace = get_trace(ctx.engine, trace_id)
    if trace is None:
        raise PageError(f"There is no trace {trace_id}.")
    first, last = int(trace["first_ts"] or 0), int(trace["last_ts"] or 0)
    task_rows = tasks(ctx.engine, trace_id)
    stats = region_stats(ctx.engine, trace_id)
    cats = logs(ctx.engine, trace_id, limit=0)
    api = f"/api/traces/{trace_id}/annotations"
    if not task_rows and not stats and not cats["total"]:
        return html.Div([html.H2("Tasks, regions & logs"),
                         html.P("This trace has no user annotations (runtime/trace tasks, "
                                "regions or logs).", className="muted",
                                id="annotations-none")])
    cat_options = [{"label": f"{c['category'] or '(empty)'} ({c['count']:,})",
                    "value": c["category"]} for c in cats["categories"]]
    return html.Div([
        html.H2(["Tasks, regions & logs · ", html.Span(trace["name"], className="mono")]),
        dcc.Store(id="annotations-trace", data={"id": trace_id, "first": first}),
        html.Div([
            html.H3([f"Tasks ({len(task_rows):,})", _downloads(trace_id, "tasks")]),
            dcc.Graph(id="annotations-tasks-graph", figure=tasks_figure(task_rows, first, last),
                      config=cfg(f"trace{trace_id}-tasks")) if task_rows else None,
            html.Div(task_table(trace_id, task_rows, first),
                     style={"maxHeight": "480px", "overflow": "auto"}),
        ], className="card"),
        html.Div([
            html.H3([f"Regions by name ({len(stats):,} names)",
                     _downloads(trace_id, "regions")]),
            dcc.Graph(id="annotations-regions-graph", figure=regions_figure(stats),
                      config=cfg(f"trace{trace_id}-regions")) if stats else None,
            region_table(stats),
        ], className="card"),
        html.Div([
            html.H3([f"Logs ({cats['total']:,})", _downloads(trace_id, "logs")]),
            html.Div([
                html.Label("category"),
                dcc.Dropdown(id="annotations-log-category", options=cat_options,
                             placeholder="any", style={"width": "340px"}),
                html.Label("text contains"),
                dcc.Input(id="annotations-log-text", debounce=True, style={"width": "220px"}),
                html.Label("goroutine"),
                dcc.Input(id="annotations-log-g", debounce=True, style={"width": "90px"}),
            ], className="controls"),
            dcc.Loading(html.Div(id="annotations-logs")),
        ], className="card"),
        html.P(["JSON: ", html.A(api, href=api, target="_blank")], className="muted"),
    ])


def register(dash_app: Dash) -> None:
    @dash_app.callback(Output("annotations-logs", "children"),
                       Input("annotations-log-category", "value"),
                       Input("annotations-log-text", "value"),
                       Input("annotations-log-g", "value"),
                       State("annotations-trace", "data"))
    def _logs(category: str | None, text: str | None, g: str | None,
              trace: dict[str, int]) -> Any:
        ctx = ui_context()
        goid: int | None = None
        if g not in (None, ""):
            try:
                goid = int(str(g).strip())
            except ValueError:
                return html.P(f"goroutine must be a number, not {g!r}", className="error-text")
        data = logs(ctx.engine, trace["id"], category=category, text=text or None, g=goid,
                    limit=LOG_ROWS)
        return log_table(trace["id"], data, trace["first"])
