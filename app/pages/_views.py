"""Helpers shared by the overview, states, annotations and compare pages."""

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
