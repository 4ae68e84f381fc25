"""Covered time in the timeline's level of detail (ingest.views.timeline_lod) on
real traces: every shape says how much of its span its intervals cover, so a
merged shape of a mostly empty lane (a 1.4% stop-the-world) is not drawn as if
the state filled it.

The truth is computed here from the raw rows with arithmetic of its own (a
sweep over the intervals' edges for their union, prefix sums for the time
inside a span), not with the code under test. Shape-by-shape checks of the
JSON's ``cover`` against the raw mix are in test_timeline_lod's check_lanes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import Engine

from ingest.config import Settings, sqlite_url
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.derive.range_lanes import range_lanes
from ingest.store.db import make_engine
from ingest.views.overview import overview
from ingest.views.timeline import Params, cover_column, timeline
from ingest.views.timeline_lod import Shapes, reduce_indexed, reduce_window

REPO = Path(__file__).resolve().parents[3]
SAMPLES = {"httpnet": REPO / "samples" / "go1.27-httpnet.trace",
           "gcpressure": REPO / "samples" / "go1.27-gcpressure.trace",
           "mixed121": REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace"}
I64 = npt.NDArray[np.int64]
FIELDS = ("lane", "start", "end", "cat", "n", "ref", "mix", "covered")


@dataclass
class Loaded:
    engine: Engine
    frames: dict[str, TraceFrames]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    from ingest.load.pipeline import ingest_trace_file

    d = tmp_path_factory.mktemp("cover")
    engine = make_engine(Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db")).db_url)
    store = FrameStore(engine, d)
    yield Loaded(engine, {name: store.get(ingest_trace_file(engine, path, data_dir=d).id)
                          for name, path in SAMPLES.items()})
    engine.dispose()


def windows(f: TraceFrames) -> list[tuple[int, int]]:
    a, b = f.first_ts, f.last_ts
    span = b - a
    return [(a, b), (a + span // 3, a + span // 3 + span // 50),
            (a + span // 2, a + span // 2 + 20_000), (a - span // 10, a + span // 5),
            (b - span // 7, b + span // 7)]


def time_inside(s: I64, e: I64, a: I64, b: I64) -> I64:
    """ns of the sorted, non-overlapping intervals [s, e) inside each [a, b)."""
    cum = np.r_[0, np.cumsum(e - s)]

    def before(t: I64) -> I64:
        k = np.searchsorted(e, t, side="right")  # intervals ended by t
        kk = np.minimum(k, max(len(s) - 1, 0))
        part = np.where((k < len(s)) & (s[kk] < t), t - s[kk], 0) if len(s) else 0
        out: I64 = cum[k] + part
        return out

    return before(b) - before(a)
def union_ns(s: I64, e: I64) -> int:
    """ns covered by at least one of the intervals [s, e): a sweep over their
    edges (+1 at a start, -1 at an end), summing where the depth is positive."""
    t = np.r_[s, e]
    order = np.argsort(t, kind="stable")
    depth = np.cumsum(np.r_[np.ones(len(s), np.int64), -np.ones(len(e), np.int64)][order])
    return int((np.diff(t[order]) * (depth[:-1] > 0)).sum())


def check_covered(sh: Shapes, s: I64, e: I64, t1: int, t2: int) -> bool:
    """One lane's shapes against its raw rows [s, e): every covered ns in (0,
    span], a single interval all covered, and, where the shapes do not overlap
    each other, their covered ns add up to the rows' union in the window and
    each shape's to the rows' time inside it. Returns whether they overlap."""
    cs, ce = np.maximum(s, t1), np.minimum(e, t2)
    cs, ce = cs[ce > cs], ce[ce > cs]
    span = sh.end - sh.start
    assert (sh.covered > 0).all() and (sh.covered <= span).all()
    assert (sh.covered[sh.n == 1] == span[sh.n == 1]).all(), "one interval covers its span"
    truth = union_ns(cs, ce)
    if (sh.start[1:] >= sh.end[:-1]).all():
        assert int(sh.covered.sum()) == truth, "the lane's covered ns, once"
        if len(ce) and (ce[1:] >= ce[:-1]).all() and (cs[1:] >= ce[:-1]).all():
            np.testing.assert_array_equal(time_inside(cs, ce, sh.start, sh.end), sh.covered)
        return False
    # Overlapping rows (assist, sweep): a shape counts its own rows' union.
    assert truth <= int(sh.covered.sum()) <= int((ce - cs).sum())
    return True


@pytest.mark.parametrize("name", list(SAMPLES))
def test_covered_ns_is_the_union_of_the_intervals(loaded: Loaded, name: str) -> None:
    f = loaded.frames[name]
    rng = range_lanes(loaded.engine, f).lanes
    sparse_merged = 0  # merged shapes under half covered, in lanes of separate shapes
    for t1, t2 in windows(f):
        for nb in (64, 900):
            for i in range(len(rng.ids)):
                lo, hi = int(rng.lo[i]), int(rng.hi[i])
                s, e = rng.start[lo:hi], rng.end[lo:hi]
                sh = reduce_window(s, e, rng.cat[lo:hi], rng.ref[lo:hi],
                                   np.zeros(hi - lo, np.int64), t1, t2, nb)
                if not check_covered(sh, s, e, t1, t2):
                    sparse_merged += int(((sh.n > 1) & (sh.covered * 2 < sh.end - sh.start))
                                         .sum())
            for ls in (p_lanes(f), m_lanes(f)):
                sh = reduce_indexed(ls, [(i, i) for i in range(len(ls.ids))], t1, t2, nb)
                for i in range(len(ls.ids)):
                    one = sh.lane == i
                    lane_sh = Shapes(*(getattr(sh, k)[one] for k in FIELDS))
                    lo, hi = int(ls.lo[i]), int(ls.hi[i])
                    assert not check_covered(lane_sh, ls.start[lo:hi], ls.end[lo:hi], t1, t2)
    assert sparse_merged > 0, "some mostly empty range lane had merged shapes"


@pytest.mark.parametrize("name", list(SAMPLES))
def test_whole_trace_stw_lane_covers_the_traces_stw_time(loaded: Loaded, name: str) -> None:
    """The STW lane of the whole trace by P: its shapes' covered ns are the
    trace's stop-the-world time as the overview counts it (exact in the
    reduction; within the 3 decimals of ``cover`` in the JSON)."""
    f = loaded.frames[name]
    data = timeline(loaded.engine, f, Params(mode="p"))
    stw_ns = overview(loaded.engine, f, f.trace_id)["key"]["stw_total_ns"]
    span = f.last_ts - f.first_ts
    assert 0 < stw_ns < span / 5, "stop-the-world is a small part of the trace"
    lane_no = data["lanes"]["key"].index("stw")
    js = [i for i, ln in enumerate(data["shapes"]["lane"]) if ln == lane_no]
    d = np.array([data["shapes"]["d"][i] for i in js], np.int64)
    cover = np.array([data["shapes"]["cover"][i] for i in js])
    rng = range_lanes(loaded.engine, f).lanes
    i = int(np.flatnonzero(rng.ids == 1)[0])  # RANGE_LANES[1] is stw
    lo, hi = int(rng.lo[i]), int(rng.hi[i])
    sh = reduce_window(rng.start[lo:hi], rng.end[lo:hi], rng.cat[lo:hi], rng.ref[lo:hi],
                       np.zeros(hi - lo, np.int64), f.first_ts, f.last_ts, data["buckets"])
    np.testing.assert_array_equal(sh.end - sh.start, d)
    np.testing.assert_array_equal(cover_column(sh.covered, d), cover)
    assert int(sh.covered.sum()) == stw_ns, "exact"
    assert abs(float((cover * d).sum()) - stw_ns) <= 0.001 * d.sum(), "as the JSON says"
    # Coarse buckets merge the pauses: the lane draws far less than its span.
    coarse = reduce_window(rng.start[lo:hi], rng.end[lo:hi], rng.cat[lo:hi], rng.ref[lo:hi],
                           np.zeros(hi - lo, np.int64), f.first_ts, f.last_ts, 16)
    assert int(coarse.covered.sum()) == stw_ns and (coarse.n > 1).any()
    assert (coarse.covered < coarse.end - coarse.start).any()
