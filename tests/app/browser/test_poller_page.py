"""The OS poller page in a real browser: the httpnet run's recording attached to its
Go trace (alignment shown, every figure drawn, an epoll wait's hover tells the asked
timeout and the events returned), and a recording without a Go trace (its poller
page works, Go pages say why they cannot). The OS marks on the timeline's M lanes are
tested with the timeline (tests/app/browser/test_timeline.py).
Screenshots go to the artifacts directory."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.poller_recordings import GO_TRACE, make_recording
from tests.support.server import Served

#: The centre of the widest actual-wait bar (the second bar trace) of the epoll lanes.
WIDEST_WAIT_JS = """() => {
    const traces = document.querySelectorAll('#poller-epoll .trace.bars');
    let best = null;
    for (const p of traces[traces.length - 1].querySelectorAll('path')) {
        const r = p.getBoundingClientRect();
        if (!best || r.width > best.width) best = r;
    }
    return {x: best.x + best.width / 2, y: best.y + best.height / 2};
}"""


def _zip(directory: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(directory.iterdir()):
            zf.write(p, p.name)
    return buf.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, int, int]]:
    root = tmp_path_factory.mktemp("poller-browser")
    with Served(root / "data", [GO_TRACE]) as s:
        (go_id,) = s.ingested
        r = s.post(f"/api/traces/{go_id}/poller",
                   data=_zip(make_recording("httpnet", root / "httpnet")))
        assert r.status_code == 201, r.text
        alone = s.post("/api/recordings", data=_zip(make_recording("connleak", root / "cl")))
        assert alone.status_code == 201, alone.text
        yield s, go_id, int(alone.json()["id"])


def test_poller_page_of_a_joined_run(page: Page, server: tuple[Served, int, int]) -> None:
    s, go_id, _ = server
    page.goto(f"{s.url}/traces/{go_id}/poller")
    wait_for_dash(page, "#poller-epoll")
    assert "clock-snapshot" in page.inner_text("#poller-alignment-method")
    facts = page.inner_text("#poller-alignment-facts")
    assert "345 of 493 Go syscalls" in facts and "residual" in facts
    assert page.locator(".error-box").count() == 0
    assert page.locator(".js-plotly-plot").count() >= 9
    shot(page, "poller-joined")
    # Hover an epoll wait: the asked timeout, the actual wait and the events returned.
    assert page.locator("#poller-epoll .bars path").count() > 10
    page.locator("#poller-epoll").scroll_into_view_if_needed()
    box = page.evaluate(WIDEST_WAIT_JS)
    page.mouse.move(box["x"], box["y"])
    page.wait_for_selector("#poller-epoll .hoverlayer .hovertext", timeout=10_000)
    hover = page.locator("#poller-epoll .hoverlayer .hovertext").first.text_content() or ""
    assert "epfd" in hover and "timeout" in hover and "waited" in hover
    assert "events returned" in hover or "E" in hover
    shot(page, "poller-epoll-hover", full_page=False)
    handoffs = page.inner_text("#poller-os-handoffs")
    assert "lost their P" in handoffs


def test_recording_without_go_trace(page: Page, server: tuple[Served, int, int]) -> None:
    s, _, sid = server
    page.goto(f"{s.url}/traces/{sid}/poller")
    wait_for_dash(page, "#poller-fds")
    assert "wall-clock" in page.inner_text("#poller-alignment-method")
    assert "Not joined" in page.inner_text("#poller-os")
    shot(page, "poller-standalone")
    page.goto(f"{s.url}/traces/{sid}/overview")
    wait_for_dash(page, ".error-box")
    assert "OS recording without a Go trace" in page.inner_text(".error-box")
    shot(page, "poller-standalone-overview", full_page=False)
