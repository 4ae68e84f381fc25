"""The "Export to Perfetto" button of the overview and the timeline downloads
the trace's Perfetto file, which reads back with the perfetto protos."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.perfetto_read import read
from tests.support.server import Served

SAMPLE = "go1.27-mutex.trace"


@pytest.mark.parametrize(("page_name", "button"), [("overview", "#overview-perfetto"),
                                                   ("timeline", "#timeline-perfetto")])
def test_perfetto_button_downloads_the_trace(page: Page, samples_server: Served,
                                             sample_ids: dict[str, int], tmp_path: Path,
                                             page_name: str, button: str) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/{page_name}")
    wait_for_dash(page, button)
    link = page.locator(button)
    assert link.get_attribute("href") == f"/api/traces/{tid}/perfetto"
    link.scroll_into_view_if_needed()
    shot(page, f"perfetto-button-{page_name}", full_page=False)
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.failure() is None
    assert download.suggested_filename == f"gmpscope-{tid}-perfetto.pftrace"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    pt = read(path)
    assert pt.flows and any(t.name == "Procs (P)" for t in pt.tracks.values())
