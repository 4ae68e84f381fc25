"""Overview of one trace: key numbers, goroutines by state over time with GC and
STW bands, heap and GOMAXPROCS, threads over time. Data: :mod:`ingest.views.overview`
(also ``GET /api/traces/<id>/overview``)."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.components_findings import findings_panel, register_findings
from app.context import ui_context
from app.figures.overview import heap_figure, states_figure, threads_figure
from app.pages._views import cfg, fmt_bytes
from app.router import PageError
from ingest.derive.frames import TraceNotFound
from ingest.views.overview import DEFAULT_BINS, overview

ROUTES = ("/traces/<int:trace_id>/overview",)
TITLE = "Overview"



def key_cards(k: dict[str, Any]) -> html.Div:
    """The key numbers as stat cards (ids ``overview-stat-<key>``)."""
    damaged = k["status"] != "complete"
    cards = [
        ("duration", fmt_ns(k["duration_ns"]), None),
        ("events", fmt_count(k["events"]), f"{fmt_count(k['transitions'])} transitions"),
        ("goroutines", fmt_count(k["goroutines"]), None),
        ("procs", fmt_count(k["procs"]),
         f"GOMAXPROCS {k['gomaxprocs']}" if k["gomaxprocs"] is not None else None),
        ("threads", fmt_count(k["threads"]), None),
        ("GC cycles", fmt_count(k["gc_count"]), None),
        ("STW total", fmt_ns(k["stw_total_ns"]), f"{fmt_count(k['stw_count'])} pauses"),
        ("trace format", f"Go {k['go_version']}", k["family"]),
        ("status", "damaged" if damaged else "complete",
         f"{fmt_bytes(k['bytes_lost'])} lost, {k['generations_lost']} generations"
         if damaged else None),
    ]
    return html.Div([html.Div(stat_card(label, value, hint),
                              id=f"overview-stat-{label.replace(' ', '-').lower()}")
                     for label, value, hint in cards], className="stats")


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    try:
        bins = int(query.get("bins") or DEFAULT_BINS)
    except ValueError:
        raise PageError(f"bins must be an integer, not {query.get('bins')!r}") from None
    try:
        data = overview(ctx.engine, ctx.frames.get(trace_id), trace_id, bins=bins)
    except TraceNotFound:
        raise PageError(f"There is no trace {trace_id}.") from None
    k = data["key"]
    api = f"/api/traces/{trace_id}/overview"
    return html.Div([
        html.H2(["Overview · ", html.Span(k["name"], className="mono")]),
        key_cards(k),
        findings_panel(trace_id),
        html.Div([
            dcc.Graph(id="overview-states", figure=states_figure(data),
                      config=cfg(f"trace{trace_id}-overview-states")),
            html.P("Time-weighted average number of goroutines in each state per time bin "
                   "(Waiting split by reason); shaded: GC mark phases and stop-the-world "
                   "pauses. Drag to zoom.", className="muted"),
        ], className="card"),
        html.Div([
            html.Div(dcc.Graph(id="overview-heap", figure=heap_figure(data),
                               config=cfg(f"trace{trace_id}-overview-heap")),
                     className="card"),
            html.Div(dcc.Graph(id="overview-threads", figure=threads_figure(data),
                               config=cfg(f"trace{trace_id}-overview-threads")),
                     className="card"),
        ], className="row"),
        html.P(["Data: ", html.A(api, href=api, target="_blank"), " · ",
                dcc.Link("state graphs", href=f"/traces/{trace_id}/states"), " · ",
                dcc.Link("timeline", href=f"/traces/{trace_id}/timeline"
                         f"?mode=p&t1={k['first_ts']}&t2={k['last_ts']}")],
               className="muted"),
    ])


def register(dash_app: Dash) -> None:
    register_findings(dash_app)
