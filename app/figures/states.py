"""State graph figure: nodes at fixed places per known state, edges as arrow
annotations whose width grows with the transition count, labels with the
count and hover with the dwell-time statistics. Pure builder over the JSON of
:func:`ingest.views.states.to_json`."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.source import DiagramSource
from app.figures.text import plotly_text
from ingest.views.states import format_ns, to_json
from ingest.views.states_frames import graph_for
from ingest.views.wait_reasons import WAIT_CATEGORIES, node_name

#: Fixed node positions (x, y) so graphs of different traces read the same.
POSITIONS: dict[str, tuple[float, float]] = {
    "Undetermined": (-1.8, 1.4),
    "NotExist": (-1.8, -1.2),
    "Runnable": (0.0, 0.0),
    "Running": (2.4, 0.0),
    "Syscall": (2.4, -1.7),
    "Idle": (0.0, -1.7),
    "Waiting": (1.2, 1.9),
}
for _i, _c in enumerate(WAIT_CATEGORIES):
    POSITIONS[node_name("Waiting", _c)] = (-0.9 + _i * 0.7, 2.0 + 0.45 * (_i % 2))

NODE_COLORS = {"Running": "#2e9d57", "Runnable": "#e0a526", "Syscall": "#c44e52",
               "Idle": "#b9bec7", "NotExist": "#dddddd", "Undetermined": "#eeeeee"}
WAITING_COLOR = "#8da2bf"


def _pos(name: str, extra: dict[str, tuple[float, float]]) -> tuple[float, float]:
    if name in POSITIONS:
        return POSITIONS[name]
    if name not in extra:
        extra[name] = (-1.8 + 0.9 * len(extra), -2.6)
    return extra[name]


def _node_label(name: str) -> str:
    base, _, cat = name.partition(": ")
    return plotly_text(base) + ("<br>" + plotly_text(cat) if cat else "")


def _edge_hover(e: dict[str, Any]) -> str:
    head = f"{plotly_text(e['source'])} → {plotly_text(e['target'])}<br>count {e['count']:,}"
    if not e["dwell_count"]:
        return head + "<br>dwell unknown (first transitions)"
    return (head + f"<br>dwell in {plotly_text(e['source'])} before it "
            f"({e['dwell_count']:,} timed):<br>mean {format_ns(e['dwell_mean_ns'])} · "
            f"p50 {format_ns(e['dwell_p50_ns'])} · p99 {format_ns(e['dwell_p99_ns'])} · "
            f"max {format_ns(e['dwell_max_ns'])}")


def state_graph_figure(graph: dict[str, Any], title: str | None = None,
                       height: int = 560) -> go.Figure:
    """The state graph ``graph`` (to_json output) as a Plotly figure."""
    extra: dict[str, tuple[float, float]] = {}
    nodes = [n["id"] for n in graph["nodes"]]
    edges = graph["edges"]
    top = max((e["count"] for e in edges), default=1)
    pairs = {(e["source"], e["target"]) for e in edges}
    fig = go.Figure()
    lx: list[float] = []
    ly: list[float] = []
    ltext: list[str] = []
    lhover: list[str] = []
    arrows: list[dict[str, Any]] = []
    for e in edges:
        x0, y0 = _pos(e["source"], extra)
        x1, y1 = _pos(e["target"], extra)
        width = 1 + 6 * math.log1p(e["count"]) / math.log1p(top)
        if e["source"] == e["target"]:
            lx.append(x0)
            ly.append(y0 - 0.42)
            ltext.append(f"↻ {e['count']:,}")
            lhover.append(_edge_hover(e))
            continue
        dx, dy = x1 - x0, y1 - y0
        length = math.hypot(dx, dy) or 1.0
        nx, ny = -dy / length, dx / length
        # Two edges between the same nodes: shift each to its own side.
        off = 0.09 if (e["target"], e["source"]) in pairs else 0.0
        sx, sy, tx, ty = x0 + nx * off, y0 + ny * off, x1 + nx * off, y1 + ny * off
        arrows.append({"x": tx, "y": ty, "ax": sx, "ay": sy, "xref": "x", "yref": "y",
                       "axref": "x", "ayref": "y", "showarrow": True, "arrowhead": 2,
                       "arrowsize": 0.8, "arrowwidth": width, "text": "",
                       "arrowcolor": "rgba(70,80,100,0.55)", "standoff": 26,
                       "startstandoff": 26})
        lx.append(sx + dx * 0.5 + nx * 0.12)
        ly.append(sy + dy * 0.5 + ny * 0.12)
        ltext.append(f"{e['count']:,}")
        lhover.append(_edge_hover(e))
    fig.update_layout(annotations=arrows)  # once: add_annotation per edge is quadratic
    fig.add_trace(go.Scatter(x=lx, y=ly, mode="text", text=ltext, hovertext=lhover,
                             hoverinfo="text", textfont={"size": 11, "color": "#333"},
                             name="edges", showlegend=False))
    xs, ys, colors, labels, hovers = [], [], [], [], []
    counts = {n["id"]: n for n in graph["nodes"]}
    for n in nodes:
        x, y = _pos(n, extra)
        xs.append(x)
        ys.append(y)
        colors.append(WAITING_COLOR if n.startswith("Waiting") else NODE_COLORS.get(n, "#ccc"))
        labels.append(_node_label(n))
        c = counts[n]
        hovers.append(f"{plotly_text(n)}<br>in {c['in']:,} · out {c['out']:,}")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=labels, hovertext=hovers,
                             hoverinfo="text", textposition="middle center",
                             textfont={"size": 11, "color": "#111"},
                             marker={"size": 58, "color": colors,
                                     "line": {"width": 1, "color": "#555"}},
                             name="states", showlegend=False))
    all_pos = [_pos(n, extra) for n in nodes] or [(0.0, 0.0)]
    x_lo = min(p[0] for p in all_pos) - 0.6
    x_hi = max(p[0] for p in all_pos) + 0.6
    y_lo = min(p[1] for p in all_pos) - 0.7
    y_hi = max(p[1] for p in all_pos) + 0.5
    total = graph.get("total", 0)
    fig.update_layout(
        title=title or f"{plotly_text(graph['resource'])} state graph · {total:,} transitions",
        template="plotly_white", height=height, margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"visible": False, "range": [x_lo, x_hi]},
        yaxis={"visible": False, "range": [y_lo, y_hi]}, hovermode="closest")
    return fig


def _opt_int(opts: dict[str, str], name: str) -> int | None:
    v = opts.get(name)
    return int(v) if v not in (None, "") else None


def _states(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    split = opts.get("split_reasons", "1").lower() in ("1", "true", "yes", "on")
    resource = opts.get("resource", "goroutine")
    graph = graph_for(src.engine, src.frames, trace_id, resource,
                      group=opts.get("group") or None, t1=_opt_int(opts, "t1"),
                      t2=_opt_int(opts, "t2"), split_reasons=split and resource == "goroutine")
    return state_graph_figure(to_json(graph))


DIAGRAMS = {"states": _states}
