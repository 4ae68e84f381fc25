"""Figures of the OS side (poller page, OS syscalls section, timeline marks).

Pure builders over the data of :mod:`ingest.views.poller`. Times on the x axes
are ms since the recording's first event (wall clock); the timeline marks use
the timeline's own axis (ms since the trace start).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from plotly.subplots import make_subplots  # type: ignore[import-untyped]

from app.figures.margins import LEGEND_BELOW
from app.figures.source import DiagramSource
from app.figures.syscalls import fmt_ns, histogram_figure
from app.figures.text import plotly_text

_MARGIN = {"l": 10, "r": 10, "t": 36, "b": 50}
LANE_PX = 46


def _title(fig: go.Figure, text: str, height: int = 300) -> go.Figure:
    fig.update_layout(template="plotly_white", height=height, margin=_MARGIN,
                      title={"text": text, "font": {"size": 13}})
    return fig


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def wait_duration_figure(w: dict[str, Any]) -> go.Figure:
    """How long readiness waits (epoll_pwait, poll, select...) lasted."""
    return histogram_figure(w["duration_histogram"], "Wait durations (every wait)", "#2f8fd0",
                            "waits")


def jitter_figure(w: dict[str, Any]) -> go.Figure:
    """Timeout jitter: actual duration minus asked timeout, for waits that timed out."""
    fig = histogram_figure(w["jitter_histogram"], "Timeout jitter (duration − asked timeout, "
                           "waits that timed out)", "#c44e52", "waits")
    fig.update_layout(xaxis_title="late by (log-scaled bins, lower edge)")
    return fig


def early_figure(w: dict[str, Any]) -> go.Figure:
    """Waits that returned events before their timeout: how far into it."""
    h = w["early_fraction_histogram"]
    labels = [f"{a:.0%}–{b:.0%}" for a, b in zip(h["edges"][:-1], h["edges"][1:], strict=False)]
    fig = go.Figure(go.Bar(x=labels, y=h["counts"], marker_color="#2e9d57",
                           hovertemplate="%{x} of the timeout: %{y}<extra></extra>"))
    _title(fig, "Returned early with events: share of the timeout used")
    fig.update_layout(xaxis_title="duration / asked timeout", yaxis_title="waits")
    return _empty(fig, "no wait with a finite timeout returned early") if not h["counts"] else fig


def events_per_wakeup_figure(w: dict[str, Any]) -> go.Figure:
    """Events returned per wakeup (0 = an empty wakeup)."""
    counts = w["events_per_wakeup"]
    colors = ["#c9ced6" if i == 0 else "#2f8fd0" for i in range(len(counts))]
    fig = go.Figure(go.Bar(x=list(range(len(counts))), y=counts, marker_color=colors,
                           hovertemplate="%{x} events: %{y} wakeups<extra></extra>"))
    _title(fig, "Events returned per wakeup (grey: empty)")
    fig.update_layout(xaxis_title="events returned", yaxis_title="wakeups",
                      xaxis={"dtick": 1 if len(counts) <= 20 else None})
    return _empty(fig, "no completed wait") if not counts else fig


def epoll_ctl_figure(c: dict[str, Any]) -> go.Figure:
    """epoll_ctl ADD / MOD / DEL per time bin."""
    x = [t / 1e6 for t in c["t"]]
    fig = go.Figure()
    for key, name, color in (("add", "ADD", "#2e9d57"), ("mod", "MOD", "#e0a526"),
                             ("del", "DEL", "#c44e52")):
        fig.add_trace(go.Bar(x=x, y=c[key], name=name, marker_color=color))
    _title(fig, f"epoll_ctl per {fmt_ns(c['bin_ns'])}")
    fig.update_layout(barmode="stack", xaxis_title="time since the recording's start (ms)",
                      yaxis_title="calls", legend=LEGEND_BELOW)
    return fig


def open_fds_figure(f: dict[str, Any]) -> go.Figure:
    """Descriptors known open over time (a leak only climbs)."""
    x = [t / 1e6 for t in f["t"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=f["open"], name="all descriptors", line_shape="hv",
                             line={"color": "#18202c"}))
    fig.add_trace(go.Scatter(x=x, y=f["sockets"], name="sockets", line_shape="hv",
                             line={"color": "#2f8fd0"}))
    _title(fig, "Open descriptors (seen by the recording)")
    fig.update_layout(xaxis_title="time since the recording's start (ms)",
                      yaxis_title="open", legend=LEGEND_BELOW)
    return _empty(fig, "no descriptor opened or used") if not x else fig


def errors_figure(errs: list[dict[str, Any]]) -> go.Figure:
    """Failed calls by syscall and errno."""
    rows = errs[:25][::-1]
    labels = [f"{plotly_text(r['syscall'])} {plotly_text(r['errno'])}" for r in rows]
    color = ["#c44e52" if r["errno"] in ("EMFILE", "ENFILE", "ENOMEM") else "#8da2bf"
             for r in rows]
    fig = go.Figure(go.Bar(x=[r["count"] for r in rows], y=labels, orientation="h",
                           marker_color=color, hovertemplate="%{y}: %{x}<extra></extra>"))
    _title(fig, "Errors by syscall and errno", max(260, 80 + 22 * len(rows)))
    fig.update_layout(xaxis_title="calls", yaxis={"automargin": True})
    return _empty(fig, "no call failed") if not rows else fig


def io_uring_figure(u: dict[str, Any]) -> go.Figure:
    """io_uring_enter calls: entries asked to submit, submitted (result), min_complete."""
    calls = u["calls"]
    x = [c["rel_ns"] / 1e6 for c in calls]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[c["to_submit"] for c in calls], mode="markers",
                             name="to_submit", marker={"symbol": "circle-open", "size": 11,
                                                       "color": "#18202c"}))
    fig.add_trace(go.Scatter(x=x, y=[c["result"] for c in calls], mode="markers",
                             name="submitted (result)", marker={"color": "#2e9d57", "size": 7}))
    fig.add_trace(go.Scatter(x=x, y=[c["min_complete"] for c in calls], mode="markers",
                             name="min_complete", marker={"symbol": "x", "color": "#c44e52"}))
    _title(fig, "io_uring_enter: submissions and completions waited for")
    fig.update_layout(xaxis_title="time since the recording's start (ms)",
                      yaxis_title="entries", legend=LEGEND_BELOW)
    return _empty(fig, "no io_uring_enter call") if not calls else fig


_OPCODE_COLORS = ("#2f6fdf", "#2e9d57", "#c44e52", "#e0a526", "#8064a2", "#18202c")


def uring_latency_figure(u: dict[str, Any]) -> go.Figure:
    """io_uring requests: submission-to-completion latency per opcode (log bins)."""
    edges = u["edges_ns"]
    fig = go.Figure()
    centers = [(edges[i] * edges[i + 1]) ** 0.5 / 1e3 for i in range(len(edges) - 1)]
    widths = [(edges[i + 1] - edges[i]) / 1e3 for i in range(len(edges) - 1)]
    for k, (op, counts) in enumerate(sorted(u["histogram"].items())):
        fig.add_trace(go.Bar(x=centers, y=counts, width=widths, name=op,
                             marker={"color": _OPCODE_COLORS[k % len(_OPCODE_COLORS)]},
                             hovertemplate=f"{op}: %{{y}} requests near %{{x:.3g}} us"
                                           "<extra></extra>"))
    _title(fig, "io_uring requests: latency, submission to completion")
    fig.update_layout(barmode="stack", xaxis={"type": "log", "title": "latency (us)"},
                      yaxis_title="requests", legend=LEGEND_BELOW)
    return _empty(fig, "no io_uring request recorded (the eBPF backend records them)") \
        if not u["requests"] else fig


def uring_depth_figure(u: dict[str, Any]) -> go.Figure:
    """io_uring queue depth: requests submitted and not yet completed, over time."""
    d = u["depth"]
    fig = go.Figure(go.Scatter(x=[t / 1e6 for t in d["rel_ns"]], y=d["depth"], mode="lines",
                               line={"shape": "hv", "color": "#2f6fdf"}, name="in flight",
                               hovertemplate="%{y} in flight at +%{x:.6g} ms<extra></extra>"))
    _title(fig, f"io_uring queue depth (max {d['max']})")
    fig.update_layout(xaxis_title="time since the recording's start (ms)",
                      yaxis_title="requests in flight")
    return _empty(fig, "no io_uring request recorded") if not u["requests"] else fig


def ready_fds_figure(r: dict[str, Any]) -> go.Figure:
    """Descriptors by how often an epoll wait returned them ready."""
    top = r["top"]
    labels = [f"fd {t['fd']}" + (f" {t['fd_path']}" if t["fd_path"] else "") for t in top]
    fig = go.Figure(go.Bar(x=[t["count"] for t in top], y=labels, orientation="h",
                           marker={"color": "#2e9d57"},
                           hovertemplate="%{y}: ready %{x} times<extra></extra>"))
    _title(fig, f"Descriptors returned ready by epoll waits ({r['waits']:,} waits, "
                f"{r['events']:,} events)", max(240, 90 + 18 * len(top)))
    fig.update_layout(yaxis={"autorange": "reversed", "automargin": True},
                      xaxis_title="times returned ready")
    return _empty(fig, "no epoll wait returned events with known descriptors") \
        if not top else fig


def _wait_hover(w: dict[str, Any], epfd: int) -> str:
    tmo = w["timeout_ns"]
    asked = "no timeout" if tmo is None or tmo < 0 else f"timeout {fmt_ns(tmo)}"
    got = ("unfinished" if w["duration_ns"] is None else f"waited {fmt_ns(w['duration_ns'])}")
    res = (f"{w['errno']}" if w["errno"] else f"{w['result']} events returned"
           if w["result"] is not None else "no result")
    ready = w.get("ready_fds")
    fds = f"<br>ready fds {plotly_text(str(ready))}" if ready else ""
    return (f"epfd {epfd} · {plotly_text(w['syscall'])} on thread {w['tid']}<br>{asked}, "
            f"{got}<br>{res} (maxevents {w['maxevents']}){fds}"
            f"<br>at +{w['rel_ns'] / 1e6:.6g} ms")


def epoll_lanes_figure(e: dict[str, Any]) -> go.Figure:
    """A lane per epoll instance: each wait as a bar, the asked timeout (light,
    behind) against the actual duration (dark, coloured by events returned)."""
    lanes = e["lanes"]
    fig = go.Figure()
    asked_y, asked_base, asked_x = [], [], []
    y, base, x, hover, color = [], [], [], [], []
    for lane_no, lane in enumerate(lanes):
        for w in lane["waits"]:
            start = w["rel_ns"] / 1e6
            if w["timeout_ns"] is not None and w["timeout_ns"] > 0:
                asked_y.append(lane_no)
                asked_base.append(start)
                asked_x.append(w["timeout_ns"] / 1e6)
            y.append(lane_no)
            base.append(start)
            x.append(max(w["duration_ns"] or 0, 1) / 1e6)
            hover.append(_wait_hover(w, lane["epfd"]))
            r = w["result"]
            color.append("#c44e52" if w["errno"] else "#c9ced6" if r == 0 else "#2f6fdf")
    fig.add_trace(go.Bar(orientation="h", y=asked_y, base=asked_base, x=asked_x, width=0.8,
                         name="asked timeout", marker={"color": "rgba(224,165,38,0.35)"},
                         hoverinfo="skip"))
    fig.add_trace(go.Bar(orientation="h", y=y, base=base, x=x, width=0.45,
                         name="actual wait (blue: events, grey: empty, red: error)",
                         marker={"color": color, "line": {"width": 0}}, hovertext=hover,
                         hovertemplate="%{hovertext}<extra></extra>"))
    n = max(len(lanes), 1)
    _title(fig, "Waits per epoll instance: asked timeout vs actual duration",
           max(220, 120 + LANE_PX * n))
    fig.update_layout(barmode="overlay", xaxis_title="time since the recording's start (ms)",
                      yaxis={"tickvals": list(range(len(lanes))),
                             "ticktext": [f"epfd {ln['epfd']}" for ln in lanes],
                             "range": [n - 0.5, -0.5], "automargin": True},
                      legend=LEGEND_BELOW)
    return _empty(fig, "no epoll wait recorded") if not lanes else fig


def os_syscalls_figure(o: dict[str, Any]) -> go.Figure:
    """Total time per syscall and descriptor kind, with the calls that ran while
    their Go syscall lost its P."""
    rows = o["by_name"][:20][::-1]
    labels = [f"{plotly_text(r['syscall'])} ({plotly_text(r['fd_kind'])})" for r in rows]
    fig = make_subplots(specs=[[{"secondary_y": False}]])
    fig.add_trace(go.Bar(x=[r["total_ns"] / 1e6 for r in rows], y=labels, orientation="h",
                         marker_color="#c44e52",
                         customdata=[[r["count"], fmt_ns(r["p99_ns"] or 0),
                                      fmt_ns(r["max_ns"] or 0)] for r in rows],
                         hovertemplate="%{y}: %{x:.3f} ms in %{customdata[0]} calls, "
                                       "p99 %{customdata[1]}, max %{customdata[2]}"
                                       "<extra></extra>"))
    _title(fig, "OS time by syscall and descriptor kind", max(260, 80 + 22 * len(rows)))
    fig.update_layout(xaxis_title="total time in the call (ms)", yaxis={"automargin": True},
                      showlegend=False)
    return _empty(fig, "no completed call") if not rows else fig


def marks_trace(marks: list[dict[str, Any]], lane_of: dict[int, int], first_ts: int
                ) -> dict[str, Any] | None:
    """The timeline's OS marks as a plain Plotly trace (the timeline page sends plain
    dicts): one marker per OS call (or merged group) on its M lane, at the call's
    start (ms since the trace start); None when none falls on a shown lane."""
    x, y, hover, color = [], [], [], []
    for mk in marks:
        lane = lane_of.get(int(mk["m"]))
        if lane is None:
            continue
        x.append(round((mk["ts"] - first_ts) / 1e6, 6))
        y.append(lane + 0.32)
        dur = "unfinished" if mk["duration_ns"] is None else fmt_ns(mk["duration_ns"])
        if mk["count"] > 1:
            hover.append(f"OS · M{mk['m']}: {mk['count']} calls<br>"
                         f"{plotly_text(mk['syscall'])}<br>{dur} in total")
        else:
            res = mk["errno"] or mk["result"]
            fd = "" if mk["fd"] is None else f"({mk['fd']})"
            hover.append(f"OS · M{mk['m']}: {plotly_text(mk['syscall'])}{fd} = {res}"
                         f"<br>{dur}")
        color.append("#c44e52" if mk["errno"] and mk["errno"] != "EAGAIN" else "#18202c")
    if not x:
        return None
    return {"type": "scatter", "x": x, "y": y, "mode": "markers",
            "name": "OS calls (strace)",
            "marker": {"symbol": "triangle-up", "size": 7, "color": color},
            "hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>",
            "customdata": [["os", -1, 0]] * len(x)}


def os_mark_traces(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The OS marks trace for a timeline window's data (``data["os_marks"]``, from
    ingest.views.poller.timeline_marks): only in M mode, only with marks."""
    marks = (data.get("os_marks") or {}).get("marks") or []
    if data.get("mode") != "m" or not marks:
        return []
    lanes = data["lanes"]
    lane_of = {int(i): n for n, (i, t) in enumerate(zip(lanes["id"], lanes["type"],
                                                        strict=True))
               if t == "m" and i is not None}
    trace = marks_trace(marks, lane_of, int(data["first_ts"]))
    return [] if trace is None else [trace]


def add_os_marks(fig: go.Figure, data: dict[str, Any]) -> go.Figure:
    """The same marks added to a go.Figure timeline (export); a no-op without marks."""
    for t in os_mark_traces(data):
        fig.add_trace(go.Scatter(**{k: v for k, v in t.items() if k != "type"}))
    return fig


# --------------------------------------------------------------------------
# export contract


def _page(src: DiagramSource, trace_id: int) -> dict[str, Any]:
    from ingest.views.poller import poller_page

    return poller_page(src.engine, trace_id)


def _waits(src: DiagramSource, trace_id: int, _o: dict[str, str]) -> go.Figure:
    w = _page(src, trace_id)["waits"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Wait durations", "Timeout jitter"))
    for col, key, color in ((1, "duration_histogram", "#2f8fd0"),
                            (2, "jitter_histogram", "#c44e52")):
        for t in histogram_figure(w[key], "", color).data:
            fig.add_trace(t, row=1, col=col)
    return _title(fig, f"Trace {trace_id}: readiness waits", 340)


def _one(build: Callable[[Any], go.Figure], key: str, title: str
         ) -> Callable[[DiagramSource, int, dict[str, str]], go.Figure]:
    def diagram(src: DiagramSource, trace_id: int, _o: dict[str, str]) -> go.Figure:
        fig = build(_page(src, trace_id)[key])
        fig.update_layout(title=f"Trace {trace_id}: {title}")
        return fig
    return diagram


def _os(src: DiagramSource, trace_id: int, _o: dict[str, str]) -> go.Figure:
    from ingest.views.poller import os_syscalls

    fig = os_syscalls_figure(os_syscalls(src.engine, trace_id))
    fig.update_layout(title=f"Trace {trace_id}: OS time by syscall")
    return fig


DIAGRAMS = {
    "poller-waits": _waits,
    "poller-events-per-wakeup": _one(events_per_wakeup_figure, "waits", "events per wakeup"),
    "poller-fds": _one(open_fds_figure, "open_fds", "open descriptors"),
    "poller-epoll": _one(epoll_lanes_figure, "epoll", "waits per epoll instance"),
    "poller-epoll-ctl": _one(epoll_ctl_figure, "epoll_ctl", "epoll_ctl over time"),
    "poller-errors": _one(errors_figure, "errors", "errors"),
    "poller-io-uring": _one(io_uring_figure, "io_uring", "io_uring"),
    "poller-uring-latency": _one(uring_latency_figure, "uring_requests",
                                 "io_uring request latency"),
    "poller-uring-depth": _one(uring_depth_figure, "uring_requests", "io_uring queue depth"),
    "poller-ready-fds": _one(ready_fds_figure, "ready", "descriptors returned ready"),
    "os-syscalls": _os,
}
