"""Overview (ingest.views.overview, /api/traces/<id>/overview): the time-weighted
state counts integrate to the total time spent in each state, and the key
numbers are the database's."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.load.pipeline import IngestResult
from ingest.views.overview import bin_edges, overview, time_weighted
from ingest.views.states_frames import wait_category
from tests.support.ingest_fixtures import TRACES, loaded
from tests.support.server import Served

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
FIXTURES = (loaded,)


def test_time_weighted_by_hand() -> None:
    """[0,10) and [5,15) over bins of 5: 1, 2, 1, 0 on average; a bin half
    covered by one interval averages 0.5."""
    edges = np.array([0, 5, 10, 15, 20])
    got = time_weighted(np.array([0, 5]), np.array([10, 15]), edges)
    assert got.tolist() == [1.0, 2.0, 1.0, 0.0]
    got = time_weighted(np.array([2, 30]), np.array([5, 40]), np.array([0, 4, 8]))
    assert got.tolist() == [0.5, 0.25]  # [2,5) clipped; [30,40) outside


def _state_totals(engine: Engine, trace_id: int) -> dict[str, int]:
    """Goroutine time per overview series, by plain Python over interval_view:
    a Waiting interval takes the category of its reason, a Waiting -> Waiting
    one without a reason that of the wait it continues."""
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id = :t"),
                                   {"t": trace_id}).one()
        rows = conn.execute(text(
            "SELECT rid, state, from_state, reason, start_ts, end_ts FROM interval_view "
            "WHERE trace_id = :t AND resource = 'goroutine' ORDER BY id"), {"t": trace_id}).all()
    totals: dict[str, int] = defaultdict(int)
    prev_rid, prev_cat = None, None
    for rid, state, frm, reason, s, e in rows:
        cat = None
        if state == "Waiting":
            if frm == "Waiting" and not reason and rid == prev_rid and prev_cat:
                cat = prev_cat
            else:
                cat = wait_category(reason)
        prev_rid, prev_cat = rid, cat
        dur = min(e, last) - max(s, first)
        if dur > 0:
            totals[f"Waiting: {cat}" if cat else state] += dur
    return totals


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_states_integrate_to_state_time(loaded: Loaded, name: str) -> None:
    engine, data_dir, results = loaded
    tid = results[name].id
    data = overview(engine, FrameStore(engine, data_dir).get(tid), tid, bins=97)
    widths = np.diff(np.array(data["bins"]["edges"], dtype=np.float64))
    want = _state_totals(engine, tid)
    for series, avg in data["goroutine_states"].items():
        got = float(np.dot(avg, widths))
        assert got == pytest.approx(want.get(series, 0), rel=1e-9, abs=1e-3), series
    with engine.connect() as conn:
        running_ns = conn.execute(text(
            "SELECT COALESCE(SUM(running_ns), 0), COALESCE(SUM(syscall_ns), 0) FROM threads "
            "WHERE trace_id = :t"), {"t": tid}).one()
    # threads.running_ns/syscall_ns sum the goroutine intervals begun on each M.
    # (PostgreSQL's SUM is a Decimal: compared as the float it is.)
    assert float(np.dot(data["threads"]["Running"], widths)) == pytest.approx(
        float(running_ns[0]), rel=1e-9, abs=1e-3)
    assert float(np.dot(data["threads"]["Syscall"], widths)) == pytest.approx(
        float(running_ns[1]), rel=1e-9, abs=1e-3)


def test_bin_edges_cover_the_trace() -> None:
    e = bin_edges(100, 1100, 10)
    assert e[0] == 100 and e[-1] == 1100 and len(e) == 11
    assert len(bin_edges(5, 5, 10)) >= 2  # an empty trace still has a bin


def test_api_key_numbers(samples_server: Served, sample_ids: dict[str, int]) -> None:
    """Key numbers equal the trace row and the GC ranges; metrics are the samples."""
    tid = sample_ids["go1.27-gcpressure.trace"]
    doc = samples_server.get(f"/api/traces/{tid}/overview?bins=50").json()
    row = samples_server.get(f"/api/traces/{tid}").json()
    k = doc["key"]
    for key in ("events", "transitions", "goroutines", "procs", "threads", "go_version"):
        assert k[key] == row[key], key
    assert k["duration_ns"] == row["last_ts"] - row["first_ts"]
    assert k["bytes_lost"] == row["loss"]["bytes_lost"]
    bands = doc["gc_bands"]
    gc = [b for b in bands if b["kind"] == "gc"]
    stw = sorted((b["start_ts"], b["end_ts"]) for b in bands if b["kind"] == "stw")
    assert k["gc_count"] == len(gc) > 0
    assert all(a[1] <= b[0] for a, b in zip(stw, stw[1:], strict=False))  # disjoint
    assert k["stw_total_ns"] == sum(e - s for s, e in stw) > 0
    assert len(doc["bins"]["edges"]) == 51
    gmp = doc["metrics"]["/sched/gomaxprocs:threads"]["value"]
    assert gmp and k["gomaxprocs"] == max(gmp)
    heap = doc["metrics"]["/memory/classes/heap/objects:bytes"]
    assert len(heap["ts"]) == len(heap["value"]) > 0
    assert heap["ts"] == sorted(heap["ts"])
    json.dumps(doc)
    assert samples_server.get("/api/traces/999999/overview").status_code == 404
    assert samples_server.get(f"/api/traces/{tid}/overview?bins=x").status_code == 400
