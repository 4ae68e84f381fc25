"""Syscalls & netpoller page: duration distributions, top stacks, syscalls
that lost their P and how long the handoff took, netpoller parking over time."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.margins import X_TITLED
from app.figures.syscalls import handoff_figure, histogram_figure, parked_figure
from app.pages._analysis import (
    api_link,
    around,
    data_table,
    downloads,
    goroutine_href,
    graph_cfg,
    md_link,
    profiles,
    rel,
    stack_list,
    stack_summary,
    stack_text,
    timeline_href,
    window,
    window_note,
)
from ingest.views.syscalls import netpoll_summary, syscall_summary

ROUTES = ("/traces/<int:trace_id>/syscalls",)
TITLE = "Syscalls & netpoller"
LONGEST_SHOWN = 20


def _stacks_table(rows: list[dict[str, Any]], tid: str) -> Any:
    """Stacks by total time or count, as one table; the frames on hover (and
    listed under the card)."""
    data = [{"stack": f"{r['stack_id']}: " + stack_summary(r["frames"], f"stack {r['stack_id']}"),
             "count": fmt_count(r["count"]), "total": fmt_ns(r["total_ns"]),
             "mean": fmt_ns(r["mean_ns"]), "max": fmt_ns(r["max_ns"])} for r in rows]
    return data_table(tid, [("stack", "stack"), ("count", "count"), ("total", "total"),
                            ("mean", "mean"), ("max", "max")], data,
                      num={"count", "total", "mean", "max"},
                      tooltips=[{"stack": stack_text(r["frames"])} for r in rows])


def _stacks_card(title: str, stacks: dict[str, Any], prefix: str) -> html.Div:
    if not stacks["by_total"]:
        return html.Div([html.H3(title), html.P("None in this trace window.", className="muted")],
                        className="card")
    shown = stacks["by_total"] + stacks["by_count"]
    return html.Div([html.H3(title), html.H4("By total time"),
                     _stacks_table(stacks["by_total"], f"{prefix}-by-total"),
                     html.H4("By count"), _stacks_table(stacks["by_count"], f"{prefix}-by-count"),
                     stack_list({str(r["stack_id"]): r["frames"] for r in shown},
                                [r["stack_id"] for r in shown], f"{prefix}-stack",
                                "Their frames (click to expand)")],
                    className="card")


def _longest(trace_id: int, d: dict[str, Any], first: int, last: int) -> Any:
    rows = []
    for r in d["longest"][:LONGEST_SHOWN]:
        t1, t2 = around(r["start_ts"], r["end_ts"], first, last)
        rows.append({
            "goid": md_link(str(r["goid"]), goroutine_href(trace_id, r["goid"])),
            "start": rel(r["start_ts"], first), "duration": fmt_ns(r["duration_ns"]),
            "m": str(r["m"]), "p": str(r["p"]), "lost": "yes" if r["p_lost"] else "no",
            "handoff": fmt_ns(r["handoff_ns"]) if r["handoff_ns"] is not None else "–",
            "timeline": md_link("timeline", timeline_href(trace_id, "m", t1, t2, g=r["goid"],
                                                          m=r["m"]))})
    return data_table("syscalls-longest", [
        ("goid", "goid"), ("start", "start"), ("duration", "duration"), ("m", "M"),
        ("p", "P"), ("lost", "lost P"), ("handoff", "handoff after"), ("timeline", "")], rows,
        num={"start", "duration", "m", "p", "handoff"}, markdown={"goid", "timeline"})


def _graph_or_note(n: int, note: str, gid: str, fig: Any, filename: str) -> html.Div:
    """The figure in a card, or a one-line note in its place when it would be empty."""
    if not n:
        return html.Div(html.P(note, className="muted", id=gid), className="card")
    return html.Div(dcc.Graph(id=gid, figure=fig, config=graph_cfg(filename)), className="card")


def layout(query: dict[str, str], trace_id: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    f = ctx.frames.get(trace_id)
    t1, t2 = window(query)
    sc = syscall_summary(ctx.engine, f, t1, t2)
    net = netpoll_summary(ctx.engine, f, t1, t2)
    h, nd = sc["handoff"], net["duration"]
    cards = [
        stat_card("syscalls", fmt_count(sc["count"]), f"{fmt_ns(sc['total_ns'])} in total"),
        stat_card("syscall p50 / p99", f"{fmt_ns(sc['duration']['p50_ns'])} / "
                                       f"{fmt_ns(sc['duration']['p99_ns'])}",
                  f"max {fmt_ns(sc['duration']['max_ns'])}"),
        stat_card("lost their P", fmt_count(sc["p_lost"]),
                  f"{sc['handoff_found']} with the handoff found"),
        stat_card("handoff p50 / max", f"{fmt_ns(h['p50_ns'])} / {fmt_ns(h['max_ns'])}",
                  "syscall start → P taken by another M"),
        stat_card("network waits", fmt_count(net["count"]),
                  f"{fmt_count(net['goroutines'])} goroutines"),
        stat_card("network wait p50 / p99", f"{fmt_ns(nd['p50_ns'])} / {fmt_ns(nd['p99_ns'])}",
                  f"max {fmt_ns(nd['max_ns'])}"),
        stat_card("parked in netpoller at end", fmt_count(net["parked_at_end"]),
                  "network waits never ended"),
    ]
    first, last = f.first_ts, f.last_ts
    note = (f"Durations count only complete intervals: {sc['complete']} of {sc['count']} "
            f"syscalls, {net['complete']} of {net['count']} network waits "
            f"({net['unfinished']} still waiting at the end of the trace).")
    api = f"/api/traces/{trace_id}"
    return html.Div([
        html.H2("Syscalls & netpoller"),
        *window_note(trace_id, "syscalls", t1, t2, f.first_ts),
        html.Div(cards, className="stats", id="syscalls-stats"),
        html.P(note, className="muted"),
        profiles(trace_id, [("syscall", "syscalls"), ("net", "network waits")], t1, t2,
                 "syscalls"),
        html.Div([
            _graph_or_note(sc["count"], "No syscalls in this trace window.",
                           "syscalls-hist", histogram_figure(
                               sc["histogram"], "Syscall durations", "#c44e52"),
                           f"trace{trace_id}-syscalls"),
            _graph_or_note(net["count"], "No goroutine waited on the network (netpoller) "
                           "in this trace window.", "syscalls-netpoll-hist", histogram_figure(
                               net["histogram"], "Network (netpoller) wait durations",
                               "#2f8fd0"), f"trace{trace_id}-netpoll"),
        ], className="row"),
        html.Div([
            _graph_or_note(sc["count"], "No syscalls, no P handoffs.", "syscalls-handoff",
                           handoff_figure(sc, first), f"trace{trace_id}-handoff"),
            _graph_or_note(net["count"], "Nothing parked in the netpoller.", "syscalls-parked",
                           parked_figure(net, first), f"trace{trace_id}-netpoll-over-time"),
        ], className="row"),
        html.Div([
            _graph_or_note(sc["handoff_found"], "No syscall lost its P to another M.",
                           "syscalls-handoff-hist", histogram_figure(
                               sc["handoff_histogram"], "P handoff: syscall start → P taken",
                               "#18202c", bottom=X_TITLED), f"trace{trace_id}-handoff-hist"),
        ], className="row"),
        html.Div([_stacks_card("Syscall stacks", sc["stacks"], "syscalls-stacks"),
                  _stacks_card("Network wait stacks", net["stacks"], "syscalls-net-stacks")],
                 className="row"),
        html.Div([html.H3("Longest syscalls"), _longest(trace_id, sc, first, last),
                  api_link(f"{api}/syscalls/summary"), api_link(f"{api}/netpoll"),
                  downloads(trace_id, ["syscalls"])], className="card"),
    ], id="syscalls-page")


def register(dash_app: Dash) -> None:
    return None
