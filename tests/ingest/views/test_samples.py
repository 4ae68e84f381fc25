"""The samples' lines (ingest/views/samples.py) on the real samples/README.md."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from ingest.views.samples import (
    TRACE_PAGES,
    CatalogError,
    hints_for,
    kept_catalog,
    parse_table,
    read_catalog,
    write_catalog,
)

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "samples"


def test_readme_lists_every_sample_and_nothing_else() -> None:
    catalog = read_catalog(SAMPLES)
    listed = {s.path.rstrip("/") for s in catalog}
    present = {p.name for p in SAMPLES.iterdir() if p.suffix == ".trace" or p.is_dir()}
    assert listed == present
    assert all(s.page in TRACE_PAGES and s.shows and s.hint for s in catalog)


def test_a_recording_directory_stands_for_its_go_trace() -> None:
    (rec,) = [s for s in read_catalog(SAMPLES) if s.path.endswith("/")]
    trace = SAMPLES / rec.path / rec.trace_file
    assert trace.suffix == ".trace" and (SAMPLES / rec.path / "poller.parquet").is_file()
    assert rec.sha256 == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert rec.page == "poller"


def test_rows_keep_their_text() -> None:
    rows = parse_table("intro\n\n| sample | what it shows | click first |\n| --- | --- | --- |\n"
                       "| `a.trace` | x with a \\| pipe | `timeline`: y |\n\nafter | not a row |\n")
    assert rows == [("`a.trace`", "x with a \\| pipe", "`timeline`: y")]


HEAD = "| sample | what it shows | click first |\n| --- | --- | --- |\n"


@pytest.mark.parametrize("table, why", [
    ("| file | what |\n| --- | --- |\n| `a.trace` | x |\n", "no table"),
    (HEAD + "| `a.trace` | x | see the timeline |\n", "must start with a page"),
    (HEAD + "| `b.trace` | x | `timeline`: y |\n", "not in"),
    (HEAD + "| `a.trace` | x |\n", "3 cells"),
])
def test_a_bad_readme_is_one_clear_error(tmp_path: Path, table: str, why: str) -> None:
    shutil.copyfile(SAMPLES / "go1.27-mutex.trace", tmp_path / "a.trace")
    (tmp_path / "README.md").write_text(table)
    with pytest.raises(CatalogError, match=why):
        read_catalog(tmp_path)


def test_hints_follow_the_stored_bytes_not_the_name(tmp_path: Path) -> None:
    catalog = read_catalog(SAMPLES)
    write_catalog(tmp_path, catalog)
    assert kept_catalog(tmp_path) == catalog
    old = next(s for s in catalog if s.path == "go1.19-httpnet.trace")
    traces = [{"id": 7, "name": "renamed.trace", "sha256": old.sha256},
              {"id": 8, "name": "go1.19-httpnet.trace", "sha256": "0" * 64}]
    assert hints_for(traces, tmp_path) == {7: {
        "path": old.path, "shows": old.shows, "page": "timeline", "hint": old.hint,
        "href": "/traces/7/timeline"}}
    assert hints_for(traces, tmp_path / "elsewhere") == {}
