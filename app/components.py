"""Small components every page uses: trace navigation, error boxes, number formats.

Strings from traces always go into components as children or properties
(rendered as text by React), never through ``dangerously_allow_html`` or
Markdown: a function name like ``<script>`` stays text.
"""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from app.pages import TRACE_NAV


def trace_nav(trace_id: int, active: str) -> html.Nav:
    """The tab bar of one trace's pages."""
    links = [dcc.Link(label, href=f"/traces/{trace_id}/{suffix}",
                      className="tab active" if module == active else "tab",
                      id=f"nav-{module}")
             for module, label, suffix in TRACE_NAV]
    return html.Nav([dcc.Link(f"Trace {trace_id}", href=f"/traces/{trace_id}/overview",
                              className="trace-name"), *links], className="trace-nav")


def error_box(message: str, home: bool = False) -> html.Div:
    """A clear message in place of a page."""
    children: list[Any] = [html.P(message, className="error-text")]
    if home:
        children.append(dcc.Link("Back to the library", href="/"))
    return html.Div(children, className="error-box", role="alert")


def fmt_ns(ns: float | int | None) -> str:
    """A duration in ns as a short human string (1.25 ms, 3.4 s)."""
    if ns is None:
        return "–"
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} ns"


def fmt_count(n: int | None) -> str:
    """An integer with thousands separators."""
    return "–" if n is None else f"{n:,}"


def stat_card(label: str, value: str, hint: str | None = None) -> html.Div:
    """One key number."""
    children: list[Any] = [html.Div(value, className="stat-value"),
                           html.Div(label, className="stat-label")]
    if hint:
        children.append(html.Div(hint, className="stat-hint"))
    return html.Div(children, className="stat-card")


#: Plotly config for every graph: PNG and SVG downloads from the mode bar.
def graph_config(filename: str, fmt: str = "png") -> dict[str, Any]:
    return {"displaylogo": False, "toImageButtonOptions": {"format": fmt, "filename": filename,
                                                           "scale": 2}}
