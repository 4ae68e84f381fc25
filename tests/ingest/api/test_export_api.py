"""The download API on a real ``gmpscope serve``: tables as CSV and Parquet,
figures and state graphs as attachments.

Row counts come from the server's database and from the trace summary; the
Parquet download must hold the same rows as the CSV one.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ingest.store import interval_files
from ingest.views.tables import TABLES
from tests.support.coded_rows import set_text
from tests.support.server import REPO, Served

#: A sample with every kind of table filled (tasks, regions, logs with hostile strings).
ANNOTATIONS = "go1.27-annotations.trace"
HTTPNET = "go1.27-httpnet.trace"
#: Tables keyed by trace_id whose rows we count with SQL directly.
_SQL_COUNT = {
    "traces": "SELECT count(*) FROM traces WHERE id = ?",
    "intervals": "SELECT count(*) FROM intervals WHERE trace_id = ?",
    "transitions": "SELECT count(*) FROM transitions WHERE trace_id = ?",
}


def db_count(served: Served, table: str, tid: int) -> int:
    sql = _SQL_COUNT.get(table, f"SELECT count(*) FROM {table} WHERE trace_id = ?")
    # The intervals and the views over them read the files kept beside the
    # database through the store's SQLite extension: registered before this
    # process opens the connection (ingest.store.interval_files).
    assert interval_files.register()
    with sqlite3.connect(served.data_dir / "gmpscope.db") as c:
        return int(c.execute(sql, (tid,)).fetchone()[0])


def get_csv(served: Served, path: str) -> list[list[str]]:
    r = served.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(r.content.decode("utf-8"), newline="")))


def get_parquet(served: Served, path: str, tmp_path: Path) -> Any:
    r = served.get(path)
    assert r.status_code == 200, r.text
    out = tmp_path / "t.parquet"
    out.write_bytes(r.content)
    return pq.read_table(out)


def as_csv_cell(v: Any) -> str:
    """How the CSV spells a value (the module docstring of ingest.views.tables)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v if v.startswith(("=", "+", "-", "@", "\t", "\r")) else v
    if isinstance(v, dt.datetime):
        return v.isoformat()
    return str(v)


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("sample", [ANNOTATIONS, HTTPNET])
def test_csv_rows_match_the_database(samples_server: Served, sample_ids: dict[str, int],
                                     sample: str, table: str) -> None:
    tid = sample_ids[sample]
    rows = get_csv(samples_server, f"/api/traces/{tid}/tables/{table}.csv")
    assert rows[0] == TABLES[table].columns
    assert len(rows) - 1 == db_count(samples_server, table, tid)


def test_counts_match_the_summary(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[ANNOTATIONS]
    summary = samples_server.get(f"/api/traces/{tid}").json()
    expected = {"transitions": summary["transitions"], "goroutines": summary["goroutines"],
                "procs": summary["procs"], "threads": summary["threads"],
                "syscalls": summary["syscall_count"], "ranges": summary["range_count"],
                "tasks": summary["task_count"], "regions": summary["region_count"],
                "logs": summary["log_count"]}
    for table, n in expected.items():
        rows = get_csv(samples_server, f"/api/traces/{tid}/tables/{table}.csv")
        assert len(rows) - 1 == n, table


@pytest.mark.parametrize("table", ["traces", "goroutines", "intervals", "syscalls", "ranges",
                                   "tasks", "regions", "logs", "metrics", "stacks"])
def test_parquet_equals_csv(samples_server: Served, sample_ids: dict[str, int], table: str,
                            tmp_path: Path) -> None:
    tid = sample_ids[ANNOTATIONS]
    rows = get_csv(samples_server, f"/api/traces/{tid}/tables/{table}.csv")
    data = get_parquet(samples_server, f"/api/traces/{tid}/tables/{table}.parquet", tmp_path)
    assert data.column_names == rows[0]
    assert [[as_csv_cell(v) for v in r.values()] for r in data.to_pylist()] == rows[1:]


def test_time_window(samples_server: Served, sample_ids: dict[str, int]) -> None:
    """A window keeps exactly the rows the overlap rule selects from the whole table."""
    tid = sample_ids[HTTPNET]
    info = samples_server.get(f"/api/traces/{tid}").json()
    t1 = info["first_ts"] + (info["last_ts"] - info["first_ts"]) // 3
    t2 = t1 + (info["last_ts"] - info["first_ts"]) // 10
    whole = get_csv(samples_server, f"/api/traces/{tid}/tables/intervals.csv")
    head = whole[0]
    s, e = head.index("start_ts"), head.index("end_ts")
    expected = [r for r in whole[1:] if int(r[s]) < t2 and (int(r[e]) > t1 or int(r[s]) >= t1)]
    part = get_csv(samples_server, f"/api/traces/{tid}/tables/intervals.csv?t1={t1}&t2={t2}")
    assert part[1:] == expected
    assert 0 < len(expected) < len(whole) - 1
    logs = get_csv(samples_server, f"/api/traces/{tid}/tables/metrics.csv?t1={t1}&t2={t2}")
    ts = logs[0].index("ts")
    assert all(t1 <= int(r[ts]) < t2 for r in logs[1:])


def test_attachment_names(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[ANNOTATIONS]
    r = samples_server.get(f"/api/traces/{tid}/tables/logs.csv?t1=5")
    assert r.headers["Content-Disposition"] == \
        f'attachment; filename="gmpscope-{tid}-logs-5-end.csv"'
    r = samples_server.get(f"/api/traces/{tid}/export?diagram=states&format=dot")
    assert r.headers["Content-Disposition"] == f'attachment; filename="gmpscope-{tid}-states.dot"'


def test_errors(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[ANNOTATIONS]
    r = samples_server.get(f"/api/traces/{tid}/tables/secrets.csv")
    assert r.status_code == 404 and "unknown table 'secrets'" in r.json()["error"]
    assert samples_server.get(f"/api/traces/{tid}/tables/secrets.parquet").status_code == 404
    assert samples_server.get("/api/traces/999999/tables/logs.csv").status_code == 404
    assert samples_server.get(f"/api/traces/{tid}/tables/logs.csv?t1=x").status_code == 400
    r = samples_server.get(f"/api/traces/{tid}/tables/stacks.csv?t1=1")
    assert r.status_code == 400 and "not time-bounded" in r.json()["error"]
    r = samples_server.get(f"/api/traces/{tid}/export?diagram=no-such&format=svg")
    assert r.status_code == 400 and "states" in r.json()["error"]
    r = samples_server.get(f"/api/traces/{tid}/export?diagram=states&format=gif")
    assert r.status_code == 400
    assert samples_server.get("/api/traces/999999/export?diagram=states&format=dot"
                              ).status_code == 404


def test_state_graph_text_equals_the_states_api(samples_server: Served,
                                                sample_ids: dict[str, int]) -> None:
    tid = sample_ids[HTTPNET]
    for query in ("resource=goroutine", "resource=proc", "resource=thread",
                  "resource=goroutine&split_reasons=1"):
        for fmt in ("mermaid", "dot"):
            got = samples_server.get(f"/api/traces/{tid}/export?diagram=states&format={fmt}"
                                     f"&{query}")
            want = samples_server.get(f"/api/traces/{tid}/states?format={fmt}&{query}")
            assert got.status_code == want.status_code == 200, got.text
            assert got.text == want.text


def test_svg_download(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[HTTPNET]
    r = samples_server.get(f"/api/traces/{tid}/export?diagram=states&format=svg&width=900")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("image/svg+xml")
    root = ET.fromstring(r.content)
    assert root.get("width") == "900"
    texts = " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))
    assert "Running" in texts and "Runnable" in texts


def test_formula_injection_escaped(tmp_path: Path) -> None:
    """Hostile log messages come out of the CSV as text, and exact in Parquet."""
    hostile = ['=cmd|"/c calc"!A1', "+SUM(1,2)", "-1+1", "@A1"]
    with Served(tmp_path / "data", [REPO / "samples" / ANNOTATIONS]) as served:
        tid = served.ingested[0]
        assert interval_files.register()  # the logs' rows in files, read by SQL
        with sqlite3.connect(served.data_dir / "gmpscope.db") as c:
            seqs = [s for (s,) in c.execute("SELECT seq FROM logs WHERE trace_id = ? "
                                            "ORDER BY seq LIMIT 4", (tid,))]
            for seq, text in zip(seqs, hostile, strict=True):
                set_text(c, tid, "logs", "category", "seq", seq, text)
        rows = get_csv(served, f"/api/traces/{tid}/tables/logs.csv")
        col = rows[0].index("category")
        got = {int(r[0]): r[col] for r in rows[1:]}
        assert [got[s] for s in seqs] == ["'" + h for h in hostile]
        data = get_parquet(served, f"/api/traces/{tid}/tables/logs.parquet", tmp_path)
        exact = dict(zip(data.column("seq").to_pylist(), data.column("category").to_pylist(),
                         strict=True))
        assert [exact[s] for s in seqs] == hostile
