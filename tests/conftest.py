"""Fixtures shared by the service and browser tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.server import SAMPLES, Served  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the whole session (Debian's; `make test` installs it).
    Every test that drives a browser takes it: Playwright's sync API cannot run
    twice in one process (a test worker runs many test files)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
                    "(`make test-setup` installs it: apt-get install chromium)", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def samples_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``gmpscope serve`` with every sample trace of samples/ ingested (read-only use:
    tests that change data start their own server)."""
    with Served(tmp_path_factory.mktemp("samples-server"), SAMPLES) as served:
        yield served


@pytest.fixture(scope="session")
def sample_ids(samples_server: Served) -> dict[str, int]:
    """Sample file name -> its trace id in ``samples_server``."""
    traces = samples_server.get("/api/traces").json()["traces"]
    return {t["name"]: t["id"] for t in traces}
