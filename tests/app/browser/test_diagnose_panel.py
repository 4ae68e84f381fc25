"""The overview page's Findings panel shows exactly the API's findings: rule,
severity, summary, timeline link, evidence links and stacks as text."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page

from ingest.diagnose import RULES
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

#: Samples with findings (several rules, severities) and one without.
WITH_FINDINGS = ("go1.27-syscallblock.trace", "go1.27-connleak.trace")
QUIET = "go1.27-timers.trace"


def _open(page: Page, served: Served, tid: int) -> None:
    page.goto(f"{served.url}/traces/{tid}/overview")
    wait_for_dash(page, "#findings-body .findings-count")


def _api(served: Served, tid: int) -> dict[str, Any]:
    r = served.get(f"/api/traces/{tid}/findings")
    assert r.status_code == 200
    report: dict[str, Any] = r.json()
    return report


@pytest.mark.parametrize("sample", WITH_FINDINGS)
def test_panel_matches_api(page: Page, samples_server: Served, sample_ids: dict[str, int],
                           sample: str) -> None:
    tid = sample_ids[sample]
    report = _api(samples_server, tid)
    assert report["findings"]
    _open(page, samples_server, tid)
    shot(page, f"findings-{sample}")
    cards = page.locator("#findings-body .finding")
    assert cards.count() == len(report["findings"])
    for i, f in enumerate(report["findings"]):
        card = page.locator(f"#finding-{i}")
        assert card.get_attribute("data-rule") == f["rule"]
        assert card.get_attribute("data-severity") == f["severity"]
        assert card.locator(".badge").inner_text().lower() == f["severity"]
        assert card.locator(".finding-summary").inner_text() == f["summary"]
        assert card.locator(".finding-link").get_attribute("href") == f["link"]
        card.locator("summary").click()  # open the evidence
        ranges = card.locator(".finding-range")
        assert [ranges.nth(k).get_attribute("href") for k in range(ranges.count())] == \
            [r["link"] for r in f["ranges"]]
        assert [ranges.nth(k).inner_text() for k in range(ranges.count())] == \
            [r["label"] for r in f["ranges"]]
        gs = card.locator(".finding-goroutine")
        assert [gs.nth(k).get_attribute("href") for k in range(gs.count())] == \
            [g["link"] for g in f["goroutines"]]
        stacks = card.locator("pre.stack")
        assert stacks.count() == len(f["stacks"])
        for k, s in enumerate(f["stacks"]):
            text = stacks.nth(k).inner_text()
            for fr in s["frames"][:12]:
                assert fr["function"] in text and f"{fr['file']}:{fr['line']}" in text
        if f["threads"]:
            assert card.locator(".finding-threads").inner_text() == \
                ", ".join(f"M{m}" for m in f["threads"])
    shot(page, f"findings-{sample}-open")


def test_open_in_timeline(page: Page, samples_server: Served,
                          sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-syscallblock.trace"]
    first = _api(samples_server, tid)["findings"][0]
    _open(page, samples_server, tid)
    page.locator("#finding-0 .finding-link").click()
    page.wait_for_url(f"**{first['link']}")
    wait_for_dash(page, "#page-content > *")
    assert page.url == samples_server.url + first["link"]


def test_quiet_trace_says_so(page: Page, samples_server: Served,
                             sample_ids: dict[str, int]) -> None:
    tid = sample_ids[QUIET]
    assert _api(samples_server, tid)["findings"] == []
    _open(page, samples_server, tid)
    assert page.locator("#findings-body .finding").count() == 0
    assert page.locator(".findings-none").inner_text() == "No problems found by the rules."
    assert f"0 findings from {len(RULES)} rules" in page.locator(".findings-count").inner_text()
