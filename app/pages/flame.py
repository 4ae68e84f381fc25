"""Flame graphs page: where goroutines waited (network, locks, channels and
select, syscalls, the scheduler) and where the CPU samples fell, for the
whole trace or a window; click a frame for the goroutines behind it.
``?kind=`` picks the profile, ``?t1=&t2=`` the window (trace ns)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from dash import Dash, Input, Output, Patch, State, dcc, html, no_update

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.flame import flame_figure
from app.pages._analysis import (
    api_link,
    data_table,
    flame_href,
    goroutine_href,
    graph_cfg,
    link,
    md_link,
    pprof_href,
    rel,
    window,
)
from app.router import PageError
from ingest.views.flame import DEFAULT_KIND, KIND_TITLES, flame_goroutines, flame_tree
from ingest.views.pprof import TYPES

ROUTES = ("/traces/<int:trace_id>/flame",)
TITLE = "Flame graphs"
#: What each kind's frames are: the stack where the wait began, or the sample's.
_WHERE = {
    "net": "where goroutines parked in the netpoller (Waiting, reason network)",
    "lock": "where goroutines blocked on a mutex, a condition or a wait group",
    "chan": "where goroutines blocked on a channel or in a select",
    "sync": "where goroutines blocked on channels, select and sync primitives "
            "(go tool trace -pprof=sync)",
    "syscall": "where goroutines entered syscalls",
    "sched": "where goroutines were made runnable, then waited for a P",
    "cpu": "where the CPU profiler's samples fell (the trace's StackSample events)",
}


def _kind_tabs(trace_id: int, kind: str, t1: int | None, t2: int | None) -> html.Div:
    tabs = [html.Span(KIND_TITLES[k], className="tab active", id=f"flame-kind-{k}")
            if k == kind else
            dcc.Link(KIND_TITLES[k], href=flame_href(trace_id, k, t1, t2), className="tab",
                     id=f"flame-kind-{k}") for k in KIND_TITLES]
    return html.Div(tabs, className="flame-kinds", id="flame-kinds")


def _window_note(trace_id: int, kind: str, t1: int | None, t2: int | None,
                 first: int) -> list[Any]:
    if t1 is None and t2 is None:
        return []
    return [html.P([f"Window: {rel(t1, first) if t1 is not None else 'start'} to "
                    f"{rel(t2, first) if t2 is not None else 'end'} of the trace. ",
                    link("Whole trace", flame_href(trace_id, kind))],
                   className="muted", id="flame-window")]


def _ms(ts: int | None, origin: int) -> str:
    return "" if ts is None else f"{(ts - origin) / 1e6:g}"


def _window_controls(t1: int | None, t2: int | None, first: int) -> html.Div:
    return html.Div([
        html.Span("Window, ms from the trace's start: ", className="muted"),
        dcc.Input(id="flame-from", type="text", placeholder="start",
                  value=_ms(t1, first), className="flame-ms"),
        html.Span("to", className="muted"),
        dcc.Input(id="flame-to", type="text", placeholder="end",
                  value=_ms(t2, first), className="flame-ms"),
        dcc.Link("Show this window", id="flame-apply", href=flame_href(0, "sync")),
    ], className="controls", id="flame-window-controls")


def layout(query: dict[str, str], trace_id: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    f = ctx.frames.get(trace_id)
    kind = query.get("kind", DEFAULT_KIND)
    if kind not in TYPES:
        raise PageError(f"kind must be one of {', '.join(KIND_TITLES)}, not {kind!r}")
    t1, t2 = window(query)
    tree = flame_tree(ctx.engine, f, kind, t1, t2)
    unit = tree["unit"]
    cards = [stat_card("time" if kind != "cpu" else "CPU time", fmt_ns(tree["total_ns"]),
                       "summed over goroutines" if kind != "cpu" else "samples × 10 ms"),
             stat_card(unit, fmt_count(tree["count"])),
             stat_card("goroutines", fmt_count(tree["goroutines"])),
             stat_card("distinct stacks", fmt_count(tree["stacks"]))]
    cut = (f" The {tree['nodes_cut']:,} lightest frames are left out." if tree["nodes_cut"]
           else "")
    api = f"/api/traces/{trace_id}/flame?{urlencode({'kind': kind})}"
    return html.Div([
        html.H2("Flame graphs"),
        *_window_note(trace_id, kind, t1, t2, f.first_ts),
        _kind_tabs(trace_id, kind, t1, t2),
        html.P(f"{tree['title'].capitalize()}: {_WHERE[kind]}. Each frame is as wide as the "
               "time under it; callers below, callees above. Click a frame to zoom into it "
               "and list the goroutines behind it; click the bottom bar (or double-click) to "
               "zoom out." + cut,
               className="muted", id="flame-help"),
        html.Div(cards, className="stats", id="flame-stats"),
        _window_controls(t1, t2, f.first_ts),
        dcc.Store(id="flame-params", data={"trace_id": trace_id, "kind": kind, "t1": t1,
                                           "t2": t2, "first_ts": f.first_ts}),
        html.Div(dcc.Graph(id="flame-graph", figure=flame_figure(tree),
                           config=graph_cfg(f"trace{trace_id}-flame-{kind}")),
                 className="card"),
        html.Div(html.P("Click a frame to list the goroutines behind it.", className="muted"),
                 id="flame-goroutines", className="card"),
        html.Div([
            html.Div(["pprof: ", html.A(f"trace{trace_id}-{kind}.pb.gz",
                                        href=pprof_href(trace_id, kind, t1, t2),
                                        id="flame-pprof"),
                      " (go tool pprof -http=: FILE)"], className="muted"),
            api_link(api),
        ], className="card"),
    ], id="flame-page")


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def goroutines_panel(data: dict[str, Any], trace_id: int) -> list[Any]:
    """The goroutines behind a node, as a heading and a table."""
    unit = "samples" if data["kind"] == "cpu" else "waits"
    where = data["function"] or "all frames"
    rows = [{"goid": md_link(str(g["goid"]), goroutine_href(trace_id, g["goid"]))
             if g["goid"] >= 0 else "(none)",
             "start": g["start_function"] or "–", "count": fmt_count(g["count"]),
             "time": fmt_ns(g["value_ns"]),
             "share": f"{100 * g['value_ns'] / max(data['value_ns'], 1):.1f}%"}
            for g in data["goroutines"]]
    shown = len(rows)
    return [
        html.H3(["Goroutines behind ", html.Code(where)], id="flame-goroutines-title"),
        html.P(f"{_n(data['goroutine_count'], 'goroutine')}, "
               f"{_n(data['count'], unit.rstrip('s'))}, {fmt_ns(data['value_ns'])}"
               + (f"; the {shown} heaviest listed." if shown < data["goroutine_count"] else "."),
               className="muted"),
        html.Pre(" → ".join(data["path"]) or "(root)", className="stack", id="flame-path"),
        data_table("flame-goroutines-table", [("goid", "goid"), ("start", "start function"),
                                              ("count", unit), ("time", "time"),
                                              ("share", "share")], rows,
                   num={"count", "time", "share"}, markdown={"goid"}),
    ]


def _on_click(click: dict[str, Any] | None, params: dict[str, Any]) -> tuple[Any, Any]:
    """The goroutines behind the clicked frame, and the graph zoomed to it."""
    try:
        point = click["points"][0] if click else {}
        node = int(point["customdata"][-1])
    except (KeyError, IndexError, TypeError, ValueError):
        return html.P("Click a frame to list the goroutines behind it.",
                      className="muted"), no_update
    ctx = ui_context()
    f = ctx.frames.get(params["trace_id"])
    try:
        data = flame_goroutines(ctx.engine, f, params["kind"], node, params["t1"], params["t2"])
    except LookupError as e:
        return html.P(str(e), className="muted"), no_update
    zoom = Patch()
    x0, width = point["customdata"][-3:-1]
    if isinstance(x0, int | float) and isinstance(width, int | float) and width > 0:
        zoom["layout"]["xaxis"]["range"] = [x0, x0 + width]
    return goroutines_panel(data, params["trace_id"]), zoom


def _apply_href(start: Any, end: Any, params: dict[str, Any]) -> str:
    first = int(params["first_ts"])

    def ts(v: Any) -> int | None:
        try:
            return None if v in (None, "") else first + round(float(v) * 1e6)
        except (TypeError, ValueError):
            return None

    t1, t2 = ts(start), ts(end)
    if t1 is not None and t2 is not None and t2 <= t1:
        t1 = t2 = None
    return flame_href(int(params["trace_id"]), str(params["kind"]), t1, t2)


def register(dash_app: Dash) -> None:
    dash_app.callback(Output("flame-goroutines", "children"), Output("flame-graph", "figure"),
                      Input("flame-graph", "clickData"), State("flame-params", "data"),
                      prevent_initial_call=True)(_on_click)
    dash_app.callback(Output("flame-apply", "href"), Input("flame-from", "value"),
                      Input("flame-to", "value"), State("flame-params", "data"))(_apply_href)

