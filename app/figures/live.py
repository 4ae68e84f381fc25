"""Figures of the live page: per-second small multiples and the latest window's timeline.

Pure builders: plain data in (rows of ``live_seconds`` as dicts, arrays of
proc runs), a Plotly figure out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.text import plotly_text

Row = Mapping[str, Any]
SESSION_COLORS = ("#2f6fdf", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#1098ad")
STATE_COLORS = {"running": "#2b8a3e", "runnable": "#e67700", "waiting": "#868e96",
                "syscall": "#c92a2a"}
DASHES = ("solid", "dot", "dash", "dashdot")


def _per_s(col: str) -> Callable[[Row], float | None]:
    def f(r: Row) -> float | None:
        d = r.get("duration_ns") or 0
        return r[col] / (d / 1e9) if d else None
    return f


def _ms(col: str) -> Callable[[Row], float | None]:
    def f(r: Row) -> float | None:
        v = r.get(col)
        return None if v is None else float(v) / 1e6
    return f


def _ms_per_s(col: str) -> Callable[[Row], float | None]:
    def f(r: Row) -> float | None:
        d = r.get("duration_ns") or 0
        return r[col] / 1e6 / (d / 1e9) if d else None
    return f


def _col(col: str, scale: float = 1.0) -> Callable[[Row], float | None]:
    def f(r: Row) -> float | None:
        v = r.get(col)
        return None if v is None else v / scale
    return f


#: Panel title -> [(series label, value of a row)].
PANELS: tuple[tuple[str, tuple[tuple[str, Callable[[Row], float | None]], ...]], ...] = (
    ("Goroutines by state (mean)", (("running", _col("g_running")),
                                    ("runnable", _col("g_runnable")),
                                    ("waiting", _col("g_waiting")),
                                    ("syscall", _col("g_syscall")))),
    ("Goroutines alive (peak) / created per s", (("peak", _col("g_peak")),
                                                  ("waiting peak", _col("g_waiting_peak")),
                                                  ("created/s", _per_s("g_created")))),
    ("Scheduler latency (ms)", (("p50", _ms("sched_p50_ns")), ("p99", _ms("sched_p99_ns")))),
    ("Netpoll waits per s", (("waits/s", _per_s("netpoll_waits")),)),
    ("Netpoll wait p99 (ms)", (("p99", _ms("netpoll_p99_ns")),)),
    ("Syscalls and P handoffs per s", (("syscalls/s", _per_s("syscalls")),
                                       ("P handoffs/s", _per_s("p_handoffs")))),
    ("GC and STW (ms per s)", (("GC", _ms_per_s("gc_ns")), ("STW", _ms_per_s("stw_ns")))),
    ("Heap objects (MB)", (("heap", _col("heap_bytes", 1e6)),)),
    ("Threads and Ps running", (("threads (M)", _col("threads")),
                                ("Ps running", _col("procs_running")))),
)


def _os_per_s(col: str, scale: float = 1.0) -> Callable[[Row], float | None]:
    """A live_os_seconds column (``os_`` prefix in the series) per second of the bin;
    None for a second without an OS side."""
    def f(r: Row) -> float | None:
        d, v = r.get("duration_ns") or 0, r.get(f"os_{col}")
        return None if v is None or not d else v / scale / (d / 1e9)
    return f


#: The OS side's panels (gmpscope live --os), shown when the session has it.
OS_PANELS: tuple[tuple[str, tuple[tuple[str, Callable[[Row], float | None]], ...]], ...] = (
    ("OS: Running on off-CPU threads (ms per s)", (
        ("thread waiting for a CPU", _os_per_s("offcpu_waiting_ns", 1e6)),
        ("thread asleep", _os_per_s("offcpu_asleep_ns", 1e6)),
        ("Running (recorded Ms)", _os_per_s("running_ns", 1e6)))),
    ("OS: threads on / waiting for a CPU (mean)", (
        ("on a CPU", _os_per_s("threads_oncpu_ns", 1e9)),
        ("waiting for a CPU", _os_per_s("threads_waiting_ns", 1e9)))),
    ("OS: epoll waits and ready fds per s", (
        ("epoll waits/s", _os_per_s("epoll_waits")),
        ("ready fds/s", _os_per_s("epoll_ready")))),
)


def has_os(rows: Sequence[Row]) -> bool:
    """Some second of these rows has an OS side (gmpscope live --os)."""
    return any(r.get("os_epoll_waits") is not None for r in rows)


def wall(t_ns: int) -> datetime:
    """A wall-clock ns timestamp as an aware datetime (UTC)."""
    return datetime.fromtimestamp(t_ns / 1e9, UTC)


def with_gaps(rows: Sequence[Row]) -> list[Row]:
    """The rows with an empty row where the next starts more than a second after
    this one ends (the collector was stopped or the target down), so lines break."""
    out: list[Row] = []
    for i, r in enumerate(rows):
        out.append(r)
        if i + 1 < len(rows):
            end = int(r["t_ns"]) + int(r["duration_ns"])
            if int(rows[i + 1]["t_ns"]) - end > 1_000_000_000:
                out.append({"t_ns": end + 1, "duration_ns": 0})
    return out


def series_spec(sessions: Mapping[str, Sequence[Row]], height: int = 620) -> dict[str, Any]:
    """Small multiples of the per-second rows of one or more sessions, as a plain
    Plotly figure dict (built directly: the page redraws it every second, and
    plotly's validating objects cost most of a second per draw on a busy machine).

    One session: each series has its own color. Several: one color per
    session, series told apart by dash style. The OS side's panels (OS_PANELS)
    follow when a session has one; ``height`` is for three rows of panels.
    """
    cols = 3
    panels = PANELS + (OS_PANELS if any(has_os(r) for r in sessions.values()) else ())
    nrows = -(-len(panels) // cols)
    height = height * nrows // 3
    gap_x, gap_y = 0.06, 0.09
    w = (1 - gap_x * (cols - 1)) / cols
    h = (1 - gap_y * (nrows - 1)) / nrows
    layout: dict[str, Any] = {
        "height": height, "margin": {"l": 40, "r": 10, "t": 40, "b": 30},
        "uirevision": "live", "hovermode": "x unified", "plot_bgcolor": "#fff",
        "font": {"size": 11}, "showlegend": False, "annotations": []}
    for i, (title, _series) in enumerate(panels):
        r, c = divmod(i, cols)
        x0 = c * (w + gap_x)
        y1 = 1 - r * (h + gap_y)
        n = "" if i == 0 else str(i + 1)
        xdom = [round(x0, 6), round(min(1.0, x0 + w), 6)]
        ydom = [round(max(0.0, y1 - h), 6), round(y1, 6)]
        layout[f"xaxis{n}"] = {"domain": xdom, "anchor": f"y{n}", "type": "date",
                               "showgrid": True, "gridcolor": "#eee",
                               "matches": "x" if i else None,
                               "showticklabels": r == nrows - 1}
        layout[f"yaxis{n}"] = {"domain": ydom, "anchor": f"x{n}", "showgrid": True,
                               "gridcolor": "#eee", "rangemode": "tozero"}
        layout["annotations"].append({
            "text": title, "x": x0 + w / 2, "y": y1, "xref": "paper", "yref": "paper",
            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 12}})
    traces: list[dict[str, Any]] = []
    several = len(sessions) > 1
    for si, (name, rows_in) in enumerate(sessions.items()):
        data = with_gaps(rows_in)
        x = [int(r["t_ns"]) // 1_000_000 for r in data]  # ms since the epoch: a date axis
        for pi, (_title, series) in enumerate(panels):
            n = "" if pi == 0 else str(pi + 1)
            for k, (label, fn) in enumerate(series):
                if several:
                    color, dash = SESSION_COLORS[si % len(SESSION_COLORS)], DASHES[k % 4]
                    legend = f"{name} · {label}"
                else:
                    color = STATE_COLORS.get(label, SESSION_COLORS[k % len(SESSION_COLORS)])
                    dash, legend = "solid", label
                text = plotly_text(legend)
                traces.append({
                    "type": "scatter", "mode": "lines", "x": x, "y": [fn(r) for r in data],
                    "name": text, "xaxis": f"x{n}", "yaxis": f"y{n}",
                    "line": {"color": color, "dash": dash, "width": 1.6},
                    "hovertemplate": f"{text}: %{{y:.4g}}<extra></extra>"})
    return {"data": traces, "layout": layout}


def series_figure(sessions: Mapping[str, Sequence[Row]], height: int = 620) -> go.Figure:
    """:func:`series_spec` as a Plotly figure (for exports)."""
    return go.Figure(series_spec(sessions, height))


def window_timeline_spec(p: npt.NDArray[np.int64], start: npt.NDArray[np.int64],
                         end: npt.NDArray[np.int64], g: npt.NDArray[np.int64], first_ts: int,
                         title: str, max_runs: int = 1500) -> dict[str, Any]:
    """Which goroutine ran on each P over one window (ms from its start), as a
    Plotly figure dict. One line segment per proc run; beyond ``max_runs`` only
    the longest are drawn (the page redraws it every second: a busy window has
    ~10k runs, most a few µs wide, invisible at this scale; "open" shows them all)."""
    if len(p) > max_runs:
        keep = np.argsort(end - start)[-max_runs:]
        p, start, end, g = p[keep], start[keep], end[keep], g[keep]
    traces: list[dict[str, Any]] = []
    procs = sorted({int(v) for v in p.tolist()})
    for i, pid in enumerate(procs):
        m = p == pid
        s = (start[m] - first_ts) / 1e6
        e = (end[m] - first_ts) / 1e6
        xs = np.column_stack((s, e, np.full(len(s), np.nan))).ravel()
        gs = np.repeat(g[m], 3)
        traces.append({
            "type": "scatter", "mode": "lines",
            "x": [None if np.isnan(v) else round(float(v), 4) for v in xs],
            "y": [f"P{pid}"] * len(xs), "customdata": gs.tolist(),
            "line": {"width": 14, "color": SESSION_COLORS[i % len(SESSION_COLORS)]},
            "hovertemplate": "G%{customdata} at %{x:.3f} ms<extra>%{y}</extra>",
            "showlegend": False})
    layout = {"title": {"text": plotly_text(title), "font": {"size": 13}},
              "height": 120 + 28 * max(1, len(procs)),
              "margin": {"l": 50, "r": 10, "t": 36, "b": 30}, "plot_bgcolor": "#fff",
              "xaxis": {"title": {"text": "ms since the window began"}},
              "yaxis": {"categoryorder": "category descending"}, "uirevision": "timeline"}
    return {"data": traces, "layout": layout}


def window_timeline(p: npt.NDArray[np.int64], start: npt.NDArray[np.int64],
                    end: npt.NDArray[np.int64], g: npt.NDArray[np.int64], first_ts: int,
                    title: str, max_runs: int = 1500) -> go.Figure:
    """:func:`window_timeline_spec` as a Plotly figure (for exports)."""
    return go.Figure(window_timeline_spec(p, start, end, g, first_ts, title, max_runs))
