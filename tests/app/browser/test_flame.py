"""The flame page in a real browser, on real samples: its numbers are the
JSON API's, one bar per node of the tree, a click on a frame zooms to it and
lists the goroutines behind it (as the API lists them), the kind tabs and the
window controls lead to the right profile, the analysis pages link to it and
to the pprof files. Screenshots go to the artifacts directory."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page

from app.components import fmt_count, fmt_ns
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served


def _api(served: Served, path: str, **params: Any) -> Any:
    r = served.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_flame_click_lists_goroutines(page: Page, samples_server: Served,
                                      sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-mutex.trace"]
    tree = _api(samples_server, f"/api/traces/{tid}/flame", kind="sync")
    nodes = tree["nodes"]
    page.goto(f"{samples_server.url}/traces/{tid}/flame?kind=sync")
    wait_for_dash(page, "#flame-graph .main-svg")
    assert page.locator(".error-box").count() == 0
    stats = page.locator("#flame-stats").inner_text()
    assert fmt_ns(tree["total_ns"]) in stats and fmt_count(tree["count"]) in stats
    bars = page.locator("#flame-graph g.point")
    assert bars.count() == len(nodes["id"])
    shot(page, "flame-mutex-sync")
    # The heaviest frame above the root: its bar is the node's (bars in node order).
    node = max(range(1, len(nodes["id"])), key=lambda n: nodes["value"][n])
    expect = _api(samples_server, f"/api/traces/{tid}/flame/goroutines", kind="sync", node=node)
    box = bars.nth(node).bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    wait_for_dash(page, "#flame-goroutines-table")
    assert nodes["name"][node] in page.locator("#flame-goroutines-title").inner_text()
    rows = page.locator("#flame-goroutines-table tbody tr:has(td)")
    assert rows.count() == len(expect["goroutines"])
    first = rows.first.inner_text()
    top = expect["goroutines"][0]
    assert str(top["goid"]) in first and fmt_ns(top["value_ns"]) in first
    # Zoomed to the frame: the x axis spans exactly its bar.
    shown = page.evaluate("() => document.querySelector('#flame-graph .js-plotly-plot')"
                          "._fullLayout.xaxis.range")
    assert abs((shown[1] - shown[0]) - nodes["value"][node]) <= 1e-6 * nodes["value"][node]
    shot(page, "flame-mutex-sync-clicked")
    # Its goroutine link opens that goroutine.
    rows.first.locator("a").first.click()
    wait_for_dash(page, "#goroutine-title")
    assert page.locator("#goroutine-title").inner_text() == f"Goroutine {top['goid']}"


def test_flame_kinds_and_window(page: Page, samples_server: Served,
                                sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet.trace"]
    info = _api(samples_server, f"/api/traces/{tid}")
    page.goto(f"{samples_server.url}/traces/{tid}/flame")
    wait_for_dash(page, "#flame-graph .main-svg")
    page.locator("#flame-kind-net").click()
    wait_for_dash(page, "#flame-kind-net.active")
    assert parse_qs(urlparse(page.url).query)["kind"] == ["net"]
    net = _api(samples_server, f"/api/traces/{tid}/flame", kind="net")
    assert fmt_ns(net["total_ns"]) in page.locator("#flame-stats").inner_text()
    pprof = page.locator("#flame-pprof")
    assert pprof.get_attribute("href") == f"/api/traces/{tid}/pprof?type=net"
    # A window typed in ms from the trace's start.
    page.locator("#flame-from").fill("10")
    page.locator("#flame-to").fill("40")
    page.locator("#flame-to").press("Tab")
    page.wait_for_function("() => document.querySelector('#flame-apply')"
                           ".getAttribute('href').includes('t1=')")
    page.locator("#flame-apply").click()
    wait_for_dash(page, "#flame-window")
    q = parse_qs(urlparse(page.url).query)
    t1, t2 = int(q["t1"][0]), int(q["t2"][0])
    assert (t1 - info["first_ts"], t2 - info["first_ts"]) == (10_000_000, 40_000_000)
    part = _api(samples_server, f"/api/traces/{tid}/flame", kind="net", t1=t1, t2=t2)
    assert 0 < part["total_ns"] < net["total_ns"]
    assert fmt_ns(part["total_ns"]) in page.locator("#flame-stats").inner_text()
    assert f"t1={t1}" in (page.locator("#flame-pprof").get_attribute("href") or "")
    shot(page, "flame-httpnet-net-window")


def test_analysis_pages_link_profiles(page: Page, samples_server: Served,
                                      sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet.trace"]
    for path, kind in (("syscalls", "syscall"), ("latency", "sched"), ("goroutines", "lock")):
        page.goto(f"{samples_server.url}/traces/{tid}/{path}")
        wait_for_dash(page, f"#{path}-profiles")
        href = page.locator(f"#{path}-pprof-{kind}").get_attribute("href")
        assert href == f"/api/traces/{tid}/pprof?type={kind}"
        r = samples_server.get(href)
        assert r.status_code == 200 and r.content[:2] == b"\x1f\x8b"
    page.locator("#goroutines-flame-chan").click()
    wait_for_dash(page, "#flame-kind-chan.active")
    assert "Channels & select" in page.locator("#flame-kinds .active").inner_text()


def test_timeline_window_to_flame(page: Page, samples_server: Served,
                                  sample_ids: dict[str, int]) -> None:
    """The timeline's current window, after a zoom, opens as the flame page's window."""
    tid = sample_ids["go1.27-httpnet.trace"]
    info = _api(samples_server, f"/api/traces/{tid}")
    page.goto(f"{samples_server.url}/traces/{tid}/timeline?mode=p")
    wait_for_dash(page, "#timeline-canvas")
    page.wait_for_function("() => window.gmpscopeTimeline.getView() !== null")
    whole = page.locator("#timeline-flame").get_attribute("href") or ""
    span = info["last_ts"] - info["first_ts"]
    page.evaluate("([a, b]) => window.gmpscopeTimeline.goto(a, b)",
                  [str(info["first_ts"] + span * 3 // 10), str(info["first_ts"] + span * 6 // 10)])
    page.wait_for_function("(old) => document.querySelector('#timeline-flame')"
                           ".getAttribute('href') !== old", arg=whole)
    wait_for_dash(page)
    q = parse_qs(urlparse(page.locator("#timeline-flame").get_attribute("href") or "").query)
    t1, t2 = int(q["t1"][0]), int(q["t2"][0])
    assert info["first_ts"] < t1 < t2 < info["last_ts"]
    page.locator("#timeline-flame").click()
    wait_for_dash(page, "#flame-window")
    part = _api(samples_server, f"/api/traces/{tid}/flame", kind="sync", t1=t1, t2=t2)
    assert fmt_count(part["count"]) in page.locator("#flame-stats").inner_text()
