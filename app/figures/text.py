"""Trace strings inside Plotly figures.

Plotly renders a subset of HTML (``<b>``, ``<br>``, ``<a href>``...) in hover
text, annotations and tick labels, so a string a program wrote into its trace
(a function name, a label, a log message) is escaped before it goes there:
it must show as text, never become markup or a link.
"""

from __future__ import annotations

import html

#: Longer strings are cut in hover text (full text stays available in tables).
MAX_HOVER_CHARS = 300


def plotly_text(s: str, limit: int = MAX_HOVER_CHARS) -> str:
    """``s`` escaped for Plotly text fields, cut to ``limit`` characters."""
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    # quote=False: Plotly decodes &lt; &gt; &amp; but shows &quot; literally, and a quote
    # cannot open an attribute once "<" is escaped.
    return html.escape(s, quote=False)
