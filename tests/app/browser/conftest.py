"""Playwright fixtures for the browser tests (Debian's /usr/bin/chromium, headless).

``browser`` (tests/conftest.py: every test of a session that drives Chromium shares it,
since a second Playwright in one process fails) is one Chromium per session; ``page``
is a fresh 1400x900 page per
test that records console errors and uncaught page errors and fails the test
when any occurred (``page_errors`` lets a test inspect or clear them first).
Helpers in tests/support/browser.py: ``shot(page, name)`` saves a screenshot under
$GMPSCOPE_ARTIFACTS (default tests/artifacts/); ``wait_for_dash(page, selector)``
waits until Dash has rendered and stopped loading. ``samples_server``
(tests/conftest.py) is the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, ViewportSize

from tests.support.browser import RENDER_GUARD_MS

VIEWPORT: ViewportSize = {"width": 1400, "height": 900}
#: Console messages that are not errors of the app (the browser's own noise).
IGNORED_CONSOLE = re.compile(r"favicon\.ico|Failed to load resource: net::ERR_ABORTED")


@pytest.fixture
def page_errors() -> list[str]:
    """Console errors and uncaught exceptions of ``page`` so far (a test may clear it)."""
    return []


@pytest.fixture
def page(browser: Browser, page_errors: list[str]) -> Iterator[Page]:
    """A fresh page (own context, downloads allowed) that fails the test on JS errors."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(RENDER_GUARD_MS)

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and not IGNORED_CONSOLE.search(msg.text):
            page_errors.append(f"console error: {msg.text} ({msg.location.get('url', '')})")

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: page_errors.append(f"page error: {exc}"))
    try:
        yield pg
    finally:
        context.close()
    if page_errors:
        pytest.fail("JavaScript errors on the page:\n" + "\n".join(page_errors), pytrace=False)
