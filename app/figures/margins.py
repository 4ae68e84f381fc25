"""Figure margins that already fit what the figure puts in them.

A plotly axis whose tick labels or title do not fit in the margin it was
given grows that margin (``automargin``: on in plotly's default template, and
set by the builders with long category labels), and so does a legend below
the plot: plotly draws the whole figure, measures, and draws it all again.
As a page opens that second drawing runs cold, before the browser has
optimised plotly's code: on the 200 MB benchmark trace every figure of the
overview, syscalls, latency and goroutine pages was drawn twice, about half
of their plotly time (the syscalls page: 852 -> 451 ms of synchronous
``Plotly.react`` with margins that fit; bench/RESULTS.md, session 33). So a
builder asks for margins that fit its usual labels, measured in Chromium;
automargin stays, for labels wider than foreseen (a narrower window, another
font), at the old cost.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Width of one character of a 12 px tick label: a 58-character function name
#: took 364 px, "Scheduler wait (Runnable)" 162 px (Chromium, DejaVu Sans).
CHAR_PX = 6.4
#: Left margin of a numeric y axis with a title (ticks such as "250k", "1.5M").
Y_TITLED = 72
#: Right margin of a second numeric y axis with a title beside it.
Y2_TITLED = 50
#: Bottom margin of an x axis with a title and labels set upright (the
#: histograms' bins, "178 ns" .. "1.78 ms", in half a page's width).
X_UPRIGHT_TITLED = 95
#: Bottom margin of an x axis with a title and level labels.
X_TITLED = 55
#: The most a left margin grows for long category labels.
MAX_LEFT = 600
#: How far under the plot a legend below it starts: a part of the plot's height.
LEGEND_GAP = 0.28
#: A legend in a row below the plot: :func:`below_legend` sizes the margin it needs.
LEGEND_BELOW = {"orientation": "h", "y": -LEGEND_GAP, "yanchor": "top", "x": 0}


def below_legend(height: int, rows: int = 1, top: int = 30) -> int:
    """The bottom margin of an x axis with a title over :data:`LEGEND_BELOW`
    of ``rows`` rows, in a figure ``height`` px high: the legend's place is a
    part of the plot's height, which is what the margins leave of it, so
    solved for the margin (it matched plotly's own to a pixel on the syscalls
    and latency pages)."""
    y = LEGEND_GAP
    return round((y * (height - top) + 21 + 19 * rows) / (1 + y)) + 2


def left_for(labels: Iterable[str], pad: int = 12) -> int:
    """A left margin that fits the widest of ``labels`` as tick labels."""
    widest = max((len(s) for s in labels), default=0)
    return min(MAX_LEFT, round(widest * CHAR_PX) + pad)
