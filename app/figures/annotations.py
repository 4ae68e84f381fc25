"""Annotation figures: tasks over time (one bar per task of a page of tasks,
indented by depth) and regions by name (total time). Pure builders over the data of
:mod:`ingest.views.annotations`; every trace string is escaped for Plotly."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.margins import X_TITLED, left_for
from app.figures.source import DiagramSource
from app.figures.text import plotly_text
from ingest.store.traces import get_trace
from ingest.views.annotations import region_stats, task_page
from ingest.views.states import format_ns

#: The figures' left margin at least, wider for longer labels: the two
#: figures' plots line up on the page.
LEFT = 220
#: Tasks drawn at most (the export draws the longest this many).
MAX_TASK_BARS = 300


def tasks_figure(rows: list[dict[str, Any]], first_ts: int, last_ts: int,
                 limit: int = MAX_TASK_BARS, total: int | None = None) -> go.Figure:
    """Task bars from start to end (a missing end runs to the trace's end, a
    missing start from its beginning, drawn lighter), in the rows' order (a
    page of :func:`ingest.views.annotations.task_page`); ``total``: how many
    tasks the rows were taken from (for the title)."""
    shown = rows[:limit]
    y, base, width, colors, hover = [], [], [], [], []
    for r in shown:
        s = r["start_ts"] if r["start_ts"] is not None else first_ts
        e = r["end_ts"] if r["end_ts"] is not None else last_ts
        label = "  " * r["depth"] + f"#{r['task_id']} {plotly_text(r['name'], 60)}"
        y.append(label)
        base.append((s - first_ts) / 1e9)
        width.append(max(e - s, 0) / 1e9)
        partial = r["start_ts"] is None or r["end_ts"] is None
        colors.append("rgba(47,111,223,0.35)" if partial else "#2f6fdf")
        dur = "open" if r["duration_ns"] is None else format_ns(r["duration_ns"])
        hover.append(f"task {r['task_id']} {plotly_text(r['name'])}<br>duration {dur}"
                     f"<br>goroutines {len(r['goroutines'])} · regions {r['regions']}"
                     f" · logs {r['logs']}")
    fig = go.Figure(go.Bar(y=y, x=width, base=base, orientation="h", marker_color=colors,
                           hovertext=hover, hoverinfo="text"))
    total = len(rows) if total is None else total
    more = f" ({len(shown):,} of {total:,})" if total > len(shown) else ""
    fig.update_layout(title=f"Tasks over time{more}", template="plotly_white",
                      height=max(260, 16 * len(shown) + 90),
                      margin={"l": max(LEFT, left_for(y)), "r": 20, "t": 50, "b": X_TITLED},
                      xaxis_title="time since trace start (s)",
                      yaxis={"autorange": "reversed", "type": "category"})
    return fig


def regions_figure(stats: list[dict[str, Any]]) -> go.Figure:
    """Total time per region name (timed regions), largest first."""
    names = [plotly_text(s["name"], 60) or "(empty)" for s in stats]
    fig = go.Figure(go.Bar(
        y=names, x=[s["total_ns"] / 1e6 for s in stats], orientation="h",
        marker_color="#2e9d57",
        hovertext=[f"{plotly_text(s['name'])}<br>{s['count']:,} regions · total "
                   f"{format_ns(s['total_ns'])} · mean {format_ns(s['mean_ns'])} · "
                   f"p99 {format_ns(s['p99_ns'])}" for s in stats], hoverinfo="text"))
    fig.update_layout(title="Regions by name (total time)", template="plotly_white",
                      height=max(240, 22 * len(stats) + 90),
                      margin={"l": max(LEFT, left_for(names)), "r": 20, "t": 50,
                              "b": X_TITLED}, xaxis_title="ms",
                      yaxis={"autorange": "reversed", "type": "category"})
    return fig


def _tasks(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    t = get_trace(src.engine, trace_id)
    if t is None:
        raise LookupError(f"no trace with id {trace_id}")
    page = task_page(src.engine, trace_id, src.frames.get(trace_id), limit=MAX_TASK_BARS,
                     sort="duration")
    return tasks_figure(page["rows"], int(t["first_ts"] or 0), int(t["last_ts"] or 0),
                        total=page["total"])


def _regions(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    if get_trace(src.engine, trace_id) is None:
        raise LookupError(f"no trace with id {trace_id}")
    return regions_figure(region_stats(src.engine, trace_id, src.frames.get(trace_id)))


DIAGRAMS = {"tasks": _tasks, "regions": _regions}
