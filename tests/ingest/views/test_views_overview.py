"""Overview (ingest.views.overview, /api/traces/<id>/overview): the time-weighted
state counts integrate to the total time spent in each state, the key numbers
are the database's, the reduced counters keep the raw samples' min and max,
the GC/STW bands and coverage add up to the ranges' time, and the JSON is
bounded."""

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
from ingest.views.overview_series import AVG_DECIMALS, state_ns
from tests.support.goroutine_series import goroutine_series_rows
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
    """Goroutine time per overview series, by plain Python over interval_view,
    clipped to the trace's span."""
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id = :t"),
                                   {"t": trace_id}).one()
    totals: dict[str, int] = defaultdict(int)
    for name, s, e in goroutine_series_rows(engine, trace_id):
        dur = min(e, last) - max(s, first)
        if dur > 0:
            totals[name] += dur
    return totals


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_states_integrate_to_state_time(loaded: Loaded, name: str) -> None:
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    data = overview(engine, frames, tid, bins=97)
    edges = np.array(data["bins"]["edges"])
    widths = np.diff(edges.astype(np.float64))
    want = _state_totals(engine, tid)
    # Exact integers before the JSON's rounding; rounded, within half a unit
    # of the last decimal per bin.
    rounding = 0.5 * 10.0 ** -AVG_DECIMALS * float(widths.sum())
    exact, _ = state_ns(frames, edges)
    for series, avg in data["goroutine_states"].items():
        assert int(exact[series].sum()) == want.get(series, 0), series
        got = float(np.dot(avg, widths))
        assert got == pytest.approx(want.get(series, 0), rel=1e-9, abs=rounding), series
    with engine.connect() as conn:
        running_ns = conn.execute(text(
            "SELECT COALESCE(SUM(running_ns), 0), COALESCE(SUM(syscall_ns), 0) FROM threads "
            "WHERE trace_id = :t"), {"t": tid}).one()
    # threads.running_ns/syscall_ns sum the goroutine intervals begun on each M.
    # (PostgreSQL's SUM is a Decimal: compared as the float it is.)
    assert float(np.dot(data["threads"]["Running"], widths)) == pytest.approx(
        float(running_ns[0]), rel=1e-9, abs=rounding)
    assert float(np.dot(data["threads"]["Syscall"], widths)) == pytest.approx(
        float(running_ns[1]), rel=1e-9, abs=rounding)


def test_bin_edges_cover_the_trace() -> None:
    e = bin_edges(100, 1100, 10)
    assert e[0] == 100 and e[-1] == 1100 and len(e) == 11
    assert len(bin_edges(5, 5, 10)) >= 2  # an empty trace still has a bin


def _raw_metrics(engine: Engine, tid: int) -> dict[str, list[tuple[int, int]]]:
    """The metrics table's (ts, value) samples per name, in sample order."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    with engine.connect() as conn:
        for name, ts, value in conn.execute(text(
                "SELECT name, ts, value FROM metrics WHERE trace_id = :t "
                "AND value IS NOT NULL ORDER BY seq"), {"t": tid}):
            out[name].append((int(ts), int(value)))
    return out


def _sql_min_max(engine: Engine, tid: int) -> dict[str, tuple[int, int]]:
    with engine.connect() as conn:
        return {n: (int(lo), int(hi)) for n, lo, hi in conn.execute(text(
            "SELECT name, MIN(value), MAX(value) FROM metrics WHERE trace_id = :t "
            "AND value IS NOT NULL GROUP BY name"), {"t": tid})}


METRIC_TRACES = [t.name for t in TRACES if not t.name.startswith(("go1.19", "go1.21"))]


@pytest.mark.parametrize("points", [2000, 40, 3])
@pytest.mark.parametrize("name", METRIC_TRACES)
def test_counters_keep_raw_min_max(loaded: Loaded, name: str, points: int) -> None:
    """Every counter's min and max over the whole trace are the metrics table's
    (SQL MIN/MAX), reduced or not; at most `points` points; its last value is
    the last sample's."""
    engine, data_dir, results = loaded
    tid = results[name].id
    data = overview(engine, FrameStore(engine, data_dir).get(tid), tid, bins=20,
                    points=points)
    want = _sql_min_max(engine, tid)
    raw = _raw_metrics(engine, tid)
    assert data["metrics"], name
    for metric, m in data["metrics"].items():
        if metric not in want:
            assert m["ts"] == [], metric
            continue
        assert len(m["ts"]) == len(m["value"]) == len(m["min"]) == len(m["max"]) <= points
        assert (min(m["min"]), max(m["max"])) == want[metric], metric
        assert m["samples"] == len(raw[metric])
        assert m["reduced"] == (len(raw[metric]) > points)
        assert m["value"][-1] == max(raw[metric])[1]  # the latest sample (ts, then value)
        if not m["reduced"]:
            assert list(zip(m["ts"], m["value"], strict=True)) == sorted(raw[metric])
    gmp = want.get("/sched/gomaxprocs:threads")
    assert data["key"]["gomaxprocs"] == (gmp[1] if gmp else None)


@pytest.mark.parametrize("name", METRIC_TRACES)
def test_zoomed_counters(loaded: Loaded, name: str) -> None:
    """A window [t1, t2) of the middle third: each counter's min/max are those of
    the samples inside plus the one carried in (the last before t1), which
    appears at t1."""
    engine, data_dir, results = loaded
    tid = results[name].id
    raw = _raw_metrics(engine, tid)
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id = :t"),
                                   {"t": tid}).one()
    t1, t2 = first + (last - first) // 3, first + 2 * (last - first) // 3
    data = overview(engine, FrameStore(engine, data_dir).get(tid), tid, bins=10,
                    t1=t1, t2=t2, points=25)
    assert data["window"] == {"t1": t1, "t2": t2}
    assert data["bins"]["edges"][0] == t1 and data["bins"]["edges"][-1] == t2
    for metric, m in data["metrics"].items():
        samples = sorted(raw.get(metric, []))
        before = [v for ts, v in samples if ts < t1][-1:]
        inside = [v for ts, v in samples if t1 <= ts < t2]
        vals = before + inside
        if not vals:
            assert m["ts"] == []
            continue
        assert (min(m["min"]), max(m["max"])) == (min(vals), max(vals)), metric
        assert len(m["ts"]) <= 25 and m["samples"] == len(inside)
        if before:
            assert m["ts"][0] == t1


def _band_time(engine: Engine, tid: int, kind: str, t1: int, t2: int) -> int:
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT COALESCE(r.start_ts, t.first_ts), COALESCE(r.end_ts, t.last_ts) "
            "FROM ranges r JOIN traces t ON t.id = r.trace_id "
            "WHERE r.trace_id = :t AND r.kind = :k"), {"t": tid, "k": kind}).all()
    return sum(max(0, min(e, t2) - max(s, t1)) for s, e in rows)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_bands_and_coverage_add_up(loaded: Loaded, name: str) -> None:
    """Wide bands plus coverage fractions times bucket widths give each kind's
    GC/STW time in the window; band counts add up to the key numbers."""
    engine, data_dir, results = loaded
    tid = results[name].id
    for points in (2000, 50):
        data = overview(engine, FrameStore(engine, data_dir).get(tid), tid, bins=10,
                        points=points)
        w = data["window"]
        for kind in ("gc", "stw"):
            wide = [b for b in data["gc_bands"] if b["kind"] == kind]
            cov = data["gc_coverage"].get(kind, {"start_ts": [], "end_ts": [],
                                                 "fraction": [], "bands": []})
            assert len(cov["start_ts"]) <= points
            got = sum(min(b["end_ts"], w["t2"]) - max(b["start_ts"], w["t1"]) for b in wide)
            got += sum(f * (e - s) for s, e, f in zip(cov["start_ts"], cov["end_ts"],
                                                      cov["fraction"], strict=True))
            want = _band_time(engine, tid, kind, w["t1"], w["t2"])
            assert got == pytest.approx(want, abs=1e-6 * (w["t2"] - w["t1"]) + 1), kind
            count = len(wide) + sum(cov["bands"])
            assert count == data["key"]["gc_count" if kind == "gc" else "stw_count"], kind
            width = (w["t2"] - w["t1"]) / points
            assert all(b["end_ts"] - b["start_ts"] >= width - 1 for b in wide)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_json_bounded(loaded: Loaded, name: str) -> None:
    """At the largest bins the JSON stays under 1 MB: the counters have at most
    `points` points and the series one value per bin, whatever the trace."""
    engine, data_dir, results = loaded
    tid = results[name].id
    doc = overview(engine, FrameStore(engine, data_dir).get(tid), tid, bins=5000)
    size = len(json.dumps(doc))
    assert size <= 1_000_000, size
    assert all(len(m["ts"]) <= 2000 for m in doc["metrics"].values())
    assert all(len(v) <= 5000 for v in doc["goroutine_states"].values())


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
    cov = doc["gc_coverage"]
    assert k["gc_count"] == len(gc) + sum(cov.get("gc", {}).get("bands", [])) > 0
    assert all(a[1] <= b[0] for a, b in zip(stw, stw[1:], strict=False))  # disjoint
    stw_cov = cov.get("stw", {"start_ts": [], "end_ts": [], "fraction": []})
    stw_ns = sum(e - s for s, e in stw) + sum(
        f * (e - s) for s, e, f in zip(stw_cov["start_ts"], stw_cov["end_ts"],
                                       stw_cov["fraction"], strict=True))
    assert k["stw_total_ns"] == pytest.approx(stw_ns, abs=1e-6 * k["duration_ns"] + 1)
    assert k["stw_total_ns"] > 0
    assert len(doc["bins"]["edges"]) == 51
    gmp = doc["metrics"]["/sched/gomaxprocs:threads"]["max"]
    assert gmp and k["gomaxprocs"] == max(gmp)
    heap = doc["metrics"]["/memory/classes/heap/objects:bytes"]
    assert len(heap["ts"]) == len(heap["value"]) > 0
    assert heap["ts"] == sorted(heap["ts"])
    json.dumps(doc)
    assert samples_server.get("/api/traces/999999/overview").status_code == 404
    assert samples_server.get(f"/api/traces/{tid}/overview?bins=x").status_code == 400
    for bad in ("t1=x", f"t1={row['last_ts']}&t2={row['first_ts']}", "points=y"):
        assert samples_server.get(f"/api/traces/{tid}/overview?{bad}").status_code == 400
    zoom = samples_server.get(f"/api/traces/{tid}/overview?bins=10&points=30"
                              f"&t1={row['first_ts'] + 1000}&t2={row['last_ts'] - 1000}").json()
    assert zoom["window"] == {"t1": row["first_ts"] + 1000, "t2": row["last_ts"] - 1000}
    assert all(len(m["ts"]) <= 30 for m in zoom["metrics"].values())
    assert zoom["key"] == k
