"""Syscall and netpoller figures: log-scaled duration histograms, P handoffs
and netpoller parking over time. Pure builders over the data of
:mod:`ingest.views.syscalls`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from plotly.subplots import make_subplots  # type: ignore[import-untyped]

from app.figures.margins import (
    LEGEND_BELOW,
    X_UPRIGHT_TITLED,
    Y2_TITLED,
    Y_TITLED,
    below_legend,
)
from app.figures.source import DiagramSource
from ingest.views.syscalls import netpoll_summary, syscall_summary

#: Horizontal legend under the x axis title (a legend above collides with the title).


def fmt_ns(ns: float) -> str:
    """Short duration label (figures stay free of Dash imports)."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def histogram_figure(hist: dict[str, Any], title: str, color: str = "#2f6fdf",
                     what: str = "count", bottom: int = X_UPRIGHT_TITLED) -> go.Figure:
    """Bars of a log histogram (ingest.views.histo.log_histogram): one bar per bin,
    labelled by its lower edge; ``bottom``: X_TITLED where the figure is wide
    enough for its labels to lie level (app.figures.margins)."""
    edges, counts = hist.get("edges", []), hist.get("counts", [])
    labels = [fmt_ns(e) for e in edges[:-1]]
    hover = [f"{fmt_ns(a)} – {fmt_ns(b)}" for a, b in zip(edges[:-1], edges[1:], strict=False)]
    fig = go.Figure(go.Bar(x=labels, y=counts, marker_color=color, customdata=hover,
                           hovertemplate="%{customdata}: %{y}<extra></extra>"))
    fig.update_layout(height=300, margin={"l": Y_TITLED, "r": 10, "t": 30, "b": bottom},
                      bargap=0.05,
                      title={"text": title, "font": {"size": 13}},
                      xaxis_title="duration (log-scaled bins, lower edge)", yaxis_title=what)
    if not counts:
        fig.add_annotation(text="no complete durations", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    return fig


def _bin_mid_ms(edges: list[int], origin: int) -> list[float]:
    return [((a + b) / 2 - origin) / 1e6 for a, b in zip(edges[:-1], edges[1:], strict=False)]


def handoff_figure(data: dict[str, Any], origin: int) -> go.Figure:
    """Syscalls and those that lost their P per time bin (bars), and the
    longest and mean P handoff in each bin (lines, right axis)."""
    ot = data["over_time"]
    x = _bin_mid_ms(ot["edges"], origin)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=x, y=ot["syscalls"], name="syscalls begun", marker_color="#c9ced6"),
                  secondary_y=False)
    fig.add_trace(go.Bar(x=x, y=ot["p_lost"], name="lost their P", marker_color="#c44e52"),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[v / 1e6 if v else None for v in ot["handoff_max_ns"]],
                             name="longest handoff (ms)", mode="markers",
                             marker={"color": "#18202c", "symbol": "diamond"}), secondary_y=True)
    fig.add_trace(go.Scatter(x=x, y=[v / 1e6 if v else None for v in ot["handoff_mean_ns"]],
                             name="mean handoff (ms)", mode="markers",
                             marker={"color": "#e0a526"}), secondary_y=True)
    fig.update_layout(barmode="overlay", height=380,
                      margin={"l": Y_TITLED, "r": Y2_TITLED, "t": 30,
                              "b": below_legend(380, rows=2)},
                      legend=LEGEND_BELOW,
                      title={"text": "Syscalls and P handoffs over time", "font": {"size": 13}})
    fig.update_xaxes(title_text="ms since trace start")
    fig.update_yaxes(title_text="syscalls per bin", secondary_y=False)
    fig.update_yaxes(title_text="handoff (ms)", secondary_y=True, rangemode="tozero",
                     showgrid=False)
    return fig


def parked_figure(data: dict[str, Any], origin: int) -> go.Figure:
    """Goroutines parked in the netpoller at each bin start, and waits begun."""
    ot = data["over_time"]
    x = _bin_mid_ms(ot["edges"], origin)
    start_x = [(a - origin) / 1e6 for a in ot["edges"][:-1]]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=x, y=ot["waits"], name="network waits begun",
                         marker_color="#9cc3e6"), secondary_y=False)
    fig.add_trace(go.Scatter(x=start_x, y=ot["parked"], name="goroutines parked",
                             mode="lines", line={"color": "#2f8fd0", "shape": "hv"}),
                  secondary_y=True)
    fig.update_layout(height=380,
                      margin={"l": Y_TITLED, "r": Y2_TITLED, "t": 30, "b": below_legend(380)},
                      legend=LEGEND_BELOW,
                      title={"text": "Netpoller waits over time", "font": {"size": 13}})
    fig.update_xaxes(title_text="ms since trace start")
    fig.update_yaxes(title_text="waits per bin", secondary_y=False)
    fig.update_yaxes(title_text="parked goroutines", secondary_y=True, rangemode="tozero",
                     showgrid=False)
    return fig


def _window(opts: dict[str, str]) -> tuple[int | None, int | None]:
    try:
        t1 = int(opts["t1"]) if opts.get("t1") else None
        t2 = int(opts["t2"]) if opts.get("t2") else None
    except ValueError:
        raise ValueError("t1 and t2 must be integers (trace ns)") from None
    return t1, t2


def _syscalls(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    d = syscall_summary(src.engine, src.frames.get(trace_id), *_window(opts))
    return histogram_figure(d["histogram"], f"Syscall durations ({d['complete']} complete)",
                            "#c44e52")


def _netpoll(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    d = netpoll_summary(src.engine, src.frames.get(trace_id), *_window(opts))
    return histogram_figure(d["histogram"], f"Network wait durations ({d['complete']} complete)",
                            "#2f8fd0")


def _handoff(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    f = src.frames.get(trace_id)
    return handoff_figure(syscall_summary(src.engine, f, *_window(opts)), f.first_ts)


def _parked(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    f = src.frames.get(trace_id)
    return parked_figure(netpoll_summary(src.engine, f, *_window(opts)), f.first_ts)


DIAGRAMS: dict[str, Callable[[DiagramSource, int, dict[str, str]], go.Figure]] = {
    "syscalls": _syscalls,
    "netpoll": _netpoll,
    "handoff": _handoff,
    "netpoll-over-time": _parked,
}
