"""Scheduler latency (Runnable -> Running) against Go's own parsed events and
against plain loops over the database's intervals; percentiles by hand; the
JSON API."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from ingest.derive.frames import FrameStore, TraceFrames
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.latency import CAUSES, latency_report, latency_samples
from tests.support.analysis import Store, open_store
from tests.support.goparsed import GoEvent, go_parsed
from tests.support.server import Served

SAMPLES = ("go1.27-connleak.trace", "go1.27-gcpressure.trace", "go1.27-httpnet.trace",
           "go1.27-mutex.trace", "go1.27-syscallblock.trace", "go1.27-timers.trace",
           "go1.27-annotations.trace")
REPO = Path(__file__).resolve().parents[3]

Sample = tuple[int, int, int, int]  # goid, runnable_ts, running_ts, p


@pytest.fixture(scope="module")
def store(samples_server: Served, sample_ids: dict[str, int]) -> Store:
    return open_store(samples_server, sample_ids)


def ours(f: TraceFrames) -> list[Sample]:
    s = latency_samples(f)
    return sorted(zip(s.goid.tolist(), s.runnable_ts.tolist(), s.running_ts.tolist(),
                      s.p.tolist(), strict=True))


def from_transitions(rows: Iterator[tuple[int, int, str, str, int]]
                     ) -> tuple[list[Sample], int]:
    """Samples from goroutine transitions (goid, ts, from, to, p) in each
    goroutine's order: a sample from entering Runnable (from anything but
    Runnable) to Runnable->Running; entering from Undetermined is censored."""
    entered: dict[int, int | None] = {}
    out: list[Sample] = []
    censored = 0
    for goid, ts, frm, to, p in rows:
        if to == "Runnable" and frm != "Runnable":
            entered[goid] = None if frm == "Undetermined" else ts
        elif frm == "Runnable" and to == "Running":
            start = entered.pop(goid, None)
            if start is None:
                censored += 1
            else:
                out.append((goid, start, ts, p))
    return sorted(out), censored


def go_samples(trace: Path) -> tuple[list[Sample], int]:
    events, err = go_parsed(trace)
    assert err is None
    rows = ((e.rid, e.ts, e.from_state, e.to_state, e.p) for e in events
            if isinstance(e, GoEvent) and e.kind == "StateTransition"
            and e.resource == "goroutine")
    return from_transitions(rows)


@pytest.mark.parametrize("name", SAMPLES)
def test_equals_sql_transitions(store: Store, name: str) -> None:
    """Same samples as a plain loop over the transitions view (ORDER BY seq)."""
    f = store.get(name)
    rows = store.rows("SELECT id, ts, from_state, to_state, p FROM transitions "
                      "WHERE trace_id = :t AND resource = 'goroutine' ORDER BY seq",
                      t=f.trace_id)
    want, censored = from_transitions(iter((r[0], r[1], r[2], r[3], r[4]) for r in rows))
    assert ours(f) == want
    assert latency_samples(f).censored == censored


@pytest.mark.slow
@pytest.mark.parametrize("name", ["go1.27-syscallblock.trace", "go1.27-mutex.trace",
                                  "go1.27-httpnet.trace", "go1.27-connleak.trace"])
def test_equals_go_parsed(store: Store, name: str) -> None:
    """Go 1.27.3's own parse of the sample gives exactly our samples."""
    want, censored = go_samples(REPO / "samples" / name)
    f = store.get(name)
    assert want and ours(f) == want
    assert latency_samples(f).censored == censored


@pytest.fixture(scope="module")
def workload_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    d = tmp_path_factory.mktemp("latency-workloads")
    eng = make_engine(f"sqlite:///{d / 'db.sqlite'}")
    yield eng, d
    eng.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("go_version", ["1.21.13", "1.22.10", "1.27.3"])
def test_workload_traces_equal_go(workload_db: tuple[Engine, Path], go_version: str) -> None:
    """Real workload traces of older toolchains (v1 and v2 formats), ingested
    here, against Go 1.27.3's parse of the same file."""
    from tests.support.workload_traces import workload_trace

    engine, d = workload_db
    trace = workload_trace(go_version, "syscallblock")
    res = ingest_trace_file(engine, trace, data_dir=d)
    f = FrameStore(engine, d).get(res.id)
    want, censored = go_samples(trace)
    assert want and ours(f) == want
    assert latency_samples(f).censored == censored


def _nearest(v: list[int], q: float) -> int:
    return v[max(1, math.ceil(q * len(v))) - 1]


@pytest.mark.parametrize("name", ["go1.27-httpnet.trace", "go1.27-syscallblock.trace"])
def test_report_by_hand(store: Store, name: str) -> None:
    f = store.get(name)
    rep = latency_report(f, worst=10)
    lat = sorted(r - a for _, a, r, _ in ours(f))
    assert rep["samples"] == len(lat)
    s = rep["summary"]
    assert (s["p50_ns"], s["p90_ns"], s["p99_ns"], s["max_ns"]) == (
        _nearest(lat, 0.5), _nearest(lat, 0.9), _nearest(lat, 0.99), lat[-1])
    assert sum(rep["histogram"]["counts"]) == len(lat)
    ot = rep["over_time"]
    assert sum(ot["count"]) == len(lat)
    assert max(x for x in ot["max"] if x is not None) == lat[-1]
    pp = rep["per_p"]
    assert sum(pp["count"]) == len([x for x in ours(f) if x[3] >= 0])
    assert sum(rep["by_cause"]["count"]) == len(lat) and rep["by_cause"]["cause"] == list(CAUSES)
    worst = [w["latency_ns"] for w in rep["worst"]]
    assert worst == lat[::-1][:10]
    # Per bin, by hand: samples whose Running transition falls in the bin.
    edges = ot["edges"]
    k = max(range(len(ot["count"])), key=lambda i: ot["count"][i])
    in_bin = sorted(r - a for _, a, r, _ in ours(f) if edges[k] <= r < edges[k + 1])
    assert ot["count"][k] == len(in_bin) and ot["p99"][k] == _nearest(in_bin, 0.99)


def test_window(store: Store) -> None:
    f = store.get("go1.27-httpnet.trace")
    mid = (f.first_ts + f.last_ts) // 2
    a = latency_report(f, None, mid)
    b = latency_report(f, mid, None)
    assert a["samples"] + b["samples"] == latency_report(f)["samples"]


def test_syscallblock_single_p(store: Store) -> None:
    """GOMAXPROCS(1): every goroutine ran on P0."""
    rep = latency_report(store.get("go1.27-syscallblock.trace"))
    assert rep["per_p"]["p"] == [0]


def test_api_latency(samples_server: Served, sample_ids: dict[str, int], store: Store) -> None:
    name = "go1.27-mutex.trace"
    tid = sample_ids[name]
    r = samples_server.get(f"/api/traces/{tid}/latency", params={"worst": 5})
    assert r.status_code == 200
    doc = r.json()
    assert doc == latency_report(store.get(name), worst=5)
    assert len(doc["worst"]) == 5
    assert samples_server.get(f"/api/traces/{tid}/latency",
                              params={"t1": 10, "t2": 5}).status_code == 400
    assert samples_server.get(f"/api/traces/{tid}/latency",
                              params={"worst": "many"}).status_code == 400
    assert samples_server.get("/api/traces/999999/latency").status_code == 404
