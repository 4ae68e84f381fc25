"""The goroutine page's "Running while its thread was off-CPU" section in a real
browser: a worker goroutine of the cpuquota run (0.25 CPU quota, GOMAXPROCS 4)
recorded with its scheduling, stored before the server starts. Its cards show
what the view computes, the figure is drawn, each stretch links to the M
timeline. A goroutine page of a trace without a recording has no such section.
Screenshots go to the artifacts directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from app.components import fmt_ns
from ingest.store.db import make_engine
from ingest.views import offcpu
from tests.support.browser import shot, wait_for_dash
from tests.support.sched_recordings import NEEDS_BPFTRACE, record, stored, workload_bin
from tests.support.server import Served

pytestmark = [pytest.mark.slow, *NEEDS_BPFTRACE]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, int, dict]]:
    root = tmp_path_factory.mktemp("offcpu-browser")
    url = f"sqlite:///{root / 'db.sqlite'}"
    engine = make_engine(url)
    rec = record(workload_bin("cpuquota"), ["-duration", "400ms"], root / "quota",
                 await_stdin=True)
    tid = stored(engine, rec, root / "data")
    s = offcpu.offcpu_summary(engine, tid)
    assert s is not None and s["goroutines"]
    g = offcpu.goroutine_offcpu(engine, tid, s["goroutines"][0]["goid"])
    assert g is not None
    engine.dispose()
    with Served(root / "data", db_url=url) as srv:
        yield srv, tid, g


def test_goroutine_offcpu_section(page: Page, server: tuple[Served, int, dict]) -> None:
    srv, tid, g = server
    page.goto(f"{srv.url}/traces/{tid}/goroutines/{g['goid']}")
    wait_for_dash(page, "#goroutine-offcpu-card")
    card = page.inner_text("#goroutine-offcpu-card")
    assert "Running while its thread was off-CPU" in card
    stats = page.inner_text("#goroutine-offcpu-stats")
    assert fmt_ns(g["offcpu_ns"]) in stats and fmt_ns(g["running_ns"]) in stats
    assert f"{100 * g['share']:.1f}%" in stats
    assert page.locator("#goroutine-offcpu .js-plotly-plot, #goroutine-offcpu.js-plotly-plot"
                        ).count() + page.locator("#goroutine-offcpu .main-svg").count() > 0
    links = page.locator("#goroutine-offcpu-table a")
    assert links.count() == min(20, len(g["stretches"]))
    assert "mode=m" in (links.first.get_attribute("href") or "")
    page.locator("#goroutine-offcpu-card").scroll_into_view_if_needed()
    shot(page, "goroutine-offcpu")


def test_no_section_without_a_recording(page: Page, tmp_path: Path) -> None:
    from tests.support.server import SAMPLES

    with Served(tmp_path / "data", [SAMPLES[0]]) as srv:
        (tid,) = srv.ingested
        page.goto(f"{srv.url}/traces/{tid}/goroutines/1")
        wait_for_dash(page, "#goroutine-page")
        assert page.locator("#goroutine-offcpu-card").count() == 0
