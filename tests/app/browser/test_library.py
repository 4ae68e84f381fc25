"""The library page in a real browser: upload through the file input (chunks, job
progress, new row, open it), a garbage file's clear error, delete, compare, token.

Each test module's server is its own (these tests change data). Screenshots go to
the artifacts directory (tests/artifacts/ unless $GMPSCOPE_ARTIFACTS).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.support.browser import RENDER_GUARD_MS, shot, wait_for_dash
from tests.support.server import REPO, Served

SAMPLES = REPO / "samples"
PRELOADED = [SAMPLES / "go1.27-mutex.trace", SAMPLES / "go1.27-syscallblock.trace"]
UPLOAD = SAMPLES / "go1.27-httpnet-2MB.trace"
#: Waits for an upload's end are bounded by the render guard: a hang, not a speed limit.
GUARD = RENDER_GUARD_MS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("library") / "data", PRELOADED) as srv:
        yield srv


def ids_by_name(srv: Served) -> dict[str, int]:
    return {t["name"]: t["id"] for t in srv.get("/api/traces").json()["traces"]}


def open_library(page: Page, srv: Served) -> None:
    page.goto(srv.url + "/")
    wait_for_dash(page, "#library-dropzone")
    page.wait_for_selector("#library-file-input", state="attached")


def test_upload_shows_progress_then_the_new_trace(page: Page, server: Served) -> None:
    open_library(page, server)
    shot(page, "library-before-upload")
    page.set_input_files("#library-file-input", str(UPLOAD))
    row = page.locator(".upload-row").first
    expect(row).to_have_attribute("data-state", re.compile("uploading|ingesting|done"))
    expect(row).to_have_attribute("data-state", "done", timeout=GUARD)
    shot(page, "library-upload-done")
    tid = ids_by_name(server)[UPLOAD.name]
    expect(row.locator(".upload-status")).to_contain_text(f"stored as trace {tid}")
    bar = row.locator("progress")
    assert bar.evaluate("b => b.value === b.max")
    # The table was refreshed with the new trace, with its numbers from the API.
    trace = server.get(f"/api/traces/{tid}").json()
    table_row = page.locator(f"#library-row-{tid}")
    expect(table_row).to_be_visible()
    expect(table_row).to_contain_text(UPLOAD.name)
    expect(table_row).to_contain_text(f"{trace['events']:,}")
    expect(table_row).to_contain_text(f"{trace['goroutines']:,}")
    # Open it from the upload row.
    row.locator("a.upload-open").click()
    page.wait_for_url(f"**/traces/{tid}/overview")
    wait_for_dash(page, ".trace-nav")
    shot(page, "library-opened-upload")
    # In-app navigation: back in the library, this tab's upload rows are still there.
    page.locator("a.brand").click()
    wait_for_dash(page, "#library-dropzone")
    expect(page.locator(".upload-row[data-state=done]")).to_have_count(1)


def test_garbage_upload_says_why(page: Page, server: Served, tmp_path: Path) -> None:
    before = ids_by_name(server)
    junk = tmp_path / "notes.trace"
    junk.write_bytes((SAMPLES / "README.md").read_bytes())
    open_library(page, server)
    page.set_input_files("#library-file-input", str(junk))
    row = page.locator(".upload-row").first
    expect(row).to_have_attribute("data-state", "failed", timeout=GUARD)
    expect(row.locator(".upload-error")).to_contain_text("notes.trace: not a readable Go trace")
    shot(page, "library-garbage-upload")
    assert ids_by_name(server) == before


def test_pick_two_to_compare(page: Page, server: Served) -> None:
    ids = ids_by_name(server)
    a, b = ids[PRELOADED[0].name], ids[PRELOADED[1].name]
    open_library(page, server)
    expect(page.locator("#library-compare")).to_contain_text("Tick two")
    page.locator(f"#library-row-{a} input[type=checkbox]").check()
    page.locator(f"#library-row-{b} input[type=checkbox]").check()
    link = page.locator("a#library-compare")
    expect(link).to_have_attribute("href", f"/compare?a={min(a, b)}&b={max(a, b)}")
    shot(page, "library-compare-picked")


def test_delete_asks_then_removes_the_row(page: Page, server: Served) -> None:
    victim = ids_by_name(server)[PRELOADED[1].name]
    open_library(page, server)
    asked: list[str] = []

    def on_dialog(d: Dialog) -> None:
        asked.append(d.message)
        d.accept()

    page.on("dialog", on_dialog)
    page.locator(f"#library-row-{victim} button.library-delete").click()
    expect(page.locator(f"#library-row-{victim}")).to_have_count(0, timeout=GUARD)
    expect(page.locator("#library-status")).to_contain_text(f"Deleted trace {victim}")
    assert asked and PRELOADED[1].name in asked[0]
    assert server.get(f"/api/traces/{victim}").status_code == 404
    shot(page, "library-after-delete")


def test_token_and_size_limit(page: Page, page_errors: list[str], tmp_path: Path) -> None:
    limit = 150_000  # takes the timers sample (112 kB), not the 2 MB one
    with Served(tmp_path / "data", [PRELOADED[0]], token="s3cret", read_token="r3ad",
                extra_args=("--workers", "1", "--threads", "8",
                            "--max-upload", str(limit))) as srv:
        tid = ids_by_name(srv)[PRELOADED[0].name]
        # Logged in with the read token (tests/app/browser/test_login.py): the library
        # shows, and a delete needs the write token typed in the Token field.
        page.goto(srv.url + "/")
        page.fill("#token", "r3ad")
        page.click("#login-submit")
        open_library(page, srv)
        page.on("dialog", lambda d: d.accept())
        page.locator(f"#library-row-{tid} button.library-delete").click()
        expect(page.locator("#library-status")).to_contain_text("needs the write token")
        shot(page, "library-token-missing")
        # The browser logs the refused request; that is the expected outcome here.
        page_errors[:] = [e for e in page_errors if "403" not in e]
        page.fill("#library-token", "s3cret")
        page.set_input_files("#library-file-input", str(SAMPLES / "go1.27-timers.trace"))
        row = page.locator(".upload-row").first
        expect(row).to_have_attribute("data-state", "done", timeout=GUARD)
        page.locator(f"#library-row-{tid} button.library-delete").click()
        expect(page.locator(f"#library-row-{tid}")).to_have_count(0, timeout=GUARD)
        assert srv.get(f"/api/traces/{tid}").status_code == 404
        # Over the limit: refused before a byte is sent, saying so.
        page.set_input_files("#library-file-input", str(UPLOAD))
        row = page.locator(".upload-row").first
        expect(row).to_have_attribute("data-state", "failed", timeout=GUARD)
        expect(row.locator(".upload-error")).to_contain_text("too large")
        shot(page, "library-too-large")
        assert not list((srv.data_dir / "tmp").glob(".upload-*"))
