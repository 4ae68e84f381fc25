"""The timeline page in a real browser: it draws the whole trace, zooming asks the
server for the smaller window (more detail: a pixel stands for less time and the
bars stay inside the window), clicking a bar shows the span's details, and the
mode and deep links work. Screenshots go to the artifacts directory."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

SAMPLE = "go1.27-httpnet-2MB.trace"
BARS = "#timeline-graph .bars path"

#: Reads the figure Plotly holds: x range and, per bar, its start and end (ms).
FIGURE_JS = """() => {
    const gd = document.querySelector('#timeline-graph .js-plotly-plot');
    const bars = [];
    for (const t of gd.data) {
        for (let i = 0; i < t.base.length; i++) bars.push([t.base[i], t.base[i] + t.x[i]]);
    }
    return {range: gd.layout.xaxis.range, bars: bars,
            status: document.querySelector('#timeline-status').innerText};
}"""


def _figure(page: Page) -> dict[str, Any]:
    fig: dict[str, Any] = page.evaluate(FIGURE_JS)
    return fig


def _pixel_ns(status: str) -> str:
    m = re.search(r"one pixel ≈ ([^)]+)\)", status)
    assert m, status
    return m.group(1)


def _to_ns(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1.0}[unit]


def test_timeline_zoom_refines_and_click_shows_details(
        page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/timeline?mode=m")
    wait_for_dash(page, "#timeline-graph")
    page.wait_for_selector(BARS, state="attached")
    shot(page, "timeline-m-full")
    before = _figure(page)
    assert len(before["bars"]) > 50
    full_pixel = _to_ns(_pixel_ns(before["status"]))

    # Zoom to 1/200 of the trace, as a drag would (a relayout event).
    lo, hi = before["range"]
    z0 = lo + (hi - lo) * 0.4
    z1 = z0 + (hi - lo) / 200
    page.evaluate("""([a, b]) => Plotly.relayout(
        document.querySelector('#timeline-graph .js-plotly-plot'),
        {'xaxis.range[0]': a, 'xaxis.range[1]': b})""", [z0, z1])
    page.wait_for_function(
        """(old) => document.querySelector('#timeline-status').innerText !== old""",
        arg=before["status"])
    wait_for_dash(page)
    after = _figure(page)
    shot(page, "timeline-m-zoomed")
    zoom_pixel = _to_ns(_pixel_ns(after["status"]))
    assert zoom_pixel < full_pixel / 100, "a pixel stands for less time after zooming"
    assert after["bars"], "the zoomed window has bars"
    eps = (z1 - z0) * 1e-6
    assert all(a >= z0 - eps and b <= z1 + max(eps, zoom_pixel / 1e6 * 1.01)
               for a, b in after["bars"]), "bars stay inside the window"

    # Click a bar: its details, with a link to the goroutine's page.
    page.locator(BARS).nth(len(after["bars"]) // 2).click(force=True)
    page.wait_for_selector("#timeline-details h3")
    wait_for_dash(page)
    shot(page, "timeline-m-clicked")
    details = page.locator("#timeline-details").inner_text()
    assert "intervals merged" in details or "Stack where it entered" in details


def test_timeline_modes_and_deep_link(page: Page, samples_server: Served,
                                      sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    api = samples_server.get(f"/api/traces/{tid}/timeline?mode=g&limit=20").json()
    goid = next(i for i, t in zip(api["lanes"]["id"], api["lanes"]["type"], strict=True)
                if t == "g" and i > 0)
    t1 = api["first_ts"]
    t2 = t1 + (api["last_ts"] - t1) // 10
    page.goto(f"{samples_server.url}/traces/{tid}/timeline?mode=g&g={goid}&t1={t1}&t2={t2}")
    wait_for_dash(page, "#timeline-graph")
    page.wait_for_selector(BARS, state="attached")
    fig = _figure(page)
    assert abs(fig["range"][1] - fig["range"][0] - (t2 - t1) / 1e6) < 1e-6
    ticks = page.evaluate("""() => [...document.querySelectorAll('#timeline-graph .ytick text')]
                             .map(e => e.textContent)""")
    assert any(t.startswith("▶") and t.endswith(f"G{goid}") for t in ticks), ticks
    shot(page, "timeline-g-deeplink")
    # Switch to P lanes: the lanes change, the window stays.
    page.locator("#timeline-mode input[value=p]").check()
    page.wait_for_function(
        """() => [...document.querySelectorAll('#timeline-graph .ytick text')]
                 .some(e => e.textContent === 'P0')""")
    wait_for_dash(page)
    assert abs(_figure(page)["range"][0] - fig["range"][0]) < 1e-6
    shot(page, "timeline-p-window")


#: Per drawn bar of the range lanes: lane (rounded y), intervals it stands for,
#: the data's thickness and the drawn height in pixels.
BAR_HEIGHTS_JS = """() => {
    const gd = document.querySelector('#timeline-graph .js-plotly-plot');
    const layers = gd.querySelectorAll('.barlayer .trace');
    const out = [];
    gd.data.filter(t => t.type === 'bar').forEach((t, k) => {
        const pts = layers[k].querySelectorAll('.point path');
        t.y.forEach((y, i) => out.push([Math.round(y), t.customdata[i][2], t.width[i],
                                        pts[i] ? pts[i].getBBox().height : -1]));
    });
    return {bars: out, help: document.querySelector('#timeline-cover-help').innerText};
}"""


def test_merged_bars_show_how_much_of_their_span_is_covered(
        page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    """The whole trace by P: a merged shape of a mostly empty range lane (sweep
    covers a fraction of a percent of the trace) is drawn as a sliver, not a
    band as tall as a single interval's bar."""
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/timeline?mode=p")
    wait_for_dash(page, "#timeline-graph")
    page.wait_for_selector(BARS, state="attached")
    shot(page, "timeline-p-whole-cover")
    got = page.evaluate(BAR_HEIGHTS_JS)
    assert "as tall as the share of its span" in got["help"]
    full = max(h for _y, n, _w, h in got["bars"] if n == 1)
    assert full > 8
    slivers = [(y, w, h) for y, n, w, h in got["bars"] if n > 1 and y < 4 and w < 0.2]
    assert slivers, "merged range-lane shapes that cover little of their span"
    assert all(0 < h < full / 3 for _y, _w, h in slivers), (full, slivers[:5])
