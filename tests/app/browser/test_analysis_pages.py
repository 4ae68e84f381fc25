"""The analysis pages in a real browser, on real samples: the key numbers of
the JSON API are on screen, links lead where they should, stacks expand.
Screenshots go to the artifacts directory (tests/artifacts/)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from app.components import fmt_count, fmt_ns
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served


def _open(page: Page, url: str, ready: str, name: str) -> None:
    page.goto(url)
    wait_for_dash(page, ready)
    assert page.locator(".error-box").count() == 0
    shot(page, f"analysis-{name}")


def _api(served: Served, path: str, **params: Any) -> Any:
    r = served.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_goroutines_page(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-mutex.trace"]
    doc = _api(samples_server, f"/api/traces/{tid}/goroutine-groups")
    _open(page, f"{samples_server.url}/traces/{tid}/goroutines", "#goroutines-groups-table",
          "goroutines-mutex")
    stats = page.locator("#goroutines-stats").inner_text()
    assert fmt_count(doc["goroutines"]) in stats
    sync = sum(g["times"]["sync"] for g in doc["groups"])
    assert fmt_ns(sync) in stats
    assert page.locator("#goroutines-graph .main-svg").count() > 0
    rows = page.locator("#goroutines-groups-table tbody tr")
    assert rows.count() == len(doc["groups"])
    # Into the biggest group, then one of its goroutines.
    top = doc["groups"][0]
    page.locator("#goroutines-groups-table tbody tr").first.locator("a").click()
    wait_for_dash(page, "#goroutines-members-table")
    assert top["name"] in page.locator("#goroutines-group-title").inner_text()
    assert page.locator("#goroutines-members-table tbody tr:has(td)").count() == top["count"]
    shot(page, "analysis-goroutines-group")
    link = page.locator("#goroutines-members-table tbody tr:has(td)").first.locator("a").first
    goid = link.inner_text()
    link.click()
    wait_for_dash(page, "#goroutine-title")
    assert page.locator("#goroutine-title").inner_text() == f"Goroutine {goid}"


def test_goroutine_page(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-syscallblock.trace"]
    rows = _api(samples_server, f"/api/traces/{tid}/goroutine-groups")
    group = next(g for g in rows["groups"] if g["times"]["syscall"] > 0 and g["count"] > 1)
    members = _api(samples_server, f"/api/traces/{tid}/goroutine-groups",
                   group=group["name"])["members"]
    goid = max(members, key=lambda m: m["times"]["syscall"])["goid"]
    d = _api(samples_server, f"/api/traces/{tid}/goroutines/{goid}", limit=100)
    _open(page, f"{samples_server.url}/traces/{tid}/goroutines/{goid}", "#goroutine-transitions",
          f"goroutine-{goid}")
    stats = page.locator("#goroutine-stats").inner_text()
    assert fmt_ns(d["lifetime_ns"]) in stats and fmt_ns(d["times"]["syscall"]) in stats
    assert page.locator("#goroutine-gantt .main-svg").count() > 0
    assert d["start_function"] in page.locator("#goroutine-facts").inner_text()
    assert page.locator("#goroutine-start-stack").inner_text().startswith(d["start_function"])
    table = page.locator("#goroutine-transitions tbody tr:has(td)")
    assert table.count() == len(d["transitions"])
    # A syscall row names its stack; the stack, listed once under the table,
    # expands on click and shows the frames as text.
    k = next(i for i, r in enumerate(d["transitions"]) if r["state"] == "Syscall")
    sid = d["transitions"][k]["stack_id"]
    frames = d["stacks"][str(sid)]
    assert f"{sid}: {frames[0]['function']}" in table.nth(k).inner_text()
    details = page.locator(f"#goroutine-stack-{sid}")
    details.locator("summary").click()
    assert frames[0]["function"] in details.locator("pre").inner_text()
    # Each row's start links to the timeline around that transition.
    start = table.nth(k).locator("a")
    assert f"t1={d['transitions'][k]['start_ts']}" in (start.get_attribute("href") or "")
    shot(page, f"analysis-goroutine-{goid}-stack")
    href = page.get_by_text("Show in the timeline").get_attribute("href") or ""
    assert f"mode=g&t1={d['first_ts']}" in href and f"g={goid}" in href


def test_syscalls_page(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-syscallblock.trace"]
    sc = _api(samples_server, f"/api/traces/{tid}/syscalls/summary")
    _open(page, f"{samples_server.url}/traces/{tid}/syscalls", "#syscalls-longest",
          "syscalls-syscallblock")
    stats = page.locator("#syscalls-stats").inner_text()
    assert fmt_count(sc["count"]) in stats and fmt_count(sc["p_lost"]) in stats
    assert fmt_ns(sc["handoff"]["max_ns"]) in stats
    for gid in ("#syscalls-hist", "#syscalls-handoff", "#syscalls-handoff-hist"):
        assert page.locator(f"{gid} .main-svg").count() > 0, gid
    first = page.locator("#syscalls-stacks-by-total tbody tr:has(td)").first
    top = sc["stacks"]["by_total"][0]
    assert top["frames"][0]["function"] in first.inner_text()
    # Its frames, listed under the tables, expand on click.
    frames = page.locator(f"#syscalls-stacks-stack-{top['stack_id']}")
    frames.locator("summary").click()
    assert top["frames"][-1]["function"] in frames.locator("pre").inner_text()
    longest = page.locator("#syscalls-longest tbody tr:has(td)").first
    assert fmt_ns(sc["longest"][0]["duration_ns"]) in longest.inner_text()
    assert "mode=m" in (longest.get_by_text("timeline").get_attribute("href") or "")


def test_netpoll_connleak(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-connleak.trace"]
    net = _api(samples_server, f"/api/traces/{tid}/netpoll")
    _open(page, f"{samples_server.url}/traces/{tid}/syscalls", "#syscalls-parked",
          "syscalls-connleak")
    stats = page.locator("#syscalls-stats").inner_text()
    assert fmt_count(net["parked_at_end"]) in stats and fmt_count(net["count"]) in stats
    assert page.locator("#syscalls-netpoll-hist .main-svg").count() > 0
    assert page.locator("#syscalls-parked .main-svg").count() > 0


def test_latency_page(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet.trace"]
    lat = _api(samples_server, f"/api/traces/{tid}/latency")
    _open(page, f"{samples_server.url}/traces/{tid}/latency", "#latency-worst", "latency-httpnet")
    stats = page.locator("#latency-stats").inner_text()
    s = lat["summary"]
    assert fmt_count(lat["samples"]) in stats
    for k in ("p50_ns", "p90_ns", "p99_ns", "max_ns"):
        assert fmt_ns(s[k]) in stats, k
    for gid in ("#latency-hist", "#latency-per-p", "#latency-over-time"):
        assert page.locator(f"{gid} .main-svg").count() > 0, gid
    worst = page.locator("#latency-worst tbody tr:has(td)").first
    w = lat["worst"][0]
    assert fmt_ns(w["latency_ns"]) in worst.inner_text()
    href = worst.get_by_text("timeline").get_attribute("href") or ""
    assert "mode=p" in href and f"g={w['goid']}" in href
    t1 = int(href.split("t1=")[1].split("&")[0])
    t2 = int(href.split("t2=")[1].split("&")[0])
    assert t1 <= w["runnable_ts"] and w["running_ts"] <= t2


def test_bad_parameters_show_an_error(page: Page, samples_server: Served,
                                      sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-mutex.trace"]
    page.goto(f"{samples_server.url}/traces/{tid}/latency?t1=abc")
    wait_for_dash(page, ".error-box")
    assert "t1 must be an integer" in page.locator(".error-box").inner_text()
    page.goto(f"{samples_server.url}/traces/{tid}/goroutines?group=nope")
    wait_for_dash(page, ".error-box")
    assert "nope" in page.locator(".error-box").inner_text()
    page.goto(f"{samples_server.url}/traces/{tid}/goroutines/987654")
    wait_for_dash(page, ".error-box")


def test_windows_and_sorting(page: Page, samples_server: Served,
                             sample_ids: dict[str, int]) -> None:
    """?t1=&t2= narrows the latency page (same count as the API); a group's
    goroutines sort by a category."""
    tid = sample_ids["go1.27-httpnet.trace"]
    trace = _api(samples_server, f"/api/traces/{tid}")
    mid = (trace["first_ts"] + trace["last_ts"]) // 2
    lat = _api(samples_server, f"/api/traces/{tid}/latency", t1=mid)
    _open(page, f"{samples_server.url}/traces/{tid}/latency?t1={mid}", "#latency-window",
          "latency-window")
    assert fmt_count(lat["samples"]) in page.locator("#latency-stats").inner_text()
    tid = sample_ids["go1.27-mutex.trace"]
    doc = _api(samples_server, f"/api/traces/{tid}/goroutine-groups")
    name = doc["groups"][0]["name"]
    by = _api(samples_server, f"/api/traces/{tid}/goroutine-groups", group=name, sort="sync")
    page.goto(f"{samples_server.url}/traces/{tid}/goroutines?group={name}")
    wait_for_dash(page, "#goroutines-sort")
    page.locator("#goroutines-sort").get_by_text("Sync block").click()
    wait_for_dash(page, "#goroutines-sort b")
    assert page.locator("#goroutines-sort b").inner_text() == "Sync block"
    first = page.locator("#goroutines-members-table tbody tr:has(td)").first.locator("a").first
    assert first.inner_text() == str(by["members"][0]["goid"])
