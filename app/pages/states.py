"""State graphs of goroutines, procs and threads, with filters (goroutine
group, time window, Waiting split by reason), an edge table and the same
graph as Mermaid and Graphviz DOT text. Data: :mod:`ingest.views.states_frames`
(also ``GET /api/traces/<id>/states``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import plotly.graph_objects as go  # type: ignore[import-untyped]
from dash import Dash, Input, Output, State, dcc, html

from app.components import error_box, fmt_count, fmt_ns
from app.context import ui_context
from app.figures.states import state_graph_figure
from app.pages._views import cfg
from app.router import PageError
from ingest.store.traces import get_trace
from ingest.views.states import to_dot, to_json, to_mermaid
from ingest.views.states_frames import goroutine_groups, graph_for

ROUTES = ("/traces/<int:trace_id>/states",)
TITLE = "State graphs"
RESOURCES = ("goroutine", "proc", "thread")


def _int_or_none(v: Any, name: str) -> int | None:
    if v in (None, ""):
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer (trace ns), not {v!r}") from None


def edge_table(graph: dict[str, Any]) -> html.Table:
    """One row per edge: count and dwell time in the source state."""
    head = html.Tr([html.Th("from"), html.Th("to"), html.Th("count", className="num"),
                    html.Th("timed", className="num"), html.Th("mean", className="num"),
                    html.Th("p50", className="num"), html.Th("p99", className="num"),
                    html.Th("max", className="num")])
    rows = [html.Tr([html.Td(e["source"]), html.Td(e["target"]),
                     html.Td(fmt_count(e["count"]), className="num"),
                     html.Td(fmt_count(e["dwell_count"]), className="num"),
                     html.Td(fmt_ns(e["dwell_mean_ns"]), className="num"),
                     html.Td(fmt_ns(e["dwell_p50_ns"]), className="num"),
                     html.Td(fmt_ns(e["dwell_p99_ns"]), className="num"),
                     html.Td(fmt_ns(e["dwell_max_ns"]), className="num")])
            for e in graph["edges"]]
    return html.Table([html.Thead(head), html.Tbody(rows)], className="data",
                      id="states-edge-table")


def controls(trace_id: int, query: dict[str, str]) -> html.Div:
    ctx = ui_context()
    groups = goroutine_groups(ctx.engine, ctx.frames.get(trace_id))
    options = [{"label": f"{g['group'] or '(unknown start)'}  ({g['goroutines']:,})",
                "value": g["group"]} for g in groups]
    resource = query.get("resource", "goroutine")
    split = query.get("split_reasons", "1").lower() in ("1", "true", "yes", "on")
    return html.Div([
        html.Label("resource"),
        dcc.Dropdown(id="states-resource", options=list(RESOURCES),
                     value=resource if resource in RESOURCES else "goroutine",
                     clearable=False, style={"width": "150px"}),
        dcc.Checklist(id="states-split", options=[{"label": " split Waiting by reason",
                                                   "value": "split"}],
                      value=["split"] if split else []),
        html.Label("goroutine group (start function)"),
        dcc.Dropdown(id="states-group", options=options, value=query.get("group"),
                     placeholder="all goroutines", style={"width": "420px"}),
        html.Label("t1"),
        dcc.Input(id="states-t1", value=query.get("t1", ""), debounce=True,
                  placeholder="trace ns", style={"width": "150px"}),
        html.Label("t2"),
        dcc.Input(id="states-t2", value=query.get("t2", ""), debounce=True,
                  placeholder="trace ns", style={"width": "150px"}),
    ], className="controls")


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    trace = get_trace(ctx.engine, trace_id)
    if trace is None:
        raise PageError(f"There is no trace {trace_id}.")
    resource = query.get("resource", "goroutine")
    resource = resource if resource in RESOURCES else "goroutine"
    split = ["split"] if query.get("split_reasons", "1").lower() in ("1", "true", "yes",
                                                                     "on") else []
    choice = (resource, split, query.get("group"), query.get("t1", ""), query.get("t2", ""))
    # The first graph comes with the layout (the callbacks answer changes only):
    # one round trip to the server instead of three before it is drawn.
    fig, table, mermaid, dot, api, api_href, err = _graph_outputs(*choice, trace_id)
    return html.Div([
        html.H2(["State graphs · ", html.Span(trace["name"], className="mono")]),
        dcc.Store(id="states-trace", data=trace_id),
        controls(trace_id, query),
        html.P(f"Trace time runs from {trace['first_ts']} to {trace['last_ts']} ns; a window "
               "keeps the transitions with t1 ≤ ts < t2. Edge labels: transition counts; "
               "hover an edge label for the dwell time in the source state before it. "
               "Threads: derived from the goroutines' Running/Syscall intervals on each M "
               "(Idle in between).", className="muted"),
        dcc.Loading(html.Div([
            html.Div(err, id="states-error"),
            html.Div([dcc.Graph(id="states-graph", figure=fig,
                                config=cfg(f"trace{trace_id}-states"))],
                     className="card"),
            # export helper: server-side file downloads
            html.Div(_export_links(*choice, trace_id), id="states-export"),
            html.Div([html.H3("Edges"), html.Div(table, id="states-table")],
                     className="card"),
            html.Div([
                html.Div([html.H3("Mermaid"),
                          html.Pre(mermaid, id="states-mermaid", className="stack")],
                         className="card"),
                html.Div([html.H3("Graphviz DOT"),
                          html.Pre(dot, id="states-dot", className="stack")],
                         className="card"),
            ], className="row"),
            html.P(["JSON: ", html.A(api, id="states-api", href=api_href, target="_blank")],
                   className="muted"),
        ])),
    ])


def _graph_outputs(resource: str, split: list[str] | None, group: str | None, t1: Any,
                   t2: Any, trace_id: int) -> tuple[Any, ...]:
    """(figure, edge table, Mermaid, DOT, API link text, its href, error) of a choice."""
    ctx = ui_context()
    use_split = bool(split) and resource == "goroutine"
    use_group = group if resource == "goroutine" else None
    try:
        graph = graph_for(ctx.engine, ctx.frames, trace_id, resource, group=use_group,
                          t1=_int_or_none(t1, "t1"), t2=_int_or_none(t2, "t2"),
                          split_reasons=use_split)
    except (ValueError, LookupError) as e:
        empty = go.Figure()
        return empty, None, "", "", "", None, error_box(str(e).strip("'\""))
    doc = to_json(graph)
    params = {"resource": resource}
    if use_group is not None:
        params["group"] = use_group
    if use_split:
        params["split_reasons"] = "1"
    for k, v in (("t1", t1), ("t2", t2)):
        if v not in (None, ""):
            params[k] = str(v).strip()
    api = f"/api/traces/{trace_id}/states?{urlencode(params)}"
    title = f"{resource} state graph · {doc['total']:,} transitions"
    if use_group is not None:
        title += f" · group of {graph.info.get('group_goroutines', 0):,} goroutines"
    return (state_graph_figure(doc, title=title), edge_table(doc), to_mermaid(graph),
            to_dot(graph), api, api, None)


def _export_links(resource: str, split: list[str] | None, group: str | None, t1: Any,
                  t2: Any, trace_id: int) -> Any:
    """Export links (SVG, PNG, HTML, Mermaid, DOT files) for the graph as shown."""
    from app.components_export import export_links

    goroutines = resource == "goroutine"
    options = {"resource": resource, "group": group if goroutines else None,
               "split_reasons": "1" if split and goroutines else "0",
               "t1": str(t1).strip() if t1 not in (None, "") else None,
               "t2": str(t2).strip() if t2 not in (None, "") else None}
    return export_links(trace_id, "states", options, id_prefix="states-export")


_CHOICE = (Input("states-resource", "value"), Input("states-split", "value"),
           Input("states-group", "value"), Input("states-t1", "value"),
           Input("states-t2", "value"), State("states-trace", "data"))


def register(dash_app: Dash) -> None:
    dash_app.callback(
        Output("states-graph", "figure"), Output("states-table", "children"),
        Output("states-mermaid", "children"), Output("states-dot", "children"),
        Output("states-api", "children"), Output("states-api", "href"),
        Output("states-error", "children"), *_CHOICE,
        prevent_initial_call=True)(_graph_outputs)
    dash_app.callback(Output("states-export", "children"), *_CHOICE,
                      prevent_initial_call=True)(_export_links)
