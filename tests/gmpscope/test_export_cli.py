"""``gmpscope export`` as a user runs it: a subprocess on a sample trace.

Expected values come from the database the export reads (the state graph,
the transitions, the table row counts) and from the requested image size.
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from app.figures.timeline import RUNNING_BY_G
from ingest.store import interval_files
from ingest.store.db import make_engine
from ingest.views.states import state_graph, to_dot, to_mermaid
from tests.support.coded_rows import set_text
from tests.support.server import REPO

SAMPLE = REPO / "samples" / "go1.27-httpnet.trace"
ANNOTATIONS = REPO / "samples" / "go1.27-annotations.trace"


def gmpscope(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gmpscope", *args, "--data-dir", str(data_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def db(data_dir: Path) -> sqlite3.Connection:
    # The intervals read the files beside the database through the store's
    # SQLite extension, registered before the connection opens.
    assert interval_files.register()
    return sqlite3.connect(data_dir / "gmpscope.db")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("export-cli")


@pytest.fixture(scope="module")
def trace_id(data_dir: Path) -> int:
    """The sample, ingested by the first export that names its path."""
    out = data_dir / "first.mmd"
    r = gmpscope(data_dir, "export", str(SAMPLE), "--diagram", "states", "-f", "mermaid",
                 "-o", str(out))
    assert r.returncode == 0, r.stderr
    m = re.search(r"trace (\d+) ingested", r.stderr)
    assert m, r.stderr
    return int(m.group(1))


def goroutine_transitions(data_dir: Path, tid: int) -> int:
    with db(data_dir) as c:
        return int(c.execute(
            "SELECT count(*) FROM intervals i JOIN transition_counts k ON k.trace_id = "
            "i.trace_id AND k.kind = i.kind WHERE i.trace_id = ? AND k.resource = 'goroutine'",
            (tid,)).fetchone()[0])


def test_path_of_stored_trace_is_found_by_hash(data_dir: Path, trace_id: int) -> None:
    out = data_dir / "again.dot"
    r = gmpscope(data_dir, "export", str(SAMPLE), "--diagram", "states", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "ingested" not in r.stderr
    with db(data_dir) as c:
        assert c.execute("SELECT count(*) FROM traces").fetchone()[0] == 1
    assert out.read_text().startswith('digraph "goroutine"')


@pytest.mark.parametrize("fmt,render", [("mermaid", to_mermaid), ("dot", to_dot)])
@pytest.mark.parametrize("resource", ["goroutine", "proc"])
def test_state_graph_text(data_dir: Path, trace_id: int, fmt: str, render: object,
                          resource: str) -> None:
    out = data_dir / f"states-{resource}.{fmt}"
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "states", "--format", fmt,
                 "-O", f"resource={resource}", "-o", str(out))
    assert r.returncode == 0, r.stderr
    engine = make_engine(f"sqlite:///{data_dir / 'gmpscope.db'}", migrate_to_head=False)
    try:
        graph = state_graph(engine, trace_id, resource)
    finally:
        engine.dispose()
    text = out.read_text()
    assert text == render(graph)  # type: ignore[operator]
    # The edge labels' counts add up to the resource's rows of the transitions table.
    counts = [int(n.replace(",", "")) for n in
              re.findall(r'(?:-->\|"|label=")([\d,]+)', text)]
    assert len(counts) == len(graph.edges)
    with db(data_dir) as c:
        n = c.execute("SELECT count(*) FROM transitions WHERE trace_id = ? AND resource = ?",
                      (trace_id, resource)).fetchone()[0]
    assert sum(counts) == n > 0


def test_svg_states(data_dir: Path, trace_id: int) -> None:
    out = data_dir / "states.svg"
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "states", "-o", str(out))
    assert r.returncode == 0, r.stderr
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))
    engine = make_engine(f"sqlite:///{data_dir / 'gmpscope.db'}", migrate_to_head=False)
    try:
        graph = state_graph(engine, trace_id, "goroutine")
    finally:
        engine.dispose()
    for node in graph.nodes:
        assert node in texts, f"state {node} not in the SVG"
    assert f"{goroutine_transitions(data_dir, trace_id):,}" in texts


def test_svg_timeline_lanes(data_dir: Path, trace_id: int) -> None:
    out = data_dir / "timeline.svg"
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "timeline", "-O", "mode=p",
                 "-o", str(out))
    assert r.returncode == 0, r.stderr
    root = ET.parse(out).getroot()
    texts = {"".join(e.itertext()) for e in root.iter() if e.tag.endswith("text")}
    with db(data_dir) as c:
        procs = [pid for (pid,) in c.execute("SELECT pid FROM procs WHERE trace_id = ?",
                                             (trace_id,))]
    assert procs
    for pid in procs:
        assert f"P{pid}" in texts, f"lane P{pid} not in the SVG"
    assert RUNNING_BY_G in texts  # the legend of the runs, coloured by goroutine


def test_png_size(data_dir: Path, trace_id: int) -> None:
    out = data_dir / "states.png"
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "states", "-o", str(out),
                 "-O", "width=900", "-O", "height=500", "-O", "scale=2")
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (1800, 1000)
    assert len(data) > 20_000  # a drawn graph, not a blank image


def test_html_is_standalone(data_dir: Path, trace_id: int) -> None:
    out = data_dir / "states.html"
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "states", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "Plotly.newPlot" in page
    assert "<script src=" not in page  # plotly.js embedded: works offline
    assert re.search(r"plotly\.js v\d", page)
    assert f"trace {trace_id}: states" in page
    assert '"Running"' in page or "Running" in page


def test_tables(data_dir: Path, trace_id: int) -> None:
    csv_out, pq_out = data_dir / "iv.csv", data_dir / "iv.parquet"
    for out in (csv_out, pq_out):
        r = gmpscope(data_dir, "export", str(trace_id), "--table", "intervals", "-o", str(out))
        assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(csv_out.read_text())))
    with db(data_dir) as c:
        n = c.execute("SELECT transitions FROM traces WHERE id = ?", (trace_id,)).fetchone()[0]
    assert len(rows) - 1 == n == pq.read_metadata(pq_out).num_rows
    g = rows[0].index("g")
    assert any(row[g] == "-1" for row in rows[1:])  # numbers are never quoted


def test_formula_cells_are_escaped(tmp_path: Path) -> None:
    r = gmpscope(tmp_path, "ingest", "--no-progress", str(ANNOTATIONS))
    assert r.returncode == 0, r.stderr
    tid = int(r.stdout.split()[0])
    hostile = ['=HYPERLINK("http://evil.example","x")', "+1+2", "-2+3", "@SUM(A1)", "\t=1"]
    with db(tmp_path) as c:
        seqs = [s for (s,) in c.execute(
            "SELECT seq FROM logs WHERE trace_id = ? ORDER BY seq LIMIT ?", (tid, len(hostile)))]
        for seq, text in zip(seqs, hostile, strict=True):
            set_text(c, tid, "logs", "message", "seq", seq, text)
    out = tmp_path / "logs.csv"
    r = gmpscope(tmp_path, "export", str(tid), "--table", "logs", "-o", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    by_seq = {int(row["seq"]): row["message"] for row in rows}
    for seq, text in zip(seqs, hostile, strict=True):
        assert by_seq[seq] == "'" + text
    pq_out = tmp_path / "logs.parquet"
    r = gmpscope(tmp_path, "export", str(tid), "--table", "logs", "-o", str(pq_out))
    assert r.returncode == 0, r.stderr
    exact = dict(zip(*pq.read_table(pq_out, columns=["seq", "message"]).to_pydict().values(),
                     strict=True))
    assert [exact[s] for s in seqs] == hostile  # Parquet keeps the exact strings


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("gmpscope export: ")
    return lines[0]


def test_unknown_diagram(data_dir: Path, trace_id: int) -> None:
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "no-such", "-o",
                 str(data_dir / "x.svg"))
    assert r.returncode == 2
    line = one_line_error(r)
    assert "unknown diagram 'no-such'" in line and "states" in line
    assert not (data_dir / "x.svg").exists()


def test_missing_trace(data_dir: Path, trace_id: int) -> None:
    r = gmpscope(data_dir, "export", str(trace_id + 1000), "--diagram", "states", "-o",
                 str(data_dir / "y.svg"))
    assert r.returncode == 2
    assert f"no trace with id {trace_id + 1000}" in one_line_error(r)
    r = gmpscope(data_dir, "export", str(data_dir / "nope.trace"), "--table", "logs", "-o",
                 str(data_dir / "y.csv"))
    assert r.returncode == 2
    one_line_error(r)


def test_text_format_for_a_figure_only_diagram(data_dir: Path, trace_id: int) -> None:
    r = gmpscope(data_dir, "export", str(trace_id), "--diagram", "syscalls", "-f", "dot",
                 "-o", str(data_dir / "z.dot"))
    assert r.returncode == 2
    assert "only for state graphs" in one_line_error(r)


def test_unknown_table(data_dir: Path, trace_id: int) -> None:
    r = gmpscope(data_dir, "export", str(trace_id), "--table", "secrets", "-o",
                 str(data_dir / "s.csv"))
    assert r.returncode == 2
    assert "unknown table 'secrets'" in one_line_error(r)
