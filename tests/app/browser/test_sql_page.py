"""The SQL page in a real browser over the sample traces: a query in the URL
shows its rows and a chart, Run puts the editor's query into the URL (a reload
runs it again), an example link runs its example, a refusal shows its message.
Screenshots go to the artifacts directory (tests/artifacts/)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page

from app.pages.sql import sql_href
from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served


def _examples(served: Served, trace_id: int) -> dict[str, str]:
    r = served.get("/api/sql/examples", params={"trace_id": trace_id})
    assert r.status_code == 200, r.text
    return {e["name"]: e["sql"] for e in r.json()["examples"]}


def _api(served: Served, sql: str) -> Any:
    r = served.get("/api/sql", params={"sql": sql})
    assert r.status_code == 200, r.text
    return r.json()


def _table_rows(page: Page) -> list[list[str]]:
    cells = page.locator("#sql-table tbody tr:has(td)")
    return [[c.strip() for c in cells.nth(i).locator("td").all_inner_texts()]
            for i in range(cells.count())]


def _chart(page: Page) -> Any:
    """The drawn chart's traces: (name, x, y) of each."""
    return page.evaluate("""() => {
        const gd = document.querySelector('#sql-chart .js-plotly-plot');
        return gd.data.map(t => [t.name, t.x, t.y]);
    }""")


def test_query_in_the_url_shows_table_and_chart(page: Page, samples_server: Served,
                                                 sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet.trace"]
    sql = _examples(samples_server, tid)["time-per-state-per-p"]
    doc = _api(samples_server, sql)
    page.goto(samples_server.url + sql_href(sql))
    wait_for_dash(page, "#sql-table")
    assert page.locator("#sql-error").count() == 0
    shot(page, "sql-time-per-state-per-p")
    assert page.locator("#sql-text").input_value() == sql
    assert _table_rows(page) == [[str(v) for v in row] for row in doc["rows"]]
    assert f"{len(doc['rows'])} rows" in page.locator("#sql-note").inner_text()
    # The chart: total_ns per P, one bar series per state.
    cols = doc["columns"]
    by_state: dict[str, dict[str, int]] = {}
    for row in doc["rows"]:
        r = dict(zip(cols, row, strict=True))
        by_state.setdefault(r["state"], {})[str(r["p"])] = r["total_ns"]
    drawn = {name: dict(zip([str(x) for x in xs], ys, strict=True))
             for name, xs, ys in _chart(page)}
    assert drawn == by_state
    assert page.locator("#sql-chart .bars path").count() == len(doc["rows"])
    # The CSV link and the share link carry the query.
    csv_href = page.locator("#sql-csv").get_attribute("href") or ""
    assert parse_qs(urlparse(csv_href).query)["sql"] == [sql]
    share = page.locator("#sql-share").get_attribute("href") or ""
    assert parse_qs(urlparse(share).query)["q"] == [sql]


def test_run_puts_the_query_in_the_url_and_reload_runs_it(page: Page, samples_server: Served,
                                                          sample_ids: dict[str, int]) -> None:
    page.goto(samples_server.url + "/sql")
    wait_for_dash(page, "#sql-text")
    assert page.locator("#sql-table").count() == 0
    sql = "SELECT id, name FROM traces ORDER BY id"
    page.locator("#sql-text").fill(sql)
    page.locator("#sql-run").click()
    page.wait_for_url("**/sql?q=*")
    wait_for_dash(page, "#sql-table")
    assert parse_qs(urlparse(page.url).query)["q"] == [sql]
    want = [[str(i), name] for name, i in sorted(sample_ids.items(), key=lambda kv: kv[1])]
    assert _table_rows(page) == want
    page.reload()
    wait_for_dash(page, "#sql-table")
    assert _table_rows(page) == want
    assert page.locator("#sql-text").input_value() == sql


def test_example_link_and_refusal(page: Page, samples_server: Served,
                                  sample_ids: dict[str, int]) -> None:
    page.goto(samples_server.url + "/sql")
    wait_for_dash(page, "#sql-examples")
    # The examples' trace, picked from the list (the newest by default).
    tid = sample_ids["go1.27-httpnet.trace"]
    page.locator("#sql-trace").click()
    page.get_by_text(f"{tid}: go1.27-httpnet.trace", exact=True).click()
    page.wait_for_url(f"**/sql?trace={tid}")
    wait_for_dash(page, "#sql-examples")
    sql = _examples(samples_server, tid)["longest-syscalls"]
    doc = _api(samples_server, sql)
    page.locator("#sql-example-longest-syscalls").click()
    wait_for_dash(page, "#sql-table")
    assert page.locator("#sql-text").input_value() == sql
    assert len(_table_rows(page)) == len(doc["rows"]) == 20
    # A goroutine has several of them: the chart's x is the row number (one
    # series per outcome, together every row once).
    col = doc["columns"].index("duration_ns")
    drawn = sorted((x, y) for _, xs, ys in _chart(page) for x, y in zip(xs, ys, strict=True))
    assert drawn == [(n, row[col]) for n, row in enumerate(doc["rows"], 1)]
    shot(page, "sql-longest-syscalls")
    page.locator("#sql-text").fill("DELETE FROM traces")
    page.locator("#sql-run").click()
    wait_for_dash(page, "#sql-error")
    assert "DELETE is not allowed" in page.locator("#sql-error").inner_text()
    assert page.locator("#sql-table").count() == 0
    assert parse_qs(urlparse(page.url).query)["trace"] == [str(tid)]
    shot(page, "sql-refused")
    assert len(samples_server.get("/api/traces").json()["traces"]) == len(sample_ids)


def test_markup_in_results_stays_text(page: Page, samples_server: Served) -> None:
    """Strings a query returns (a trace's function names, labels, logs) go into
    the table, the chart's axis and its legend as text."""
    payload = '<img src=x onerror="window.__xss=1">'
    sql = (f"SELECT '{payload}' AS name, 'legend<b onmouseover=window.__xss=2>' AS kind, "
           "3 AS n UNION ALL SELECT 'other', 'legend2', 4")
    page.goto(samples_server.url + sql_href(sql, x="name", y="n", color="kind"))
    wait_for_dash(page, "#sql-table")
    for plot in page.locator("#sql-chart .nsewdrag").all():
        box = plot.bounding_box()
        assert box is not None
        for fx in (0.25, 0.75):
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.9)
    assert page.evaluate("() => window.__xss === undefined")
    assert page.locator("#sql-table").inner_text().count(payload) == 1
    assert page.locator("[onerror], [onmouseover]").count() == 0
    ticks = page.locator("#sql-chart .xtick text").all_text_contents()
    assert payload in ticks
    legend = page.locator("#sql-chart .legendtext").all_text_contents()
    assert "legend<b onmouseover=window.__xss=2>" in legend
    shot(page, "sql-markup")
