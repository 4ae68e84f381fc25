"""Helpers shared by the overview, timeline, states, annotations and compare pages."""

from __future__ import annotations

from typing import Any

from app.components import graph_config


def cfg(filename: str) -> Any:
    """``graph_config`` typed for ``dcc.Graph(config=...)`` (Dash's stub wants its own type)."""
    return graph_config(filename)


def fmt_bytes(n: int | None) -> str:
    """A byte count as a short string (2.01 MB)."""
    if n is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


#: A clientside callback passing a graph's relayoutData on only when its x axis
#: changed: Plotly reports every relayout (the autosize after each draw, a
#: window resize), and a server round trip for each kept a page busy for most
#: of a second after it had drawn (the overview and the timeline).
X_CHANGED_JS = """function(r) {
    if (r && (r['xaxis.autorange'] || r['xaxis.range[0]'] !== undefined
              || Array.isArray(r['xaxis.range']))) {
        return r;
    }
    return window.dash_clientside.no_update;
}"""
