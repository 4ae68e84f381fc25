"""The analysis views' linear-time forms against the straightforward ones, on
the real sample traces: percentiles picked from value buckets against a
sort, the largest by a partition against a stable argsort, codes by a table
against np.unique, parked counts per step against sorted searches, GC-assist
Running time by a binary search per range against a per-lane prefix sum and a
plain loop, start-function groups from the lanes' table against the
goroutines table, a goroutine's longest segments against an argsort."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.extensions import PURE_ENV
from ingest.views import goroutines as gs
from ingest.views import histo, quantiles
from ingest.views import latency as lat_view
from ingest.views import running_time as rt
from ingest.views.goroutine import _longest, goroutine_detail
from ingest.views.histo import (
    bin_index,
    count_at_or_before,
    dense_codes,
    group_percentiles,
    nearest_rank,
    order_statistics,
    summary,
    time_bins,
    top_indices,
)
from ingest.views.latency import CAUSES, latency_samples
from ingest.views.syscalls import network_waits
from tests.support.analysis import Store, open_store
from tests.support.server import Served

SAMPLES = ("go1.27-connleak.trace", "go1.27-gcpressure.trace", "go1.27-httpnet.trace",
           "go1.27-mutex.trace", "go1.27-syscallblock.trace", "go1.27-timers.trace")


@pytest.fixture(scope="module")
def store(samples_server: Served, sample_ids: dict[str, int]) -> Store:
    return open_store(samples_server, sample_ids)


def by_sorting(group: np.ndarray, values: np.ndarray, n: int) -> dict[str, list[int | None]]:
    """Per group: nearest-rank p50/p90/p99 and max of its sorted values."""
    out: dict[str, list[int | None]] = {"p50": [], "p90": [], "p99": [], "max": []}
    for g in range(n):
        v = np.sort(values[group == g])
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
            out[key].append(nearest_rank(v, q))
        out["max"].append(int(v[-1]) if len(v) else None)
    return out


@pytest.mark.parametrize("name", SAMPLES)
def test_latency_percentiles_equal_sorting(store: Store, name: str) -> None:
    """Per time bin, P and cause, and overall: the bucket form, the sort form
    (``by_value``) and a plain sort per group agree."""
    f = store.get(name)
    s = latency_samples(f)
    lat = np.asarray(s.running_ts) - np.asarray(s.runnable_ts)
    assert len(lat)
    edges = time_bins(f.first_ts, f.last_ts)
    p = np.asarray(s.p, dtype=np.int64)
    pids = np.unique(p)
    groupings = [(bin_index(np.asarray(s.running_ts), edges), len(edges) - 1),
                 (np.searchsorted(pids, p), len(pids)),
                 (np.asarray(s.cause, dtype=np.int64), len(CAUSES))]
    for group, n in groupings:
        fast = group_percentiles(group, lat, n)
        assert fast == group_percentiles(group, lat, n, by_value=np.argsort(lat, kind="stable"))
        want = by_sorting(group, lat, n)
        for key, vals in want.items():
            assert fast[key] == vals, key
        assert fast["count"] == np.bincount(group, minlength=n).tolist()
    assert summary(lat) == summary(lat, np.sort(lat))
    ranks = np.arange(0, len(lat), max(1, len(lat) // 97))
    assert order_statistics(lat, ranks).tolist() == np.sort(lat)[ranks].tolist()


@pytest.mark.parametrize("values", [
    [5] * 1000,  # one value: one bucket holds them all
    [0, 0, 0, 1, 2, 3, 2**40, 2**40 + 1],
    [-7, -7, -3, 0, 12, 12, 12, 99],  # below zero: buckets of value - min
    [2**62, 2**62 + 1, 2**62 + 2, 3, 2**53 + 1, 2**53],  # beyond float precision
])
def test_order_statistics_edge_cases(values: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    v = np.array(values, dtype=np.int64)
    ranks = np.arange(len(v))
    assert order_statistics(v, ranks).tolist() == sorted(values)
    group = np.arange(len(v)) % 3
    want = by_sorting(group, v, 3)
    fast = group_percentiles(group, v, 3)
    assert {k: fast[k] for k in ("p50", "p90", "p99", "max")} == want
    assert summary(v) == summary(v, np.sort(v))
    # Without buckets: (group, value) keys partitioned, or a sort when they overflow.
    monkeypatch.setattr(histo, "one_pass", lambda *a: None)
    assert order_statistics(v, ranks).tolist() == sorted(values)
    fast = group_percentiles(group, v, 3)
    assert {k: fast[k] for k in ("p50", "p90", "p99", "max")} == want


@pytest.mark.parametrize("name", SAMPLES)
def test_top_indices_equal_stable_argsort(store: Store, name: str) -> None:
    """The longest syscalls and network waits (ties in ns abound)."""
    f = store.get(name)
    w = network_waits(f)
    for d in (np.asarray(f.syscalls["duration_ns"]), w["end"] - w["start"]):
        for k in (0, 1, 10, 50, len(d)):
            assert top_indices(d, k).tolist() == np.argsort(-d, kind="stable")[:k].tolist()


@pytest.mark.parametrize("name", SAMPLES)
def test_codes_and_parked_counts(store: Store, name: str) -> None:
    f = store.get(name)
    w = network_waits(f)
    for ids in (np.asarray(f.syscalls["stack_id"]), w["stack_id"], w["goid"]):
        uniq, inv = np.unique(ids, return_inverse=True)
        got_uniq, got_inv = dense_codes(ids)
        assert got_uniq.tolist() == uniq.tolist()
        assert got_inv.tolist() == inv.reshape(-1).tolist()
    at = time_bins(f.first_ts, f.last_ts)[:-1]
    for ts in (w["start"], w["end"], np.asarray(f.syscalls["start_ts"])):
        assert count_at_or_before(ts, at).tolist() == \
            np.searchsorted(np.sort(ts), at, side="right").tolist()
        uneven = np.r_[at[:1], at[1:] + 1]  # not evenly spaced: the sorted form
        assert count_at_or_before(ts, uneven).tolist() == \
            np.searchsorted(np.sort(ts), uneven, side="right").tolist()
    ts = np.asarray(f.syscalls["start_ts"])
    edges = time_bins(f.first_ts, f.last_ts)
    want = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, len(edges) - 2)
    assert bin_index(ts, edges).tolist() == want.tolist()


def test_assist_running_time_three_ways(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """gcpressure's GC mark assist ranges: Running time inside each by the
    binary search per range, by the prefix sum over the ranges' lanes, and by
    a plain loop over one lane at a time."""
    f = store.get("go1.27-gcpressure.trace")
    ranges = gs.assist_ranges(store.engine, f)
    assert len(ranges.g) > 0
    lanes = f.goroutines
    li = np.searchsorted(lanes.ids, ranges.g)
    ok = lanes.ids[np.minimum(li, len(lanes.ids) - 1)] == ranges.g
    li, t1, t2 = li[ok], ranges.start[ok], ranges.end[ok]
    fast = rt.running_in_many(f, li, t1, t2)
    assert fast.tolist() == rt.running_in_many_by_lanes(f, li, t1, t2).tolist()
    loop = [rt.running_in(f, slice(int(lanes.off[i]), int(lanes.off[i + 1])), int(a), int(b))
            for i, a, b in zip(li, t1, t2, strict=True)]
    assert fast.tolist() == loop
    assert sum(loop) > 0
    # In passes of a few windows and lanes (a lane longer than a pass alone).
    for windows, rows in ((3, 50), (1 << 16, 1), (1 << 16, 1 << 40)):
        monkeypatch.setattr(rt, "WINDOW_CHUNK", windows)
        monkeypatch.setattr(rt, "LANE_ROWS", rows)
        assert rt.running_in_chunks(f, li, t1, t2).tolist() == loop


@pytest.mark.parametrize("name", SAMPLES)
def test_group_codes_equal_group_names(store: Store, name: str) -> None:
    """Groups from the goroutine lanes' table (asking the database only about
    goroutines without a start function) = groups from the goroutines table."""
    f = store.get(name)
    codes = gs.group_codes(store.engine, f)
    names, known = gs.group_names(store.engine, f, f.goroutines.ids)
    assert [codes.names[c] for c in np.asarray(codes.code).tolist()] == names
    assert np.asarray(codes.known).tolist() == known.tolist()
    assert len(set(codes.names)) == len(codes.names)
    assert set(np.asarray(codes.code).tolist()) == set(range(len(codes.names)))


@pytest.mark.parametrize("name", ["go1.27-mutex.trace", "go1.27-httpnet.trace"])
def test_longest_segments_equal_argsort(store: Store, name: str) -> None:
    """The busiest goroutine's merged segments: the longest ``cap`` by a
    partition (ties to the later ones) = the stable argsort's last ``cap``."""
    f = store.get(name)
    lanes = f.goroutines
    busiest = int(lanes.ids[int(np.argmax(np.diff(lanes.off)))])
    seg = goroutine_detail(store.engine, f, busiest, limit=0, segments=10**9)["segments"]
    d = np.array(seg["end"], dtype=np.int64) - np.array(seg["start"], dtype=np.int64)
    assert len(d) > 50
    for cap in (1, 7, 50, len(d) // 2, len(d) - 1, len(d)):
        assert _longest(d, cap).tolist() == np.sort(np.argsort(d, kind="stable")[-cap:]).tolist()
    small = goroutine_detail(store.engine, f, busiest, limit=0, segments=20)["segments"]
    keep = np.sort(np.argsort(d, kind="stable")[-20:])
    assert small["start"] == np.array(seg["start"])[keep].tolist() and small["truncated"]


@pytest.mark.parametrize("name", SAMPLES)
def test_latency_in_chunks_equals_whole_arrays(store: Store, name: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The latency report and samples built chunk by chunk (chunks made small
    here, so that every trace spans many) = built over whole arrays."""
    f = store.get(name)
    whole = lat_view.Samples(lat_view._latency_samples(f), f)
    monkeypatch.setattr(lat_view, "ROW_CHUNK", 997)
    monkeypatch.setattr(quantiles, "CHUNK", 1009)
    small = lat_view.Samples(lat_view._latency_samples(f), f)
    for col in ("goid", "runnable_ts", "running_ts", "p", "m", "cause"):
        assert np.array_equal(getattr(small, col), getattr(whole, col)), col
    assert (small.censored, small.pending) == (whole.censored, whole.pending)
    mid = (f.first_ts + f.last_ts) // 2
    # Columns read a few samples at a time, of all samples or some.
    monkeypatch.setattr(lat_view, "READ_SAMPLES", 13)
    some = np.flatnonzero(np.arange(len(whole)) % 3 == 1)
    for at in (None, some):
        part = small.read((*lat_view.COLUMNS, "latency"), at)
        for col in lat_view.COLUMNS:
            want = getattr(whole, col) if at is None else getattr(whole, col)[at]
            assert np.array_equal(part[col], want) and part[col].dtype == want.dtype, col
        want = whole.latency if at is None else whole.latency[at]
        assert np.array_equal(part["latency"], want)
    for t1, t2 in ((None, None), (mid, None), (None, mid)):
        cols, at = lat_view._window(whole, t1, t2)

        def more(idx: np.ndarray, at: np.ndarray | None = at) -> dict[str, np.ndarray]:
            return whole.read(("goid", "m"), idx if at is None else at[idx])

        edges = time_bins(f.first_ts if t1 is None else t1, f.last_ts if t2 is None else t2)
        for worst in (0, 5, 50):
            chunked = lat_view._report_chunked(cols, edges, worst, more)
            assert chunked is not None
            assert chunked == lat_view._report_arrays(cols, edges, worst, more), (t1, t2, worst)


@pytest.mark.parametrize("name", SAMPLES)
def test_goroutine_times_in_chunks_equal_one_pass(store: Store, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Category times summed a chunk of whole goroutines at a time (chunks
    made tiny here) = summed over every row at once."""
    f = store.get(name)
    whole = gs._goroutine_times(store.engine, f)
    monkeypatch.setattr(gs, "ROW_CHUNK", 97)
    small = gs._goroutine_times(store.engine, f)
    for col in ("goid", "times", "first_ts", "end_ts", "final_state"):
        assert np.array_equal(getattr(small, col), getattr(whole, col)), col
    assert len(whole.goid) > 1


@pytest.mark.parametrize("name", SAMPLES)
def test_goroutine_times_in_c_equal_numpys(store: Store, name: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Category times summed by the C pass (ingest/csrc/lanesums.c) = numpy's,
    whole and a few goroutines at a time."""
    pytest.importorskip("ingest.views._lanesums")
    f = store.get(name)
    for rows in (1 << 30, 97):
        monkeypatch.setattr(gs, "ROW_CHUNK", rows)
        c = gs._goroutine_times(store.engine, f)
        monkeypatch.setenv(PURE_ENV, "1")
        py = gs._goroutine_times(store.engine, f)
        monkeypatch.delenv(PURE_ENV)
        assert np.array_equal(c.times, py.times) and c.times.any(), rows


def test_step_parts_equal_the_whole_column() -> None:
    """Steps read a part at a time (step_parts) = read whole, big steps,
    steps down and big steps at a part's first value included."""
    from ingest.derive.cache import Steps

    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 50, 1000):
        v = np.cumsum(rng.integers(0, 300, n)) + 10**12
        if n > 10:
            v[5:] += 10**9  # one big step
            v[7] -= 5  # a step down and back
            v[13:] += 70_000
        steps = Steps.of(v)
        for size in (1, 2, 7, max(1, n)):
            got = [(a, d) for a, d in quantiles.step_parts(steps, size)]
            assert [a for a, _ in got] == list(range(0, n, size))
            whole = np.concatenate([d for _, d in got]) if got else np.zeros(0, np.int64)
            assert np.array_equal(whole, steps.values()) and np.array_equal(whole, v)
