"""User annotations: task types (a summary per task name), a page of tasks (by type,
longest or earliest first, with previous/next), regions by name, logs (filterable).
Every string the program wrote is shown as text, exactly. Data:
:mod:`ingest.views.annotations` (also ``GET /api/traces/<id>/annotations``)."""

from __future__ import annotations

from typing import Any, cast

from dash import Dash, Input, Output, State, callback_context, dcc, html
from dash.dash_table.DataTable import DataTable

from app.components import fmt_count, fmt_ns
from app.context import ui_context
from app.figures.annotations import regions_figure, tasks_figure
from app.pages._views import cfg
from app.router import PageError
from ingest.store.traces import get_trace
from ingest.views.annotations import logs, region_stats, task_page, task_types

ROUTES = ("/traces/<int:trace_id>/annotations",)
TITLE = "Tasks, regions & logs"
LOG_ROWS = 1000
#: Tasks in a page of the task table (previous/next move by a page); the
#: figure draws the page's tasks.
TASK_PAGE = 50
TASK_SORT_OPTIONS = [{"label": "longest first", "value": "duration"},
                     {"label": "earliest first", "value": "start"}]
#: Keeps newlines, tabs and long strings visible as they are.
TEXT_STYLE = {"whiteSpace": "pre-wrap", "wordBreak": "break-all"}


def _text(s: str | None) -> html.Span:
    if s == "":
        return html.Span("(empty)", className="muted")
    return html.Span(s or "", style=TEXT_STYLE, className="trace-string")


def _label(s: str, limit: int = 60) -> str:
    """A short one-line version of a trace string for a dropdown label (the
    value stays the full string)."""
    if s == "":
        return "(empty)"
    s = "".join(ch if ch.isprintable() else "\ufffd" for ch in s)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _downloads(trace_id: int, table: str) -> html.Span:
    base = f"/api/traces/{trace_id}/tables/{table}"
    return html.Span([" · ", html.A("CSV", href=f"{base}.csv"), " · ",
                      html.A("Parquet", href=f"{base}.parquet")], className="muted")


def _g_link(trace_id: int, g: int | None) -> Any:
    if g is None or g < 0:
        return "–"
    return dcc.Link(str(g), href=f"/traces/{trace_id}/goroutines/{g}")


#: DataTable styles: one React component per table (thousands of html.Td
#: components make Dash's renderer take minutes), strings kept as they are.
CELL_STYLE = {"whiteSpace": "pre-wrap", "wordBreak": "break-all", "textAlign": "left",
              "fontFamily": "system-ui, sans-serif", "fontSize": "13px", "padding": "3px 8px",
              "maxWidth": "700px", "height": "auto"}
HEADER_STYLE = {"fontWeight": "600", "backgroundColor": "#f3f4f7"}


def _data_table(table_id: str, columns: list[tuple[str, str]], rows: list[dict[str, Any]],
                page_size: int) -> DataTable:
    return DataTable(
        id=table_id, columns=[{"name": n, "id": i} for i, n in columns], data=cast(Any, rows),
        page_size=page_size, sort_action="native", style_cell=CELL_STYLE,
        style_header=HEADER_STYLE, style_table={"overflowX": "auto"})


def task_table(trace_id: int, rows: list[dict[str, Any]], first_ts: int) -> Any:
    """A page of tasks; the name column is indented by depth (the task's
    ancestors in the trace: its parent may be on another page)."""
    data = []
    for r in rows:
        gs = r["goroutines"]
        start = "before trace" if r["start_ts"] is None else fmt_ns(r["start_ts"] - first_ts)
        dur = fmt_ns(r["duration_ns"]) if r["duration_ns"] is not None else (
            "not ended" if r["end_ts"] is None else "–")
        data.append({"task": r["task_id"], "depth": r["depth"],
                     "name": ("    " * r["depth"]) + (r["name"] if r["name"] else "(no name)"),
                     "parent": "" if r["parent_id"] is None else r["parent_id"],
                     "start": start, "duration": dur,
                     "goroutines": " ".join(str(g) for g in gs[:8]) + (
                         f" … ({len(gs)})" if len(gs) > 8 else ""),
                     "regions": r["regions"], "logs": r["logs"]})
    return _data_table("annotations-tasks-table", [
        ("task", "task"), ("name", "name"), ("parent", "parent"), ("start", "start"),
        ("duration", "duration"), ("goroutines", "goroutines"), ("regions", "regions"),
        ("logs", "logs")], data, page_size=TASK_PAGE)


#: A statistics column: (heading, key, formatter).
_Stat = tuple[str, str, Any]
_TASK_STATS: tuple[_Stat, ...] = (
    ("count", "count", fmt_count), ("timed", "timed", fmt_count),
    ("total", "total_ns", fmt_ns), ("mean", "mean_ns", fmt_ns), ("p50", "p50_ns", fmt_ns),
    ("p90", "p90_ns", fmt_ns), ("p99", "p99_ns", fmt_ns), ("max", "max_ns", fmt_ns))
_REGION_STATS: tuple[_Stat, ...] = (
    ("count", "count", fmt_count), ("timed", "timed", fmt_count),
    ("total", "total_ns", fmt_ns), ("mean", "mean_ns", fmt_ns), ("p50", "p50_ns", fmt_ns),
    ("p99", "p99_ns", fmt_ns), ("max", "max_ns", fmt_ns),
    ("goroutines", "goroutines", fmt_count))


def _stats_table(label: str, stats: list[dict[str, Any]], columns: tuple[_Stat, ...],
                 table_id: str) -> html.Table:
    """One row per name (the first column, ``label``), then ``columns``."""
    head = html.Tr([html.Th(label), *(html.Th(h, className="num") for h, _, _ in columns)])
    body = [html.Tr([html.Td(_text(s["name"])),
                     *(html.Td(fmt(s[key]), className="num") for _, key, fmt in columns)])
            for s in stats]
    return html.Table([html.Thead(head), html.Tbody(body)], className="data", id=table_id)


def task_types_table(types: list[dict[str, Any]]) -> html.Table:
    """One row per task name: count, timed, total and duration percentiles."""
    return _stats_table("task type", types, _TASK_STATS, "annotations-task-types-table")


def _type_value(name: str) -> str:
    """A task type as a dropdown value ("" would read as no choice)."""
    return "=" + name


def task_section(trace_id: int, page: dict[str, Any], first: int, last: int) -> list[Any]:
    """The range shown, the page's figure and table."""
    rows, total, off = page["rows"], page["total"], page["offset"]
    shown = (f"tasks {off + 1:,}–{off + len(rows):,} of {total:,}" if rows
             else f"no tasks here ({total:,} match)")
    return [html.P(shown, className="muted", id="annotations-tasks-range"),
            dcc.Graph(id="annotations-tasks-graph",
                      figure=tasks_figure(rows, first, last, limit=TASK_PAGE, total=total),
                      config=cfg(f"trace{trace_id}-tasks")) if rows else None,
            task_table(trace_id, rows, first)]


def region_table(stats: list[dict[str, Any]]) -> html.Table:
    """One row per region name: count, timed, total, percentiles, goroutines."""
    return _stats_table("region", stats, _REGION_STATS, "annotations-regions-table")


def log_table(trace_id: int, data: dict[str, Any], first_ts: int) -> html.Div:
    rows = [{"time": fmt_ns(r["ts"] - first_ts), "ts": r["ts"], "goroutine": r["g"],
             "task": "" if r["task_id"] is None else r["task_id"],
             "category": r["category"], "message": r["message"]} for r in data["rows"]]
    note = f"{data['total']:,} log records match"
    if data["total"] > len(data["rows"]):
        note += f"; the first {len(data['rows']):,} are shown"
    return html.Div([html.P(note, className="muted", id="annotations-logs-count"),
                     _data_table("annotations-logs-table", [
                         ("time", "time"), ("goroutine", "goroutine"), ("task", "task"),
                         ("category", "category"), ("message", "message")], rows,
                         page_size=50)])


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    trace = get_trace(ctx.engine, trace_id)
    if trace is None:
        raise PageError(f"There is no trace {trace_id}.")
    first, last = int(trace["first_ts"] or 0), int(trace["last_ts"] or 0)
    frames = ctx.frames.get(trace_id)
    types = task_types(ctx.engine, trace_id, frames)
    page = task_page(ctx.engine, trace_id, frames, limit=TASK_PAGE)
    n_tasks = sum(t["count"] for t in types)
    stats = region_stats(ctx.engine, trace_id, frames)
    # The first page of logs comes with the page (no callback's round trip).
    cats = logs(ctx.engine, trace_id, frames, limit=LOG_ROWS)
    api = f"/api/traces/{trace_id}/annotations"
    if not n_tasks and not stats and not cats["total"]:
        return html.Div([html.H2("Tasks, regions & logs"),
                         html.P("This trace has no user annotations (runtime/trace tasks, "
                                "regions or logs).", className="muted",
                                id="annotations-none")])
    cat_options = [{"label": f"{_label(c['category'])} ({c['count']:,})",
                    "value": c["category"]} for c in cats["categories"]]
    return html.Div([
        html.H2(["Tasks, regions & logs · ", html.Span(trace["name"], className="mono")]),
        dcc.Store(id="annotations-trace", data={"id": trace_id, "first": first,
                                                "last": last}),
        dcc.Store(id="annotations-task-offset", data=0),
        html.Div([
            html.H3([f"Tasks ({n_tasks:,}, {len(types):,} types)",
                     _downloads(trace_id, "tasks")]),
            task_types_table(types),
            html.Div([
                html.Label("type"),
                dcc.Dropdown(id="annotations-task-type", placeholder="any",
                             options=[{"label": f"{_label(t['name'])} ({t['count']:,})",
                                       "value": _type_value(t["name"])} for t in types],
                             style={"width": "340px"}),
                dcc.RadioItems(id="annotations-task-sort", options=TASK_SORT_OPTIONS,
                               value="duration", inline=True),
                html.Button("← previous", id="annotations-tasks-prev", n_clicks=0,
                            disabled=True),
                html.Button("next →", id="annotations-tasks-next", n_clicks=0,
                            disabled=page["total"] <= TASK_PAGE),
            ], className="controls"),
            dcc.Loading(html.Div(task_section(trace_id, page, first, last),
                                 id="annotations-tasks")),
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
            dcc.Loading(html.Div(log_table(trace_id, cats, first), id="annotations-logs")),
        ], className="card"),
        html.P(["JSON: ", html.A(api, href=api, target="_blank")], className="muted"),
    ])


def register(dash_app: Dash) -> None:
    @dash_app.callback(Output("annotations-tasks", "children"),
                       Output("annotations-task-offset", "data"),
                       Output("annotations-tasks-prev", "disabled"),
                       Output("annotations-tasks-next", "disabled"),
                       Input("annotations-task-type", "value"),
                       Input("annotations-task-sort", "value"),
                       Input("annotations-tasks-prev", "n_clicks"),
                       Input("annotations-tasks-next", "n_clicks"),
                       State("annotations-task-offset", "data"),
                       State("annotations-trace", "data"),
                       prevent_initial_call=True)
    def _tasks(type_value: str | None, sort: str | None, _prev: int, _next: int,
               offset: int | None, trace: dict[str, int]) -> Any:
        trig = callback_context.triggered_id
        off = int(offset or 0)
        if trig == "annotations-tasks-next":
            off += TASK_PAGE
        elif trig == "annotations-tasks-prev":
            off = max(0, off - TASK_PAGE)
        else:  # another type or order: back to the first page
            off = 0
        name = type_value[1:] if type_value else None
        ctx = ui_context()
        page = task_page(ctx.engine, trace["id"], ctx.frames.get(trace["id"]), limit=TASK_PAGE,
                         offset=off, name=name, sort=sort if sort == "start" else "duration")
        return (task_section(trace["id"], page, trace["first"], trace["last"]), off,
                off == 0, off + TASK_PAGE >= page["total"])

    @dash_app.callback(Output("annotations-logs", "children"),
                       Input("annotations-log-category", "value"),
                       Input("annotations-log-text", "value"),
                       Input("annotations-log-g", "value"),
                       State("annotations-trace", "data"), prevent_initial_call=True)
    def _logs(category: str | None, text: str | None, g: str | None,
              trace: dict[str, int]) -> Any:
        ctx = ui_context()
        goid: int | None = None
        if g not in (None, ""):
            try:
                goid = int(str(g).strip())
            except ValueError:
                return html.P(f"goroutine must be a number, not {g!r}", className="error-text")
        data = logs(ctx.engine, trace["id"], ctx.frames.get(trace["id"]), category=category,
                    text=text or None, g=goid, limit=LOG_ROWS)
        return log_table(trace["id"], data, trace["first"])
