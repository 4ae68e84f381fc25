"""The causality endpoints (flows, search, area, critical path) through a real
``gmpscope serve`` on SQLite and PostgreSQL, on the chain workload's trace:
answers checked against Go's own unblocks and SQL over the same database;
400 for bad parameters, 404 for unknown traces, spans and goroutines."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from ingest.store.db import make_engine
from tests.support.causality import go_unblocks
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import Served
from tests.support.workload_traces import workload_trace

GO = "1.27"


@pytest.fixture(scope="module", params=backends())
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Served, str]]:
    base = tmp_path_factory.mktemp("causality-api")
    for url in make_db_url(request.param, base):
        with Served(base / "data", [workload_trace(GO, "chain")], db_url=url) as s:
            yield s, url


def _rows(url: str, sql: str, **params: Any) -> list[Any]:
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            return list(c.execute(sa.text(sql), params).all())
    finally:
        eng.dispose()


def _groups(url: str, tid: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for fn, g in _rows(url, "SELECT start_function, goid FROM goroutines WHERE trace_id = :t "
                            "AND start_function LIKE 'main.%' ORDER BY created_ts", t=tid):
        out.setdefault(fn, []).append(g)
    return out


def test_flows_name_gos_waker(served: tuple[Served, str]) -> None:
    srv, _ = served
    tid = srv.ingested[0]
    unblocks = go_unblocks(workload_trace(GO, "chain"))
    checked = 0
    for _seq, goid, waker, stack in unblocks:
        ts = [r for r in srv.get(f"/api/traces/{tid}/search?q={goid}&limit=5000")
              .json()["spans"] if r["state"] == "Runnable" and r["from_state"] == "Waiting"]
        for span in ts:
            d = srv.get(f"/api/traces/{tid}/flows?ref={span['ref']}").json()
            if d["woken_by"]["waker"] == waker and \
                    tuple(f["function"] for f in d["woken_by"]["stack"]) == stack:
                checked += 1
                break
        else:
            pytest.fail(f"no span of goroutine {goid} woken by {waker}")
    assert checked == len(unblocks) > 0


def test_search_area_and_critical_path(served: tuple[Served, str]) -> None:
    srv, url = served
    tid = srv.ingested[0]
    groups = _groups(url, tid)
    d = srv.get(f"/api/traces/{tid}/search?q=MAIN.HOLDER&limit=2").json()
    want = _rows(url, "SELECT count(*) FROM interval_view v JOIN goroutines g ON "
                      "g.trace_id = v.trace_id AND g.goid = v.rid WHERE v.trace_id = :t "
                      "AND g.start_function = 'main.holder'", t=tid)[0][0]
    assert d["total"] >= want > 0 and len(d["spans"]) == 2
    first, last = _rows(url, "SELECT first_ts, last_ts FROM traces WHERE id = :t", t=tid)[0]
    a = srv.get(f"/api/traces/{tid}/area", params={
        "t1": first, "t2": last, "lane": ["group:main.holder", "p:0"]}).json()
    sleep = _rows(url, "SELECT sum(v.end_ts - v.start_ts) FROM interval_view v WHERE "
                       "v.trace_id = :t AND v.state = 'Waiting' AND v.reason = 'sleep' AND "
                       "v.rid IN (SELECT goid FROM goroutines WHERE trace_id = :t AND "
                       "start_function = 'main.holder')", t=tid)[0][0]
    assert {x["function"]: x["states"].get("Waiting") for x in a["functions"]}[
        "time.Sleep"] == sleep
    assert a["links"]["flame_sync"].startswith(f"/traces/{tid}/flame?kind=sync&t1=")
    for consumer, feeder, holder in zip(groups["main.consumer"], groups["main.feeder"],
                                        groups["main.holder"], strict=True):
        c = srv.get(f"/api/traces/{tid}/critical-path?g={consumer}").json()
        assert c["chain"] == [consumer, feeder, holder]
        assert sum(x["duration_ns"] for x in c["links"]) == c["total_ns"]


@pytest.mark.parametrize("path, status", [
    ("/api/traces/{tid}/flows", 404),
    ("/api/traces/{tid}/flows?ref=-1", 404),
    ("/api/traces/{tid}/flows?g=999999", 404),
    ("/api/traces/{tid}/flows?ref=x", 400),
    ("/api/traces/9999/flows?g=1", 404),
    ("/api/traces/{tid}/search", 400),
    ("/api/traces/{tid}/search?q=main&state=Asleep", 400),
    ("/api/traces/{tid}/search?q=main&t1=5&t2=1", 400),
    ("/api/traces/{tid}/area", 400),
    ("/api/traces/{tid}/area?lane=q:1", 400),
    ("/api/traces/{tid}/critical-path", 404),
    ("/api/traces/{tid}/critical-path?g=999999", 404),
    ("/api/traces/{tid}/critical-path?task=999999", 404),
])
def test_errors(served: tuple[Served, str], path: str, status: int) -> None:
    srv, _ = served
    r = srv.get(path.format(tid=srv.ingested[0]))
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json") and r.json()["error"]
