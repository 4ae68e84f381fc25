"""The timeline's causality panels in Chromium on the chain workload's trace
(collectors/workloads/cmd/chain: consumer <- feeder <- holder): click the
consumer's wait and see who woke it (Go's own unblock, through the API),
follow the arrow with F, search with Enter / Shift+Enter, Shift+drag an area
and compare its statistics with the API's, and draw the critical path with C.
Screenshots: timeline-causality-*.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.causality import go_unblocks
from tests.support.server import Served
from tests.support.workload_traces import workload_trace

GO = "1.27"

#: A layer that keeps the canvas's helpers (x of a time, y of a lane) for the test.
KEEP_HELPERS = """() => new Promise(res => {
    const tl = window.gmpscopeTimeline;
    tl.addLayer((ctx, h) => { window.__h = h; });
    const v = tl.getView();
    tl.goto(v.t1, v.t2);
    const wait = () => window.__h ? res(true) : setTimeout(wait, 50);
    wait();
})"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("causality-ui"), [workload_trace(GO, "chain")]) as s:
        yield s


def _groups(srv: Served, tid: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for fn in ("main.consumer", "main.feeder", "main.holder"):
        d = srv.get(f"/api/traces/{tid}/search?q={fn}&limit=1000").json()
        out[fn] = [g for g in d["goroutine_ids"]
                   if any(s["goroutine"] == g and s["matched_by"] == "start_function"
                          for s in d["spans"])]
    return out


def _point(page: Page, goroutine: int, ts: int) -> tuple[float, float]:
    """Page coordinates of goroutine's lane at trace time ts."""
    page.evaluate(KEEP_HELPERS)
    x, y, h = page.evaluate("""([g, ts]) => { const h = window.__h;
        return [h.x(String(ts)), h.laneY('g' + g), h.laneHeight]; }""", [goroutine, ts])
    assert y is not None, f"lane of G{goroutine} is drawn"
    box = page.locator("#timeline-canvas").bounding_box()
    assert box is not None
    return box["x"] + x, box["y"] + y + h / 2


def _state(page: Page) -> Any:
    return page.evaluate("() => window.gmpscopeCausality.state()")


def _open(page: Page, srv: Served, tid: int) -> None:
    page.goto(f"{srv.url}/traces/{tid}/timeline?mode=g")
    wait_for_dash(page, "#timeline-causality")
    page.wait_for_function("() => window.gmpscopeTimeline.getView() !== null")


def test_flows_follow_search_area_and_critical_path(page: Page, served: Served) -> None:
    tid = served.ingested[0]
    groups = _groups(served, tid)
    consumer, feeder, holder = (groups[f][0] for f in ("main.consumer", "main.feeder",
                                                       "main.holder"))
    # Go's own unblocks: who woke the consumer and the feeder.
    go = {(g, w) for _, g, w, _ in go_unblocks(Path(workload_trace(GO, "chain")))}
    assert (consumer, feeder) in go and (feeder, holder) in go
    _open(page, served, tid)
    wait = served.get(f"/api/traces/{tid}/search?q={consumer}&state=Waiting").json()["spans"][0]

    # Select the consumer's wait: woken by the feeder, an arrow from it.
    x, y = _point(page, consumer, (wait["start_ts"] + wait["end_ts"]) // 2)
    page.mouse.click(x, y)
    page.wait_for_selector("#causality-woken-by")
    assert page.inner_text("#causality-woken-by").startswith(f"Woken by G{feeder} ")
    assert "main.feeder" in page.inner_text("#causality-flows pre.stack")
    arrows = _state(page)["layers"]["flows"][1]
    assert arrows[0]["fromGoroutine"] == feeder and arrows[0]["toGoroutine"] == consumer
    page.wait_for_timeout(200)
    shot(page, "timeline-causality-flows")

    # F follows the arrow: the feeder's span, woken by the holder.
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("f")
    page.wait_for_function(f"""() => document.querySelector('#causality-flows .causality-head')
        .innerText.startsWith('G{feeder} ')""")
    assert page.inner_text("#causality-woken-by").startswith(f"Woken by G{holder} ")
    assert f"G{consumer}" in page.inner_text("#causality-woke")
    # The canvas's own selection and details panel moved to the feeder's span too.
    waker_ref = _state(page)["sel"]["ref"]
    page.wait_for_function(f"""() => {{ const s = window.gmpscopeTimeline.current.selected;
        return !!s && s.ref === {waker_ref} && s.g === {feeder}; }}""")
    page.wait_for_function(f"""() => document.querySelector('#timeline-details')
        .innerText.includes('G{feeder}')""")
    shot(page, "timeline-causality-followed")

    # Search: Enter steps forward, Shift+Enter back; the count is the API's.
    total = served.get(f"/api/traces/{tid}/search?q=main.holder").json()["total"]
    box = page.locator("#causality-search-input")
    box.fill("main.holder")
    box.press("Enter")
    page.wait_for_function("""() => document.querySelector('#causality-search-status')
        .innerText.startsWith('match 1 of')""")
    assert f"match 1 of {total} " in page.inner_text("#causality-search-status")
    first = page.inner_text("#causality-search-status")
    box.press("Enter")
    page.wait_for_function("""() => document.querySelector('#causality-search-status')
        .innerText.startsWith('match 2 of')""")
    assert page.inner_text("#causality-search-status") != first
    box.press("Shift+Enter")
    page.wait_for_function("""() => document.querySelector('#causality-search-status')
        .innerText.startsWith('match 1 of')""")
    assert page.inner_text("#causality-search-status") == first
    assert len(_state(page)["layers"]["search"][0]) == total  # every match outlined (one page)
    shot(page, "timeline-causality-search")

    # Area: Shift+drag over the three goroutines' lanes; statistics as the API's.
    _open(page, served, tid)
    areas: list[Any] = []
    page.expose_function("__area", lambda d: areas.append(d))
    page.evaluate("() => window.gmpscopeTimeline.on('select-area', d => window.__area(d))")
    x1, y1 = _point(page, consumer, wait["start_ts"])
    x2, y2 = _point(page, holder, wait["end_ts"])
    page.keyboard.down("Shift")
    page.mouse.move(x1, y1 - 4)
    page.mouse.down()
    page.mouse.move((x1 + x2) / 2, (y1 + y2) / 2, steps=5)
    page.mouse.move(x2, y2 + 4, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#causality-area-states")
    assert areas, "the canvas announced the area"
    d = areas[0]
    want = served.get(f"/api/traces/{tid}/area",
                      params={"t1": d["t1"], "t2": d["t2"], "lane": d["lanes"]}).json()
    assert {f"g{g}" for g in (consumer, feeder, holder)} <= set(d["lanes"])
    head = page.inner_text("#causality-area-head")
    assert f"{want['goroutine_count']} goroutines" in head
    rows = page.locator("#causality-area-states tr").all_inner_texts()[1:]
    assert [r.split("\t")[0] for r in rows] == [s["state"] for s in want["states"]]
    links = page.locator("#causality-area-links a")
    assert links.count() >= 4
    assert links.first.get_attribute("href") == want["links"]["latency"]
    shot(page, "timeline-causality-area")
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("Escape")  # clears the area

    # Critical path of the consumer (C): consumer <- feeder <- holder, drawn.
    x, y = _point(page, consumer, (wait["start_ts"] + wait["end_ts"]) // 2)
    page.mouse.click(x, y)
    page.wait_for_selector("#causality-woken-by")
    page.locator("#timeline-canvas").focus()
    page.keyboard.press("c")
    page.wait_for_selector("#causality-path-head")
    assert page.inner_text("#causality-path-head").endswith(
        f"chain G{consumer} ← G{feeder} ← G{holder}")
    path = served.get(f"/api/traces/{tid}/critical-path?g={consumer}").json()
    outlines, arrows = _state(page)["layers"]["path"]
    assert len(outlines) == len(path["links"])
    assert [(a["fromGoroutine"], a["toGoroutine"]) for a in arrows] == \
        [(holder, feeder), (feeder, consumer)]
    # A task's path: its id and Enter (the consumer's task, ended by the consumer).
    task = next(t for t in range(1, 10)
                if served.get(f"/api/traces/{tid}/critical-path?task={t}").json()
                .get("goroutine") == consumer)
    page.locator("#causality-task-input").fill(str(task))
    page.locator("#causality-task-input").press("Enter")
    page.wait_for_function(f"""() => (document.querySelector('#causality-path-head')
        ?.innerText || '').startsWith('Task {task} (request)')""")
    assert page.inner_text("#causality-path-head").endswith(
        f"chain G{consumer} ← G{feeder} ← G{holder}")
    page.get_by_role("button", name="Show the whole path").click()
    page.wait_for_function(f"""() => {{ const v = window.gmpscopeTimeline.getView();
        return Number(v.t1) < {path["t1"]} && Number(v.t2) >= {path["t2"]}
            && Number(v.t2) - Number(v.t1) < 1.2 * {path["t2"] - path["t1"]}; }}""")
    page.wait_for_timeout(300)
    shot(page, "timeline-causality-path")
