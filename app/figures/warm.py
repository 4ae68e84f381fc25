"""Plotly made ready in a server worker before its first page.

Plotly loads a template and the validators of each property path the first
time a figure uses them: the overview's first figure in a fresh worker took
0.14 s to build against 0.02 s after (the 200 MB benchmark trace), and that
first build fell on a user's first page. ``gmpscope serve`` calls
:func:`warm_up` as each worker starts.
"""

from __future__ import annotations

import plotly.graph_objects as go  # type: ignore[import-untyped]


def warm_up() -> None:
    """Build one small figure with the template, trace types and layout parts
    the figure builders use (app/figures/*), and serialise it."""
    fig = go.Figure(
        [go.Scatter(x=[0, 1], y=[0, 1], stackgroup="warm", fill="tonexty", mode="lines",
                    line={"shape": "hv", "width": 0}, hovertemplate="%{y}", name="a"),
         go.Bar(x=[0], y=[1], marker={"color": "#2e9d57"}, name="b")],
        layout={"template": "plotly_white", "title": "warm", "height": 100,
                "shapes": [{"type": "rect", "x0": 0, "x1": 1, "y0": 0, "y1": 1}],
                "yaxis2": {"overlaying": "y", "side": "right"},
                "legend": {"orientation": "h"}, "hovermode": "x unified",
                "margin": {"l": 1, "r": 1, "t": 1, "b": 1}})
    fig.to_plotly_json()
