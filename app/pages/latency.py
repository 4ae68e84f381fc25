"""Scheduler latency page: how long goroutines waited Runnable before they
ran: histogram, percentiles over time and per P, by cause, worst cases."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.latency import hist_figure, over_time_figure, per_p_figure
from app.pages._analysis import (
    api_link,
    around,
    data_table,
    goroutine_href,
    graph_cfg,
    md_link,
    profiles,
    rel,
    table,
    timeline_href,
    window,
    window_note,
)
from ingest.views.latency import latency_report

ROUTES = ("/traces/<int:trace_id>/latency",)
TITLE = "Scheduler latency"
WORST_SHOWN = 30


def _worst(trace_id: int, d: dict[str, Any], first: int, last: int) -> Any:
    rows = []
    for r in d["worst"][:WORST_SHOWN]:
        t1, t2 = around(r["runnable_ts"], r["running_ts"], first, last)
        rows.append({
            "goid": md_link(str(r["goid"]), goroutine_href(trace_id, r["goid"])),
            "latency": fmt_ns(r["latency_ns"]), "runnable": rel(r["runnable_ts"], first),
            "running": rel(r["running_ts"], first), "p": f"P{r['p']}", "m": str(r["m"]),
            "cause": r["cause"],
            "timeline": md_link("timeline", timeline_href(trace_id, "p", t1, t2, g=r["goid"]))})
    return data_table("latency-worst", [
        ("goid", "goid"), ("latency", "latency"), ("runnable", "runnable at"),
        ("running", "running at"), ("p", "ran on"), ("m", "M"), ("cause", "cause"),
        ("timeline", "")], rows, num={"latency", "runnable", "running"},
        markdown={"goid", "timeline"})


def _causes(d: dict[str, Any]) -> html.Table:
    bc = d["by_cause"]
    rows = [[c, fmt_count(n), fmt_ns(p50), fmt_ns(p99), fmt_ns(mx)]
            for c, n, p50, p99, mx in zip(bc["cause"], bc["count"], bc["p50"], bc["p99"],
                                          bc["max"], strict=True) if n]
    return table(["became runnable because", "samples", "p50", "p99", "max"], rows,
                 num={1, 2, 3, 4}, id="latency-causes")


def layout(query: dict[str, str], trace_id: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    f = ctx.frames.get(trace_id)
    t1, t2 = window(query)
    d = latency_report(f, t1, t2)
    s = d["summary"]
    cards = [stat_card("samples", fmt_count(d["samples"]), "Runnable → Running"),
             stat_card("p50", fmt_ns(s["p50_ns"])), stat_card("p90", fmt_ns(s["p90_ns"])),
             stat_card("p99", fmt_ns(s["p99_ns"])), stat_card("max", fmt_ns(s["max_ns"])),
             stat_card("mean", fmt_ns(s["mean_ns"])),
             stat_card("not sampled", fmt_count(d["censored"] + d["pending"]),
                       f"{d['censored']} runnable at start, {d['pending']} still at end")]
    return html.Div([
        html.H2("Scheduler latency"),
        *window_note(trace_id, "latency", t1, t2, f.first_ts),
        html.P("Time from a goroutine becoming Runnable to it Running, for every such "
               "pair of transitions. Percentiles are nearest-rank.", className="muted"),
        html.Div(cards, className="stats", id="latency-stats"),
        profiles(trace_id, [("sched", "scheduler wait")], t1, t2, "latency"),
        html.Div([
            html.Div(dcc.Graph(id="latency-hist", figure=hist_figure(d),
                               config=graph_cfg(f"trace{trace_id}-latency")),
                     className="card"),
            html.Div(dcc.Graph(id="latency-per-p", figure=per_p_figure(d),
                               config=graph_cfg(f"trace{trace_id}-latency-per-p")),
                     className="card"),
        ], className="row"),
        html.Div(dcc.Graph(id="latency-over-time", figure=over_time_figure(d, f.first_ts),
                           config=graph_cfg(f"trace{trace_id}-latency-over-time")),
                 className="card"),
        html.Div([html.Div([html.H3("By cause"), _causes(d)], className="card"),
                  html.Div([html.H3("Worst cases"), _worst(trace_id, d, f.first_ts, f.last_ts),
                            api_link(f"/api/traces/{trace_id}/latency")], className="card")],
                 className="row"),
    ], id="latency-page")


def register(dash_app: Dash) -> None:
    return None
