"""The login form in Chromium: a server with a token sends the browser to /login,
the token typed once lands on the page asked for, the session cookie carries every
later request (Dash's callbacks, the API the scripts call, downloads), the read
login cannot delete, and logging out ends it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from app.components import fmt_count
from tests.support.browser import shot, wait_for_dash
from tests.support.server import SAMPLES, Served

WRITE_TOKEN = "w-browser-5ecret"
READ_TOKEN = "r-browser-5ecret"
SAMPLE = next(p for p in SAMPLES if p.name == "go1.27-mutex.trace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("login") / "data", [SAMPLE], token=WRITE_TOKEN,
                read_token=READ_TOKEN) as srv:
        yield srv


def log_in(page: Page, token: str) -> None:
    page.fill("#token", token)
    page.click("#login-submit")


def test_login_lands_on_the_page_asked_for(page: Page, page_errors: list[str],
                                           server: Served) -> None:
    (tid,) = server.ingested
    asked = f"/traces/{tid}/overview"
    page.goto(server.url + asked)
    assert page.url == f"{server.url}/login?next={quote(asked, safe='/')}"
    expect(page.locator("#token")).to_be_visible()
    shot(page, "login-form", full_page=False)

    log_in(page, "not-the-token")
    expect(page.locator("#login-error")).to_have_text("wrong token")
    assert "/login" in page.url
    assert not page.context.cookies()
    shot(page, "login-wrong-token", full_page=False)

    log_in(page, READ_TOKEN)
    page.wait_for_url(server.url + asked)
    wait_for_dash(page, "#overview-states")
    # The page drew the trace's data, fetched through Dash's callbacks with the cookie.
    kpis = server.get(f"/api/traces/{tid}/overview").json()["key"]
    expect(page.locator("#overview-stat-goroutines")).to_contain_text(
        fmt_count(kpis["goroutines"]))
    assert page.locator("#overview-states .js-plotly-plot").count() == 1
    expect(page.locator("#nav-logout")).to_be_visible()
    shot(page, "login-landed-overview")

    (cookie,) = page.context.cookies()
    assert cookie["name"] == "gmpscope_session" and cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    assert "gmpscope_session" not in page.evaluate("document.cookie")  # HttpOnly

    # The scripts' own API calls and the downloads go with the cookie too.
    listed = page.evaluate("fetch('/api/traces').then(r => r.json())")
    assert [t["id"] for t in listed["traces"]] == [tid]
    with page.expect_download() as info:
        page.locator("#overview-perfetto").click()
    assert info.value.failure() is None
    path = info.value.path()
    assert path is not None and Path(path).stat().st_size > 1000
    # A read login cannot write: the API says so.
    status = page.evaluate(f"fetch('/api/traces/{tid}', {{method: 'DELETE'}})"
                           ".then(r => r.status)")
    assert status == 403
    assert server.get(f"/api/traces/{tid}").status_code == 200
    # The browser logs the two refusals asked for above (the wrong token's form, the
    # delete); nothing else may have failed.
    expected = [e for e in page_errors if "status of 401" in e and e.endswith("/login)")
                or "status of 403" in e and f"/api/traces/{tid})" in e]
    assert len(expected) == 2, page_errors
    page_errors[:] = [e for e in page_errors if e not in expected]

    page.locator("#nav-logout").click()
    page.wait_for_url(server.url + "/login")
    assert not page.context.cookies()
    page.goto(server.url + asked)
    assert "/login?next=" in page.url


def test_write_login_deletes_from_the_library(browser: Browser, server: Served,
                                              tmp_path: Path) -> None:
    """Logged in with the write token, the library's delete needs nothing typed."""
    blob = (SAMPLES[0].parent / "go1.27-timers.trace").read_bytes()
    r = server.post("/api/traces?name=victim", data=blob,
                    headers={"Authorization": f"Bearer {WRITE_TOKEN}"})
    assert r.status_code == 201, r.text
    victim = r.json()["id"]
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        log_in(page, WRITE_TOKEN)
        page.wait_for_url(server.url + "/")
        wait_for_dash(page, f"#library-row-{victim}")
        page.on("dialog", lambda d: d.accept())
        page.locator(f"#library-row-{victim} button.library-delete").click()
        expect(page.locator(f"#library-row-{victim}")).to_have_count(0)
        assert server.get(f"/api/traces/{victim}").status_code == 404
        shot(page, "login-write-deleted")
    finally:
        context.close()
