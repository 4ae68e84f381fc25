"""Goroutine time breakdowns: stacked bars per start-function group, and one
goroutine's state Gantt and breakdown. Pure builders over the plain data of
:mod:`ingest.views.goroutines` / :mod:`ingest.views.goroutine`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.margins import LEGEND_BELOW, X_TITLED, below_legend, left_for
from app.figures.source import DiagramSource
from app.figures.text import plotly_text
from ingest.views.goroutine import goroutine_detail
from ingest.views.goroutines import CATEGORIES, CATEGORY_LABELS, goroutine_groups

#: One colour per time category (the stylesheet's state colours where they exist).
COLORS = {
    "running": "#2e9d57",
    "runnable": "#e0a526",
    "syscall": "#c44e52",
    "network": "#2f8fd0",
    "sync": "#8a63c9",
    "gc_assist": "#d4609c",
    "other_wait": "#a9b4c4",
}
#: Groups shown in the bar chart at most (the table lists all).
MAX_BARS = 25


def _ms(ns: int | float) -> float:
    return float(ns) / 1e6


def groups_figure(data: dict[str, Any], max_bars: int = MAX_BARS) -> go.Figure:
    """Stacked horizontal bars: per group, summed time per category (ms)."""
    groups = sorted(data["groups"], key=lambda g: -g["lifetime_ns"])[:max_bars]
    groups.reverse()  # largest at the top
    names = [f"{plotly_text(g['name'], 80)} ({g['count']})" for g in groups]
    biggest = max((g["lifetime_ns"] for g in groups), default=0)
    unit, scale = ("s", 1e9) if biggest >= 10e9 else ("ms", 1e6)
    fig = go.Figure()
    for c in CATEGORIES:
        fig.add_trace(go.Bar(
            y=names, x=[g["times"][c] / scale for g in groups], orientation="h",
            name=CATEGORY_LABELS[c], marker_color=COLORS[c],
            hovertemplate="%{y}<br>" + CATEGORY_LABELS[c] + ": %{x:.4g} " + unit
            + "<extra></extra>"))
    height = max(300, 130 + 24 * len(groups))
    fig.update_layout(barmode="stack", height=height,
                      margin={"l": left_for(names), "r": 10, "t": 30,
                              "b": below_legend(height)},
                      xaxis_title=f"time summed over the group's goroutines ({unit})",
                      legend=LEGEND_BELOW,
                      title={"text": "Time by category per start function "
                                     f"(top {len(groups)} by total time)", "font": {"size": 13}})
    fig.update_yaxes(automargin=True)
    return fig


def breakdown_figure(times: dict[str, int], title: str) -> go.Figure:
    """One stacked bar of a single goroutine's (or group's) category times."""
    fig = go.Figure()
    for c in CATEGORIES:
        fig.add_trace(go.Bar(y=[""], x=[_ms(times.get(c, 0))], orientation="h",
                             name=CATEGORY_LABELS[c], marker_color=COLORS[c],
                             hovertemplate=CATEGORY_LABELS[c] + ": %{x:.3f} ms<extra></extra>"))
    # The bar's one label is empty (the left margin holds its tick's pad); the
    # x axis's last label may stand out past the plot's right edge.
    fig.update_layout(barmode="stack", height=190, margin={"l": 16, "r": 20, "t": 30, "b": 88},
                      xaxis_title="ms", legend={**LEGEND_BELOW, "y": -0.5},
                      title={"text": title, "font": {"size": 13}})
    return fig


def gantt_figure(detail: dict[str, Any]) -> go.Figure:
    """The goroutine's state segments over time, one row per category.

    One line trace per category, segments separated by gaps (NaN), as numpy
    arrays: Plotly sends those as typed arrays, not a number (and a label)
    per point for Dash's renderer to walk; rows are numbers labelled by ticks."""
    seg = detail["segments"]
    origin = detail["first_ts"]
    start = np.asarray(seg["start"], dtype=np.int64)
    # A zero-length segment still gets a visible sliver.
    end = np.maximum(np.asarray(seg["end"], dtype=np.int64), start + 1)
    cats = np.asarray(seg["category"], dtype=object)
    row = {c: i for i, c in enumerate(reversed(CATEGORIES))}
    fig = go.Figure()
    for c in CATEGORIES:
        mine = cats == c
        k = int(np.count_nonzero(mine))
        if not k:
            continue
        x = np.full(3 * k, np.nan)
        x[0::3] = (start[mine] - origin) / 1e6
        x[1::3] = (end[mine] - origin) / 1e6
        fig.add_trace(go.Scatter(x=x, y=np.full(3 * k, row[c], dtype=np.int8), mode="lines",
                                 name=CATEGORY_LABELS[c], connectgaps=False,
                                 line={"color": COLORS[c], "width": 14},
                                 hovertemplate="%{x:.3f} ms<extra>" + CATEGORY_LABELS[c]
                                 + "</extra>"))
    title = f"Goroutine {detail['goid']}: states over its lifetime"
    if seg.get("truncated"):
        title += f" (longest {len(seg['start'])} segments)"
    fig.update_layout(height=260, showlegend=False,
                      margin={"l": left_for(CATEGORY_LABELS[c] for c in row), "r": 10, "t": 30,
                              "b": X_TITLED},
                      xaxis_title="ms since the goroutine's first event",
                      title={"text": title, "font": {"size": 13}})
    fig.update_yaxes(tickvals=list(row.values()),
                     ticktext=[CATEGORY_LABELS[c] for c in row], range=[-0.5, len(row) - 0.5],
                     automargin=True, showgrid=False, zeroline=False)
    return fig


def _groups_diagram(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    data = goroutine_groups(src.engine, src.frames.get(trace_id), opts.get("group"), limit=0)
    if opts.get("group"):
        g = next((x for x in data["groups"] if x["name"] == opts["group"]), None)
        if g is None:
            raise LookupError(f"no goroutine group {opts['group']!r}")
        return breakdown_figure(g["times"], f"{plotly_text(g['name'], 120)}: "
                                            f"{g['count']} goroutines")
    return groups_figure(data)


def _goroutine_diagram(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    raw = opts.get("g") or opts.get("goid")
    if raw is None or not raw.lstrip("-").isdigit():
        raise ValueError("the goroutine diagram needs g=<goid>")
    return gantt_figure(goroutine_detail(src.engine, src.frames.get(trace_id), int(raw),
                                         limit=0))


DIAGRAMS: dict[str, Callable[[DiagramSource, int, dict[str, str]], go.Figure]] = {
    "goroutines": _groups_diagram,
    "goroutine": _goroutine_diagram,
}
