"""The pprof profiles against Go's: ``go tool trace -pprof=TYPE`` on real
traces of the workloads written by every toolchain (Go 1.19 to 1.27), both
files read by ``go tool pprof -raw``: the same stacks with the same
contentions and delay (so the same totals); the CPU profile against the
``StackSample`` events of Go's own parser; windows against arithmetic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from ingest.derive.frames import FrameStore, TraceFrames
from ingest.extensions import PURE_ENV
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.pprof import CPU_PERIOD_NS, TYPES, UnknownType, profile, waits
from ingest.views.pprof_proto import decode, encode
from tests.support.goparsed import go_parsed
from tests.support.gopprof import go_trace_pprof, pprof_raw
from tests.support.workload_traces import TOOLCHAINS, workload_trace

pytestmark = pytest.mark.slow

#: Workloads that between them wait in every way the profiles count.
WORKLOADS = ("httpnet", "mutex", "syscallblock")
GO_TYPES = ("net", "sync", "syscall", "sched")


class Traces:
    def __init__(self, engine: Engine, data_dir: Path) -> None:
        self.engine = engine
        self.store = FrameStore(engine, data_dir)
        self.data_dir = data_dir
        self.ids: dict[Path, int] = {}

    def frames(self, path: Path) -> TraceFrames:
        if path not in self.ids:
            self.ids[path] = ingest_trace_file(self.engine, path, path.name,
                                               data_dir=self.data_dir).id
        return self.store.get(self.ids[path])


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traces]:
    d = tmp_path_factory.mktemp("pprof")
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    yield Traces(engine, d)
    engine.dispose()


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("version", TOOLCHAINS)
def test_equal_to_go_tool_trace(traces: Traces, version: str, workload: str) -> None:
    path = workload_trace(version, workload)
    f = traces.frames(path)
    for kind in GO_TYPES:
        go = pprof_raw(go_trace_pprof(path, kind))
        ours = pprof_raw(encode(profile(traces.engine, f, kind)))
        assert ours.sample_types == go.sample_types == ["contentions/count", "delay/nanoseconds"]
        # The criterion (totals within 1%, the same stacks), then the exact equality we reach.
        for a, b in zip(ours.totals(), go.totals(), strict=True):
            assert abs(a - b) <= 0.01 * b, (kind, ours.totals(), go.totals())
        assert set(ours.stacks) == set(go.stacks), kind
        assert ours.stacks == go.stacks, kind
        assert ours.samples == go.samples, kind  # stacks merged by pcs as Go merges them


def test_workloads_wait_in_every_way(traces: Traces) -> None:
    """The comparison above compares something: each Go profile is non-empty
    on one of the workloads (Go 1.27's traces)."""
    for kind in GO_TYPES:
        assert any(pprof_raw(go_trace_pprof(workload_trace("1.27.3", w), kind)).stacks
                   for w in WORKLOADS), kind


@pytest.mark.parametrize("version", ["1.19", "1.21.13", "1.22.10", "1.27.3"])
def test_cpu_profile_is_the_stack_samples(traces: Traces, version: str) -> None:
    """One sample per ``StackSample`` event of Go's parser, by stack."""
    path = workload_trace(version, "gcpressure")  # runs the CPU profiler with the trace
    events, _err = go_parsed(path)
    expected = Counter(tuple(fr.func for fr in ev.stack) for ev in events
                       if ev.kind == "StackSample")
    assert expected, "the workload's trace carries CPU samples"
    ours = pprof_raw(encode(profile(traces.engine, traces.frames(path), "cpu")))
    assert ours.sample_types == ["samples/count", "cpu/nanoseconds"]
    assert {k: v[0] for k, v in ours.stacks.items()} == dict(expected)
    assert all(v[1] == v[0] * CPU_PERIOD_NS for v in ours.stacks.values())


@pytest.mark.parametrize("kind", ["sync", "sched", "chan", "lock", "cpu"])
def test_window_delays_add_up(traces: Traces, kind: str) -> None:
    """Two windows that cut the trace in two hold the whole trace's delay
    between them (a wait across the cut is clipped to each side), and each
    window holds only waits that overlap it."""
    path = workload_trace("1.27.3", "gcpressure" if kind == "cpu" else "mutex")
    f = traces.frames(path)
    whole = profile(traces.engine, f, kind).totals()
    mid = (f.first_ts + f.last_ts) // 2
    left = profile(traces.engine, f, kind, f.first_ts, mid).totals()
    right = profile(traces.engine, f, kind, mid + 1, f.last_ts).totals()
    assert whole[1] > 0
    if kind == "cpu":  # samples: each falls on one side
        assert [a + b for a, b in zip(left, right, strict=True)] == whole
    else:  # [first, mid] and [mid+1, last] leave 1 ns out per wait across mid
        across = left[0] + right[0] - whole[0]
        assert whole[1] - across <= left[1] + right[1] <= whole[1]
        assert 0 < left[1] < whole[1]


def test_chan_and_lock_split_sync(traces: Traces) -> None:
    f = traces.frames(workload_trace("1.27.3", "httpnet"))
    sync, chan, lock = (profile(traces.engine, f, k).totals() for k in ("sync", "chan", "lock"))
    assert [c + lk for c, lk in zip(chan, lock, strict=True)] == sync
    assert chan[0] > 0


def test_profile_file_round_trip(traces: Traces) -> None:
    """The file decodes (protobuf) to the profile's own values, locations and
    string table, as Go's BuildProfile lays it out."""
    prof = profile(traces.engine, traces.frames(workload_trace("1.27.3", "mutex")), "sync")
    msg = decode(encode(prof))
    st = list(msg.string_table)
    assert st[0] == ""
    assert [(st[t.type], st[t.unit]) for t in msg.sample_type] == list(prof.sample_types)
    assert (st[msg.period_type.type], msg.period) == ("trace", 1)
    assert [list(s.value) for s in msg.sample] == [s["values"] for s in prof.samples]
    assert [loc.address for loc in msg.location] == [loc["pc"] for loc in prof.locations]
    fn = {x.id: st[x.name] for x in msg.function}
    assert [fn[loc.line[0].function_id] for loc in msg.location] == \
        [loc["function"] for loc in prof.locations]


def test_unknown_type(traces: Traces) -> None:
    f = traces.frames(workload_trace("1.27.3", "mutex"))
    with pytest.raises(UnknownType):
        waits(traces.engine, f, "heap")
    assert "cpu" in TYPES and "net" in TYPES


@pytest.mark.parametrize("workload", WORKLOADS)
def test_waits_part_by_part_equal_one_pass(traces: Traces, workload: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The waits found a few goroutines at a time equal those of one pass
    over every row (parts cut between goroutines; windows too)."""
    from ingest.views import pprof

    f = traces.frames(workload_trace(TOOLCHAINS[-1], workload))
    mid = (f.first_ts + f.last_ts) // 2
    assert len(f.goroutines.ids) > 10
    found = 0
    for kind in GO_TYPES:
        for t1, t2 in ((None, None), (mid, None), (None, mid)):
            monkeypatch.setattr(pprof, "WAIT_ROWS", 1 << 40)
            whole = waits(traces.engine, f, kind, t1, t2)
            monkeypatch.setattr(pprof, "WAIT_ROWS", 5)
            small = waits(traces.engine, f, kind, t1, t2)
            found += len(whole.goid)
            for col in ("goid", "stack_id", "value_ns", "seq"):
                a, b = getattr(whole, col), getattr(small, col)
                assert a.dtype == b.dtype and a.tolist() == b.tolist(), (kind, t1, t2, col)
    assert found


@pytest.mark.parametrize("workload", WORKLOADS)
def test_waits_in_c_equal_numpys(traces: Traces, workload: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The one C pass over each part (ingest/csrc/waits.c) finds numpy's
    waits: every profile type, whole trace and windows, whole and in parts."""
    from ingest.views import pprof

    pytest.importorskip("ingest.views._waits")
    f = traces.frames(workload_trace(TOOLCHAINS[-1], workload))
    mid = (f.first_ts + f.last_ts) // 2
    found = 0
    for kind in ("net", "sync", "chan", "lock", "syscall", "sched"):
        for t1, t2 in ((None, None), (mid, None), (None, mid), (mid, mid + 1)):
            for rows in (1 << 40, 5):
                monkeypatch.setattr(pprof, "WAIT_ROWS", rows)
                c = waits(traces.engine, f, kind, t1, t2)
                monkeypatch.setenv(PURE_ENV, "1")
                py = waits(traces.engine, f, kind, t1, t2)
                monkeypatch.delenv(PURE_ENV)
                found += len(c.goid)
                for col in ("goid", "stack_id", "value_ns", "seq"):
                    a, b = getattr(c, col), getattr(py, col)
                    assert a.dtype == b.dtype and a.tolist() == b.tolist(), (kind, t1, t2, col)
    assert found


def test_last_of_each_equals_a_stable_sort() -> None:
    """Each key's row of greatest order (ties: the last row) = the last of
    each key after a stable sort by (key, order)."""
    import numpy as np

    from ingest.views.pprof import last_of_each

    rng = np.random.default_rng(2)
    for n in (0, 1, 5, 1000):
        for spread in (3, 10**12):
            key = rng.integers(0, spread, n) - 2
            order = rng.integers(0, 4, n)  # many ties
            by = np.lexsort((order, key))
            want = by[np.r_[key[by][1:] != key[by][:-1], True]] if n else by
            assert last_of_each(key, order).tolist() == want.tolist()
