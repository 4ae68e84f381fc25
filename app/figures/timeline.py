"""The timeline figure of the export diagram ``timeline``: lanes of horizontal bars,
one bar trace per category. (The page draws its lanes on a canvas,
static/timeline_canvas.js, with the colours defined here.)

A pure builder over the data of :func:`ingest.views.timeline.timeline` (already a
level-of-detail summary: a few thousand shapes at most). A merged shape's bar
is as tall as the share of its span that its intervals cover (the data's
``cover``), standing on the lane's baseline: a bucket where stop-the-world
took 1.4% of the time is a sliver, not a solid band; a single interval is a
full bar. Bars rather than
layout shapes: Plotly draws thousands of bars quickly and gives each a hover
label; layout shapes get slow past a few hundred. The x axis is ms since the
trace's start; lanes are numeric rows (0 at the top) labelled by tick text.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.source import DiagramSource
from app.figures.text import plotly_text
from ingest.views.timeline import parse_params, timeline

#: Category colours (static/gmpscope.css palette; Waiting in blue-grey shades).
COLORS = {
    "Running": "#2e9d57", "Runnable": "#e0a526", "Syscall": "#c44e52",
    "Waiting: network": "#5b7fb0", "Waiting: sync": "#8c7fb5",
    "Waiting: chan/select": "#7fa3c4", "Waiting: sleep": "#b5c4d8",
    "Waiting: GC": "#a99bc9", "Waiting: other": "#8da2bf", "Idle": "#dfe2e8",
    "GC": "#7b4fb3", "STW": "#4b2a7a", "Sweep": "#c3a8e6", "Assist": "#9b6fd0",
}
#: Running bars on P and M lanes: a colour per goroutine, as in go tool trace,
#: so that one goroutine can be followed from P to P or M to M. Greens and
#: teals only: a bar still reads as Running next to the other states' colours.
GOROUTINE_COLORS = (
    "#1b7a43", "#77c58f", "#0f6b5c", "#93b84f", "#2a9d8f", "#a8d8b0",
    "#3f7f2f", "#56b8a9", "#1f5f3f", "#4cb374", "#6a9f3a", "#8fd3c7",
)
#: Legend name of Running bars coloured by goroutine.
RUNNING_BY_G = "Running (a colour per goroutine)"
LANE_PX = 18
#: Thickness of a full bar, in lanes (a single interval, or a merged shape
#: whose intervals cover all of its span).
BAR = 0.8
#: Thinnest merged bar, as a fraction of a full one (about one pixel): a
#: merged shape is as tall as the share of its span its intervals cover, but
#: never vanishes.
MIN_COVER_DRAWN = 0.08
#: Longest lane label (start functions can be very long).
LABEL_CHARS = 48


def fmt_dur(ns: float) -> str:
    """A duration as a short string (ns, µs, ms, s)."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def goroutine_color(g: int) -> str:
    """The colour of goroutine ``g``'s Running bars on P and M lanes. By id
    modulo the palette, whose neighbours alternate dark and light: goroutines
    started one after the other (neighbouring ids) never share a colour."""
    return GOROUTINE_COLORS[g % len(GOROUTINE_COLORS)]


def _bar_colors(data: dict[str, Any], name: str, idx: list[int]) -> str | list[str]:
    """A category's colour, or per bar for Running on P and M lanes: each
    single interval its goroutine's colour, merged shapes the category's."""
    color = COLORS.get(name, "#999999")
    if name != "Running" or data.get("mode") not in ("p", "m"):
        return color
    sh = data["shapes"]
    return [goroutine_color(sh["g"][i]) if sh["n"][i] == 1 and sh["g"][i] >= 0 else color
            for i in idx]


def _label(text: str, kind: str) -> str:
    if len(text) > LABEL_CHARS:
        text = "…" + text[-(LABEL_CHARS - 1):]
    esc = plotly_text(text)
    return f"<b>{esc}</b>" if kind in ("group", "range") else esc


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def cover_of(data: dict[str, Any], i: int) -> float:
    """Share of shape ``i``'s span its intervals cover (1.0 without the column)."""
    cover = data["shapes"].get("cover")
    return float(cover[i]) if cover is not None else 1.0


def bar_thickness(data: dict[str, Any], i: int) -> float:
    """Bar thickness (lanes) of shape ``i``: full for a single interval, the
    covered share of a full bar (at least MIN_COVER_DRAWN of it) when merged."""
    if data["shapes"]["n"][i] <= 1:
        return BAR
    return round(BAR * max(min(cover_of(data, i), 1.0), MIN_COVER_DRAWN), 4)


def _hover(data: dict[str, Any], i: int, lane_label: str) -> str:
    sh = data["shapes"]
    cats = data["categories"]
    d = sh["d"][i]
    start_ms = (data["t1"] + sh["s"][i] - data["first_ts"]) / 1e6
    head = plotly_text(lane_label)
    if sh["n"][i] > 1:
        cover = cover_of(data, i)
        mix = data["mix"][i] or []
        # Each state's share of the span (where a lane's intervals overlap, as
        # in the assist lane, a state covers no more than the intervals do).
        parts = sorted(((c, min(ns / max(d, 1), cover))
                        for c, ns in zip(mix[0::2], mix[1::2], strict=True)),
                       key=lambda p: -p[1])
        state = cats[sh["cat"][i]]
        share = next((x for c, x in parts if c == sh["cat"][i]), cover)
        lines = [f"{cats[c]} {_pct(x)}" for c, x in parts[:5]]
        if len(parts) > 1:
            lines.append(f"any state {_pct(cover)}")
        return (f"{head}: {sh['n'][i]} intervals, {_pct(share)} of this span is {state}<br>"
                + "<br>".join(lines) + f"<br>{fmt_dur(d)} from {start_ms:.6g} ms")
    kind = data["kinds"].get(str(sh["kind"][i]))
    reason = kind[3] if kind else ""
    state = cats[sh["cat"][i]]
    g = sh["g"][i]
    who = f"G{g} " if g >= 0 and not lane_label.startswith("G") else ""
    extra = f" ({plotly_text(reason)})" if reason and "Waiting" not in state else ""
    return f"{head}: {who}{state}{extra}<br>{fmt_dur(d)} from {start_ms:.6g} ms"


def figure_dict(data: dict[str, Any], height: int | None = None) -> dict[str, Any]:
    """The figure as a plain dict (no per-element validation, which costs seconds for
    thousands of bars in go.Figure)."""
    lanes = data["lanes"]
    labels = lanes["label"]
    n_lanes = len(labels)
    sh = data["shapes"]
    first = data["first_ts"]
    cats = data["categories"]
    min_ns = data["bucket_ns"]
    origin = (data["t1"] - first) / 1e6
    by_cat: dict[int, list[int]] = {}
    for i, c in enumerate(sh["cat"]):
        by_cat.setdefault(c, []).append(i)
    traces: list[dict[str, Any]] = []
    for c in sorted(by_cat):
        idx = by_cat[c]
        name = cats[c]
        colors = _bar_colors(data, name, idx)
        widths = [bar_thickness(data, i) for i in idx]
        traces.append({
            "type": "bar", "orientation": "h",
            "name": RUNNING_BY_G if isinstance(colors, list) else name,
            # Bars stand on the lane's baseline (the y axis runs downwards).
            "y": [round(sh["lane"][i] + (BAR - w) / 2, 4) for i, w in zip(idx, widths,
                                                                            strict=True)],
            "base": [round(origin + sh["s"][i] / 1e6, 6) for i in idx],
            # At least one pixel wide, or a lone short interval would not show.
            "x": [round(max(sh["d"][i], min_ns) / 1e6, 6) for i in idx],
            "customdata": [[sh["ref"][i], sh["g"][i], sh["n"][i]] for i in idx],
            "hovertext": [_hover(data, i, labels[sh["lane"][i]]) for i in idx],
            "hovertemplate": "%{hovertext}<extra></extra>",
            "marker": {"color": colors, "line": {"width": 0}},
            "width": widths,
        })
    ticktext = [_label(t, k) for t, k in zip(labels, lanes["type"], strict=True)]
    if 0 <= data.get("focus", -1) < n_lanes:
        ticktext[data["focus"]] = "▶ " + ticktext[data["focus"]]
    span_ms = [origin, (data["t2"] - first) / 1e6]
    # Group separators in the G view: a line above each group header.
    shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
               "y0": i - 0.5, "y1": i - 0.5, "line": {"color": "#c9ced6", "width": 1}}
              for i, t in enumerate(lanes["type"]) if t == "group" and i > 0]
    layout = {
        # plotly_white's look, spelled out: a template is a plotly.py object.
        "paper_bgcolor": "white", "plot_bgcolor": "white",
        "font": {"color": "#2a3f5f"}, "barmode": "overlay", "bargap": 0,
        "height": height or max(260, 90 + LANE_PX * n_lanes),
        "margin": {"l": 10, "r": 10, "t": 36, "b": 40},
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        "hovermode": "closest", "dragmode": "zoom",
        "uirevision": f"{data['trace_id']}-{data['mode']}-{data.get('offset', 0)}",
        "xaxis": {"title": {"text": "time since trace start (ms)"}, "range": span_ms,
                  "showgrid": True, "gridcolor": "#ebf0f8", "zeroline": False},
        "yaxis": {"tickvals": list(range(n_lanes)), "ticktext": ticktext,
                  "range": [n_lanes - 0.5, -0.5], "fixedrange": True, "automargin": True,
                  "showgrid": False},
        "shapes": shapes,
    }
    from app.figures.poller import os_mark_traces  # OS marks on M lanes, when there are any

    return {"data": traces + os_mark_traces(data), "layout": layout}


def timeline_figure(data: dict[str, Any], height: int | None = None) -> go.Figure:
    """Bars per category over the lanes of one timeline window."""
    return go.Figure(figure_dict(data, height))


def _diagram(src: DiagramSource, trace_id: int, options: dict[str, str]) -> go.Figure:
    data = timeline(src.engine, src.frames.get(trace_id), parse_params(options))
    fig = timeline_figure(data)
    fig.update_layout(title=f"Trace {trace_id} timeline by {data['mode'].upper()}")
    return fig


DIAGRAMS = {"timeline": _diagram}
