"""Downloads from the browser: the SVG link next to a graph gives an SVG file,
the CSV link next to a table a CSV file (the server's attachment, captured by
Playwright)."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tests.support.server import Served

SAMPLE = "go1.27-httpnet.trace"


def _download(page: Page, selector: str, tmp_path: Path) -> tuple[str, bytes]:
    link = page.locator(selector).first
    link.wait_for(state="visible")
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.failure() is None
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return download.suggested_filename, path.read_bytes()


def test_state_graph_svg_download(page: Page, samples_server: Served,
                                  sample_ids: dict[str, int], tmp_path: Path) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/states")
    wait_for_dash(page, ".js-plotly-plot .main-svg")
    shot(page, "export-states-page")
    name, data = _download(page, ".export-links a.export-svg", tmp_path)
    assert name.endswith(".svg") and name.startswith(f"gmpscope-{tid}-states")
    root = ET.fromstring(data)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))
    assert "Running" in texts
    name, data = _download(page, ".export-links a.export-mermaid", tmp_path)
    assert name.endswith(".mmd") and data.startswith(b"flowchart LR")


def test_table_csv_download(page: Page, samples_server: Served, sample_ids: dict[str, int],
                            tmp_path: Path) -> None:
    tid = sample_ids[SAMPLE]
    page.goto(f"{samples_server.url}/traces/{tid}/syscalls")
    wait_for_dash(page, ".table-links a.export-csv")
    name, data = _download(page, ".table-links a.export-csv", tmp_path)
    assert name.endswith(".csv")
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert len(rows) > 1 and "start_ts" in rows[0]
