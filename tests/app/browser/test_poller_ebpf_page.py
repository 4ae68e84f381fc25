"""The OS poller page of eBPF recordings in a real browser: io_uring requests (latency
per opcode, queue depth, the table) and the descriptors epoll waits returned ready.

Data: the real eBPF recordings of tests/data/ebpf (capture.sh): uring_rw (16 requests,
8 writes and 8 reads) and httpnet. Screenshots go to the artifacts directory.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

DATA = Path(__file__).resolve().parents[2] / "data" / "ebpf"


def _zip(directory: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(directory.iterdir()):
            zf.write(p, p.name)
    return buf.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, int, int]]:
    with Served(tmp_path_factory.mktemp("ebpf-browser") / "data", []) as s:
        ids = []
        for name in ("uring_rw", "httpnet"):
            r = s.post("/api/recordings", data=_zip(DATA / name))
            assert r.status_code == 201, r.text
            ids.append(int(r.json()["id"]))
        yield s, ids[0], ids[1]


def test_io_uring_requests_drawn(page: Page, server: tuple[Served, int, int]) -> None:
    s, uring_id, _ = server
    page.goto(f"{s.url}/traces/{uring_id}/poller")
    wait_for_dash(page, "#poller-uring-latency")
    assert page.locator(".error-box").count() == 0
    assert "eBPF (bpftrace)" in page.inner_text("#poller-alignment")
    rows = page.locator("#poller-uring-table tbody tr")
    assert rows.count() == 2
    cells = {rows.nth(i).locator("td").nth(0).inner_text(): rows.nth(i).locator("td").nth(1)
             .inner_text() for i in range(2)}
    assert cells == {"WRITE": "8", "READ": "8"}
    # One bar trace per opcode in the latency histogram; the depth line is drawn.
    assert page.locator("#poller-uring-latency .trace.bars").count() == 2
    assert page.locator("#poller-uring-depth .scatterlayer .trace path.js-line").count() == 1
    page.wait_for_selector("#poller-uring-depth .main-svg")
    title = page.evaluate("() => document.querySelector('#poller-uring-depth text.gtitle')"
                          ".textContent")
    assert title.startswith("io_uring queue depth (max ")
    shot(page, "poller-ebpf-uring")


def test_ready_descriptors_drawn(page: Page, server: tuple[Served, int, int]) -> None:
    s, _, http_id = server
    page.goto(f"{s.url}/traces/{http_id}/poller")
    wait_for_dash(page, "#poller-ready")
    ready = [v for v in pq.read_table(DATA / "httpnet" / "poller.parquet")
             .column("ready_fds").to_pylist() if v]
    title = page.evaluate("() => document.querySelector('#poller-ready text.gtitle')"
                          ".textContent")
    assert f"({len(ready):,} waits, {sum(len(v.split(',')) for v in ready):,} events)" in title
    assert page.locator("#poller-ready .trace.bars path").count() >= 3
    assert "No io_uring_enter call" in page.inner_text("#poller-uring")
    shot(page, "poller-ebpf-ready")
