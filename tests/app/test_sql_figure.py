"""The SQL page's chart builder on small rows: default columns, series by a
text column, the row number as x, text escaped, nothing to draw."""

from __future__ import annotations

from app.figures.sql import ROW, pick_axes, result_figure

COLS = ["p", "state", "intervals", "total_ns"]
ROWS = [[0, "Idle", 14, 39058560], [0, "Running", 14, 131985281],
        [1, "Idle", 29, 33791936], [1, "Running", 30, 138500865]]


def test_defaults_prefer_a_measure_and_a_short_text_color() -> None:
    assert pick_axes(COLS, ROWS) == ("p", "total_ns", "state")
    assert pick_axes([], []) == (None, None, None)
    # The first column repeats within its series: the row number instead.
    rows = [[8, 2, 30, "returned", "a" * 60], [8, 1, 20, "returned", "b" * 60]]
    assert pick_axes(["goid", "start_ts", "duration_ns", "outcome", "stack"], rows) \
        == (ROW, "duration_ns", None)


def test_bars_one_series_per_color_value() -> None:
    fig = result_figure(COLS, ROWS, "p", "total_ns", "bar", "state")
    got = {t.name: dict(zip(t.x, t.y, strict=True)) for t in fig.data}
    assert got == {"Idle": {0: 39058560, 1: 33791936}, "Running": {0: 131985281, 1: 138500865}}
    assert fig.layout.xaxis.type == "category"


def test_row_number_as_x_and_text_escaped() -> None:
    rows = [["<b>x</b>", 5], ["<b>x</b>", 7]]
    fig = result_figure(["name", "n"], rows, ROW, "n", "line", None)
    assert list(fig.data[0].x) == [1, 2] and list(fig.data[0].y) == [5, 7]
    fig = result_figure(["name", "n"], rows, "name", "n", "bar", None)
    assert list(fig.data[0].x) == ["&lt;b&gt;x&lt;/b&gt;"] * 2


def test_nothing_to_draw_says_why() -> None:
    assert "No rows" in result_figure(COLS, [], "p", "total_ns").layout.annotations[0].text
    fig = result_figure(COLS, ROWS, "p", None)
    assert not fig.data and "numeric y" in fig.layout.annotations[0].text
