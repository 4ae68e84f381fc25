"""Two traces side by side: key numbers with deltas, scheduler latency,
goroutine state graphs and goroutines by state over time. Data:
:mod:`ingest.views.compare` (also ``GET /api/compare?a=ID&b=ID``)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.components import fmt_count, fmt_ns
from app.context import ui_context
from app.figures.overview import states_figure
from app.figures.states import state_graph_figure
from app.pages._views import cfg, fmt_bytes
from app.router import PageError
from ingest.derive.frames import TraceNotFound
from ingest.store.traces import list_traces
from ingest.views.compare import compare

ROUTES = ("/compare",)
TITLE = "Compare"
LABELS = {"duration_ns": "duration", "events": "events", "transitions": "transitions",
          "goroutines": "goroutines", "procs": "procs", "gomaxprocs": "GOMAXPROCS",
          "threads": "threads", "gc_count": "GC cycles", "stw_count": "STW pauses",
          "stw_total_ns": "STW total", "bytes_lost": "bytes lost"}
LATENCY_KEYS = (("count", "samples"), ("mean_ns", "mean"), ("p50_ns", "p50"),
                ("p90_ns", "p90"), ("p99_ns", "p99"), ("max_ns", "max"))


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if key == "bytes_lost":
        return fmt_bytes(int(v))
    return fmt_count(int(v))


def _delta(key: str, d: Any, ratio: float | None) -> str:
    if d is None:
        return "–"
    sign = "+" if d > 0 else ("−" if d < 0 else "±")
    mag = _fmt(key, abs(d))
    return f"{sign}{mag}" + (f" (×{ratio:.3g})" if ratio is not None else "")


def delta_table(data: dict[str, Any]) -> html.Table:
    head = html.Tr([html.Th(""), html.Th(f"A: trace {data['a']['trace_id']}", className="num"),
                    html.Th(f"B: trace {data['b']['trace_id']}", className="num"),
                    html.Th("B − A", className="num")])
    rows = [html.Tr([html.Td(LABELS.get(d["key"], d["key"])),
                     html.Td(_fmt(d["key"], d["a"]), className="num"),
                     html.Td(_fmt(d["key"], d["b"]), className="num"),
                     html.Td(_delta(d["key"], d["delta"], d["ratio"]), className="num")],
                    id=f"compare-row-{d['key']}") for d in data["deltas"]]
    la, lb = data["a"]["sched_latency"], data["b"]["sched_latency"]
    for key, label in LATENCY_KEYS:
        va, vb = la.get(key), lb.get(key)
        both = va is not None and vb is not None
        rows.append(html.Tr([
            html.Td(f"scheduler latency {label}"), html.Td(_fmt(key, va), className="num"),
            html.Td(_fmt(key, vb), className="num"),
            html.Td(_delta(key, vb - va if both else None,
                           vb / va if both and va else None), className="num")],
            id=f"compare-latency-{label}"))
    return html.Table([html.Thead(head), html.Tbody(rows)], className="data",
                      id="compare-table")


def _choice(traces: list[dict[str, Any]], query: dict[str, str]) -> html.Div:
    options = [{"label": f"{t['id']}: {t['name']}", "value": t["id"]} for t in traces]

    def pick(k: str) -> int | None:
        try:
            return int(query[k])
        except (KeyError, ValueError):
            return None

    return html.Div([
        html.Label("A"), dcc.Dropdown(id="compare-a", options=options, value=pick("a"),
                                      style={"width": "360px"}),
        html.Label("B"), dcc.Dropdown(id="compare-b", options=options, value=pick("b"),
                                      style={"width": "360px"}),
        dcc.Link("Compare", id="compare-go", href="/compare", className="button"),
    ], className="controls")


def comparison(data: dict[str, Any]) -> html.Div:
    a, b = data["a"], data["b"]
    peak = max((sum(col) for side in (a, b) for col in zip(*side["goroutine_states"].values(),
                                                            strict=True)), default=1.0)
    cols = []
    for label, side in (("A", a), ("B", b)):
        tid = side["trace_id"]
        over = states_figure(side)
        # At half the page's width its legend takes three rows: a bottom
        # margin that fits them (app.figures.margins).
        over.update_layout(height=320, yaxis_range=[0, peak * 1.05], margin_b=130,
                           title=f"{label}: goroutines by state")
        cols.append(html.Div([
            html.H3([f"{label}: ", dcc.Link(side["key"]["name"],
                                            href=f"/traces/{tid}/overview")]),
            dcc.Graph(id=f"compare-states-{label.lower()}",
                      figure=state_graph_figure(side["states"], height=470,
                                                title=f"{label}: goroutine state graph · "
                                                f"{side['states']['total']:,} transitions"),
                      config=cfg(f"trace{tid}-states")),
            dcc.Graph(id=f"compare-over-{label.lower()}", figure=over,
                      config=cfg(f"trace{tid}-overview-states")),
        ], className="card"))
    api = f"/api/compare?a={a['trace_id']}&b={b['trace_id']}"
    return html.Div([
        html.Div([html.H3("Key numbers"), delta_table(data)], className="card"),
        html.Div(cols, className="row"),
        html.P(["JSON: ", html.A(api, href=api, target="_blank")], className="muted"),
    ])


def layout(query: dict[str, str], **_: Any) -> Any:
    ctx = ui_context()
    traces = list_traces(ctx.engine)
    body: list[Any] = [html.H2("Compare two traces"), _choice(traces, query)]
    if query.get("a") and query.get("b"):
        try:
            a, b = int(query["a"]), int(query["b"])
        except ValueError:
            raise PageError("a and b must be trace ids: /compare?a=ID&b=ID") from None
        try:
            body.append(comparison(compare(ctx.engine, ctx.frames, a, b)))
        except TraceNotFound as e:
            raise PageError(f"There is no trace {e.args[0] if e.args else ''}.") from None
    else:
        body.append(html.P("Pick two traces (or tick two in the library).", className="muted"))
    return html.Div(body)


def register(dash_app: Dash) -> None:
    @dash_app.callback(Output("compare-go", "href"),
                       Input("compare-a", "value"), Input("compare-b", "value"))
    def _href(a: int | None, b: int | None) -> str:
        if a is None or b is None:
            return "/compare"
        return f"/compare?a={a}&b={b}"
