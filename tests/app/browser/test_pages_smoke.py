"""Every page renders in a real browser without JavaScript errors or error boxes.

Opens the library, each per-trace page of the navigation (``TRACE_NAV``) for a
sample trace, and the compare page, and checks that no figure was drawn twice
for margins that did not fit (app.figures.margins); saves a screenshot of each into the
artifacts directory (tests/artifacts/ unless $GMPSCOPE_ARTIFACTS) for a look.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from app.pages import TRACE_NAV
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

#: The sample the per-trace pages are opened for (network, syscalls and GC: all views have data).
SAMPLE = "go1.27-httpnet.trace"


def _open(page: Page, url: str, name: str) -> None:
    page.goto(url)
    wait_for_dash(page, "#page-content > *")
    shot(page, f"smoke-{name}")
    boxes = page.locator(".error-box")
    assert boxes.count() == 0, f"{url}: error box: {boxes.first.inner_text()}"
    # Every graph has drawn a plot (an empty one shows as a blank box).
    graphs = page.evaluate("""() => Array.from(document.querySelectorAll('.dash-graph'))
        .map(g => [g.id, !!g.querySelector('.js-plotly-plot .main-svg')])""")
    undrawn = [gid for gid, drawn in graphs if not drawn]
    assert not undrawn, f"{url}: graphs not drawn: {undrawn}"
    assert_drawn_once(page, url)


#: Each plotly figure's margins as asked for and as drawn (l, r, t, b).
_MARGINS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
    const m = gd._fullLayout.margin, s = gd._fullLayout._size;
    return [gd.parentElement.id, [m.l, m.r, m.t, m.b],
            [s.l, s.r, s.t, s.b].map(Math.round)];
})"""


def assert_drawn_once(page: Page, url: str) -> None:
    """No figure had a margin grown by plotly (app.figures.margins): a grown
    margin means the figure was drawn twice as the page opened."""
    grown = [(gid, asked, drawn) for gid, asked, drawn in page.evaluate(_MARGINS_JS)
             if any(d > a for d, a in zip(drawn, asked, strict=True))]
    assert not grown, f"{url}: margins grown by plotly (id, asked, drawn): {grown}"


def test_library(page: Page, samples_server: Served) -> None:
    _open(page, samples_server.url + "/", "library")


@pytest.mark.parametrize("suffix", [suffix for _, _, suffix in TRACE_NAV])
def test_trace_page(page: Page, samples_server: Served, sample_ids: dict[str, int],
                    suffix: str) -> None:
    tid = sample_ids[SAMPLE]
    _open(page, f"{samples_server.url}/traces/{tid}/{suffix}", suffix)
    assert page.locator(".trace-nav").count() == 1


def test_annotations_with_hostile_strings(page: Page, samples_server: Served,
                                          sample_ids: dict[str, int]) -> None:
    """The sample whose tasks, regions and logs carry hostile strings."""
    tid = sample_ids["go1.27-annotations.trace"]
    _open(page, f"{samples_server.url}/traces/{tid}/annotations", "annotations-strings")


def test_goroutine_page(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    _open(page, f"{samples_server.url}/traces/{tid}/goroutines/1", "goroutine-1")


def test_compare(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    a, b = sample_ids[SAMPLE], sample_ids["go1.27-timers.trace"]
    _open(page, f"{samples_server.url}/compare?a={a}&b={b}", "compare")
