"""The Perfetto export through a real server (``GET /api/traces/<id>/perfetto``)
and the CLI (``gmpscope export ID --format perfetto``), on SQLite and
PostgreSQL, over real workload traces: the same bytes from both, read back
with the ``perfetto`` package's protos, its slice counts per kind of track
equal to the intervals in SQL, its flows to the wake-ups in SQL, its counter
samples to the metrics rows."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ingest.store.db import make_engine
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.perfetto_read import read
from tests.support.server import REPO, Served
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow

GO = "1.27.3"
WORKLOADS = ("mutex", "httpnet")

#: Goroutine wake-ups: Waiting -> Runnable in another goroutine's context,
#: followed by the goroutine's Running (the flows' rule, docs/perfetto.md).
WAKEUPS = """
SELECT COUNT(*) FROM (
  SELECT rid, g, from_state, state,
         LEAD(state) OVER (PARTITION BY rid ORDER BY start_ts, seq) AS next_state
  FROM interval_view WHERE trace_id = :t AND resource = 'goroutine') w
WHERE from_state = 'Waiting' AND state = 'Runnable' AND COALESCE(g, -1) >= 0
  AND g != rid AND next_state = 'Running'
"""


@pytest.fixture(scope="module", params=backends())
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Served, str]]:
    base = tmp_path_factory.mktemp("perfetto-api")
    traces = [workload_trace(GO, w) for w in WORKLOADS]
    for url in make_db_url(request.param, base):
        with Served(base / "data", traces, db_url=url) as s:
            yield s, url


def scalar(url: str, sql: str, **params: Any) -> int:
    # The store's engine: its connections know how SQLite's intervals are stored.
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            return int(c.execute(sa.text(sql), params).scalar_one())
    finally:
        eng.dispose()


def cli(served: Served, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("GMPSCOPE_DB", None)
    return subprocess.run([sys.executable, "-m", "gmpscope", "export", *args, "--db", url,
                           "--data-dir", str(served.data_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_api_and_cli_export(served: tuple[Served, str], workload: str, tmp_path: Path
                            ) -> None:
    srv, url = served
    trace_id = srv.ingested[WORKLOADS.index(workload)]
    r = srv.get(f"/api/traces/{trace_id}/perfetto")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Disposition"].endswith(
        f'filename="gmpscope-{trace_id}-perfetto.pftrace"')
    out = tmp_path / "t.pftrace"
    p = cli(srv, url, str(trace_id), "--format", "perfetto", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == r.content

    pt = read(r.content)
    roots = {t.name: t for t in pt.tracks.values() if t.parent == 0}

    def slices_under(root: str, depth: int) -> int:
        level = [roots[root]]
        for _ in range(depth):
            level = [c for t in level for c in pt.children(t.uuid)]
        return sum(len(t.slices) for t in level)

    t = trace_id
    assert slices_under("Goroutines by start function", 2) == scalar(
        url, "SELECT COUNT(*) FROM interval_view WHERE trace_id = :t AND "
        "resource = 'goroutine' AND state != 'NotExist'", t=t) > 0
    assert slices_under("Procs (P)", 1) == scalar(
        url, "SELECT COUNT(*) FROM proc_runs WHERE trace_id = :t", t=t) > 0
    assert slices_under("Threads (M)", 1) == scalar(
        url, "SELECT COUNT(*) FROM thread_intervals WHERE trace_id = :t AND m >= 0", t=t) > 0
    assert len(pt.flows) == scalar(url, WAKEUPS, t=t) > 0
    counters = [tr for tr in roots.values() if tr.is_counter]
    metric_samples = sum(len(tr.counts) for tr in counters if ":" in tr.name)
    assert metric_samples == scalar(
        url, "SELECT COUNT(*) FROM metrics WHERE trace_id = :t AND value IS NOT NULL", t=t)
    assert {"Goroutines", "Threads in syscall"} <= {tr.name for tr in counters}


def test_errors(served: tuple[Served, str], tmp_path: Path) -> None:
    srv, url = served
    r = srv.get("/api/traces/999999/perfetto")
    assert r.status_code == 404 and "999999" in r.json()["error"]
    p = cli(srv, url, "999999", "--format", "perfetto", "-o", str(tmp_path / "x.pftrace"))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "999999" in p.stderr
    p = cli(srv, url, str(srv.ingested[0]), "--format", "perfetto", "--table", "intervals",
            "-o", str(tmp_path / "x.pftrace"))
    assert p.returncode == 2 and "whole trace" in p.stderr
    assert not (tmp_path / "x.pftrace").exists()
    # The format from the file's extension.
    p = cli(srv, url, str(srv.ingested[0]), "-o", str(tmp_path / "y.pftrace"))
    assert p.returncode == 0, p.stderr
    assert read(tmp_path / "y.pftrace").flows
