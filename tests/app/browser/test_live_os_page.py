"""The live page of a session recorded with ``gmpscope live --os``, in Chromium:
the OS side's cards and panels appear, with the numbers the API serves; a session
without the OS side has no OS panels."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page

from app.figures.live import OS_PANELS, PANELS, series_spec
from tests.support.browser import shot
from tests.support.demo import Demo, LoadGen, demo_binaries, start_collector
from tests.support.server import Served

GUARD_MS = 120_000
#: The epoll panel's series as drawn: (x, y) of the non-null points.
EPOLL_JS = """() => {
    const gd = document.querySelector('#live-series .js-plotly-plot');
    const tr = gd && gd.data && gd.data.find(t => t.name === 'epoll waits/s');
    return tr ? tr.x.map((x, i) => [x, tr.y[i]]).filter(p => p[1] !== null) : null;
}"""


def _titles(spec: dict[str, object]) -> list[str]:
    layout = spec["layout"]
    assert isinstance(layout, dict)
    return [a["text"] for a in layout["annotations"]]


def test_no_os_panels_without_the_os_side() -> None:
    from ingest.store.live_models import live_seconds

    row = {**{c.name: 0 for c in live_seconds.columns}, "t_ns": 10**18, "duration_ns": 10**9,
           "os_epoll_waits": None}
    assert _titles(series_spec({"s": [row]})) == [t for t, _ in PANELS]
    with_os = {**row, "os_epoll_waits": 5, "os_epoll_ready": 2, "os_running_ns": 1,
               "os_offcpu_waiting_ns": 0, "os_offcpu_asleep_ns": 0, "os_threads_oncpu_ns": 1,
               "os_threads_waiting_ns": 0}
    assert _titles(series_spec({"s": [with_os]})) == [t for t, _ in PANELS + OS_PANELS]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="recording the OS side with eBPF needs root")
@pytest.mark.skipif(shutil.which("bpftrace") is None,
                    reason="recording the OS side needs bpftrace (apt-get install bpftrace)")
def test_live_page_shows_the_os_side(page: Page, tmp_path: Path) -> None:
    bindir = demo_binaries()
    demo = Demo(bindir)
    load = LoadGen(bindir, demo.url, rps=100, clients=4)
    log = tmp_path / "collector.log"
    try:
        with Served(tmp_path / "data") as srv:
            col = start_collector(demo.url, srv.url, "ospage", log, count=3, extra=("--os",))
            try:
                assert col.wait(GUARD_MS / 1000) == 0, log.read_text()[-3000:]
                page.goto(f"{srv.url}/live/ospage")
                card = page.wait_for_selector("#live-stat-os-epoll", timeout=GUARD_MS)
                assert card is not None
                page.wait_for_selector("#live-stat-os-offcpu")
                page.wait_for_function(f"() => ({EPOLL_JS})() && ({EPOLL_JS})().length > 0",
                                       timeout=GUARD_MS)
                drawn = page.evaluate(EPOLL_JS)
                shot(page, "live-os")
                rows = srv.get("/api/live/sessions/ospage/seconds").json()["seconds"]
                # The chart draws, per second, the API's epoll waits over the bin's length.
                want = [[r["t_ns"] // 1_000_000, r["os_epoll_waits"] / (r["duration_ns"] / 1e9)]
                        for r in rows]
                assert len(drawn) == len(want) == 3
                for (x, y), (wx, wy) in zip(drawn, want, strict=True):
                    assert x == wx and y == pytest.approx(wy) and y > 0
                last = rows[-1]
                shown = card.inner_text()
                assert f"{last['os_epoll_waits'] / (last['duration_ns'] / 1e9):.3g}" in shown
                titles = page.evaluate("""() => [...document.querySelectorAll(
                    '#live-series .annotation-text')].map(e => e.textContent)""")
                assert [t for t, _ in OS_PANELS] == [t for t in titles if t.startswith("OS:")]
            finally:
                page.goto("about:blank")  # stop the 1 s polling before the server goes
                if col.poll() is None:
                    col.terminate()
                col.wait(60)
    finally:
        load.stop()
        demo.stop()
