"""Overview figures: goroutines by state over time (with GC/STW bands), heap
and GOMAXPROCS, threads over time. Pure builders over the data of
:func:`ingest.views.overview.overview`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.margins import Y2_TITLED, Y_TITLED
from app.figures.source import DiagramSource
from app.figures.text import plotly_text
from ingest.derive.overview_counters import GOMAXPROCS_METRIC, HEAP_METRICS
from ingest.views.overview import DEFAULT_BINS, overview
from ingest.views.overview_series import STATE_SERIES

#: Colours of the stacked series (the CSS palette for the plain states).
STATE_COLORS = {
    "Running": "#2e9d57", "Runnable": "#e0a526", "Syscall": "#c44e52",
    "Waiting: network": "#4c78a8", "Waiting: sync": "#9467bd", "Waiting: chan": "#17becf",
    "Waiting: select": "#8da2bf", "Waiting: sleep": "#bcbd22", "Waiting: GC assist": "#7b4fb3",
    "Waiting: other": "#c7c7c7",
}
BAND_COLORS = {"gc": "rgba(123,79,179,0.10)", "stw": "rgba(192,57,43,0.25)"}


F64 = npt.NDArray[np.float64]


def _sec(ts: int, first: int) -> float:
    return (ts - first) / 1e9


def _secs(ts: list[int] | npt.NDArray[Any], first: int) -> F64:
    """Seconds since ``first`` of integer ns timestamps."""
    return (np.asarray(ts, dtype=np.int64) - first) / 1e9


def _floats(values: list[Any]) -> F64:
    # Arrays, not lists: Plotly checks a list element by element (most of a
    # figure's build time at 2000 points a trace), an array at once.
    return np.asarray(values, dtype=np.float64)


def _mids(data: dict[str, Any]) -> F64:
    first = data["key"]["first_ts"]
    e = np.asarray(data["bins"]["edges"], dtype=np.int64)
    mids: F64 = ((e[:-1] + e[1:]) / 2 - first) / 1e9
    return mids


#: The figures' bottom margin: the x axis's title over a legend of one or two
#: rows (plotly grew 45 to 82-107 px on the 200 MB benchmark trace).
_BOTTOM = 110


def _base(fig: go.Figure, title: str, ytitle: str, right: int = 20) -> go.Figure:
    fig.update_layout(title=title, template="plotly_white", height=360,
                      margin={"l": Y_TITLED, "r": right, "t": 50, "b": _BOTTOM},
                      legend={"orientation": "h", "y": -0.18},
                      xaxis_title="time since trace start (s)", yaxis_title=ytitle,
                      hovermode="x unified")
    return fig


def _coverage_trace(data: dict[str, Any], kind: str, cov: dict[str, list[Any]]) -> go.Scatter:
    """Narrow bands merged per bucket: a step filled up to the fraction of the
    bucket they cover (on the hidden 0..1 axis y3)."""
    first = data["key"]["first_ts"]
    # Each bucket as (start, fraction), (end, 0).
    x = np.column_stack([_secs(cov["start_ts"], first), _secs(cov["end_ts"], first)]).ravel()
    y = np.column_stack([_floats(cov["fraction"]),
                         np.zeros(len(cov["fraction"]))]).ravel()
    return go.Scatter(x=x, y=y, mode="lines", line={"width": 0, "shape": "hv"},
                      fill="tozeroy", fillcolor=BAND_COLORS.get(kind, "rgba(0,0,0,0.1)"),
                      yaxis="y3", hoverinfo="skip", showlegend=False,
                      name=f"{kind} coverage")


def _bands(fig: go.Figure, data: dict[str, Any]) -> None:
    first = data["key"]["first_ts"]
    # One layout update with every shape: add_vrect per band is quadratic.
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1,
               "x0": _sec(b["start_ts"], first), "x1": _sec(b["end_ts"], first),
               "fillcolor": BAND_COLORS.get(b["kind"], "rgba(0,0,0,0.1)"), "line_width": 0,
               "layer": "below"} for b in data["gc_bands"]]
    fig.update_layout(shapes=shapes)
    coverage = data.get("gc_coverage") or {}
    for kind, cov in coverage.items():
        fig.add_trace(_coverage_trace(data, kind, cov))
    if coverage:
        fig.update_layout(yaxis3={"overlaying": "y", "range": [0, 1], "visible": False,
                                  "fixedrange": True})
    # Legend entries for the bands (shapes have none).
    for kind, label in (("gc", "GC (mark phase)"), ("stw", "stop-the-world")):
        if kind in coverage or any(b["kind"] == kind for b in data["gc_bands"]):
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=label,
                                     marker={"size": 12, "symbol": "square",
                                             "color": BAND_COLORS[kind]}))


def states_figure(data: dict[str, Any]) -> go.Figure:
    """Stacked area of time-weighted goroutine counts by state, GC/STW shaded."""
    fig = go.Figure()
    x = _mids(data)
    series = data["goroutine_states"]
    for name in STATE_SERIES:
        y = series.get(name)
        if y is None or not any(y):
            continue
        fig.add_trace(go.Scatter(x=x, y=_floats(y), name=name, stackgroup="states",
                                 mode="lines",
                                 line={"width": 0.5, "color": STATE_COLORS.get(name)},
                                 hovertemplate="%{y:.2f}"))
    _bands(fig, data)
    width = data["bins"]["width_ns"]
    return _base(fig, f"Goroutines by state (average per {width / 1e6:.3g} ms bin)",
                 "goroutines")


def _counter(fig: go.Figure, data: dict[str, Any], m: dict[str, Any], name: str,
             color: str, scale: float = 1.0, yaxis: str = "y",
             dash: str = "solid") -> None:
    """A reduced counter: its buckets' min..max as a band (so a one-sample spike
    shows at any zoom) and the last value of each bucket as a step line, both
    carried to the window's end."""
    first = data["key"]["first_ts"]
    end = (data.get("window") or {}).get("t2", data["key"]["last_ts"])
    x = _secs([*m["ts"], end], first)
    if m.get("reduced"):
        hi = _floats(m["max"]) / scale
        lo = _floats(m["min"]) / scale
        fig.add_trace(go.Scatter(x=x, y=np.r_[hi, hi[-1:]], mode="lines", line_shape="hv",
                                 line={"width": 0, "color": color}, yaxis=yaxis,
                                 hoverinfo="skip", showlegend=False, legendgroup=name))
        fig.add_trace(go.Scatter(x=x, y=np.r_[lo, lo[-1:]], mode="lines", line_shape="hv",
                                 line={"width": 0, "color": color}, yaxis=yaxis,
                                 fill="tonexty", fillcolor=_alpha(color, 0.3),
                                 name=f"{name} min–max", hoverinfo="skip",
                                 showlegend=False, legendgroup=name))
    y = _floats(m["value"]) / scale
    fig.add_trace(go.Scatter(x=x, y=np.r_[y, y[-1:]], name=name, mode="lines",
                             line_shape="hv", yaxis=yaxis, legendgroup=name,
                             line={"color": color, "dash": dash, "width": 1.2}))


def _alpha(color: str, a: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{a})"


def heap_figure(data: dict[str, Any]) -> go.Figure:
    """Heap in use and heap goal (MiB), GOMAXPROCS on a second axis; each a step
    line of its buckets' last values over a min–max band."""
    fig = go.Figure()
    labels = {HEAP_METRICS[0]: "heap objects (MiB)", HEAP_METRICS[1]: "heap goal (MiB)"}
    colors = {HEAP_METRICS[0]: "#4c78a8", HEAP_METRICS[1]: "#e45756"}
    for name in HEAP_METRICS:
        m = data["metrics"].get(name)
        if m and m["ts"]:
            _counter(fig, data, m, labels[name], colors[name], scale=2**20,
                     dash="dash" if name == HEAP_METRICS[1] else "solid")
    g = data["metrics"].get(GOMAXPROCS_METRIC)
    if g and g["ts"]:
        _counter(fig, data, g, "GOMAXPROCS", "#555555", yaxis="y2")
        fig.update_layout(yaxis2={"title": "GOMAXPROCS", "overlaying": "y", "side": "right",
                                  "range": [0, max(g.get("max") or g["value"]) + 1],
                                  "dtick": 1, "showgrid": False})
    _bands(fig, data)
    return _base(fig, "Heap and GOMAXPROCS (runtime metrics; band: min–max per bucket)",
                 "MiB", right=Y2_TITLED if g and g["ts"] else 20)


def threads_figure(data: dict[str, Any]) -> go.Figure:
    """Threads running a goroutine and threads in a syscall, averages per bin."""
    fig = go.Figure()
    x = _mids(data)
    for name, color in (("Running", STATE_COLORS["Running"]),
                        ("Syscall", STATE_COLORS["Syscall"])):
        fig.add_trace(go.Scatter(x=x, y=_floats(data["threads"][name]),
                                 name=f"threads {name.lower()}",
                                 stackgroup="threads", mode="lines",
                                 line={"width": 0.5, "color": color},
                                 hovertemplate="%{y:.2f}"))
    _bands(fig, data)
    return _base(fig, "Threads over time (running a goroutine / in a syscall)", "threads")


def _data(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> dict[str, Any]:
    bins = int(opts.get("bins") or DEFAULT_BINS)
    t1, t2 = opts.get("t1"), opts.get("t2")
    return overview(src.engine, src.frames.get(trace_id), trace_id, bins=bins,
                    t1=int(t1) if t1 else None, t2=int(t2) if t2 else None)


def _title(fig: go.Figure, data: dict[str, Any]) -> go.Figure:
    fig.update_layout(title=f"{fig.layout.title.text} — {plotly_text(data['key']['name'])}")
    return fig


DIAGRAMS = {
    "overview-states": lambda s, t, o: _title(states_figure(d := _data(s, t, o)), d),
    "overview-heap": lambda s, t, o: _title(heap_figure(d := _data(s, t, o)), d),
    "overview-threads": lambda s, t, o: _title(threads_figure(d := _data(s, t, o)), d),
}
