"""The timeline page in a real browser: lanes on a canvas (static/timeline_canvas.js).

Wheel, drag and keys move the window as they say (wheel zooms about the
pointer, drag pans by the pixels dragged, W/S zoom, A/D pan, Esc and
double-click return to the whole trace), and after each the page's URL carries
the visible window; a reload shows the same window. On a real workload trace
the canvas pixel in the middle of the longest proc run (found by SQL) has that
goroutine's colour on its P lane (docs/timeline.md's palette rule), and the
Running colour on the goroutine's own lane by G. Clicking a span shows its
details; Shift+drag announces an area. Screenshots go to the artifacts directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import FloatRect, Page

from app.figures.timeline import COLORS, goroutine_color
from tests.support.browser import shot
from tests.support.server import Served
from tests.support.workload_traces import workload_trace

SAMPLE = "go1.27-httpnet-2MB.trace"

#: True once the view drew a frame with every tile it wants and nothing is loading.
SETTLED_JS = """() => {
    const v = window.gmpscopeTimeline && window.gmpscopeTimeline.current;
    return !!(v && v.meta && v.lastFrame && v.lastFrame.complete && v.inflight.size === 0
              && !v.dirty);
}"""
#: True once the URL carries the view's window.
SYNCED_JS = """() => {
    const v = window.gmpscopeTimeline.getView();
    const q = new URLSearchParams(location.search);
    const pin = v && !v.pinnedDefault ? (v.pinned.join(',') || 'none') : null;
    return !!v && q.get('t1') === v.t1 && q.get('t2') === v.t2 && q.get('mode') === v.mode
        && q.get('pin') === pin && (q.get('offset') || '0') === String(v.offset);
}"""


def _settle(page: Page) -> dict[str, Any]:
    page.wait_for_function(SETTLED_JS, polling=50)
    page.wait_for_function(SYNCED_JS, polling=50)
    view: dict[str, Any] = page.evaluate("() => window.gmpscopeTimeline.getView()")
    return view


def _window(view: dict[str, Any]) -> tuple[int, int]:
    return int(view["t1"]), int(view["t2"])


def _url_window(page: Page) -> tuple[int, int]:
    q = parse_qs(urlparse(page.url).query)
    return int(q["t1"][0]), int(q["t2"][0])


def _canvas_box(page: Page) -> FloatRect:
    box = page.locator("#timeline-canvas").bounding_box()
    assert box is not None
    return box


def _moved_as(key: str, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether window ``a`` became ``b`` as key ``key`` says: W zooms in, S out, A pans
    earlier, D later (a pan keeps the span, to the ns each end is rounded to)."""
    same_span = abs((b[1] - b[0]) - (a[1] - a[0])) <= 2
    return {"w": b[1] - b[0] < a[1] - a[0], "s": b[1] - b[0] > a[1] - a[0],
            "a": b[0] < a[0] and same_span, "d": b[0] > a[0] and same_span}[key]


def _open(page: Page, url: str) -> dict[str, Any]:
    page.goto(url)
    page.wait_for_selector("#timeline-canvas")
    return _settle(page)


def test_wheel_drag_keys_move_the_window_and_the_url_follows(
        page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    view = _open(page, f"{samples_server.url}/traces/{tid}/timeline?mode=m")
    first, last = int(view["firstTs"]), int(view["lastTs"])
    assert _window(view) == (first, last) == _url_window(page)
    shot(page, "timeline-m-whole")
    box = _canvas_box(page)
    left, width = view["plotLeft"], view["plotWidth"]
    y = box["y"] + 120

    # Wheel up at 70% of the plot: the window narrows, the time under the pointer stays.
    frac = 0.7
    x = box["x"] + left + frac * width
    t1, t2 = _window(view)
    under = t1 + frac * (t2 - t1)
    page.mouse.move(x, y)
    page.mouse.wheel(0, -400)
    view = _settle(page)
    z1, z2 = _window(view)
    assert z2 - z1 < (t2 - t1) / 2
    assert abs(z1 + frac * (z2 - z1) - under) <= 2 + (z2 - z1) * 1e-6
    assert _url_window(page) == (z1, z2)
    shot(page, "timeline-m-wheel")

    # Drag 200 px to the left: the window moves 200 px of time later, same span.
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 100, y, steps=4)
    page.mouse.move(x - 200, y, steps=4)
    page.mouse.up()
    view = _settle(page)
    d1, d2 = _window(view)
    assert abs((d2 - d1) - (z2 - z1)) <= 2
    want = 200 * (z2 - z1) / width
    assert abs((d1 - z1) - want) <= 2 + want * 1e-6
    assert _url_window(page) == (d1, d2)

    # Keys on the focused canvas: W zooms in, S out, A pans earlier, D later.
    page.locator("#timeline-canvas").focus()
    for key in "wsad":
        before = _window(view)
        page.keyboard.down(key)
        page.wait_for_function(
            "([t1, t2]) => { const v = window.gmpscopeTimeline.getView();"
            " return v.t1 !== t1 || v.t2 !== t2; }", arg=[view["t1"], view["t2"]])
        page.wait_for_timeout(150)
        page.keyboard.up(key)
        view = _settle(page)
        assert _moved_as(key, before, _window(view)), (key, before, _window(view))
        assert _url_window(page) == _window(view)
    shot(page, "timeline-m-keys")

    # A reload (or a shared link) shows the same window.
    kept = _window(view)
    page.reload()
    page.wait_for_selector("#timeline-canvas")
    view = _settle(page)
    assert _window(view) == kept == _url_window(page)

    # Esc returns to the whole trace; so does a double-click after zooming again.
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("Escape")
    view = _settle(page)
    assert _window(view) == (first, last) == _url_window(page)
    page.mouse.move(x, y)
    page.mouse.wheel(0, -400)
    view = _settle(page)
    assert _window(view) != (first, last)
    page.mouse.dblclick(x, y)
    view = _settle(page)
    assert _window(view) == (first, last) == _url_window(page)


def test_click_shows_details_and_shift_drag_selects_an_area(
        page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    p, s, e = samples_server.get(
        "/api/sql", params={"sql": "SELECT p, start_ts, end_ts FROM proc_runs WHERE "
                            f"trace_id = {tid} ORDER BY end_ts - start_ts DESC LIMIT 1"}
    ).json()["rows"][0]
    _open(page, f"{samples_server.url}/traces/{tid}/timeline?mode=p&t1={s}&t2={e}")
    page.evaluate("""() => { window.__events = [];
        for (const n of ['select-span', 'select-area'])
            window.gmpscopeTimeline.on(n, d => window.__events.push([n, d.ref, d.t1, d.t2,
                                                                     d.lane, d.lanes])); }""")
    view = page.evaluate("() => window.gmpscopeTimeline.getView()")
    box = _canvas_box(page)
    lane_y = page.evaluate(f"""() => window.gmpscopeTimeline.current.layerHelpers()
                               .laneY('p{p}')""")
    x = box["x"] + view["plotLeft"] + view["plotWidth"] / 2
    page.mouse.click(x, box["y"] + lane_y + 9)
    page.wait_for_selector("#timeline-detail-stack")
    shot(page, "timeline-p-clicked")
    details = page.locator("#timeline-details").inner_text()
    assert "Running" in details and "Stack where it entered" in details
    events = page.evaluate("() => window.__events")
    assert events[0][0] == "select-span" and events[0][1] >= 0
    assert (int(events[0][2]), int(events[0][3])) == (s, e), "the whole run, not a tile's part"
    assert events[0][4] == f"p{p}"

    # Shift+drag over the P lanes: an area with their keys and the dragged time.
    page.keyboard.down("Shift")
    page.mouse.move(x - 100, box["y"] + lane_y + 4)
    page.mouse.down()
    page.mouse.move(x + 100, box["y"] + lane_y + 30, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    shot(page, "timeline-p-area")
    events = page.evaluate("() => window.__events")
    kind, _ref, a1, a2, _lane, lanes = events[-1]
    assert kind == "select-area" and f"p{p}" in lanes
    span = e - s
    assert abs((int(a2) - int(a1)) - 200 * span / view["plotWidth"]) <= 2 + span * 1e-6

    # From the keyboard: the visible window over the focused lane (the clicked one),
    # then one lane more above it.
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("Shift+Enter")
    kind, _ref, a1, a2, _lane, lanes = page.evaluate("() => window.__events")[-1]
    assert kind == "select-area" and (int(a1), int(a2)) == (s, e) and lanes == [f"p{p}"]
    page.keyboard.press("Shift+ArrowUp")
    kind, _ref, a1, a2, _lane, lanes = page.evaluate("() => window.__events")[-1]
    assert len(lanes) == 2 and lanes[1] == f"p{p}" and (int(a1), int(a2)) == (s, e)
    shot(page, "timeline-p-key-area")


@pytest.fixture(scope="module")
def workload_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with the gcpressure workload's trace (Go 1.27.3): long CPU runs."""
    trace = workload_trace("1.27.3", "gcpressure")
    with Served(tmp_path_factory.mktemp("timeline-workload"), [Path(trace)]) as served:
        yield served


def _pixel(page: Page, x: float, y: float) -> str:
    """The canvas pixel at CSS (x, y) of the canvas, as #rrggbb."""
    rgb: list[int] = page.evaluate("""([x, y]) => {
        const c = document.querySelector('#timeline-canvas');
        const dpr = window.gmpscopeTimeline.getView().devicePixelRatio;
        return [...c.getContext('2d').getImageData(Math.round(x * dpr),
                                                   Math.round(y * dpr), 1, 1).data];
    }""", [x, y])
    return "#" + "".join(f"{v:02x}" for v in rgb[:3])


def test_known_span_has_its_colour_at_its_place(page: Page, workload_server: Served) -> None:
    tid = workload_server.get("/api/traces").json()["traces"][0]["id"]
    # The longest run with room for a quarter of it on each side inside the
    # trace (a window past the trace's end is moved back inside it).
    rows = workload_server.get(
        "/api/sql", params={"sql": "SELECT r.p, r.g, r.start_ts, r.end_ts FROM proc_runs r "
                            "JOIN traces t ON t.id = r.trace_id WHERE "
                            f"r.trace_id = {tid} AND "
                            "r.start_ts - (r.end_ts - r.start_ts) / 4 >= t.first_ts AND "
                            "r.end_ts + (r.end_ts - r.start_ts) / 4 <= t.last_ts "
                            "ORDER BY r.end_ts - r.start_ts DESC LIMIT 1"}
    ).json()["rows"]
    p, g, s, e = rows[0]
    d = e - s
    view = _open(page, f"{workload_server.url}/traces/{tid}/timeline?mode=p")
    # Zoom to the run with some room on each side (through the published interface).
    page.evaluate("([a, b]) => window.gmpscopeTimeline.goto(a, b)", [str(s - d // 4),
                                                                    str(e + d // 4)])
    view = _settle(page)
    t1, t2 = _window(view)
    assert (t1, t2) == (s - d // 4, e + d // 4) == _url_window(page)
    lane_y = page.evaluate(f"() => window.gmpscopeTimeline.current.layerHelpers().laneY('p{p}')")
    assert lane_y is not None
    bar_y = lane_y + view["laneHeight"] - 5  # inside the bar, which stands on the baseline
    shot(page, "timeline-p-known-span")
    for frac in (0.1, 0.5, 0.9):  # inside the run: its goroutine's colour
        t = s + frac * d
        x = view["plotLeft"] + (t - t1) / (t2 - t1) * view["plotWidth"]
        assert _pixel(page, x, bar_y) == goroutine_color(g), (frac, g)
    # Select the run, then → : the next span on the lane starts where the run ends
    # (the run's parts in the other tiles of the view are not "next").
    page.evaluate("""() => { window.__sel = [];
        for (const n of ['select-span', 'select-merged'])
            window.gmpscopeTimeline.on(n, d => window.__sel.push([n, d.ref, d.t1])); }""")
    box = _canvas_box(page)
    page.mouse.click(box["x"] + view["plotLeft"] + view["plotWidth"] / 2, box["y"] + bar_y)
    page.wait_for_function("() => window.__sel.length === 1")
    run = page.evaluate("() => window.__sel[0]")
    assert run[0] == "select-span" and int(run[2]) == s
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => window.__sel.length === 2")
    nxt = page.evaluate("() => window.__sel[1]")
    assert nxt[1] != run[1] and int(nxt[2]) >= e, (run, nxt)
    # By G: the goroutine's own lane shows Running at the same place.
    page.goto(f"{workload_server.url}/traces/{tid}/timeline?mode=g&g={g}&t1={t1}&t2={t2}")
    view = _settle(page)
    assert _window(view) == (t1, t2)
    lane_y = page.evaluate(f"() => window.gmpscopeTimeline.current.layerHelpers().laneY('g{g}')")
    assert lane_y is not None, "the linked goroutine's lane is scrolled into view"
    shot(page, "timeline-g-known-span")
    x = view["plotLeft"] + (s + d / 2 - t1) / (t2 - t1) * view["plotWidth"]
    assert _pixel(page, x, lane_y + view["laneHeight"] - 5) == COLORS["Running"]


def test_links_modes_scrolling_and_help(page: Page, samples_server: Served,
                                        sample_ids: dict[str, int]) -> None:
    """A link of another page (mode, group, window) opens as it says; the mode buttons
    keep the window; every goroutine lane is reachable by scrolling (End: the last
    lane's label is loaded and drawn); ? opens and closes the keys."""
    tid = sample_ids[SAMPLE]
    lanes = samples_server.get(f"/api/traces/{tid}/timeline/lanes?mode=g&limit=1").json()
    group = lanes["groups"][1]
    t1 = lanes["first_ts"] + (lanes["last_ts"] - lanes["first_ts"]) // 3
    t2 = t1 + 50_000_000
    view = _open(page, f"{samples_server.url}/traces/{tid}/timeline?mode=g&t1={t1}&t2={t2}"
                 f"&group={group['name']}")
    assert _window(view) == (t1, t2) and view["group"] == group["name"]
    assert view["lanes"] == 4 + 1 + group["count"]
    assert page.locator("#timeline-group").input_value() == group["name"]
    assert parse_qs(urlparse(page.url).query)["group"] == [group["name"]]
    shot(page, "timeline-g-group-link")

    page.locator("[data-mode=p]").click()
    view = _settle(page)
    assert view["mode"] == "p" and _window(view) == (t1, t2)
    assert parse_qs(urlparse(page.url).query)["mode"] == ["p"]

    page.locator("[data-mode=g]").click()
    view = _settle(page)
    assert view["mode"] == "g" and view["group"] is None and view["lanes"] > 10_000
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("End")
    view = _settle(page)
    last = page.evaluate("""() => { const v = window.gmpscopeTimeline.current;
        const lanes = v.layerHelpers().lanes(); return lanes[lanes.length - 1]; }""")
    assert last["index"] == view["lanes"] - 1 and last["key"].startswith("g")
    assert int(parse_qs(urlparse(page.url).query)["offset"][0]) == view["offset"] > 10_000
    shot(page, "timeline-g-end")

    # Unpin GC (P on the keyboard's lane: the first one, GC) and pin the last lane (a
    # click on its label): the URL names the pins, and a reload keeps them.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("p")
    view = _settle(page)
    assert 0 not in view["pinned"]
    box = _canvas_box(page)
    last = page.evaluate("""() => { const l = window.gmpscopeTimeline.current.layerHelpers()
        .lanes(); return l[l.length - 1]; }""")
    page.mouse.click(box["x"] + 40, box["y"] + last["y"] + 9)
    view = _settle(page)
    pins = view["pinned"]
    assert 0 not in pins and view["lanes"] - 1 in pins and len(pins) == 4
    assert parse_qs(urlparse(page.url).query)["pin"] == [",".join(map(str, pins))]
    page.reload()
    page.wait_for_selector("#timeline-canvas")
    assert _settle(page)["pinned"] == pins
    shot(page, "timeline-g-pins")

    page.locator("#timeline-canvas").focus()
    page.keyboard.press("?")
    page.wait_for_selector(".timeline-help")
    keys = page.locator(".timeline-help").inner_text()
    assert "Shift + drag" in keys
    # The causality panels' keys too (static/timeline_causality.js).
    assert "follow the wake-up arrow" in keys and "critical path" in keys and "search" in keys
    shot(page, "timeline-help")
    page.keyboard.press("?")
    page.wait_for_selector(".timeline-help", state="detached")


#: Per device-pixel column of a range lane's row: the tallest bar the tiles put
#: there (a merged shape: its cover times the 14 px bar, at least 1 px; a single
#: interval: 14 px) and the pixels of the lane's colour counted in that column.
COVER_JS = """(key) => {
    const v = window.gmpscopeTimeline.current, h = v.layerHelpers(), dpr = v.dpr;
    const lane = h.lanes().find(l => l.key === key);
    const scale = v.plotW() / (v.v2 - v.v1), want = new Map();
    let color = null;
    for (const t of v.drawnTiles) {
        const r = t.laneAt[lane.index];
        if (!r) continue;
        for (let i = r[0]; i < r[1]; i++) {
            const x1 = h.left + (t.r1 + t.cols.s[i] - v.v1) * scale;
            const a = Math.round(x1 * dpr);
            const b = Math.max(a + 1, Math.round((x1 + t.cols.d[i] * scale) * dpr));
            const tall = t.cols.n[i] > 1 ? Math.max(1, 14 * t.cols.cover[i]) : 14;
            color = v.shapeColor(t.cols.cat[i], t.cols.n[i], t.cols.g[i]);
            for (let x = Math.max(a, h.left * dpr); x < Math.min(b, h.width * dpr); x++)
                want.set(x, [Math.max(tall, (want.get(x) || [0])[0]), t.cols.n[i]]);
        }
    }
    const rgb = [1, 3, 5].map(k => parseInt(color.slice(k, k + 2), 16));
    const ctx = v.canvas.getContext('2d'), out = [];
    for (const [x, [tall, n]] of want) {
        const px = ctx.getImageData(x, Math.round(lane.y * dpr), 1, 18 * dpr).data;
        let got = 0;
        for (let k = 0; k < px.length; k += 4)
            if (px[k] === rgb[0] && px[k + 1] === rgb[1] && px[k + 2] === rgb[2]) got++;
        out.push([n, tall, got / dpr]);
    }
    return out;
}"""


def test_merged_bars_are_as_tall_as_their_cover(page: Page, samples_server: Served,
                                                sample_ids: dict[str, int]) -> None:
    """The whole trace by P: each pixel column of the sweep and STW lanes is as tall as
    its tallest shape: a merged shape as the share of its span its intervals cover (at
    least a pixel), a single interval full height. Slivers, not bands."""
    tid = sample_ids[SAMPLE]
    _open(page, f"{samples_server.url}/traces/{tid}/timeline?mode=p")
    shot(page, "timeline-p-whole-cover")
    cols = page.evaluate(COVER_JS, "sweep") + page.evaluate(COVER_JS, "stw")
    assert len(cols) > 20
    # Bars are drawn at fractional heights: a column's count is within a pixel.
    assert all(abs(got - tall) <= 1 for _n, tall, got in cols), \
        [c for c in cols if abs(c[2] - c[1]) > 1][:10]
    assert sum(1 for n, tall, _g in cols if n > 1 and tall <= 3) > 5, "slivers"
    assert any(n == 1 for n, _t, _g in cols), "and full bars"


@pytest.fixture(scope="module")
def os_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with the sample OS recording (a Go trace and strace of one run)."""
    rec = Path(__file__).resolve().parents[3] / "samples" / "go1.27-httpnet-os"
    with Served(tmp_path_factory.mktemp("timeline-os"), [rec]) as served:
        yield served


def test_m_lanes_show_the_os_marks(page: Page, os_server: Served) -> None:
    """By M the recording's calls are marks on their thread's lanes (hundreds over the
    whole trace), a lone one named on hover with its thread; by P there are none."""
    tid = next(t["id"] for t in os_server.get("/api/traces").json()["traces"]
               if t["source"] == "trace")
    view = _open(page, f"{os_server.url}/traces/{tid}/timeline?mode=m")
    marks = page.evaluate("""() => window.gmpscopeTimeline.current.drawnTiles
        .reduce((n, t) => n + t.marks.length, 0)""")
    assert marks > 100
    # Zoom until a mark stands alone, then hover it.
    first = int(view["firstTs"])
    mark = page.evaluate("""(first) => { const v = window.gmpscopeTimeline.current;
        for (const t of v.drawnTiles) for (const mk of t.marks)
            if (mk.count === 1 && v.rowY[mk.lane] !== undefined && mk.ts > first + 1e6)
                return mk;
        return null; }""", first)
    assert mark is not None
    page.evaluate("([a, b]) => window.gmpscopeTimeline.goto(a, b)",
                  [str(mark["ts"] - 20_000), str(mark["ts"] + 20_000)])
    view = _settle(page)
    assert int(view["t1"]) == mark["ts"] - 20_000 >= first
    box = _canvas_box(page)
    y = page.evaluate(f"() => window.gmpscopeTimeline.current.layerHelpers()"
                      f".laneY('m{mark['m']}')")
    page.mouse.move(box["x"] + view["plotLeft"] + view["plotWidth"] / 2,
                    box["y"] + y + view["laneHeight"] - 4)
    tip = page.locator(".timeline-tooltip")
    tip.wait_for(state="visible")
    assert tip.inner_text().startswith(f"OS · M{mark['m']}: ")
    shot(page, "timeline-m-os-mark")
    page.locator("[data-mode=p]").click()
    view = _settle(page)
    assert view["mode"] == "p"
    assert page.evaluate("""() => window.gmpscopeTimeline.current.drawnTiles
        .reduce((n, t) => n + t.marks.length, 0)""") == 0
