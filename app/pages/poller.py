"""OS poller page: what strace saw (``gmpscope record``) beside the Go trace.

Readiness waits (durations, timeout jitter, events per wakeup, empty wakeups),
a lane per epoll instance, epoll_ctl over time, open descriptors over time,
errors, io_uring, and an OS syscalls section: the slowest calls by name and
descriptor, and those that ran while their Go syscall lost its P. The header
says how the recording's clock was aligned with the trace and how well.
Data: :mod:`ingest.views.poller`; JSON: ``/api/traces/<id>/poller``.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.poller import (
    early_figure,
    epoll_ctl_figure,
    epoll_lanes_figure,
    errors_figure,
    events_per_wakeup_figure,
    io_uring_figure,
    jitter_figure,
    open_fds_figure,
    os_syscalls_figure,
    ready_fds_figure,
    uring_depth_figure,
    uring_latency_figure,
    wait_duration_figure,
)
from app.pages._analysis import (
    api_link,
    around,
    goroutine_href,
    graph_cfg,
    link,
    table,
    timeline_href,
)
from app.router import PageError
from ingest.store.traces import get_trace
from ingest.views.poller import NoRecording, os_syscalls, poller_page

ROUTES = ("/traces/<int:trace_id>/poller",)
TITLE = "OS poller"
#: The router shows this page for OS recordings without a Go trace too.
OS_RECORDING = True
SHOWN = 25

METHODS = {
    "clock-snapshot": "the Go trace's wall-clock snapshot (Go 1.25+): exact",
    "monotonic-clock": "the recorder's CLOCK_REALTIME − CLOCK_MONOTONIC reading, confirmed "
                       "by matching syscalls",
    "syscall-matching": "matching each thread's Go syscalls with the OS calls inside them",
    "none": "not aligned: OS events are not placed on the Go timeline",
    "wall-clock": "no Go trace: times are the recording's own wall clock",
}


def _graph(gid: str, fig: Any, filename: str) -> html.Div:
    return html.Div(dcc.Graph(id=gid, figure=fig, config=graph_cfg(filename)), className="card")


def _alignment_card(al: dict[str, Any]) -> html.Div:
    method = al["method"]
    items: list[Any] = [html.H3("How the clocks were aligned"),
                        html.P([html.B(method), ": ", METHODS.get(method, "")],
                               id="poller-alignment-method")]
    facts = []
    if al["offset_ns"] is not None and method != "wall-clock":
        facts.append(f"offset: wall clock = trace time + {al['offset_ns']:,} ns")
    if al["go_syscalls"]:
        facts.append(f"{al['matched']:,} of {al['go_syscalls']:,} Go syscalls on recorded "
                     f"threads contain an OS call of their thread "
                     f"({100 * (al['quality'] or 0):.1f}%; never 100%: Go also makes calls "
                     "strace was not asked to trace)")
    if al["slack_ns"] is not None:
        facts.append(f"residual: the syscall pairs allow offsets within {fmt_ns(al['slack_ns'])}")
    if al["note"]:
        facts.append(al["note"])
    items.append(html.Ul([html.Li(f) for f in facts], id="poller-alignment-facts"))
    cmd = " ".join(str(c) for c in al.get("command") or [])
    over = al.get("overhead") or {}
    extra = [f"recording {al['name']}", f"{al['rows']:,} rows ({al['syscalls']:,} calls, "
             f"{al['signals']:,} signals, {al['exits']:,} thread exits) on {al['threads']} "
             f"threads", f"{al['unknown_lines']} recorder lines not understood",
             f"recorded with {al.get('recorder') or al.get('backend') or 'strace'}"
             + (" · PARTIAL (the recording was cut short)" if al.get("partial") else "")]
    if cmd:
        extra.append(f"command: {cmd}")
    tracer = al.get("recorder") or "strace"
    if over.get("slowdown"):
        extra.append(f"{tracer} slowed the program {over['slowdown']}x "
                     f"({over.get('added_us_per_syscall')} µs per traced call)")
    elif over.get("strace_cpu_s") is not None:
        extra.append(f"{tracer} used {over['strace_cpu_s']} s of CPU over "
                     f"{over.get('traced_wall_s')} s (no untraced baseline run)")
    items.append(html.P(" · ".join(extra), className="muted"))
    return html.Div(items, className="card", id="poller-alignment")


def _stats(d: dict[str, Any]) -> list[Any]:
    w, f, c, u = d["waits"], d["open_fds"], d["epoll_ctl"]["total"], d["io_uring"]
    errs = {(e["errno"]): 0 for e in d["errors"]}
    for e in d["errors"]:
        errs[e["errno"]] += e["count"]
    return [
        stat_card("readiness waits", fmt_count(w["count"]),
                  ", ".join(f"{k} {v}" for k, v in w["by_call"].items()) or "none"),
        stat_card("wait p50 / p99", f"{fmt_ns(w['duration']['p50_ns'] or 0)} / "
                                    f"{fmt_ns(w['duration']['p99_ns'] or 0)}",
                  f"max {fmt_ns(w['duration']['max_ns'] or 0)}"),
        stat_card("timed out", fmt_count(w["timed_out"]),
                  f"jitter p50 {fmt_ns(w['jitter']['p50_ns'] or 0)}, "
                  f"max {fmt_ns(w['jitter']['max_ns'] or 0)}"),
        stat_card("returned early", fmt_count(w["returned_early"]), "with events, before "
                  "the timeout"),
        stat_card("empty wakeups", fmt_count(w["empty"]),
                  f"{w['empty_nonblocking']} non-blocking polls (timeout 0)"),
        stat_card("epoll_ctl", f"+{c['add']} / −{c['del']}", f"{c['mod']} MOD"),
        stat_card("open descriptors", fmt_count(f["final"]), f"at the end; max {f['max']}"
                  + (" · sockets only climb (leak?)" if f["sockets_only_climb"]
                     and f["sockets"] and f["sockets"][-1] > 0 else "")),
        stat_card("EMFILE / EAGAIN", f"{errs.get('EMFILE', 0)} / {errs.get('EAGAIN', 0)}",
                  f"{sum(errs.values())} failed calls"),
        stat_card("io_uring_enter", fmt_count(u["enters"]),
                  f"{u['submitted']} of {u['to_submit']} entries submitted"),
        stat_card("io_uring requests", fmt_count(d["uring_requests"]["requests"]),
                  _uring_note(d["uring_requests"])),
    ]


def _uring_note(r: dict[str, Any]) -> str:
    if not r["requests"]:
        return "none recorded (the eBPF backend records them)"
    lat = r["latency"]
    return (f"p50 {fmt_ns(lat['p50'] or 0)}, p99 {fmt_ns(lat['p99'] or 0)}; "
            f"max depth {r['depth']['max']}" + (f"; {r['in_flight']} in flight at the end"
                                                 if r["in_flight"] else ""))


def _uring_table(r: dict[str, Any]) -> html.Table:
    head = html.Tr([html.Th(h) for h in ("opcode", "requests", "errors", "p50", "p90", "p99",
                                         "max")])
    body = [html.Tr([html.Td(o["opcode"], className="mono"), html.Td(fmt_count(o["count"])),
                     html.Td(o["errors"]),
                     *(html.Td("–" if o[k] is None else fmt_ns(o[k]))
                       for k in ("p50", "p90", "p99", "max"))]) for o in r["by_opcode"]]
    return html.Table([html.Thead(head), html.Tbody(body)], className="table",
                      id="poller-uring-table")


def _uring_section(d: dict[str, Any], fn: str) -> list[Any]:
    r = d["uring_requests"]
    if not r["requests"]:
        return []
    return [
        html.H3("io_uring requests", id="poller-uring-requests"),
        html.Div([_graph("poller-uring-latency", uring_latency_figure(r),
                         f"{fn}-poller-uring-latency"),
                  _graph("poller-uring-depth", uring_depth_figure(r), f"{fn}-poller-uring-depth")],
                 className="row"),
        html.Div([html.P(f"{r['requests']:,} requests from submission "
                         "(io_uring:io_uring_submit_req) to completion (io_uring_complete)",
                         className="muted"), _uring_table(r)], className="card"),
    ]


def _errors_table(errs: list[dict[str, Any]]) -> html.Table:
    return table(["syscall", "errno", "calls"], [[e["syscall"], e["errno"], fmt_count(e["count"])]
                                                  for e in errs[:SHOWN]], num={2},
                 id="poller-errors-table")


def _call_row(trace_id: int, c: dict[str, Any], tr: dict[str, Any]) -> list[Any]:
    gs = c["go_syscall"]
    where: Any = "–"
    if gs is not None:
        where = html.Span([link(f"G{gs['goid']}", goroutine_href(trace_id, gs["goid"])),
                           f" P{gs['p']}" + (" · P handed off" if gs["p_lost"] else "")])
    tl: Any = ""
    if c["ts"] is not None and c["m"] is not None and tr["first_ts"] is not None:
        end = c["ts"] + (c["duration_ns"] or 0)
        t1, t2 = around(c["ts"], end, tr["first_ts"], tr["last_ts"])
        tl = link("timeline", timeline_href(trace_id, "m", t1, t2, m=int(c["m"])))
    res = c["errno"] or ("?" if c["result"] is None else str(c["result"]))
    return [c["syscall"], "–" if c["fd"] is None else str(c["fd"]), c["fd_path"] or "",
            str(c["tid"]), f"+{fmt_ns(c['rel_ns'])}",
            "–" if c["duration_ns"] is None else fmt_ns(c["duration_ns"]), res, where, tl]


_CALL_HEAD = ["syscall", "fd", "descriptor", "thread", "at", "duration", "result",
              "Go syscall around it", ""]


def _os_section(trace_id: int, o: dict[str, Any], tr: dict[str, Any]) -> html.Div:
    by = table(["syscall", "descriptor kind", "calls", "total", "p50", "p99", "max"],
               [[r["syscall"], r["fd_kind"], fmt_count(r["count"]), fmt_ns(r["total_ns"]),
                 fmt_ns(r["p50_ns"] or 0), fmt_ns(r["p99_ns"] or 0), fmt_ns(r["max_ns"] or 0)]
                for r in o["by_name"][:SHOWN]], num={2, 3, 4, 5, 6}, id="poller-os-by-name")
    slow = table(_CALL_HEAD, [_call_row(trace_id, c, tr) for c in o["slowest"][:SHOWN]],
                 num={4, 5}, id="poller-os-slowest")
    ph = o["p_handoffs"]
    if not o["joined"]:
        hand: Any = html.P("Not joined: this recording has no aligned Go trace, so no OS call "
                           "can be matched with a Go syscall.", className="muted")
    elif not ph["calls"]:
        hand = html.P(f"No OS call ran inside a Go syscall that lost its P "
                      f"({o['inside_go_syscall']:,} of {o['calls']:,} calls ran inside a Go "
                      "syscall of their M).", className="muted", id="poller-os-handoffs")
    else:
        hand = html.Div([
            html.P(f"{ph['calls']} OS calls ran inside {ph['go_syscalls']} Go syscalls that "
                   f"lost their P (the runtime handed the P to another M): "
                   + ", ".join(f"{k} {v}" for k, v in ph["by_syscall"].items())
                   + f". {o['inside_go_syscall']:,} of {o['calls']:,} OS calls ran inside a "
                     "Go syscall of their M.", id="poller-os-handoffs"),
            table(_CALL_HEAD, [_call_row(trace_id, c, tr) for c in ph["slowest"][:SHOWN]],
                  num={4, 5}, id="poller-os-handoff-table")])
    return html.Div([
        html.H2("OS syscalls", id="os-syscalls"),
        html.Div([_graph("poller-os-fig", os_syscalls_figure(o), f"trace{trace_id}-os-syscalls"),
                  html.Div([html.H3("By syscall and descriptor kind"), by], className="card")],
                 className="row"),
        html.Div([html.H3("Slowest calls"), slow], className="card"),
        html.Div([html.H3("Which made the runtime hand off a P"),
                  html.P("An OS call is matched with the Go syscall of the same M (= thread "
                         "id) whose interval contains it; a Go syscall with a lost P means "
                         "the scheduler gave its P to another M while this call blocked.",
                         className="muted"), hand], className="card"),
    ], id="poller-os")


def _no_recording(trace_id: int, name: str) -> html.Div:
    """Not an error: most traces come without an OS recording; say how to add one."""
    return html.Div([
        html.H2(["OS poller · ", html.Span(name, className="mono")]),
        html.Div([
            html.P(f"Trace {trace_id} has no OS recording attached.", id="poller-none"),
            html.P("Record what the OS sees (epoll waits, descriptors, io_uring, syscalls) "
                   "with strace while the program writes its Go trace, then attach it:"),
            html.Pre("gmpscope record --go-trace run.trace -o rec/ -- ./program -trace "
                     f"run.trace\ngmpscope ingest rec/ --attach {trace_id}\n"
                     f"# or: zip -r rec.zip rec/ && curl --data-binary @rec.zip $URL"
                     f"/api/traces/{trace_id}/poller", className="stack"),
        ], className="card"),
    ], id="poller-page")


def layout(query: dict[str, str], trace_id: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    tr = get_trace(ctx.engine, trace_id)
    if tr is None:
        raise PageError(f"There is no trace {trace_id}.")
    try:
        d = poller_page(ctx.engine, trace_id)
        o = os_syscalls(ctx.engine, trace_id)
    except NoRecording:
        return _no_recording(trace_id, tr["name"])
    w = d["waits"]
    fn = f"trace{trace_id}"
    api = f"/api/traces/{trace_id}"
    return html.Div([
        html.H2(["OS poller · ", html.Span(tr["name"], className="mono")]),
        _alignment_card(d["alignment"]),
        html.Div(_stats(d), className="stats", id="poller-stats"),
        html.P(f"Times below are since the recording's first event (wall clock). A wait "
               f"timed out when it returned 0 events after a finite timeout "
               f"({w['timed_out']}); {w['nonblocking']} of {w['count']} waits were "
               "non-blocking polls (timeout 0).", className="muted"),
        html.Div([_graph("poller-wait-hist", wait_duration_figure(w), f"{fn}-poller-waits"),
                  _graph("poller-jitter", jitter_figure(w), f"{fn}-poller-jitter")],
                 className="row"),
        html.Div([_graph("poller-events", events_per_wakeup_figure(w), f"{fn}-poller-events"),
                  _graph("poller-early", early_figure(w), f"{fn}-poller-early")],
                 className="row"),
        _graph("poller-epoll", epoll_lanes_figure(d["epoll"]), f"{fn}-poller-epoll"),
        (_graph("poller-ready", ready_fds_figure(d["ready"]), f"{fn}-poller-ready-fds")
         if d["ready"]["waits"] else
         html.Div(html.P("No epoll wait with its ready descriptors in this recording.",
                         className="muted", id="poller-ready"), className="card")),
        html.Div([_graph("poller-ctl", epoll_ctl_figure(d["epoll_ctl"]), f"{fn}-poller-ctl"),
                  _graph("poller-fds", open_fds_figure(d["open_fds"]), f"{fn}-poller-fds")],
                 className="row"),
        html.Div([_graph("poller-errors", errors_figure(d["errors"]), f"{fn}-poller-errors"),
                  html.Div([html.H3("Errors"), _errors_table(d["errors"])], className="card")],
                 className="row"),
        (_graph("poller-uring", io_uring_figure(d["io_uring"]), f"{fn}-poller-io-uring")
         if d["io_uring"]["enters"] else
         html.Div(html.P("No io_uring_enter call in this recording.", className="muted",
                         id="poller-uring"), className="card")),
        *_uring_section(d, fn),
        _os_section(trace_id, o, tr),
        html.Div([api_link(f"{api}/poller"), api_link(f"{api}/poller/os-syscalls"),
                  api_link(f"{api}/poller/alignment")], className="card"),
    ], id="poller-page")


def register(dash_app: Dash) -> None:
    return None
