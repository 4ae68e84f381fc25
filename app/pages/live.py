"""Live sessions: ``/live`` (every session, several at once) and ``/live/<name>`` (one).

Both refresh about every second with a ``dcc.Interval`` (no reload): the
per-second series as small multiples (:mod:`app.figures.live`), the latest
numbers, the diagnostics rules that fired on recent windows, the latest
window's timeline and the list of windows, each opening in the full explorer.

Pause and resume go through the JSON API from the browser (a clientside
callback sending the bearer token the user typed, or the login's session cookie),
never through a Dash callback: the callback endpoint takes the read token.
"""

from __future__ import annotations

import time
from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from app.components import error_box, fmt_count, fmt_ns, graph_config
from app.context import ui_context
from app.figures.live import series_spec, wall, window_timeline_spec
from ingest.live import sessions as live

ROUTES = ("/live", "/live/<name>")
TITLE = "live"
TICK_MS = 1000
SPANS = {"1 min": 60, "2 min": 120, "10 min": 600, "1 h": 3600}
DEFAULT_SPAN = 120
#: Windows of the last this many seconds feed the alerts list.
ALERT_WINDOW_S = 60
MAX_SHOWN = 4


def _cfg(filename: str) -> Any:
    return graph_config(filename)


def layout(query: dict[str, str], name: str | None = None, **_: Any) -> Any:
    if name is None:
        return _list_layout()
    engine = ui_context().engine
    if live.get_session(engine, name) is None:
        return _waiting_layout(name)
    return _session_layout(name)


def _waiting_layout(name: str) -> Any:
    """A session not created yet: say how to start it, and show it once its
    collector has (the page is often opened before ``gmpscope live`` runs)."""
    return html.Div([
        error_box(f"No live session named {name!r} yet. Start one with "
                  f"gmpscope live --target URL --session {name}: this page shows it as "
                  "soon as the collector has created it.", home=True),
        dcc.Store(id="live-wait-name", data=name),
        dcc.Interval(id="live-wait-tick", interval=TICK_MS),
        html.Span(id="live-wait-msg", className="muted"),
    ])


def _list_layout() -> Any:
    return html.Div([
        html.H2("Live sessions"),
        html.P(["Sessions fed by ", html.Code("gmpscope live --target http://HOST:PORT"),
                " (docs/live.md). Tick sessions to watch them side by side."],
               className="muted"),
        dcc.Interval(id="live-list-tick", interval=TICK_MS),
        html.Div(id="live-list-table", className="card"),
        html.Div([
            dcc.Checklist(id="live-list-pick", options=[], value=[], inline=True),
        ], className="controls"),
        dcc.Graph(id="live-list-graph", config=_cfg("gmpscope-live-sessions")),
    ])


def _session_layout(name: str) -> Any:
    return html.Div([
        dcc.Store(id="live-name", data=name),
        dcc.Store(id="live-last-trace", data=None),
        dcc.Store(id="live-version", data=None),
        dcc.Interval(id="live-tick", interval=TICK_MS),
        html.Div([dcc.Link("← all live sessions", href="/live")], className="muted"),
        html.H2(["Live: ", html.Span(name)]),
        html.Div(id="live-head", className="muted"),
        html.Div([
            html.Button("Pause", id="live-pause", n_clicks=0),
            html.Button("Resume", id="live-resume", n_clicks=0),
            dcc.Input(id="live-token", type="password", placeholder="write token (unless "
                      "logged in with it)", debounce=True),
            html.Span(id="live-action-msg", className="muted"),
            html.Label("history"),
            dcc.RadioItems(id="live-span", value=DEFAULT_SPAN, inline=True,
                           options=[{"label": k, "value": v} for k, v in SPANS.items()]),
        ], className="controls"),
        html.Div(id="live-stats", className="stats"),
        html.Div(id="live-alerts"),
        dcc.Graph(id="live-series", config=_cfg(f"gmpscope-live-{name}")),
        dcc.Graph(id="live-timeline", config=_cfg(f"gmpscope-live-{name}-window")),
        html.Div(id="live-windows", className="card"),
    ])


# --------------------------------------------------------------------------
# data -> components


def _session_table(sessions: list[dict[str, Any]]) -> Any:
    if not sessions:
        return html.P("No live session yet.", className="muted")
    rows = [html.Tr([
        html.Td(dcc.Link(s["name"], href=f"/live/{s['name']}")),
        html.Td(s["target"]), html.Td(s["state"]), html.Td(fmt_count(s["segments"])),
        html.Td(fmt_count(s["dropped"])), html.Td(fmt_count(s["target_failures"])),
        html.Td(s["updated_at"] or "–"), html.Td(s["last_status"] or "", className="muted"),
    ]) for s in sessions]
    head = html.Tr([html.Th(h) for h in ("session", "target", "state", "windows", "dropped",
                                         "failed pulls", "updated", "collector says")])
    return html.Table([html.Thead(head), html.Tbody(rows)], className="data")


def _stat(key: str, label: str, value: str, hint: str | None = None) -> Any:
    children: list[Any] = [html.Div(value, className="stat-value", id=f"live-stat-{key}"),
                           html.Div(label, className="stat-label")]
    if hint:
        children.append(html.Div(hint, className="stat-hint"))
    return html.Div(children, className="stat-card")


def _rate(r: dict[str, Any], col: str) -> str:
    d = r["duration_ns"] / 1e9
    return f"{r[col] / d:.3g}" if d else "–"


def _stats(r: dict[str, Any] | None) -> list[Any]:
    if r is None:
        return [html.Span("No window yet: is the collector running?", className="muted")]
    heap = r.get("heap_bytes")
    return [
        _stat("goroutines", "goroutines alive (peak)", fmt_count(r["g_peak"]),
              f"{r['g_running']:.2g} running, {r['g_runnable']:.2g} runnable (mean)"),
        _stat("waiting-peak", "waiting (peak)", fmt_count(r["g_waiting_peak"])),
        _stat("sched-p99", "sched latency p99", fmt_ns(r["sched_p99_ns"]),
              f"p50 {fmt_ns(r['sched_p50_ns'])}"),
        _stat("netpoll", "netpoll waits/s", _rate(r, "netpoll_waits"),
              f"p99 {fmt_ns(r['netpoll_p99_ns'])}"),
        _stat("syscalls", "syscalls/s", _rate(r, "syscalls"),
              f"{_rate(r, 'p_handoffs')} P handoffs/s"),
        _stat("gc", "GC / STW in the second", fmt_ns(r["gc_ns"]), f"STW {fmt_ns(r['stw_ns'])}"),
        _stat("heap", "heap objects", f"{heap / 1e6:.3g} MB" if heap is not None else "–"),
        _stat("threads", "threads (M) busy", fmt_count(r["threads"]),
              f"{r['procs_running']:.2g} Ps running (mean)"),
    ]


def _os_stats(rows: list[dict[str, Any]]) -> list[Any]:
    """The OS side's cards (gmpscope live --os), from the latest second that has it."""
    r = next((x for x in reversed(rows) if x.get("os_epoll_waits") is not None), None)
    if r is None:
        return []
    d = r["duration_ns"] / 1e9 or 1.0
    off = r["os_offcpu_waiting_ns"] + r["os_offcpu_asleep_ns"]
    run = r["os_running_ns"]
    share = f"{off / run:.0%} of Running time" if run else "no Running time"
    return [
        _stat("os-offcpu", "OS: Running while thread off-CPU", f"{off / 1e6 / d:.3g} ms/s",
              f"{share}; waiting {fmt_ns(r['os_offcpu_waiting_ns'])}, asleep "
              f"{fmt_ns(r['os_offcpu_asleep_ns'])}"),
        _stat("os-cpu-wait", "OS: threads waiting for a CPU",
              f"{r['os_threads_waiting_ns'] / 1e9 / d:.2g}",
              f"{r['os_threads_oncpu_ns'] / 1e9 / d:.2g} on a CPU (mean)"),
        _stat("os-epoll", "OS: epoll waits/s", f"{r['os_epoll_waits'] / d:.3g}",
              f"{r['os_epoll_ready'] / d:.3g} ready fds/s"),
    ]


def _alerts(segs: list[dict[str, Any]], now_ns: int) -> Any:
    if segs and all(s.get("findings") is None for s in segs):
        return html.Div("Diagnostics are not available on this server.", className="muted")
    recent = [s for s in segs if s["wall_end_ns"] >= now_ns - ALERT_WINDOW_S * 10**9]
    # One line per rule: how many recent windows it fired on, the latest firing.
    by_rule: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {}
    for s in recent:  # newest first
        for f in s.get("findings") or []:
            rule = str(f.get("rule"))
            n, seg, latest = by_rule.get(rule, (0, s, f))
            by_rule[rule] = (n + 1, seg, latest)
    items = []
    for n, s, f in by_rule.values():
        link = f.get("link") if s.get("trace_id") else None
        parts: list[Any] = [
            html.Span(f"[{f.get('severity')}] ", className=f"sev-{f.get('severity')}"),
            html.B(str(f.get("title", ""))),
            html.Span(f" — in {n} of {len(recent)} windows; latest "
                      f"{wall(s['wall_start_ns']).strftime('%H:%M:%S')} (window #{s['seq']}): "),
            html.Span(str(f.get("summary", "")))]
        if link:
            parts += [" ", dcc.Link("show", href=link)]
        items.append(html.Li(parts))
    if not items:
        return html.Div(f"No diagnostics rule fired in the last {ALERT_WINDOW_S} s.",
                        className="muted", id="live-alerts-none")
    return html.Div([html.H3(f"Alerts (last {ALERT_WINDOW_S} s)"),
                     html.Ul(items)], className="card", role="alert", id="live-alerts-list")


def _windows(segs: list[dict[str, Any]], window_s: float | None) -> list[Any]:
    rows = []
    for s in segs[:30]:
        gap = s.get("gap_before_ns")
        big_gap = gap is not None and window_s is not None and gap > 0.5e9 * max(window_s, 1)
        tid = s.get("trace_id")
        rows.append(html.Tr([
            html.Td(f"#{s['seq']}"),
            html.Td(wall(s["wall_start_ns"]).strftime("%H:%M:%S.%f")[:-3]),
            html.Td(fmt_ns((s["last_ts"] or 0) - (s["first_ts"] or 0))),
            html.Td(fmt_count(s["events"])),
            html.Td(fmt_ns(gap) if gap is not None else "–", className="bad" if big_gap else ""),
            html.Td(f"{s['ingest_ms']:.0f} ms" if s.get("ingest_ms") is not None else "–"),
            html.Td(dcc.Link("open", href=f"/traces/{tid}/overview") if tid
                    else html.Span("expired", className="muted")),
            html.Td(s["note"], className="muted"),
        ]))
    head = html.Tr([html.Th(h) for h in ("window", "start (UTC)", "length", "events",
                                         "gap before", "ingest", "explorer", "note")])
    return [html.H3("Windows"), html.Table([html.Thead(head), html.Tbody(rows)],
                                           className="data")]


def _timeline(ctx: Any, segs: list[dict[str, Any]], last: int | None) -> tuple[Any, Any]:
    """The latest window's P timeline, or no_update when it is already shown."""
    with_detail = [s for s in segs if s.get("trace_id")]
    if not with_detail or with_detail[0]["trace_id"] == last:
        return no_update, no_update
    seg = with_detail[0]
    tf = ctx.frames.get(seg["trace_id"])
    pr = tf.proc_runs
    title = (f"Latest window #{seg['seq']} "
             f"({wall(seg['wall_start_ns']).strftime('%H:%M:%S')} UTC): goroutines on each P"
             + (f" (the 1,500 longest of {len(pr):,} runs)" if len(pr) > 1500 else ""))
    return (window_timeline_spec(pr["p"], pr["start_ts"], pr["end_ts"], pr["g"], tf.first_ts,
                                 title), seg["trace_id"])


# --------------------------------------------------------------------------
# callbacks


def register(dash_app: Dash) -> None:
    @dash_app.callback(Output("live-list-table", "children"),
                       Output("live-list-pick", "options"),
                       Output("live-list-pick", "value"),
                       Output("live-list-graph", "figure"),
                       Input("live-list-tick", "n_intervals"),
                       State("live-list-pick", "value"))
    def _list(_n: int | None, picked: list[str] | None) -> Any:
        engine = ui_context().engine
        sessions = live.list_sessions(engine)
        names = [s["name"] for s in sessions]
        chosen = [n for n in (picked or []) if n in names]
        if not picked:
            chosen = names[:MAX_SHOWN]
        since = time.time_ns() - DEFAULT_SPAN * 10**9
        data = {n: live.seconds_series(engine, n, since, DEFAULT_SPAN) for n in chosen}
        return (_session_table(sessions), [{"label": n, "value": n} for n in names], chosen,
                series_spec(data))

    @dash_app.callback(Output("live-version", "data"),
                       Output("live-head", "children"),
                       Output("live-stats", "children"),
                       Output("live-alerts", "children"),
                       Output("live-series", "figure"),
                       Output("live-windows", "children"),
                       Output("live-timeline", "figure"),
                       Output("live-last-trace", "data"),
                       Input("live-tick", "n_intervals"),
                       Input("live-span", "value"),
                       State("live-name", "data"),
                       State("live-version", "data"),
                       State("live-last-trace", "data"))
    def _tick(_n: int | None, span: int | None, name: str, seen: str | None,
              last_trace: int | None) -> Any:
        # One request a tick. It first asks one cheap question (has the session
        # changed?) and answers no_update when not, so the page redraws only once
        # per new window and a slow redraw is never overtaken by the next tick.
        ctx = ui_context()
        engine = ctx.engine
        version = f"{live.version(engine, name)}/{span}"
        if version == seen:
            return (no_update,) * 8
        s = live.get_session(engine, name)
        if s is None:
            return (version, error_box(f"The live session {name!r} was deleted."), [], [],
                    no_update, [], no_update, no_update)
        now = time.time_ns()
        span_s = int(span or DEFAULT_SPAN)
        rows = live.seconds_series(engine, name, now - span_s * 10**9, span_s * 2)
        segs = live.segments(engine, name, 60)
        head = [f"target {s['target']} · {s['state']} · {fmt_count(s['segments'])} windows"
                f" · {fmt_count(s['dropped'])} dropped · {fmt_count(s['target_failures'])} "
                "failed pulls",
                html.Br(), html.Span(f"collector: {s['last_status']}" if s["last_status"]
                                     else "")]
        timeline, shown = _timeline(ctx, segs, last_trace)
        stats = _stats(rows[-1] if rows else None) + _os_stats(rows)
        return (version, head, stats, _alerts(segs, now),
                series_spec({name: rows}), _windows(segs, s.get("window_s")), timeline, shown)

    dash_app.clientside_callback(  # type: ignore[no-untyped-call]
        """
        async function(tick, name) {
            // The list, not /api/live/sessions/<name>: no 404 every second.
            const r = await fetch("/api/live/sessions");
            const body = r.ok ? await r.json().catch(() => ({})) : {};
            if ((body.sessions || []).some(s => s.name === name)) {
                window.location.reload();
                return "starting";
            }
            return window.dash_clientside.no_update;
        }
        """,
        Output("live-wait-msg", "children"),
        Input("live-wait-tick", "n_intervals"), State("live-wait-name", "data"),
        prevent_initial_call=True)

    dash_app.clientside_callback(  # type: ignore[no-untyped-call]
        """
        async function(pause, resume, token, name) {
            const ctx = window.dash_clientside.callback_context;
            if (!ctx.triggered.length) { return window.dash_clientside.no_update; }
            const what = ctx.triggered[0].prop_id.startsWith("live-pause") ? "pause" : "resume";
            const headers = token ? {"Authorization": "Bearer " + token} : {};
            const r = await fetch("/api/live/sessions/" + encodeURIComponent(name) + "/" + what,
                                  {method: "POST", headers: headers});
            const body = await r.json().catch(() => ({}));
            return r.ok ? ("session " + body.state) : ("failed: " + (body.error || r.status));
        }
        """,
        Output("live-action-msg", "children"),
        Input("live-pause", "n_clicks"), Input("live-resume", "n_clicks"),
        State("live-token", "value"), State("live-name", "data"),
        prevent_initial_call=True)
