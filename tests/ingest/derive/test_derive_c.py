"""The C forms of the derivations against their numpy forms, on real traces of
every trace format we read: the interval order by counting sort
(ingest/csrc/intervalorder.c) and the one-pass reductions
(ingest/csrc/summaries.c)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace.todir import decode_file_to_dir
from ingest.codes import STATE_CODE
from ingest.columns import Transitions
from ingest.derive import fallback as derive_numpy
from ingest.derive import interval_order as order
from ingest.derive import intervals as derive
from tests.support.transitions_oracle import read_transitions

REPO = Path(__file__).resolve().parents[3]
TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace")) + [
    REPO / "samples" / "go1.27-httpnet-2MB.trace", REPO / "samples" / "go1.27-syscallblock.trace"]

_intervalorder = pytest.importorskip("ingest.derive._intervalorder")
_summaries = pytest.importorskip("ingest.derive._summaries")


def assert_same_order(a: order.Ordered, b: order.Ordered) -> None:
    for name in ("order", "end", "first", "last", "starts"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name


@pytest.fixture(scope="module", params=TRACES, ids=[t.name for t in TRACES])
def decoded(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Transitions, int]:
    d = tmp_path_factory.mktemp("order") / "parquet"
    meta = decode_file_to_dir(request.param, d)
    tr = read_transitions(d)
    return tr, max(int(meta["last_ts"]), int(tr.ts.max()))


def test_counting_sort_equals_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    fast = derive._counting_order(tr, last_ts)
    assert fast is not None, "the C sort applies to every trace Go writes"
    assert_same_order(fast, derive_numpy.order_intervals_numpy(tr, last_ts))


@pytest.mark.parametrize("change", ["negative id", "sparse ids", "third resource"])
def test_ids_outside_the_scheme_fall_back_to_numpy(decoded: tuple[Transitions, int],
                                                   change: str) -> None:
    tr, last_ts = decoded
    rid, res = tr.rid.copy(), tr.res.copy()
    k = int(np.flatnonzero(res == 0)[0])  # some goroutine's transition
    if change == "negative id":
        rid[rid == rid[k]] = -5
    elif change == "sparse ids":
        rid[rid == rid[k]] = 2**30 - 1
    else:
        res[k] = 2
    odd = dataclasses.replace(tr, rid=rid, res=res)
    assert derive._counting_order(odd, last_ts) is None
    if change != "third resource":  # the numpy sort's own range
        assert_same_order(derive.order_intervals(odd, last_ts),
                          derive_numpy.order_intervals_numpy(odd, last_ts))


def test_empty_and_one_row(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    for n in (0, 1):
        part = dataclasses.replace(tr, **{f.name: getattr(tr, f.name)[:n]
                                          for f in dataclasses.fields(tr) if f.name != "reasons"})
        fast = derive._counting_order(part, last_ts)
        assert fast is not None
        assert_same_order(fast, derive_numpy.order_intervals_numpy(part, last_ts))


def test_wrong_buffers_are_refused() -> None:
    n = 4
    res = np.zeros(n, np.int8)
    rid = np.arange(n, dtype=np.int32)
    ts = np.arange(n, dtype=np.int64)
    outs = [np.empty(n, np.int32), np.empty(n, bool), np.empty(n, bool)]
    assert _intervalorder.order_intervals(res, rid, *outs)
    assert outs[0].tolist() == [0, 1, 2, 3] and outs[2].tolist() == [True] * 4
    end = np.empty(n, np.int64)
    _intervalorder.interval_ends(outs[0], ts, outs[2], 10, end)
    assert end.tolist() == [10, 10, 10, 10], "each row its own resource: all last"
    with pytest.raises(TypeError, match="rid"):
        _intervalorder.order_intervals(res, rid.astype(np.int64), *outs)
    with pytest.raises(ValueError, match="first"):
        _intervalorder.order_intervals(res, rid, outs[0], outs[1][:3], outs[2])
    with pytest.raises((TypeError, BufferError)):
        _intervalorder.order_intervals(res, rid, outs[0], b"\0" * 4, outs[2])
    with pytest.raises(ValueError, match="end"):
        _intervalorder.interval_ends(outs[0], ts, outs[2], 10, end[:3])


def test_pure_settings_use_numpy(decoded: tuple[Transitions, int],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    monkeypatch.setenv("GMPSCOPE_PURE", "1")
    assert derive._counting_order(tr, last_ts) is None
    assert derive._c_summaries(tr, o) is None


def test_run_sums_equal_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    assert derive._c_summaries(tr, o) is not None
    sums, created, ended = derive.run_sums(tr, o)
    want_sums, want_created, want_ended = derive_numpy.run_sums_numpy(tr, o)
    assert set(sums) == set(want_sums)
    for st in sums:
        assert np.array_equal(sums[st], want_sums[st]), st
    assert np.array_equal(created, want_created) and np.array_equal(ended, want_ended)


def test_thread_sums_equal_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    got, want = derive.thread_sums(tr, o), derive_numpy.thread_sums_numpy(tr, o)
    assert len(got) == len(want) == 7
    for name, a, b in zip(("m", "first", "last", "transitions", "running", "syscall",
                           "syscalls"), got, want, strict=True):
        assert a.dtype == b.dtype == np.int64, name
        assert np.array_equal(a, b), name


def test_syscall_rows_equal_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    got, want = derive.syscall_rows(tr, o), derive_numpy.syscall_rows_numpy(tr, o)
    assert (got is None) == (want is None)
    if got is None or want is None:
        return
    for name, a, b in zip(("rows", "next_state", "p_entry", "p_lost", "stolen_ts",
                           "stolen_m"), got, want, strict=True):
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b), name


def test_state_edges_equal_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    got, want = derive.state_edges(tr, o), derive_numpy.state_edges_numpy(tr, o)
    assert [r[:5] + r[6:] for r in got] == [r[:5] + r[6:] for r in want]
    for a, b in zip(got, want, strict=True):
        assert (a[5] is None) == (b[5] is None)
        if a[5] is not None:  # numpy's pairwise float sum against an exact one
            assert a[5] == pytest.approx(b[5], rel=1e-12)


def test_transition_kinds_equal_numpy(decoded: tuple[Transitions, int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tr, _ = decoded
    nr = max(len(tr.reasons), 1)
    assert derive._kinds_c(tr, nr, 2 * 8 * 8 * nr) is not None, "the C kinds apply"
    rows, kinds = derive.transition_kinds(tr)
    monkeypatch.setenv("GMPSCOPE_PURE", "1")
    want_rows, want_kinds = derive.transition_kinds(tr)
    assert rows == want_rows
    assert kinds.dtype == want_kinds.dtype
    assert np.array_equal(kinds, want_kinds)


def test_kind_codes_out_of_range_fall_back() -> None:
    """A code outside 2 resources x 8 x 8 states x the reasons: the C count
    says no and the numpy form is used."""
    res = np.array([0, 1], np.int8)
    st = np.array([1, 2], np.int8)
    assert _summaries.kind_counts(res, st, st, np.array([0, 0], np.int8), 1,
                                  np.zeros(128, np.int64))
    assert not _summaries.kind_counts(res, st, st, np.array([0, 1], np.int8), 1,
                                      np.zeros(128, np.int64))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 1000, 4097])
def test_quantiles_of_ties_and_extremes(n: int) -> None:
    """One goroutine whose transitions alternate Running/Runnable with dwells
    drawn from a small range (many ties): p50/p99/max by the nearest rank of
    the sorted dwells, the definition state_edges documents."""
    rng = np.random.default_rng(n)
    dwell = rng.integers(0, 7, size=n).astype(np.int64)
    ts = np.concatenate([[0], np.cumsum(dwell)]).astype(np.int64)
    rows = len(ts)
    to = np.where(np.arange(rows) % 2 == 0, order.RUNNING, order.RUNNABLE).astype(np.int8)
    frm = np.roll(to, 1)
    tr = Transitions(ts=ts, res=np.zeros(rows, np.int8), rid=np.ones(rows, np.int32), frm=frm,
                     to=to, reason=np.zeros(rows, np.int16), m=np.zeros(rows, np.int32),
                     p=np.zeros(rows, np.int32), g=np.ones(rows, np.int32),
                     stack=np.zeros(rows, np.int32), reasons=[])
    o = derive.order_intervals(tr, int(ts[-1]))
    got = derive.state_edges(tr, o)
    assert [r[:5] + r[6:] for r in got] == [r[:5] + r[6:]
                                             for r in derive_numpy.state_edges_numpy(tr, o)]
    for row in got:
        edge_dwells = np.sort(dwell[(to[1:] == STATE_CODE[row[2]])
                                    & (frm[1:] == STATE_CODE[row[1]])])
        assert row[4] == len(edge_dwells)
        if len(edge_dwells):
            assert row[6] == order.nearest_rank(edge_dwells, 0.5)
            assert row[7] == order.nearest_rank(edge_dwells, 0.99)
            assert row[8] == int(edge_dwells[-1])


def test_reductions_refuse_rows_out_of_range(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    bad = o.order.copy()
    bad[len(bad) // 2] = len(bad) + 5
    with pytest.raises(ValueError, match="out of range"):
        _summaries.state_edges(bad, o.first, tr.ts, tr.res, tr.frm, tr.to)
    with pytest.raises(ValueError, match="out of range"):
        _intervalorder.interval_ends(bad, tr.ts, o.last, last_ts, np.empty(len(bad), np.int64))
    with pytest.raises(ValueError, match="out of range"):
        _summaries.syscall_rows(bad, o.last_ts, o.last, tr.ts, tr.res, tr.frm, tr.to, tr.rid,
                                tr.p, tr.m, bytes((0, 1, order.SYSCALL, order.RUNNING,
                                                   order.IDLE)))
    with pytest.raises(ValueError, match="out of range"):
        _summaries.thread_sums(tr.m, tr.ts, tr.res, tr.to, bad, o.last, o.last_ts, 0,
                               order.RUNNING, order.SYSCALL)
    groups = len(o.starts)
    with pytest.raises(ValueError, match="out of range"):
        _summaries.resource_sums(bad, o.last_ts, o.starts, tr.ts, tr.frm, tr.to, b"\x03",
                                 order.NOT_EXIST, np.empty((groups, 1), np.int64),
                                 np.empty(groups, np.int64), np.empty(groups, np.int64))
    with pytest.raises(ValueError, match="mismatched"):
        _summaries.resource_sums(o.order, o.last_ts, o.starts, tr.ts, tr.frm, tr.to, b"\x03",
                                 order.NOT_EXIST, np.empty((groups, 2), np.int64),
                                 np.empty(groups, np.int64), np.empty(groups, np.int64))


def test_ends_of_rows_equal_the_whole_end_column(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    rows = np.flatnonzero(o.last | (np.arange(len(o.order)) % 7 == 0))
    part = o.ends_of(rows)
    assert o._end is None, "the rows' ends need no whole column"
    np.testing.assert_array_equal(part, derive_numpy.order_intervals_numpy(tr, last_ts).end[rows])
    np.testing.assert_array_equal(part, o.end[rows])
    np.testing.assert_array_equal(o.ends_of(rows), part)
    with pytest.raises(ValueError, match="out of range"):
        _intervalorder.interval_ends(o.order, tr.ts, o.last, last_ts, np.empty(1, np.int64),
                                     np.array([len(o.order)], np.int64))


def test_syscall_rows_take_procs_in_16_or_32_bits(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    narrow = dataclasses.replace(tr, p=tr.p.astype(np.int16))
    wide = dataclasses.replace(tr, p=tr.p.astype(np.int32))
    a, b = derive.syscall_rows(narrow, o), derive.syscall_rows(wide, o)
    assert (a is None) == (b is None)
    for x, y in zip(a or (), b or (), strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    # Procs in neither width: refused, naming the widths taken.
    with pytest.raises(TypeError, match="p: expected items of 2 or 4 bytes"):
        _summaries.syscall_rows(o.order, o.last_ts, o.last, tr.ts, tr.res, tr.frm, tr.to,
                                tr.rid, tr.p.astype(np.int64), tr.m,
                                bytes((0, 1, order.SYSCALL, order.RUNNING, order.IDLE)))


def test_proc_runs_by_seq_equal_proc_runs_by_time(decoded: tuple[Transitions, int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With strictly increasing times, Go's order is the time order: the runs
    sorted by seq are the runs sorted by time (the general path)."""
    tr, last_ts = decoded
    o = derive.order_intervals(tr, last_ts)
    fast = derive.proc_runs(tr, o)
    monkeypatch.setattr(derive, "_strictly_increasing", lambda ts: False)
    general = derive.proc_runs(tr, o)
    for name in ("p", "seq", "interval_row"):
        assert np.array_equal(fast[name], general[name]), name


def test_strictly_increasing_sees_every_pair() -> None:
    f = derive._strictly_increasing
    assert f(np.zeros(0, np.int64)) and f(np.array([5], np.int64))
    x = np.arange(3_000_001, dtype=np.int64)
    assert f(x, 1 << 20)
    for at in (1, (1 << 20) - 1, 1 << 20, 3_000_000):
        y = x.copy()
        y[at] = y[at - 1]
        assert not f(y, 1 << 20), at
