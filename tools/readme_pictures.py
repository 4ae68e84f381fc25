"""The README's pictures: each main page of the explorer, drawn from the samples.

    python -m tools.readme_pictures            # docs/pictures/<page>.png and structure.json

Starts ``gmpscope serve --samples samples`` on a scratch data directory, opens each
page of :data:`PAGES` in Chromium (Debian's, through Playwright), and saves a
screenshot of what a reader sees first (1400x900) with the page's structure: the
texts of its headings, in order. ``tests/app/browser/test_readme_pictures.py``
opens the same pages and fails when a page's structure is no longer the one its
picture shows (a section added, renamed or gone): then run this again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "pictures"
STRUCTURE = OUT / "structure.json"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 900}

#: What a page's structure is: the texts of its visible headings and tabs, in
#: document order.
STRUCTURE_JS = """() => Array.from(document.querySelectorAll('h1, h2, h3, h4, .tab'))
    .filter(e => e.offsetParent !== null && e.innerText.trim() !== '')
    .map(e => (e.classList.contains('tab') ? 'tab' : e.tagName.toLowerCase()) + ' '
              + e.innerText.trim().replace(/\\s+/g, ' '))"""

#: Dash has drawn the page: nothing loading, every graph plotted.
IDLE_JS = """() => !document.querySelector('[data-dash-is-loading="true"]')
    && !document.querySelector('._dash-loading')
    && Array.from(document.querySelectorAll('.dash-graph'))
       .every(g => g.querySelector('.main-svg') !== null)"""


@dataclass(frozen=True)
class PictureOf:
    """A page to picture: its name, its path (``{id}``: the trace's id) and the
    sample it shows (None: no trace; ``"os"``: the sample with an OS recording)."""

    name: str
    path: str
    sample: str | None
    caption: str


PAGES: tuple[PictureOf, ...] = (
    PictureOf("library", "/", None, "The library: the samples, each with where to look first"),
    PictureOf("overview", "/traces/{id}/overview", "go1.27-httpnet.trace",
              "Overview: goroutines, heap, threads and GOMAXPROCS, findings"),
    PictureOf("timeline", "/traces/{id}/timeline", "go1.27-httpnet.trace",
              "Timeline by P, M or goroutine"),
    PictureOf("goroutines", "/traces/{id}/goroutines", "go1.27-httpnet.trace",
              "Goroutine groups and where their time went"),
    PictureOf("syscalls", "/traces/{id}/syscalls", "go1.27-syscallblock.trace",
              "Syscalls: latency, P hand-offs, the netpoller's waits"),
    PictureOf("latency", "/traces/{id}/latency", "go1.27-httpnet.trace",
              "Scheduler latency"),
    PictureOf("poller", "/traces/{id}/poller", "os",
              "The OS side: epoll, poll and friends under each M"),
    PictureOf("flame", "/traces/{id}/flame", "go1.27-mutex.trace",
              "Flame graphs of each kind of waiting"),
)


@contextmanager
def serve(data_dir: Path) -> Iterator[str]:
    """``gmpscope serve --samples samples`` on ``data_dir``; yields its URL."""
    log = open(data_dir / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "gmpscope", "serve", "--port", "0",
         "--data-dir", str(data_dir), "--samples", str(REPO / "samples")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
        env={k: v for k, v in os.environ.items()
             if k not in ("GMPSCOPE_TOKEN", "GMPSCOPE_READ_TOKEN", "GMPSCOPE_DB")})
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 600
        url = ""
        while not url and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"gmpscope serve exited: see {data_dir / 'serve.log'}")
            m = re.search(rb"serving (http://\S+)", line)
            url = m.group(1).decode() if m else ""
        if not url:
            raise RuntimeError("gmpscope serve did not start in 10 minutes")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


def trace_ids(url: str) -> dict[str, int]:
    """Sample name (and ``"os"``: the one with an OS recording) -> trace id."""
    import requests

    ids = {t["name"]: int(t["id"]) for t in requests.get(f"{url}/api/traces",
                                                          timeout=60).json()["traces"]}
    for tid in ids.values():
        if requests.get(f"{url}/api/traces/{tid}/poller", timeout=60).status_code == 200:
            ids["os"] = tid
            break
    return ids


def page_url(url: str, p: PictureOf, ids: dict[str, int]) -> str:
    """Where page ``p`` is on the server at ``url``."""
    return url + (p.path.format(id=ids[p.sample]) if p.sample else p.path)


def settle(page: Any) -> None:
    """Wait until Dash has drawn the page and stayed idle a moment."""
    page.wait_for_selector("#react-entry-point", state="attached", timeout=120_000)
    page.wait_for_function(IDLE_JS, polling=100, timeout=120_000)
    page.wait_for_timeout(800)
    page.wait_for_function(IDLE_JS, polling=100, timeout=120_000)


def structure(page: Any) -> list[str]:
    """The page's headings, in order."""
    return list(page.evaluate(STRUCTURE_JS))


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    shapes: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="gmpscope-pictures-") as tmp, \
            serve(Path(tmp)) as url, sync_playwright() as pw:
        ids = trace_ids(url)
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        for p in PAGES:
            page.goto(page_url(url, p, ids))
            settle(page)
            page.screenshot(path=str(OUT / f"{p.name}.png"))
            shapes[p.name] = structure(page)
            print(f"{p.name}: {len(shapes[p.name])} headings -> docs/pictures/{p.name}.png")
        browser.close()
    STRUCTURE.write_text(json.dumps(shapes, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
