"""Flame graphs: a profile's call tree (ingest.views.flame) as horizontal
bars, the root at the bottom and callees above their callers, each frame as
wide as the time spent under it. Bars, not Plotly's icicle trace: the pages
load plotly.js's basic bundle (static/vendor/), which has no icicle. Pure
builders."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.source import DiagramSource
from app.figures.syscalls import _window
from ingest.views.flame import flame_tree

#: Warm colours, as flame graphs are drawn; a function's package picks one.
PALETTE = ("#e8603c", "#f08c3a", "#f4a93b", "#e4c14b", "#d8763d", "#ec9d6b", "#c95f4a",
           "#f2b866", "#dd8a4c", "#e9b24e")
ROOT_COLOR = "#b9bfcb"


def package(function: str) -> str:
    """The package path of a Go function name (``net/http.(*conn).serve`` -> ``net/http``)."""
    slash = function.rfind("/")
    dot = function.find(".", slash + 1)
    return function[:dot] if dot > 0 else function


def _color(function: str) -> str:
    digest = hashlib.blake2s(package(function).encode(), digest_size=2).digest()
    return PALETTE[int.from_bytes(digest, "big") % len(PALETTE)]


def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def layout_nodes(tree: dict[str, Any]) -> dict[str, list[Any]]:
    """Each node's place in the flame graph: ``x0`` (ns from the left, its
    callers' share first), ``depth`` (0 for the root). Siblings sorted by
    name, as pprof's flame graph sorts them, so two windows of one profile
    put a function at the same place."""
    nodes = tree["nodes"]
    parent, value, name = nodes["parent"], nodes["value"], nodes["name"]
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):  # a parent's id is always below its children's
        children[parent[i]].append(i)
    x0 = [0] * n
    depth = [0] * n
    for i in range(n):
        x = x0[i]
        for c in sorted(children[i], key=lambda c: (name[c], c)):
            x0[c], depth[c] = x, depth[i] + 1
            x += value[c]
    return {"x0": x0, "depth": depth}


def flame_figure(tree: dict[str, Any], row_px: int = 18) -> go.Figure:
    """The flame graph of a :func:`ingest.views.flame.flame_tree` tree, one
    horizontal bar per frame: the root at the bottom, callees above their
    callers, each as wide as the time under it. A note in place of the graph
    when the profile is empty. The bars' ``customdata`` ends with the bar's
    x0, its width and its node id."""
    nodes = tree["nodes"]
    total = max(int(tree["total_ns"]), 1)
    fig = go.Figure()
    if not tree["count"]:
        fig.add_annotation(text=f"No {tree['title']} in this trace window.", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(height=160, xaxis_visible=False, yaxis_visible=False,
                          margin={"l": 10, "r": 10, "t": 10, "b": 10})
        return fig
    place = layout_nodes(tree)
    unit = tree["unit"]
    labels = [f"{tree['title']} · {_fmt_ns(total)}"] + nodes["name"][1:]
    custom = [[label, _fmt_ns(v), f"{100 * v / total:.1f}%", c, _fmt_ns(s), x0, v, nid]
              for label, v, c, s, x0, nid in zip(labels, nodes["value"], nodes["count"],
                                                 nodes["self"], place["x0"], nodes["id"],
                                                 strict=True)]
    fig.add_trace(go.Bar(
        orientation="h", base=place["x0"], x=nodes["value"], y=place["depth"], width=0.94,
        text=labels, textposition="inside", insidetextanchor="start",
        textfont={"family": "ui-monospace, SFMono-Regular, Menlo, monospace", "size": 11,
                  "color": "#1b1f27"},
        marker={"color": [ROOT_COLOR] + [_color(n) for n in nodes["name"][1:]],
                "line": {"width": 0.5, "color": "#ffffff"}},
        customdata=custom, showlegend=False,
        hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]} (%{customdata[2]} of all)"
                      f"<br>%{{customdata[3]}} {unit} · self %{{customdata[4]}}"
                      "<extra></extra>",
    ))
    depth = max(place["depth"]) + 1
    fig.update_layout(
        height=min(60 + row_px * depth, 1600), bargap=0,
        margin={"l": 4, "r": 4, "t": 4, "b": 4}, plot_bgcolor="#ffffff",
        uniformtext={"minsize": 9, "mode": "hide"}, dragmode="zoom",
        xaxis={"visible": False, "range": [0, total], "fixedrange": False},
        yaxis={"visible": False, "range": [-0.5, depth - 0.5], "fixedrange": True},
    )
    return fig


def _flame(src: DiagramSource, trace_id: int, opts: dict[str, str]) -> go.Figure:
    f = src.frames.get(trace_id)
    return flame_figure(flame_tree(src.engine, f, opts.get("kind", "sync"), *_window(opts)))


DIAGRAMS: dict[str, Callable[[DiagramSource, int, dict[str, str]], go.Figure]] = {
    "flame": _flame,
}
