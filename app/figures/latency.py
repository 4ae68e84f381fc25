"""Scheduler latency figures: histogram, percentiles over time, per P.
Pure builders over the data of :mod:`ingest.views.latency`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.margins import LEGEND_BELOW, Y_TITLED, below_legend
from app.figures.source import DiagramSource
from app.figures.syscalls import _window, histogram_figure
from ingest.views.latency import latency_report

PCT_COLORS = {"p50": "#2e9d57", "p90": "#e0a526", "p99": "#c44e52", "max": "#18202c"}


def _us(v: int | None) -> float | None:
    return None if v is None else v / 1e3


def over_time_figure(data: dict[str, Any], origin: int) -> go.Figure:
    """p50/p90/p99/max of the latencies of goroutines that started running
    in each time bin."""
    ot = data["over_time"]
    edges = ot["edges"]
    x = [((a + b) / 2 - origin) / 1e6 for a, b in zip(edges[:-1], edges[1:], strict=False)]
    fig = go.Figure()
    for k, color in PCT_COLORS.items():
        fig.add_trace(go.Scatter(x=x, y=[_us(v) for v in ot[k]], name=k, mode="lines+markers",
                                 marker={"size": 4}, line={"color": color, "width": 1.5},
                                 connectgaps=False))
    fig.update_layout(height=380,
                      margin={"l": Y_TITLED, "r": 10, "t": 30, "b": below_legend(380)},
                      legend=LEGEND_BELOW,
                      xaxis_title="ms since trace start (bin of the Runnable→Running transition)",
                      yaxis_title="latency (µs, log)", yaxis_type="log",
                      title={"text": "Scheduler latency percentiles over time",
                             "font": {"size": 13}})
    return fig


def per_p_figure(data: dict[str, Any]) -> go.Figure:
    """Percentiles of latency by the P the goroutine ran on."""
    pp = data["per_p"]
    labels = [f"P{p}" for p in pp["p"]]
    fig = go.Figure()
    for k, color in PCT_COLORS.items():
        fig.add_trace(go.Bar(x=labels, y=[_us(v) for v in pp[k]], name=k, marker_color=color,
                             customdata=pp["count"],
                             hovertemplate="%{x} " + k + ": %{y:.4g} µs (%{customdata} "
                             "samples)<extra></extra>"))
    fig.update_layout(barmode="group", height=360,
                      margin={"l": Y_TITLED, "r": 10, "t": 30, "b": below_legend(360)},
                      yaxis_type="log", yaxis_title="latency (µs, log)",
                      legend=LEGEND_BELOW,
                      title={"text": "Latency by the P it ran on", "font": {"size": 13}})
    return fig


def hist_figure(data: dict[str, Any]) -> go.Figure:
    return histogram_figure(data["histogram"],
                            f"Runnable→Running latency ({data['samples']} samples)", "#e0a526")


def _latency(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    return hist_figure(latency_report(src.frames.get(trace_id), *_window(opts), worst=0))


def _over_time(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    f = src.frames.get(trace_id)
    return over_time_figure(latency_report(f, *_window(opts), worst=0), f.first_ts)


def _per_p(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    return per_p_figure(latency_report(src.frames.get(trace_id), *_window(opts), worst=0))


DIAGRAMS: dict[str, Callable[[DiagramSource, int, dict[str, str]], go.Figure]] = {
    "latency": _latency,
    "latency-over-time": _over_time,
    "latency-per-p": _per_p,
}
