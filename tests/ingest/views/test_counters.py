"""Counter reduction (ingest.views.counters): hand-checkable arithmetic on
step functions, the buckets' bound and the pass-through of small inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.views.counters import MAX_BUCKETS, Reduced, bucket_edges, reduce_counter


def _step_value(ts: np.ndarray, v: np.ndarray, t: int) -> int:
    """The step function's value at t (last sample at or before t)."""
    return int(v[np.searchsorted(ts, t, "right") - 1])


def test_small_input_passes_through() -> None:
    ts, v = [10, 20, 30], [5, 7, 6]
    r = reduce_counter(ts, v, 10, 40, buckets=3)
    assert not r.reduced and r.samples == 3
    assert r.ts.tolist() == ts
    assert r.min.tolist() == r.max.tolist() == r.last.tolist() == v
    j = r.to_json()
    assert j["value"] == v and j["ts"] == ts and j["reduced"] is False


def test_one_sample_spike_survives_as_bucket_max() -> None:
    """1000 samples of 10 over [0, 1000), one of 999 at t=537; 10 buckets of 100:
    bucket 5 has max 999, every other max is 10; every min is 10."""
    ts = np.arange(1000)
    v = np.full(1000, 10)
    v[537] = 999
    r = reduce_counter(ts, v, 0, 1000, buckets=10)
    assert r.reduced and r.samples == 1000
    assert r.ts.tolist() == list(range(0, 1000, 100))
    assert r.max.tolist() == [10] * 5 + [999] + [10] * 4
    assert r.min.tolist() == [10] * 10
    assert r.last.tolist() == [10] * 10
    # A negative spike is a min.
    v[537] = -3
    assert reduce_counter(ts, v, 0, 1000, buckets=10).min.tolist()[5] == -3


def test_value_carried_into_a_bucket() -> None:
    """Steps 0 -> 100 at t=50 and 100 -> 7 at t=250, buckets of 100 over [0, 400),
    plus filler samples repeating the value so it is reduced (buckets=4):
    bucket [200, 300) starts at 100 (carried in), steps to 7 at 250: min 7, max 100."""
    ts = np.array([0, 50, 60, 250, 260, 350])
    v = np.array([0, 100, 100, 7, 7, 7])
    r = reduce_counter(ts, v, 0, 400, buckets=4)
    assert r.reduced
    # bucket 0: 0 then 100; bucket 1 [100,200): no sample, left out;
    # bucket 2: carried 100, then 7; bucket 3: carried 7, then 7.
    assert r.ts.tolist() == [0, 250, 350]
    assert r.min.tolist() == [0, 7, 7]
    assert r.max.tolist() == [100, 100, 7]
    assert r.last.tolist() == [100, 7, 7]


def test_sample_at_bucket_start_carries_nothing() -> None:
    """A sample exactly at a bucket's start replaces the carried value there."""
    ts = np.array([0, 10, 100, 110, 200, 210])
    v = np.array([50, 50, 1, 1, 2, 2])
    r = reduce_counter(ts, v, 0, 300, buckets=3)
    assert r.reduced and r.min.tolist() == [50, 1, 2] and r.max.tolist() == [50, 1, 2]


def test_value_carried_into_the_window() -> None:
    """The last sample before t1 becomes a sample at t1 (pass-through and reduced)."""
    ts, v = np.array([0, 100, 500]), np.array([3, 9, 4])
    r = reduce_counter(ts, v, 200, 600, buckets=10)
    assert r.ts.tolist() == [200, 500] and r.last.tolist() == [9, 4] and r.samples == 1
    r = reduce_counter(ts, v, 200, 400, buckets=10)  # no sample inside: the carry alone
    assert r.ts.tolist() == [200] and r.last.tolist() == [9] and r.samples == 0
    r = reduce_counter(ts, v, 100, 600, buckets=10)  # a sample at t1: no carry added
    assert r.ts.tolist() == [100, 500]
    ts2 = np.arange(150, 250)  # reduced: the carry is bucket 0's start and in its min
    v2 = np.full(100, 20)
    r = reduce_counter(np.r_[0, ts2], np.r_[5, v2], 100, 300, buckets=2)
    assert r.reduced and r.ts.tolist() == [100, 200]
    assert r.min.tolist() == [5, 20] and r.max.tolist() == [20, 20]


def test_before_window_and_empty() -> None:
    r = reduce_counter([], [], 0, 100)
    assert r.ts.tolist() == [] and r.samples == 0
    r = reduce_counter([500, 600], [1, 2], 0, 100)  # all after the window
    assert r.ts.tolist() == []
    with pytest.raises(ValueError):
        reduce_counter([1, 2], [1], 0, 10)


def _envelope_holds(r: Reduced, ts: np.ndarray, v: np.ndarray, t1: int, t2: int) -> None:
    """Between point i and i + 1 the step function stays in [min[i], max[i]] and
    ends at last[i]; so global min/max are those of the window's function."""
    stops = np.r_[r.ts[1:], t2]
    for i in range(len(r.ts)):
        lo = np.searchsorted(ts, r.ts[i], "right")
        hi = np.searchsorted(ts, stops[i], "left")
        seen = np.r_[_step_value(ts, v, int(r.ts[i])), v[lo:hi]]
        assert seen.min() >= r.min[i] and seen.max() <= r.max[i]
        assert seen[-1] == r.last[i]


@pytest.mark.parametrize("buckets", [1, 7, 100, 2000])
def test_bound_and_envelope_on_random_walk(buckets: int) -> None:
    rng = np.random.default_rng(buckets)
    ts = np.cumsum(rng.integers(0, 50, 20_000))  # repeated timestamps included
    v = np.cumsum(rng.integers(-100, 101, 20_000))
    t1, t2 = int(ts[3000]) + 1, int(ts[17_000])
    r = reduce_counter(ts, v, t1, t2, buckets=buckets)
    assert r.reduced and len(r.ts) <= buckets
    assert r.ts[0] == t1 and (np.diff(r.ts) > 0).all()
    in_win = (ts >= t1) & (ts < t2)
    assert r.samples == int(in_win.sum())
    window_vals = np.r_[_step_value(ts, v, t1), v[in_win]]
    assert r.min.min() == window_vals.min() and r.max.max() == window_vals.max()
    assert r.last[-1] == window_vals[-1]
    if buckets <= 100:
        _envelope_holds(r, ts, v, t1, t2)


def test_bucket_edges() -> None:
    e = bucket_edges(0, 1000, 4)
    assert e.tolist() == [0, 250, 500, 750, 1000]
    assert len(bucket_edges(0, 3, 10)) == 4  # fewer ns than buckets: unique edges
    assert len(bucket_edges(0, 10**12, 10**9)) == MAX_BUCKETS + 1
