"""The margins the figures ask for (app.figures.margins) against what plotly grew
them to in Chromium on the 200 MB benchmark trace before the figures asked for
them (each figure's ``_fullLayout._size`` after its first drawing; session 33,
bench/RESULTS.md): a margin asked for at least as wide is never grown, and the
figure is drawn once. The browser's side of it: tests/app/browser/test_pages_smoke.py."""

from __future__ import annotations

import pytest

from app.figures.goroutines import CATEGORY_LABELS
from app.figures.margins import (
    MAX_LEFT,
    X_TITLED,
    X_UPRIGHT_TITLED,
    Y2_TITLED,
    Y_TITLED,
    below_legend,
    left_for,
)

#: Bottom margins plotly grew to under a legend below the plot (LEGEND_BELOW):
#: (figure height, legend rows) -> px.
GROWN_BELOW = {(380, 2): 122, (380, 1): 107, (360, 1): 103, (634, 1): 163}


@pytest.mark.parametrize(("height", "rows"), sorted(GROWN_BELOW))
def test_below_legend_fits_what_plotly_grew_to(height: int, rows: int) -> None:
    grown = GROWN_BELOW[(height, rows)]
    asked = below_legend(height, rows)
    assert grown <= asked <= grown + 6  # fits, without much to spare


def test_left_for_fits_the_labels_plotly_measured() -> None:
    # A goroutine group's 58-character label grew the margin to 370 px; the
    # goroutine page's state labels to 170 px.
    assert 370 <= left_for(["net/http.(*Transport).startDialConnForLocked.func1 (57373)"]) <= 385
    assert 170 <= left_for(CATEGORY_LABELS.values()) <= 185
    assert left_for([]) == 12  # the tick's pad only
    assert left_for(["x" * 10_000]) == MAX_LEFT


def test_axis_margins_fit_what_plotly_grew_to() -> None:
    # Numeric y axes with a title grew to 58-66 px, a second one to 37-45,
    # upright bin labels with a title to 90, level ones to 51-55.
    assert Y_TITLED >= 66 and Y2_TITLED >= 45
    assert X_UPRIGHT_TITLED >= 90 and X_TITLED >= 55
