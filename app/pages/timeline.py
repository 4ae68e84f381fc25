"""Timeline of one trace: lanes by P, M or G (grouped by start function) with the
GC/STW/sweep/assist bands on top. The whole trace shows at once as a
level-of-detail summary; zooming or panning asks the server for the new window
(``GET /api/traces/<id>/timeline``, :mod:`ingest.views.timeline`). Clicking a bar
shows the span: goroutine, state, reason, duration, M/P and stack.

Deep links: ``/traces/<id>/timeline?mode=p|m|g&t1=<ns>&t2=<ns>[&g=<goid>][&m=<m>][&p=<p>]
[&group=<start function>][&offset=<lane>]``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from dash import ALL, Dash, Input, Output, State, callback_context, dcc, html, no_update

from app.components import fmt_ns, graph_config
from app.components_export import perfetto_button
from app.context import ui_context
from app.figures.timeline import figure_dict
from app.pages._analysis import flame_href
from app.pages._views import X_CHANGED_JS
from app.router import PageError
from ingest.derive.frames import TraceNotFound
from ingest.store.traces import get_trace
from ingest.views.timeline import DEFAULT_LIMIT, BadRequest, parse_params, span_details, timeline

ROUTES = ("/traces/<int:trace_id>/timeline",)
TITLE = "Timeline"

#: Query keys of a view, kept in the page's store and in deep links.
KEYS = ("mode", "t1", "t2", "offset", "limit", "group", "g", "m", "p")
MODE_OPTIONS = [{"label": " by P (procs)", "value": "p"},
                {"label": " by M (threads)", "value": "m"},
                {"label": " by G (goroutines)", "value": "g"}]


def _query(params: dict[str, Any]) -> dict[str, str]:
    return {k: str(params[k]) for k in KEYS if params.get(k) not in (None, "")}


def _config(trace_id: int) -> Any:
    # Typed Any: Dash's stub wants its own Config type for dcc.Graph(config=...).
    return {**graph_config(f"trace{trace_id}-timeline"), "scrollZoom": False,
            "doubleClick": "autosize"}


def _link(trace_id: int, params: dict[str, Any]) -> str:
    return f"/traces/{trace_id}/timeline?{urlencode(_query(params))}"


def _fetch(trace_id: int, params: dict[str, Any]) -> dict[str, Any]:
    ctx = ui_context()
    try:
        frames = ctx.frames.get(trace_id)
    except TraceNotFound:
        raise PageError(f"There is no trace {trace_id}.") from None
    data = timeline(ctx.engine, frames, parse_params(_query(params)))
    if data["mode"] == "m":  # OS events (poller recording) as marks on the M lanes
        from ingest.views.poller import timeline_marks

        data["os_marks"] = timeline_marks(ctx.engine, trace_id, data["t1"], data["t2"])
    return data


def _status(data: dict[str, Any]) -> list[Any]:
    st = data["stats"]
    n_data = sum(1 for t in data["lanes"]["type"] if t not in ("range", "group"))
    window = fmt_ns(data["t2"] - data["t1"])
    text = (f"Window {window} · {st['rows']:,} intervals → {st['shapes']:,} shapes "
            f"({st['merged']:,} merged, one pixel ≈ {fmt_ns(data['bucket_ns'])}) · "
            f"server {st['ms']:.0f} ms")
    lanes = (f"lanes {data['offset'] + 1}–{data['offset'] + n_data} of {data['total_lanes']:,}"
             if n_data else f"no lanes ({data['total_lanes']:,} in this window)")
    return [html.Span(lanes, id="timeline-lanes-label"), " · ", text]


def _groups_options(data: dict[str, Any]) -> list[dict[str, str]]:
    return [{"label": f"{g['name'] or '(unknown start function)'} ({g['count']:,})",
             "value": g["name"]} for g in data.get("groups", [])]


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    trace = get_trace(ctx.engine, trace_id)
    if trace is None:
        raise PageError(f"There is no trace {trace_id}.")
    try:
        params = parse_params(query)
    except BadRequest as e:
        raise PageError(str(e)) from None
    store = {k: getattr(params, k) for k in KEYS}
    store["limit"] = params.limit if "limit" in query else None
    data = _fetch(trace_id, store)
    store.update(t1=data["t1"], t2=data["t2"], offset=data["offset"])
    store["first_ts"], store["last_ts"] = data["first_ts"], data["last_ts"]
    api = f"/api/traces/{trace_id}/timeline"
    return html.Div([
        html.H2(["Timeline · ", html.Span(trace["name"], className="mono")]),
        dcc.Store(id="timeline-params", data=store),
        dcc.Store(id="timeline-trace", data=trace_id),
        dcc.Store(id="timeline-zoom"),
        html.Div([
            dcc.RadioItems(id="timeline-mode", options=MODE_OPTIONS, value=params.mode,
                           inline=True, className="timeline-modes"),
            html.Button("Whole trace", id="timeline-reset", className="secondary"),
            html.Button("◀ lanes", id="timeline-prev", className="secondary"),
            html.Button("lanes ▶", id="timeline-next", className="secondary"),
            html.Div(dcc.Dropdown(id="timeline-group", options=_groups_options(data),
                                  value=params.group, placeholder="all goroutine groups",
                                  clearable=True),
                     id="timeline-group-box", className="timeline-group",
                     style={} if params.mode == "g" else {"display": "none"}),
            dcc.Input(id="timeline-goid", type="text", inputMode="numeric",
                      placeholder="goroutine id", debounce=True, className="timeline-goid",
                      value=str(params.g) if params.g is not None else ""),
            perfetto_button(trace_id, "timeline-perfetto"),
        ], className="controls"),
        html.Div(_status(data), id="timeline-status", className="muted"),
        html.Div(dcc.Loading(dcc.Graph(
            id="timeline-graph", figure=figure_dict(data),
            config=_config(trace_id)),
            type="dot", delay_show=300), className="card timeline-card"),
        html.P("Bar height: a bar that merges several intervals is as tall as the share of "
               "its span they cover (a 1.4% stop-the-world is a sliver, not a band); a single "
               "interval is full height.", id="timeline-cover-help", className="muted"),
        html.Div(html.P("Click a bar for its details (a bar that merges many intervals: zoom "
                        "into it); drag to zoom, double-click to zoom out.",
                        className="muted"),
                 id="timeline-details", className="card timeline-details"),
        html.P(["This view: ", html.A("link", id="timeline-permalink",
                                      href=_link(trace_id, store)),
                " · Data: ", html.A(api, id="timeline-api", href=f"{api}?"
                                    f"{urlencode(_query(store))}", target="_blank"),
                " · ", dcc.Link("Flame graphs of this window", id="timeline-flame",
                                href=flame_href(trace_id, "sync", store["t1"], store["t2"]))],
               className="muted"),
    ])


def _window_from_relayout(rel: dict[str, Any], params: dict[str, Any]
                          ) -> tuple[int, int] | None:
    """(t1, t2) in trace ns from a Plotly relayout event, None when not a zoom."""
    first, last = int(params["first_ts"]), int(params["last_ts"])
    if rel.get("xaxis.autorange"):
        return first, last
    lo = rel.get("xaxis.range[0]")
    hi = rel.get("xaxis.range[1]")
    if lo is None and isinstance(rel.get("xaxis.range"), list):
        lo, hi = rel["xaxis.range"]
    if lo is None or hi is None:
        return None
    t1 = first + int(round(float(lo) * 1e6))
    t2 = first + int(round(float(hi) * 1e6))
    if t2 <= t1:
        t2 = t1 + 1
    return t1, t2



def register(dash_app: Dash) -> None:
    dash_app.clientside_callback(  # type: ignore[no-untyped-call]
        X_CHANGED_JS, Output("timeline-zoom", "data"),
        Input("timeline-graph", "relayoutData"), prevent_initial_call=True)

    @dash_app.callback(
        Output("timeline-params", "data"),
        Input("timeline-mode", "value"), Input("timeline-zoom", "data"),
        Input("timeline-prev", "n_clicks"), Input("timeline-next", "n_clicks"),
        Input("timeline-reset", "n_clicks"), Input("timeline-group", "value"),
        Input("timeline-goid", "value"), Input({"role": "timeline-zoom", "t1": ALL, "t2": ALL},
                                               "n_clicks"),
        State("timeline-params", "data"),
        prevent_initial_call=True)
    def _params(mode: str, rel: dict[str, Any] | None, _p: Any, _n: Any, _r: Any,
                group: str | None, goid: str | None, _z: Any,
                params: dict[str, Any]) -> Any:
        trig = callback_context.triggered_id
        p = dict(params)
        limit = int(p.get("limit") or DEFAULT_LIMIT)
        if trig == "timeline-mode":
            if mode == p.get("mode"):
                return no_update
            p.update(mode=mode, offset=None)
        elif trig == "timeline-zoom":
            win = _window_from_relayout(rel or {}, p)
            if win is None or win == (p.get("t1"), p.get("t2")):
                return no_update
            p["t1"], p["t2"] = win
        elif trig == "timeline-prev":
            p["offset"] = max(0, int(p.get("offset") or 0) - limit)
        elif trig == "timeline-next":
            p["offset"] = int(p.get("offset") or 0) + limit
        elif trig == "timeline-reset":
            p["t1"], p["t2"] = p["first_ts"], p["last_ts"]
        elif trig == "timeline-group":
            if (group or None) == p.get("group"):
                return no_update
            p.update(group=group or None, offset=None)
        elif trig == "timeline-goid":
            text = (goid or "").strip().lstrip("Gg")
            if text and not text.isdigit():
                return no_update
            p.update(g=int(text) if text else None, offset=None)
            if text:
                p["mode"] = "g"
        elif isinstance(trig, dict) and trig.get("role") == "timeline-zoom":
            if not any(_z or []):
                return no_update
            p["t1"], p["t2"] = int(trig["t1"]), int(trig["t2"])
        else:
            return no_update
        return p

    @dash_app.callback(
        Output("timeline-graph", "figure"), Output("timeline-status", "children"),
        Output("timeline-permalink", "href"), Output("timeline-api", "href"),
        Output("timeline-group", "options"), Output("timeline-group-box", "style"),
        Output("timeline-mode", "value"), Output("timeline-flame", "href"),
        Input("timeline-params", "data"), State("timeline-trace", "data"),
        prevent_initial_call=True)
    def _update(params: dict[str, Any], trace_id: int) -> Any:
        try:
            data = _fetch(trace_id, params)
        except (BadRequest, PageError) as e:
            return (no_update, html.Span(str(e), className="error-text"), no_update,
                    no_update, no_update, no_update, no_update, no_update)
        params = {**params, "offset": data["offset"]}
        api = f"/api/traces/{trace_id}/timeline?{urlencode(_query(params))}"
        return (figure_dict(data), _status(data), _link(trace_id, params), api,
                _groups_options(data),
                {} if data["mode"] == "g" else {"display": "none"}, data["mode"],
                flame_href(trace_id, "sync", data["t1"], data["t2"]))

    @dash_app.callback(
        Output("timeline-details", "children"),
        Input("timeline-graph", "clickData"),
        State("timeline-trace", "data"), State("timeline-params", "data"),
        prevent_initial_call=True)
    def _details(click: dict[str, Any] | None, trace_id: int,
                 params: dict[str, Any]) -> Any:
        if not click or not click.get("points"):
            return no_update
        pt = click["points"][0]
        if (pt.get("customdata") or [None])[0] == "os":
            return no_update  # an OS mark: its hover says it all
        ref, _g, n = (pt.get("customdata") or [-1, -1, 0])[:3]
        base = float(pt.get("base") or 0)
        width = float(pt.get("x") or 0)
        first = int(params["first_ts"])
        t1 = first + int(base * 1e6)
        t2 = first + int((base + width) * 1e6) + 1
        if int(ref) < 0:
            return merged_details(pt, int(n), t1, t2, trace_id, params)
        ctx = ui_context()
        try:
            d = span_details(ctx.engine, ctx.frames.get(trace_id), int(ref))
        except (LookupError, TraceNotFound) as e:
            return html.P(f"No details: {e}", className="error-text")
        return span_panel(d, trace_id, first)


def merged_details(pt: dict[str, Any], n: int, t1: int, t2: int, trace_id: int,
                   params: dict[str, Any]) -> Any:
    """The details panel of a merged shape: its mix and a zoom button."""
    text = str(pt.get("hovertext") or "")
    lines = [s for s in text.replace("<br>", "\n").split("\n") if s]
    # Hover text is HTML-escaped for Plotly; undo the few escapes for plain text.
    lines = [s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
             .replace("&#x27;", "'").replace("&amp;", "&") for s in lines]
    return html.Div([
        html.H3(f"{n:,} intervals merged at this zoom"),
        html.Pre("\n".join(lines[:-1]), className="stack"),
        html.Button("Zoom into these", id={"role": "timeline-zoom", "t1": t1, "t2": t2},
                    className="secondary"),
        " ",
        dcc.Link("link", href=_link(trace_id, {**params, "t1": t1, "t2": t2})),
    ])


def _frames_text(stack: list[dict[str, Any]]) -> str:
    return "\n".join(f"{f['function']}\n    {f['file']}:{f['line']}" for f in stack) \
        or "(no stack)"


def span_panel(d: dict[str, Any], trace_id: int, first_ts: int) -> Any:
    """The details panel of one span (all trace strings as text)."""
    g = d.get("goroutine")
    start_ms = (d["start_ts"] - first_ts) / 1e6
    rows: list[tuple[str, Any]] = []
    if g is not None and g >= 0:
        rows.append(("goroutine", dcc.Link(f"G{g}", href=f"/traces/{trace_id}/goroutines/{g}",
                                           id="timeline-detail-goroutine")))
    if d["source"] == "proc_run":
        rows.append(("ran on", f"P{d['p']}, M{d['m']}"))
    elif d["source"] == "range":
        rows.append(("range", f"{d['state']}: {d['reason']}"))
    else:
        rows.append(("resource", f"{d['resource']} {d['id']}"))
    rows += [
        ("state", d.get("state", "")),
        ("reason", d.get("reason") or "–"),
        ("start", f"{start_ms:.6f} ms after trace start (ts {d['start_ts']})"),
        ("duration", fmt_ns(d["duration_ns"])),
        ("M / P", f"M{d.get('m', -1)} / P{d.get('p', -1)}"),
    ]
    nxt = d.get("next")
    if nxt:
        rows.append(("then", f"{nxt['state']}" + (f" ({nxt['reason']})" if nxt["reason"]
                                                  else "")))
    table = html.Table([html.Tr([html.Th(k), html.Td(v)]) for k, v in rows],
                       className="data timeline-detail-table")
    pad = max(d["duration_ns"], 1_000)
    links: list[Any] = []
    if g is not None and g >= 0:
        links = [dcc.Link("this goroutine's timeline",
                          href=_link(trace_id, {"mode": "g", "g": g,
                                                "t1": d["start_ts"] - pad * 5,
                                                "t2": d["end_ts"] + pad * 5}))]
    children: list[Any] = [
        html.H3(f"{d['state']} · {fmt_ns(d['duration_ns'])}"), table,
        html.P(links, className="muted") if links else None,
        html.H4("Stack where it entered this state"),
        html.Pre(_frames_text(d.get("stack") or []), className="stack",
                 id="timeline-detail-stack"),
    ]
    if nxt and nxt.get("stack"):
        children += [html.H4("Stack where it left it"),
                     html.Pre(_frames_text(nxt["stack"]), className="stack")]
    return html.Div([c for c in children if c is not None])
