"""The overview, state graph, annotations and compare pages in a real browser:
the numbers on screen are the JSON API's, the program's strings show as text,
nothing the trace wrote becomes markup. Screenshots go to the artifacts dir."""

from __future__ import annotations

from playwright.sync_api import Page

from app.components import fmt_count
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

SAMPLE = "go1.27-httpnet.trace"
ANNOTATED = "go1.27-annotations.trace"


def _open(page: Page, url: str, selector: str, name: str) -> None:
    page.goto(url)
    wait_for_dash(page, selector)
    shot(page, name)
    assert page.locator(".error-box").count() == 0


def _stat(page: Page, key: str) -> str:
    return page.locator(f"#overview-stat-{key} .stat-value").inner_text().strip()


def test_overview(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    doc = samples_server.get(f"/api/traces/{tid}/overview").json()["key"]
    _open(page, f"{samples_server.url}/traces/{tid}/overview", "#overview-states .main-svg",
          "views-overview")
    assert _stat(page, "goroutines") == fmt_count(doc["goroutines"])
    assert _stat(page, "events") == fmt_count(doc["events"])
    assert _stat(page, "gc-cycles") == fmt_count(doc["gc_count"])
    assert _stat(page, "threads") == fmt_count(doc["threads"])
    for graph in ("overview-states", "overview-heap", "overview-threads"):
        assert page.locator(f"#{graph} .main-svg").count() > 0, graph
    # The stacked series are drawn (one trace per non-empty state).
    assert page.locator("#overview-states .scatterlayer .trace").count() >= 3



_HEAP_LINE_JS = """() => {
    const t = document.querySelector('#overview-heap .js-plotly-plot')._fullData
        .find(d => d.name === 'heap objects (MiB)');
    return t ? [Array.from(t.x), Array.from(t.y)] : null;
}"""


def test_overview_heap_zoom(page: Page, samples_server: Served,
                            sample_ids: dict[str, int]) -> None:
    """Dragging the heap figure to the middle third redraws it from that
    window's own buckets: its heap line is the API's counter over the window."""
    tid = sample_ids[SAMPLE]
    key = samples_server.get(f"/api/traces/{tid}/overview").json()["key"]
    _open(page, f"{samples_server.url}/traces/{tid}/overview", "#overview-heap .main-svg",
          "views-overview-heap")
    before = page.evaluate(_HEAP_LINE_JS)
    assert before is not None and len(before[0]) > 2
    span = (key["last_ts"] - key["first_ts"]) / 1e9
    x0, x1 = span / 3, 2 * span / 3
    page.evaluate("""([a, b]) => Plotly.relayout(
        document.querySelector('#overview-heap .js-plotly-plot'),
        {'xaxis.range[0]': a, 'xaxis.range[1]': b})""", [x0, x1])
    page.wait_for_function(f"() => {{ const d = ({_HEAP_LINE_JS})(); "
                           f"return d && d[0][0] >= {x0} - 1e-9; }}")
    wait_for_dash(page)
    xs, ys = page.evaluate(_HEAP_LINE_JS)
    # The page's window, as app.pages.overview.zoom_window computes it.
    t1, t2 = key["first_ts"] + round(x0 * 1e9), key["first_ts"] + round(x1 * 1e9)
    m = samples_server.get(f"/api/traces/{tid}/overview?t1={t1}&t2={t2}&bins=10").json()[
        "metrics"]["/memory/classes/heap/objects:bytes"]
    assert m["ts"], "the window holds heap samples"
    assert ys == [v / 2**20 for v in m["value"] + m["value"][-1:]]
    assert xs == [(t - key["first_ts"]) / 1e9 for t in m["ts"] + [t2]]

def test_states(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    doc = samples_server.get(f"/api/traces/{tid}/states?split_reasons=1").json()
    _open(page, f"{samples_server.url}/traces/{tid}/states", "#states-edge-table",
          "views-states")
    rows = page.locator("#states-edge-table tbody tr")
    assert rows.count() == len(doc["edges"])
    top = doc["edges"][0]
    cells = rows.nth(0).locator("td")
    assert cells.nth(0).inner_text() == top["source"]
    assert cells.nth(2).inner_text() == fmt_count(top["count"])
    assert page.locator("#states-mermaid").inner_text().startswith("flowchart LR")
    assert page.locator("#states-dot").inner_text().startswith("digraph")
    # The thread graph through the resource control.
    thread = samples_server.get(f"/api/traces/{tid}/states?resource=thread").json()
    page.locator("#states-resource").click()
    page.get_by_role("option", name="thread").click()
    page.wait_for_function(
        f"document.querySelectorAll('#states-edge-table tbody tr').length == "
        f"{len(thread['edges'])} && document.querySelector('#states-dot')"
        f".innerText.startsWith('digraph \"thread\"')")
    wait_for_dash(page)
    shot(page, "views-states-thread")


def test_annotations_strings_are_text(page: Page, samples_server: Served,
                                      sample_ids: dict[str, int]) -> None:
    tid = sample_ids[ANNOTATED]
    doc = samples_server.get(f"/api/traces/{tid}/annotations").json()
    _open(page, f"{samples_server.url}/traces/{tid}/annotations", "#annotations-logs-table",
          "views-annotations")
    # DataTables page through their rows (a header row, then up to page_size rows).
    # One page of tasks (50), the per-type summary, previous/next.
    assert page.locator("#annotations-tasks-table tr").count() == 1 + min(
        50, doc["tasks"]["total"])
    assert page.locator("#annotations-task-types-table tbody tr").count() == len(
        doc["task_types"])
    assert page.locator("#annotations-tasks-range").inner_text() == (
        f"tasks 1–50 of {doc['tasks']['total']}")
    assert page.locator("#annotations-regions-table tbody tr").count() == len(doc["regions"])
    assert page.locator("#annotations-logs-table tr").count() == 1 + min(
        50, doc["logs"]["total"])
    shown = page.eval_on_selector_all(
        ".trace-string, #annotations-logs-table td, #annotations-tasks-table td",
        "els => els.map(e => e.textContent)")
    # Written by collectors/workloads/cmd/annotations; shown exactly, quotes,
    # backslashes, newlines, tabs and NUL included.
    for s in ("say \"hi\" and 'bye'", "C:\\temp\\new folder\\", "line one\nline two\ttabbed\r",
              "nul\x00inside", "héllo wörld ✓ 日本語 🚀", "message 1: say \"hi\" and 'bye'"):
        assert s in shown, repr(s)
    # Nothing from the trace became an element: the only scripts are Dash's own.
    assert page.locator("#page-content script").count() == 0
    # Filter the logs by text: only matching rows stay.
    page.locator("#annotations-log-text").fill('say "hi"')
    page.locator("#annotations-log-text").press("Enter")
    want = samples_server.get(f"/api/traces/{tid}/annotations",
                              params={"text": 'say "hi"'}).json()["logs"]["total"]
    assert 0 < want < 50
    page.wait_for_function(
        f"document.querySelectorAll('#annotations-logs-table tr').length == {want + 1}")
    shot(page, "views-annotations-filtered")
    # Page through the tasks, then keep one type.
    total = doc["tasks"]["total"]
    page.locator("#annotations-tasks-next").click()
    page.wait_for_function("document.querySelector('#annotations-tasks-range')"
                           f".innerText == 'tasks 51–100 of {total}'")
    page.locator("#annotations-tasks-prev").click()
    page.wait_for_function("document.querySelector('#annotations-tasks-range')"
                           f".innerText == 'tasks 1–50 of {total}'")
    page.locator("#annotations-task-type").click()
    page.get_by_role("option", name="shard-1 (40)").click()
    page.wait_for_function("document.querySelector('#annotations-tasks-range')"
                           ".innerText == 'tasks 1–40 of 40'")
    assert page.locator("#annotations-tasks-next").is_disabled()
    names = page.eval_on_selector_all(
        "#annotations-tasks-table td[data-dash-column=name]", "els => els.map(e => e.textContent)")
    assert len(names) == 40 and {n.strip() for n in names} == {"shard-1"}
    shot(page, "views-annotations-tasks-type")


def test_compare(page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    a, b = sample_ids[SAMPLE], sample_ids["go1.27-syscallblock.trace"]
    doc = samples_server.get(f"/api/compare?a={a}&b={b}").json()
    _open(page, f"{samples_server.url}/compare?a={a}&b={b}", "#compare-table",
          "views-compare")
    row = page.locator("#compare-row-goroutines td")
    assert row.nth(1).inner_text() == fmt_count(doc["a"]["key"]["goroutines"])
    assert row.nth(2).inner_text() == fmt_count(doc["b"]["key"]["goroutines"])
    procs = page.locator("#compare-row-procs td")
    assert procs.nth(2).inner_text() == fmt_count(doc["b"]["key"]["procs"])
    for graph in ("compare-states-a", "compare-states-b", "compare-over-a", "compare-over-b"):
        assert page.locator(f"#{graph} .main-svg").count() > 0, graph
    assert page.locator("#compare-latency-p99 td").count() == 4
