"""The library follows the server-side load of uploads it did not send (another tab or
client, or itself before a reload: static/upload.js listJobs): a row per job still
loading when the page is shown, with its phase and percent, then its outcome, as for
its own uploads; its own are not shown twice.

Real Chromium, a real server (its own: these tests add traces), uploads through the
chunked API as any client sends them. The job is kept loading while the page opens by
holding the SQLite database's write lock, as another writer would (its load waits for
it, GMPSCOPE_BUSY_TIMEOUT_MS), then letting it go.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Page, expect

from tests.support.browser import RENDER_GUARD_MS, shot, wait_for_dash
from tests.support.server import REPO, Served

SAMPLES = REPO / "samples"
ELSEWHERE = SAMPLES / "go1.27-httpnet-2MB.trace"
OWN = SAMPLES / "go1.27-timers.trace"
GUARD = RENDER_GUARD_MS
#: Every status a followed job's row may show (static/upload.js follow and Row.done).
STATUS = re.compile(r"^(loading on the server|queued|queued behind other ingests"
                    r"|checking|checking bytes: (?P<hash>\d+)%|decoding"
                    r"|storing|storing rows: (?P<load>\d+)%"
                    r"|stored as trace \d+ \(Go [\d.]+, [\d,]+ events, [\d,]+ goroutines\) Open)$")

#: Records every status text each job row shows, as it changes.
RECORD_JS = """
() => {
  window.__statuses = {};
  const note = () => document.querySelectorAll('.upload-row[data-job-id]').forEach(row => {
    const id = row.getAttribute('data-job-id');
    const text = row.querySelector('.upload-status').textContent.trim();
    const seen = window.__statuses[id] = window.__statuses[id] || [];
    if (seen[seen.length - 1] !== text) seen.push(text);
  });
  new MutationObserver(note).observe(document.getElementById('library-progress'),
    {childList: true, subtree: true, characterData: true, attributes: true});
  note();  // what the rows already show (a job waiting for the write lock shows no change)
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("library-jobs") / "data", []) as srv:
        yield srv


def upload(srv: Served, path: Path, chunk: int = 1 << 20) -> str:
    """Send ``path`` as any client does (docs/upload.md); its ingest job's id."""
    data = path.read_bytes()
    params: dict[str, str | int] = {"name": path.name, "size": len(data)}
    created = requests.post(f"{srv.url}/api/uploads", params=params, timeout=60)
    created.raise_for_status()
    uid = created.json()["upload_id"]
    for off in range(0, len(data), chunk):
        requests.put(f"{srv.url}/api/uploads/{uid}", params={"offset": off},
                     data=data[off:off + chunk], timeout=60).raise_for_status()
    done = requests.post(f"{srv.url}/api/uploads/{uid}/complete", timeout=60)
    done.raise_for_status()
    job_id: str = done.json()["job_id"]
    return job_id


def open_library(page: Page, srv: Served) -> None:
    page.goto(srv.url + "/")
    wait_for_dash(page, "#library-dropzone")
    page.wait_for_selector("#library-file-input", state="attached")
    page.evaluate(RECORD_JS)


def test_a_job_sent_elsewhere_shows_its_phases_then_its_trace(page: Page,
                                                               server: Served) -> None:
    lock = sqlite3.connect(server.data_dir / "gmpscope.db", timeout=60, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # the job's load waits for this writer
        job = upload(server, ELSEWHERE)
        deadline = time.monotonic() + GUARD / 1000
        while server.get(f"/api/jobs/{job}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.1)
        open_library(page, server)
        row = page.locator(f'.upload-row[data-job-id="{job}"]')
        expect(row).to_have_attribute("data-state", "ingesting")
        shot(page, "library-job-sent-elsewhere-loading")
    finally:
        lock.rollback()
        lock.close()
    expect(row).to_have_attribute("data-state", "done", timeout=GUARD)
    shot(page, "library-job-sent-elsewhere")
    status = server.get(f"/api/jobs/{job}").json()
    assert status["state"] == "done"
    expect(row.locator(".upload-status")).to_contain_text(
        f"stored as trace {status['trace_id']} ")
    expect(row.locator(".upload-name")).to_contain_text(ELSEWHERE.name)
    assert "upload-elsewhere" in (row.get_attribute("class") or "")
    expect(page.locator(f'.upload-row[data-job-id="{job}"]')).to_have_count(1)
    seen = page.evaluate("id => window.__statuses[id]", job)
    assert seen and seen[-1].startswith(f"stored as trace {status['trace_id']} ")
    assert len(seen) >= 2  # at least one status while it was loading
    last = {"hash": -1, "load": -1}
    for text in seen:
        m = STATUS.match(text)
        assert m, f"unexpected status {text!r} in {seen}"
        for stage in last:
            if m.group(stage) is not None:
                assert int(m.group(stage)) >= last[stage], seen  # a percent never goes back
                last[stage] = int(m.group(stage))
    # Open it from the row, as an own upload's.
    row.locator("a.upload-open").click()
    page.wait_for_url(f"**/traces/{status['trace_id']}/overview")


def test_own_upload_is_one_row(page: Page, server: Served) -> None:
    open_library(page, server)
    page.set_input_files("#library-file-input", str(OWN))
    row = page.locator(".upload-row").filter(has_text=OWN.name)
    expect(row).to_have_attribute("data-state", "done", timeout=GUARD)
    # Shown again (in-app navigation: Open, then back): the jobs are listed again;
    # still one row, its own.
    row.locator("a.upload-open").click()
    wait_for_dash(page, ".trace-nav")
    with page.expect_response(lambda r: r.url.endswith("/api/jobs")):
        page.locator("a.brand").click()
        wait_for_dash(page, "#library-dropzone")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
    expect(row).to_have_count(1)
    assert "upload-elsewhere" not in (row.get_attribute("class") or "")
