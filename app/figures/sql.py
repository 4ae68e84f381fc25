"""The SQL page's quick chart: one figure from a query's columns and rows.

Pure: :func:`pick_axes` chooses default columns, :func:`result_figure` draws
``y`` against ``x`` (bars, lines or points), one trace per value of an
optional ``color`` column. Values from the database (function names, labels)
go through :func:`app.figures.text.plotly_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.text import plotly_text

KINDS = ("bar", "line", "scatter")
#: The x "column" that is the row's number (1 = first row): the default x when
#: the first column repeats a value within a series (a goroutine's many
#: syscalls), where bars by that value would be drawn over each other.
ROW = "#"
#: More groups than this in the color column: the rest are drawn as one, "other".
MAX_GROUPS = 12
#: A text column is a default color only when its values fit in a legend.
MAX_LEGEND_CHARS = 40
#: Column names that say "a measure", best first: preferred as the default y.
_MEASURE_HINTS = ("_ns", "_ms", "duration", "total", "sum", "bytes", "count", "intervals")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def numeric_columns(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Columns whose non-null values are all numbers (at least one)."""
    out = []
    for i, c in enumerate(columns):
        values = [r[i] for r in rows if r[i] is not None]
        if values and all(_is_number(v) for v in values):
            out.append(c)
    return out


def pick_axes(columns: Sequence[str], rows: Sequence[Sequence[Any]]
              ) -> tuple[str | None, str | None, str | None]:
    """Default (x, y, color): x the first column (:data:`ROW` when it repeats a
    value within a series); y a numeric column after it, one named like a
    measure first (``*_ns``, ``count``, ``total``...); color a text column with
    a few distinct values, if there is one."""
    if not columns:
        return None, None, None
    x = columns[0]
    numeric = [c for c in numeric_columns(columns, rows) if c != x]
    def rank(c: str) -> int:
        hits = [i for i, h in enumerate(_MEASURE_HINTS) if h in c.lower()]
        return min(hits) if hits and not c.lower().endswith("_ts") else len(_MEASURE_HINTS)

    candidates = sorted(numeric, key=rank)  # stable: column order among equals
    y = candidates[0] if candidates else None
    color = None
    for i, c in enumerate(columns):
        if c in (x, y) or c in numeric:
            continue
        distinct = {r[i] for r in rows}
        if (all(isinstance(v, str) and len(v) <= MAX_LEGEND_CHARS for v in distinct)
                and 1 < len(distinct) <= MAX_GROUPS):
            color = c
            break
    ci = columns.index(color) if color is not None else None
    series = [(r[ci] if ci is not None else None, r[0]) for r in rows]
    if len(set(series)) < len(series):
        return ROW, y, color
    return x, y, color


def _label(v: Any) -> Any:
    return plotly_text(v) if isinstance(v, str) else v


def result_figure(columns: Sequence[str], rows: Sequence[Sequence[Any]], x: str | None,
                  y: str | None, kind: str = "bar", color: str | None = None) -> go.Figure:
    """``y`` against ``x`` as ``kind`` (bar, line, scatter), grouped by ``color``."""
    fig = go.Figure()
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 30, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    if (x not in columns and x != ROW) or y not in columns or not rows:
        fig.add_annotation(text="Pick an x column and a numeric y column to draw a chart."
                           if rows else "No rows.", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    yi = columns.index(y)
    ci = columns.index(color) if color in columns and color not in (x, y) else None
    # Each row with its x value first.
    xi = columns.index(x) if x != ROW else None
    groups: dict[Any, list[Sequence[Any]]] = {}
    for n, r in enumerate(rows, 1):
        key = r[ci] if ci is not None else None
        groups.setdefault(key, []).append((n if xi is None else r[xi], *r))
    if len(groups) > MAX_GROUPS:
        kept = sorted(groups, key=lambda k: -len(groups[k]))[:MAX_GROUPS - 1]
        merged: dict[Any, list[Sequence[Any]]] = {k: groups[k] for k in kept}
        merged["other"] = [r for k, g in groups.items() if k not in kept for r in g]
        groups = merged
    for key, members in groups.items():
        xs = [_label(r[0]) for r in members]
        ys = [r[yi + 1] if _is_number(r[yi + 1]) else None for r in members]
        name = _label(str(key)) if ci is not None else y
        if kind == "line":
            fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers",
                                     marker={"size": 4}))
        elif kind == "scatter":
            fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="markers"))
        else:
            fig.add_trace(go.Bar(x=xs, y=ys, name=name))
    if kind == "bar":
        fig.update_layout(barmode="group")
        if xi is not None:
            # Ids (goroutines, Ps, stacks) are labels, not a scale: one bar
            # each, in the order of the rows.
            order = list(dict.fromkeys(_label(r[xi]) for r in rows))
            fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    fig.update_layout(xaxis_title="row" if x == ROW else _label(x), yaxis_title=_label(y),
                      showlegend=ci is not None)
    return fig
