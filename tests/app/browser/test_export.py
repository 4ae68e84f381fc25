"""Downloads from the browser, captured by Playwright.

- Every Plotly graph has an SVG button in its mode bar (static/graph_svg.js)
  next to the PNG camera; clicking it downloads an SVG drawn by the browser,
  named by the graph's graph_config.
- The export links (app/components_export.py) download server-made SVG and
  Mermaid of the state graph.
- A table's CSV link downloads the table.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from playwright.sync_api import Locator, Page

from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

SAMPLE = "go1.27-httpnet.trace"
SVG_BUTTON = '.modebar-btn[data-title="Download plot as SVG"]'
PNG_BUTTON = '.modebar-btn[data-title="Download plot as a PNG"]'


def _download(page: Page, target: Locator, tmp_path: Path) -> tuple[str, bytes]:
    with page.expect_download() as info:
        target.click()
    download = info.value
    assert download.failure() is None
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return download.suggested_filename, path.read_bytes()


def _svg_texts(data: bytes) -> str:
    root = ET.fromstring(data)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))


def test_every_graph_has_svg_and_png_buttons(page: Page, samples_server: Served,
                                             sample_ids: dict[str, int],
                                             tmp_path: Path) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/overview")
    wait_for_dash(page, ".js-plotly-plot .main-svg")
    graphs = page.locator(".js-plotly-plot")
    assert graphs.count() >= 1
    for i in range(graphs.count()):
        g = graphs.nth(i)
        assert g.locator(SVG_BUTTON).count() == 1, f"graph {i} has no SVG button"
        assert g.locator(PNG_BUTTON).count() == 1, f"graph {i} has no PNG button"
    first = graphs.first
    first.hover()
    shot(page, "export-modebar")
    name, data = _download(page, first.locator(SVG_BUTTON), tmp_path)
    assert name.endswith(".svg") and str(tid) in name  # graph_config(filename)
    texts = _svg_texts(data)
    assert "Running" in texts  # the legend of the goroutines-by-state graph
    first.hover()
    name, data = _download(page, first.locator(PNG_BUTTON), tmp_path)
    assert name.endswith(".png") and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_state_graph_export_links(page: Page, samples_server: Served,
                                  sample_ids: dict[str, int], tmp_path: Path) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/states")
    wait_for_dash(page, ".export-links a.export-svg")
    name, data = _download(page, page.locator(".export-links a.export-svg").first, tmp_path)
    assert name.startswith(f"gmpscope-{tid}-states") and name.endswith(".svg")
    assert "Running" in _svg_texts(data)
    name, data = _download(page, page.locator(".export-links a.export-mermaid").first,
                           tmp_path)
    assert name.endswith(".mmd") and data.startswith(b"flowchart LR")


def test_table_csv_link(page: Page, samples_server: Served, sample_ids: dict[str, int],
                        tmp_path: Path) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/syscalls")
    link = page.locator(f'a[href^="/api/traces/{tid}/tables/syscalls.csv"]').first
    wait_for_dash(page)
    link.wait_for(state="visible")
    name, data = _download(page, link, tmp_path)
    assert name == f"gmpscope-{tid}-syscalls.csv"
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    summary = samples_server.get(f"/api/traces/{tid}").json()
    assert rows[0][:3] == ["id", "goid", "start_ts"]
    assert len(rows) - 1 == summary["syscall_count"]
