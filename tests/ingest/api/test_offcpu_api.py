"""The off-CPU JSON API (ingest/api/offcpu.py) through a real server, on SQLite
and PostgreSQL: a real cpuquota run with its scheduling recording is stored in
the server's database first; each endpoint answers what the view computes in
process over the same database (the one query layer), and bad input answers
400/404 with one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.store.db import make_engine
from ingest.views import offcpu
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.sched_recordings import NEEDS_BPFTRACE, record, stored, workload_bin
from tests.support.server import Served

pytestmark = [pytest.mark.slow, *NEEDS_BPFTRACE]


@pytest.fixture(scope="module")
def quota_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(workload_bin("cpuquota"), ["-duration", "400ms"],
                  tmp_path_factory.mktemp("quota"), await_stdin=True)


@pytest.fixture(scope="module", params=backends())
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           quota_dir: Path) -> Iterator[tuple[Served, Any, int]]:
    root = tmp_path_factory.mktemp(f"srv-{request.param}")
    for url in make_db_url(request.param, root):
        engine = make_engine(url)
        trace_id = stored(engine, quota_dir, root / "data")
        with Served(root / "data", db_url=url) as srv:
            yield srv, engine, trace_id
        engine.dispose()


def _same(got: Any, want: Any) -> None:
    assert got == json.loads(json.dumps(want)), "the API answers what the view computes"


def test_summary_and_goroutine(served: tuple[Served, Any, int]) -> None:
    srv, engine, tid = served
    r = srv.get(f"/api/traces/{tid}/offcpu")
    assert r.status_code == 200
    want = offcpu.offcpu_summary(engine, tid)
    assert want is not None and want["offcpu_ns"] > 0
    _same(r.json(), want)
    goid = want["goroutines"][0]["goid"]
    r = srv.get(f"/api/traces/{tid}/goroutines/{goid}/offcpu")
    assert r.status_code == 200
    _same(r.json(), offcpu.goroutine_offcpu(engine, tid, goid))


def test_threads_and_lanes(served: tuple[Served, Any, int]) -> None:
    srv, engine, tid = served
    s = offcpu.offcpu_summary(engine, tid)
    assert s is not None
    t1, t2 = s["first_ts"], s["last_ts"]
    r = srv.get(f"/api/traces/{tid}/offcpu/threads")
    assert r.status_code == 200
    _same(r.json(), offcpu.thread_states(engine, tid, t1, t2))
    mid = (t1 + t2) // 2
    r = srv.get(f"/api/traces/{tid}/offcpu/lanes", params={"t1": t1, "t2": mid, "px": 40})
    assert r.status_code == 200
    _same(r.json(), offcpu.offcpu_lanes(engine, tid, t1, mid, 40))


def test_bad_input(served: tuple[Served, Any, int]) -> None:
    srv, _, tid = served
    r = srv.get(f"/api/traces/{tid}/offcpu/lanes", params={"px": "wide"})
    assert r.status_code == 400 and "px must be an integer" in r.json()["error"]
    r = srv.get(f"/api/traces/{tid}/offcpu/threads", params={"t1": 10, "t2": 5})
    assert r.status_code == 400
    assert srv.get(f"/api/traces/{tid + 1000}/offcpu").status_code == 404


def test_deleting_the_trace_deletes_its_scheduling_rows(served: tuple[Served, Any, int]) -> None:
    """Last in the module: the trace goes (a cascade on both dialects)."""
    from sqlalchemy import func, select

    from ingest.load.delete import delete_trace
    from ingest.store.os_sched_models import os_sched_intervals, os_sched_recordings

    srv, engine, tid = served
    assert delete_trace(engine, tid, srv.data_dir)
    with engine.connect() as conn:
        for table in (os_sched_intervals, os_sched_recordings):
            n = conn.execute(select(func.count()).select_from(table)
                             .where(table.c.trace_id == tid)).scalar()
            assert n == 0, table.name
    assert srv.get(f"/api/traces/{tid}/offcpu").status_code == 404
