"""``gmpscope serve --samples DIR`` through a real server, on SQLite and PostgreSQL: the
samples the README's table lists are loaded (a recording directory with its Go trace),
and ``GET /api/samples`` gives each stored one its line of that table."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from ingest.views.samples import parse_table
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import REPO, Served

SAMPLES = REPO / "samples"
#: The samples only gmpscope shows something of: an OS recording, the old format, a
#: flight-recorder snapshot (small, so both backends load them quickly).
CHOSEN = ("go1.27-httpnet-os/", "go1.19-httpnet.trace", "go1.27-slowreq-flightrecorder.trace")


def chosen_rows() -> list[tuple[str, str, str]]:
    rows = parse_table((SAMPLES / "README.md").read_text())
    return [r for r in rows if r[0].strip("`") in CHOSEN]


@pytest.fixture(scope="module", params=backends())
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("samples-api")
    samples = base / "samples"
    samples.mkdir()
    for path in CHOSEN:
        src = SAMPLES / path
        if src.is_dir():
            shutil.copytree(src, samples / path)
        else:
            shutil.copyfile(src, samples / path)
    table = ["| sample | what it shows | click first |", "| --- | --- | --- |"]
    table += [f"| {a} | {b} | {c} |" for a, b, c in chosen_rows()]
    (samples / "README.md").write_text("\n".join(table) + "\n")
    for url in make_db_url(request.param, base):
        with Served(base / "data", [], db_url=url,
                    extra_args=("--workers", "1", "--threads", "8", "--samples",
                                str(samples))) as s:
            yield s


def test_each_sample_has_its_line(served: Served) -> None:
    traces = {t["name"]: t for t in served.get("/api/traces").json()["traces"]}
    lines = served.get("/api/samples").json()["samples"]
    rows = {a.strip("`"): (b, c) for a, b, c in chosen_rows()}
    assert len(rows) == len(CHOSEN)
    assert sorted(x["path"] for x in lines) == sorted(rows)
    for line in lines:
        shows, click = rows[line["path"]]
        assert line["shows"] == shows
        assert f"`{line['page']}`: {line['hint']}" == click
        assert line["id"] == traces[line["name"]]["id"]
        assert line["href"] == f"/traces/{line['id']}/{line['page']}"
    # Newest first, as the library lists them: the README's order.
    assert [x["path"] for x in lines] == [a.strip("`") for a, _b, _c in chosen_rows()]


def test_the_recording_comes_with_its_go_trace(served: Served) -> None:
    rec = next(x for x in served.get("/api/samples").json()["samples"]
               if x["path"] == "go1.27-httpnet-os/")
    assert rec["name"] == "go1.27-httpnet-os.trace" and rec["page"] == "poller"
    alignment = served.get(f"/api/traces/{rec['id']}/poller/alignment").json()
    assert alignment["rows"] == pq.read_metadata(
        SAMPLES / "go1.27-httpnet-os" / "poller.parquet").num_rows
