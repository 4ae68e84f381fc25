"""SQL page: ``/sql?q=SELECT...``: one read-only query over the served database.

The query lives in the URL (``q``), so a reload or a shared link runs it
again: the page runs it while rendering, through the same query layer as
``GET /api/sql`` (:mod:`ingest.views.sql`). Run puts the editor's text into
the URL, which renders the page again. The result shows as a table and a
quick chart (:mod:`app.figures.sql`) whose columns are picked below it; the
link under the chart carries those choices too (``x``, ``y``, ``color``,
``kind``). ``trace`` chooses the trace of the example queries (the newest by
default). docs/sql.md.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from app.components import fmt_count
from app.context import ui_context
from app.figures.sql import KINDS, ROW, numeric_columns, pick_axes, result_figure
from app.pages._analysis import data_table, graph_cfg
from ingest.store.traces import list_traces
from ingest.views.sql import SQLError, SQLResult, run_query
from ingest.views.sql_examples import examples, newest_trace_id

ROUTES = ("/sql",)
TITLE = "SQL"
#: Rows per page of the result table (all rows stay in the browser: sorting
#: and paging happen there).
PAGE_ROWS = 50
#: The chart parameters the URL may carry.
CHART_KEYS = ("x", "y", "color", "kind")


def sql_href(sql: str, **extra: str | None) -> str:
    """The page's URL for ``sql`` (and chart choices): what Run and the
    example links open, and what a user shares."""
    params = {"q": sql, **{k: v for k, v in extra.items() if v}}
    return "/sql?" + urlencode(params)


def _examples(trace_id: int | None, dialect: str, traces: list[dict[str, Any]]) -> Any:
    if trace_id is None:
        return html.P("Examples appear once a trace is stored.", className="muted")
    links = [dcc.Link(ex.title, href=sql_href(ex.sql, trace=str(trace_id)),
                      className="button secondary", id=f"sql-example-{ex.name}",
                      title=ex.what)
             for ex in examples(dialect, trace_id)]
    picker = dcc.Dropdown(id="sql-trace", value=trace_id, clearable=False,
                          style={"width": "300px"},
                          options=[{"label": f"{t['id']}: {t['name']}", "value": t["id"]}
                                   for t in traces])
    return html.Div([html.Span("Examples on trace", className="muted"), picker, *links],
                    className="controls", id="sql-examples")


def layout(query: dict[str, str], **_: Any) -> Any:
    ui = ui_context()
    engine = ui.engine
    sql = query.get("q", "")
    try:
        trace_id = int(query["trace"]) if "trace" in query else newest_trace_id(engine)
    except ValueError:
        trace_id = newest_trace_id(engine)
    head = [
        html.H2("SQL"),
        html.P(["One read-only statement (SELECT, WITH, VALUES) over every stored trace: "
                "the tables and views of docs/schema.md (",
                html.Code("intervals"), ", ", html.Code("interval_view"), ", ",
                html.Code("goroutines"), ", ", html.Code("syscalls"), ", ",
                html.Code("stacks"), ", ", html.Code("traces"), ", ...). At most "
                f"{fmt_count(ui.settings.sql_max_rows)} rows, stopped after "
                f"{ui.settings.sql_timeout_ms / 1000:g} s. Same as ",
                html.Code("GET /api/sql?sql=..."), " (docs/sql.md)."], className="muted"),
        _examples(trace_id, engine.dialect.name, list_traces(engine)),
        dcc.Textarea(id="sql-text", value=sql, className="sql-editor", spellCheck=False,
                     placeholder="SELECT id, name, go_version, events FROM traces"),
        html.Div([html.Button("Run", id="sql-run", n_clicks=0)],
                 className="controls"),
    ]
    if not sql.strip():
        return html.Div(head)
    try:
        result = run_query(engine, sql, limit=ui.settings.sql_max_rows,
                           timeout_ms=ui.settings.sql_timeout_ms)
    except SQLError as e:
        return html.Div([*head, html.Div(html.P(str(e), className="error-text"),
                                         className="error-box", role="alert",
                                         id="sql-error")])
    return html.Div([*head, _result(sql, result, query)])


def _result(sql: str, r: SQLResult, query: dict[str, str]) -> Any:
    x, y, color = pick_axes(r.columns, r.rows)
    x = query["x"] if query.get("x") in (*r.columns, ROW) else x
    y = query.get("y", y) if query.get("y") in r.columns else y
    color = query["color"] if query.get("color") in r.columns else color
    kind = query["kind"] if query.get("kind") in KINDS else "bar"
    note = (f"{fmt_count(len(r.rows))} rows"
            + (f", cut at the limit of {fmt_count(r.limit)}" if r.truncated else "")
            + f" in {r.elapsed_ms:.0f} ms")
    options = [{"label": c, "value": c} for c in r.columns]
    numeric = set(numeric_columns(r.columns, r.rows))
    csv = "/api/sql?" + urlencode({"sql": sql, "format": "csv"})
    return html.Div([
        html.Div([html.Span(note, id="sql-note", className="bad" if r.truncated else ""),
                  html.A("CSV", href=csv, className="button secondary", id="sql-csv"),
                  html.A("link to this query", href=sql_href(sql, x=x, y=y, color=color,
                                                             kind=kind),
                         id="sql-share")], className="controls"),
        dcc.Store(id="sql-result", data={"sql": sql, "columns": r.columns, "rows": r.rows}),
        html.Div([
            html.Label("x"), dcc.Dropdown(id="sql-x", value=x,
                                          options=[{"label": "# (row number)", "value": ROW},
                                                   *options],
                                          clearable=False, style={"width": "180px"}),
            html.Label("y"), dcc.Dropdown(id="sql-y", value=y, style={"width": "180px"},
                                          options=[o for o in options
                                                   if o["value"] in numeric]),
            html.Label("color"), dcc.Dropdown(id="sql-color", options=options, value=color,
                                              style={"width": "180px"}),
            dcc.RadioItems(id="sql-kind", value=kind, inline=True,
                           options=[{"label": k, "value": k} for k in KINDS]),
        ], className="controls"),
        dcc.Graph(id="sql-chart", figure=result_figure(r.columns, r.rows, x, y, kind, color),
                  config=graph_cfg("gmpscope-sql")),
        html.Div(_table(r), className="card"),
    ], id="sql-results")


def _cell(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


def _table(r: SQLResult) -> Any:
    # Column ids by position: a query may name two columns alike.
    ids = [f"c{i}" for i in range(len(r.columns))]
    numeric = set(numeric_columns(r.columns, r.rows))
    rows = [{i: _cell(v) for i, v in zip(ids, row, strict=True)} for row in r.rows]
    table = data_table("sql-table", list(zip(ids, r.columns, strict=True)), rows,
                       num={i for i, c in zip(ids, r.columns, strict=True) if c in numeric})
    # Up to the row cap: paged and sorted in the browser, not drawn all at once
    # (data_table draws every row, for the analysis pages' short tables).
    for prop, value in (("page_action", "native"), ("page_size", PAGE_ROWS),
                        ("sort_action", "native")):
        setattr(table, prop, value)
    return table


def register(app: Dash) -> None:
    @app.callback(Output("url", "search"), Input("sql-run", "n_clicks"),
                  Input("sql-trace", "value"), State("sql-text", "value"),
                  State("url", "search"), prevent_initial_call=True)
    def _run(n: int | None, trace: int | None, sql: str | None, search: str | None) -> Any:
        # The query (and the examples' trace) go into the URL; the router then
        # renders the page, which runs it.
        query = dict(parse_qsl((search or "").lstrip("?")))
        if ctx.triggered_id == "sql-trace":
            if trace is None or query.get("trace") == str(trace):
                return no_update
            return "?" + urlencode({**query, "trace": str(trace)})
        if not n:
            return no_update
        keep = {k: v for k, v in query.items() if k == "trace"}
        return "?" + urlencode({"q": sql or "", **keep})

    @app.callback(Output("sql-chart", "figure"), Output("sql-share", "href"),
                  Input("sql-x", "value"), Input("sql-y", "value"),
                  Input("sql-color", "value"), Input("sql-kind", "value"),
                  State("sql-result", "data"), prevent_initial_call=True)
    def _chart(x: str | None, y: str | None, color: str | None, kind: str | None,
               data: dict[str, Any] | None) -> Any:
        if not data:
            return no_update, no_update
        fig = result_figure(data["columns"], data["rows"], x, y, kind or "bar", color)
        return fig, sql_href(data["sql"], x=x, y=y, color=color, kind=kind)
