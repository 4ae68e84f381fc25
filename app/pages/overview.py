"""Overview of one trace: key numbers, goroutines by state over time with GC and
STW bands, heap and GOMAXPROCS, threads over time. Data: :mod:`ingest.views.overview`
(also ``GET /api/traces/<id>/overview``)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from app.components import fmt_count, fmt_ns, stat_card
from app.components_export import perfetto_button
from app.components_findings import findings_panel, register_findings
from app.context import ui_context
from app.figures.overview import heap_figure, states_figure, threads_figure
from app.pages._views import X_CHANGED_JS, cfg, fmt_bytes
from app.router import PageError
from ingest.derive.frames import TraceNotFound
from ingest.store.traces import get_trace
from ingest.views.overview import DEFAULT_BINS, counters_view, overview

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


def _int(query: dict[str, str], name: str) -> int | None:
    raw = query.get(name) or ""
    if raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise PageError(f"{name} must be an integer, not {raw!r}") from None


def _kept_findings(trace_id: int) -> dict[str, Any] | None:
    """The trace's findings when already kept (no round trip for them), else None."""
    from ingest.diagnose import ConfigError, config_from_env, rule_defaults
    from ingest.diagnose.runner import kept_report

    ctx = ui_context()
    try:
        return kept_report(ctx.engine, ctx.frames.get(trace_id),
                           config_from_env(rule_defaults()))
    except (ConfigError, TraceNotFound):
        return None  # the panel's callback says why


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    bins = _int(query, "bins") or DEFAULT_BINS
    try:
        data = overview(ctx.engine, ctx.frames.get(trace_id), trace_id, bins=bins,
                        t1=_int(query, "t1"), t2=_int(query, "t2"))
    except TraceNotFound:
        raise PageError(f"There is no trace {trace_id}.") from None
    except ValueError as e:
        raise PageError(str(e)) from None
    k = data["key"]
    api = f"/api/traces/{trace_id}/overview"
    return html.Div([
        html.H2(["Overview · ", html.Span(k["name"], className="mono")]),
        key_cards(k),
        findings_panel(trace_id, _kept_findings(trace_id)),
        html.Div([
            dcc.Graph(id="overview-states", figure=states_figure(data),
                      config=cfg(f"trace{trace_id}-overview-states")),
            html.P("Time-weighted average number of goroutines in each state per time bin "
                   "(Waiting split by reason); shaded: GC mark phases and stop-the-world "
                   "pauses. Drag to zoom.", className="muted"),
        ], className="card"),
        dcc.Store(id="overview-trace", data=trace_id),
        dcc.Store(id="overview-heap-zoom"),
        html.Div([
            html.Div([dcc.Graph(id="overview-heap", figure=heap_figure(data),
                                config=cfg(f"trace{trace_id}-overview-heap")),
                      html.P("Each bucket's min–max as a band (a one-sample spike stays "
                             "visible), its last value as the line. Zoom for finer "
                             "buckets.", className="muted")],
                     className="card"),
            html.Div(dcc.Graph(id="overview-threads", figure=threads_figure(data),
                               config=cfg(f"trace{trace_id}-overview-threads")),
                     className="card"),
        ], className="row"),
        html.P(["Data: ", html.A(api, href=api, target="_blank"), " · ",
                dcc.Link("state graphs", href=f"/traces/{trace_id}/states"), " · ",
                dcc.Link("timeline", href=f"/traces/{trace_id}/timeline"
                         f"?mode=p&t1={k['first_ts']}&t2={k['last_ts']}"), " · ",
                perfetto_button(trace_id, "overview-perfetto")],
               className="muted"),
    ])


def zoom_window(relayout: dict[str, Any] | None, first_ts: int
                ) -> tuple[int | None, int | None] | None:
    """The trace-ns window of a figure's x zoom (seconds since ``first_ts``);
    (None, None) for a reset; None when the x axis did not change."""
    r = relayout or {}
    if r.get("xaxis.autorange"):
        return None, None
    x0, x1 = r.get("xaxis.range[0]"), r.get("xaxis.range[1]")
    if x0 is None and isinstance(r.get("xaxis.range"), list):
        x0, x1 = r["xaxis.range"]
    if x0 is None or x1 is None:
        return None
    return first_ts + round(float(x0) * 1e9), first_ts + round(float(x1) * 1e9)



def register(dash_app: Dash) -> None:
    register_findings(dash_app)
    dash_app.clientside_callback(  # type: ignore[no-untyped-call]
        X_CHANGED_JS, Output("overview-heap-zoom", "data"),
        Input("overview-heap", "relayoutData"), prevent_initial_call=True)

    @dash_app.callback(Output("overview-heap", "figure"),
                       Input("overview-heap-zoom", "data"),
                       State("overview-trace", "data"), prevent_initial_call=True)
    def _zoom_heap(relayout: dict[str, Any] | None, trace_id: int) -> Any:
        """A zoomed heap figure gets its own buckets (the counters reduced over
        the visible window), so spikes resolve as one zooms in."""
        ctx = ui_context()
        trace = get_trace(ctx.engine, trace_id)
        if trace is None:
            raise PreventUpdate
        first = int(trace["first_ts"] or 0)
        win = zoom_window(relayout, first)
        if win is None:
            raise PreventUpdate
        try:
            data = counters_view(ctx.engine, ctx.frames.get(trace_id), trace_id, *win)
        except (LookupError, ValueError):
            raise PreventUpdate from None
        fig = heap_figure(data)
        if win[0] is not None and win[1] is not None:
            fig.update_layout(xaxis_range=[(win[0] - first) / 1e9, (win[1] - first) / 1e9])
        return fig
