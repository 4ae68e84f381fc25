"""The live page in Chromium against a real demo service, collector and server:
it fills without reloading, shows an event in the service, pauses and resumes, and
the sessions list links to it."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.support.browser import shot
from tests.support.demo import Demo, demo_binaries, start_collector
from tests.support.server import Served

GUARD_MS = 120_000
#: The chart's "waiting peak" series reached n for a window at or after `since` (ms).
SHOWN_JS = """(arg) => {
    const gd = document.querySelector('#live-series .js-plotly-plot');
    if (!gd || !gd.data) { return false; }
    return gd.data.some(tr => tr.name === 'waiting peak' && tr.x.some(
        (x, i) => x >= arg.since && tr.y[i] !== null && tr.y[i] >= arg.n));
}"""


def _segments(srv: Served, name: str) -> int:
    return int(srv.get(f"/api/live/sessions/{name}").json()["segments"])


@pytest.mark.slow
def test_live_page_updates_pauses_and_resumes(page: Page, tmp_path: Path) -> None:
    bindir = demo_binaries()
    demo = Demo(bindir)
    log = tmp_path / "collector.log"
    try:
        with Served(tmp_path / "data") as srv:
            col = start_collector(demo.url, srv.url, "browser", log)
            try:
                # The page of a session the collector has not created yet is an
                # error page (a loaded CI machine starts the collector slowly).
                deadline = time.monotonic() + GUARD_MS / 1000
                while srv.get("/api/live/sessions/browser").status_code != 200:
                    assert time.monotonic() < deadline, log.read_text()[-2000:]
                    time.sleep(0.2)
                page.goto(f"{srv.url}/live/browser")
                page.wait_for_selector("#live-stat-waiting-peak", timeout=GUARD_MS)
                url_before = page.url
                since = time.time() * 1000 - 1600
                with urllib.request.urlopen(f"{demo.url}/burst?n=2500&ms=300", timeout=30):
                    pass
                page.wait_for_function(SHOWN_JS, arg={"n": 2500, "since": since},
                                       timeout=GUARD_MS)
                assert page.url == url_before  # refreshed in place, no reload
                shot(page, "live-session")

                page.click("#live-pause")
                page.wait_for_selector("#live-action-msg:has-text('session paused')")
                deadline = time.monotonic() + GUARD_MS / 1000
                while "paused on the server" not in log.read_text():
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
                stored = _segments(srv, "browser")
                time.sleep(3.0)  # the collector no longer pulls: nothing new is stored
                assert _segments(srv, "browser") == stored
                page.click("#live-resume")
                page.wait_for_selector("#live-action-msg:has-text('session running')")
                while _segments(srv, "browser") <= stored:
                    assert time.monotonic() < deadline + GUARD_MS / 1000
                    time.sleep(0.2)
                assert "resumed: pulling again" in log.read_text()

                page.goto(f"{srv.url}/live")
                page.wait_for_selector("#live-list-table a[href='/live/browser']",
                                       timeout=GUARD_MS)
                page.wait_for_selector("#live-list-graph .js-plotly-plot", timeout=GUARD_MS)
                shot(page, "live-sessions")

                # The library lists uploads, not the session's windows, and says so.
                page.goto(f"{srv.url}/")
                note = page.wait_for_selector("#library-live-note", timeout=GUARD_MS)
                assert "windows of live sessions are not listed" in note.inner_text()
                assert page.locator("#library-table a[href='/live']").count() == 1
                shot(page, "library-live-note")
                page.click(".app-header a.header-link:has-text('Live')")
                page.wait_for_selector("#live-list-table a[href='/live/browser']",
                                       timeout=GUARD_MS)
            finally:
                page.goto("about:blank")  # stop the 1 s polling before the server goes
                col.terminate()
                col.wait(60)
    finally:
        demo.stop()


@pytest.mark.slow
def test_page_opened_before_the_collector_shows_the_session(page: Page, tmp_path: Path) -> None:
    """The usual order: open /live/NAME, then start `gmpscope live`: the page says how
    to start it and shows the session once the collector has created it."""
    bindir = demo_binaries()
    demo = Demo(bindir)
    log = tmp_path / "collector.log"
    try:
        with Served(tmp_path / "data") as srv:
            page.goto(f"{srv.url}/live/later")
            page.wait_for_selector("text=No live session named 'later' yet")
            assert "gmpscope live --target URL --session later" in page.inner_text("body")
            col = start_collector(demo.url, srv.url, "later", log)
            try:
                page.wait_for_selector("#live-stat-waiting-peak", timeout=GUARD_MS)
                assert page.url.endswith("/live/later")
                shot(page, "live-session-after-wait")
            finally:
                page.goto("about:blank")  # stop the 1 s polling before the server goes
                col.terminate()
                col.wait(timeout=60)
    finally:
        demo.stop()
