"""Browser-test helpers: screenshots into the artifacts directory, waiting for Dash.

The fixtures (``browser``, ``page``, ``page_errors``) are in tests/app/browser/conftest.py;
tests import these helpers: ``from tests.support.browser import shot, wait_for_dash``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from playwright.sync_api import Page

REPO = Path(__file__).resolve().parents[2]
#: A guard against a page that never renders: a hang, not a speed limit.
RENDER_GUARD_MS = 120_000


def artifacts_dir() -> Path:
    """Where screenshots go ($GMPSCOPE_ARTIFACTS, default tests/artifacts/)."""
    d = Path(os.environ.get("GMPSCOPE_ARTIFACTS") or REPO / "tests" / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def shot(page: Page, name: str, full_page: bool = True) -> Path:
    """Save a screenshot of ``page`` as <artifacts>/<name>.png and return its path."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "page"
    path = artifacts_dir() / f"{safe}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


#: Dash is idle when nothing has been loading for this long (a callback may start
#: right after the layout renders, or after another callback's output arrives).
SETTLE_MS = 400

_BUSY_JS = """
    () => {
        const root = document.querySelector('#react-entry-point');
        if (!root || root.children.length === 0) return true;
        if (document.querySelector('._dash-loading')) return true;
        if (document.querySelector('[data-dash-is-loading="true"]')) return true;
        // dcc.Graph loads plotly.js lazily: "pending" until the plot is drawn.
        if (document.querySelector('.dash-graph--pending')) return true;
        return false;
    }
"""


def wait_for_dash(page: Page, selector: str | None = None,
                  timeout_ms: int = RENDER_GUARD_MS) -> float:
    """Wait until Dash has rendered the layout, no callback is pending, every
    dcc.Graph has drawn its plot, all of it for SETTLE_MS in a row, and
    ``selector`` (if given) is visible. Returns how long ago (seconds) the page
    went idle: the settling wait and the last check, which a paint time leaves
    out (the page was drawn when it went idle)."""
    page.wait_for_selector("#react-entry-point", state="attached", timeout=timeout_ms)
    if selector:
        page.wait_for_selector(selector, state="visible", timeout=timeout_ms)
    page.evaluate("() => { window.__gmpscopeIdleSince = null; }")
    page.wait_for_function(
        f"""() => {{
            const busy = ({_BUSY_JS})();
            const now = performance.now();
            if (busy) {{ window.__gmpscopeIdleSince = null; return false; }}
            if (window.__gmpscopeIdleSince == null) {{
                window.__gmpscopeIdleSince = now;
                return false;
            }}
            return now - window.__gmpscopeIdleSince >= {SETTLE_MS};
        }}""",
        polling=50, timeout=timeout_ms,
    )
    if selector:
        page.wait_for_selector(selector, state="visible", timeout=timeout_ms)
    idle_ms: float = page.evaluate("() => performance.now() - window.__gmpscopeIdleSince")
    return idle_ms / 1000
