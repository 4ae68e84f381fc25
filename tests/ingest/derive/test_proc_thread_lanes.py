"""The timeline's P and M lane sets as built (ingest.derive.proc_thread_lanes)
on real traces: the C passes (ingest.derive._lanesets) keep exactly the rows,
refs and block index that the numpy forms' whole lane sets give (build_index,
kept_rows), however often they hand the mapped pages back and however few
seqs a pass places; and they refuse the inputs whose order they rely on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

import ingest.derive.proc_thread_lanes as tl
from ingest.codes import RUNNING, STATE_CODE, SYSCALL
from ingest.config import Settings, sqlite_url
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.lanesets import (
    BLOCK,
    CAT,
    REF_SOURCES,
    SRC_INTERVAL,
    SRC_RUN,
    LaneSet,
    RowLanes,
    build_index,
    kept_rows,
    ref_dtype,
)
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[3]
SAMPLES = {"httpnet": REPO / "samples" / "go1.27-httpnet.trace",
           "gcpressure": REPO / "samples" / "go1.27-gcpressure.trace",
           "mixed121": REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace"}
P_CODES = bytes([STATE_CODE["Idle"], CAT["Running"], CAT["Idle"], REF_SOURCES, SRC_RUN,
                 SRC_INTERVAL])
M_CODES = bytes([SYSCALL, CAT["Syscall"], CAT["Running"], REF_SOURCES, SRC_INTERVAL])


@dataclass
class Loaded:
    engine: Engine
    frames: dict[str, TraceFrames]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    d = tmp_path_factory.mktemp("lanes")
    settings = Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db"))
    engine = make_engine(settings.db_url)
    store = FrameStore(engine, d)
    frames = {name: store.get(ingest_trace_file(engine, path, data_dir=d).id)
              for name, path in SAMPLES.items()}
    yield Loaded(engine, frames)
    engine.dispose()


def assert_same_kept(got: RowLanes | None, want: RowLanes, name: str) -> None:
    """Array for array, dtype included (what is written to disk), index too."""
    assert got is not None, f"{name}: the C pass refused a real trace"
    for field in ("ids", "lo", "hi", "ref"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype, (name, field)
        np.testing.assert_array_equal(a, b, err_msg=f"{name} {field}")
    assert (got.index is None) == (want.index is None), name
    if got.index is not None and want.index is not None:
        for field in ("block_max", "cats", "cum"):
            a, b = getattr(got.index, field), getattr(want.index, field)
            assert a.dtype == b.dtype and a.shape == b.shape, (name, field)
            np.testing.assert_array_equal(a, b, err_msg=f"{name} index.{field}")


def p_lanes_merged(f: TraceFrames) -> RowLanes:
    """The P lane set as the merge defines it, by a stable sort: rows by (proc,
    start), a run before an Idle interval starting at the same time, then in
    their own order (the numpy form's sort leaves such ties unordered)."""
    runs, iv = f.proc_runs, f.intervals
    ng = int(f.goroutines.off[-1])
    idle = ng + np.flatnonzero(f.state[ng:] == STATE_CODE["Idle"])
    p = np.r_[runs["p"], iv["rid"][idle]].astype(np.int64)
    start = np.r_[runs["start_ts"], iv["start_ts"][idle]]
    end = np.r_[runs["end_ts"], iv["end_ts"][idle]]
    is_idle = np.r_[np.zeros(len(runs), np.int8), np.ones(len(idle), np.int8)]
    order = np.lexsort((is_idle, start, p))
    ref = np.r_[np.arange(len(runs)) * REF_SOURCES + SRC_RUN,
                idle * REF_SOURCES + SRC_INTERVAL].astype(ref_dtype(f))
    ids, first = np.unique(p[order], return_index=True)
    hi = np.r_[first[1:], len(order)].astype(np.int64)
    cat = np.where(is_idle == 1, CAT["Idle"], CAT["Running"]).astype(np.int8)
    return kept_rows(build_index(LaneSet(
        ids.astype(np.int64), first.astype(np.int64), hi, start[order], end[order],
        cat[order], ref[order])))


def test_c_p_lane_set_equals_the_merge(loaded: Loaded) -> None:
    """The C pass keeps the merge's rows, refs and index (and, where no two
    rows of a proc start at once, the numpy form's)."""
    pytest.importorskip("ingest.derive._lanesets")
    for name, f in loaded.frames.items():
        want = p_lanes_merged(f)
        assert_same_kept(tl._p_lanes_c(f), want, name)
        numpy_built = tl._p_lanes_numpy(f)
        assert len(want.ref) == len(numpy_built.ref) > 0, name


@pytest.mark.parametrize("stride", [1, 7, 1 << 20])
def test_c_p_pass_releasing_as_it_goes_gives_the_same(loaded: Loaded, stride: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Called back every ``stride`` rows (and so every row), the same lane set;
    the callback runs once per ``stride`` rows the pass makes."""
    pytest.importorskip("ingest.derive._lanesets")
    f = loaded.frames["httpnet"]
    calls: list[int] = []

    def counting(*cols: Any) -> Any:
        release = releaser(*cols)

        def count_and_release() -> None:
            calls.append(1)
            release()
        return count_and_release

    releaser = tl._releaser
    monkeypatch.setattr(tl, "_releaser", counting)
    monkeypatch.setattr(tl, "SCATTERED_RELEASE_ROWS", stride)
    got = tl._p_lanes_c(f)
    assert got is not None
    rows = len(f.proc_runs) + int(np.count_nonzero(
        f.state[int(f.goroutines.off[-1]):] == STATE_CODE["Idle"]))
    assert len(calls) == rows // stride + 1  # and once after the pass
    assert_same_kept(got, p_lanes_merged(f), "httpnet")


def test_c_p_pass_refuses_inputs_out_of_order() -> None:
    """Proc runs or Idle intervals not in (proc, start) order: None, and the
    numpy sort builds the lane set instead; runs read at their interval's row
    give what the runs' own columns give."""
    ext = pytest.importorskip("ingest.derive._lanesets")
    idle = np.full(3, STATE_CODE["Idle"], np.int8)
    rid = np.array([0, 0, 1], np.int64)
    start = np.array([3, 8, 4], np.int64)
    runs_p = np.array([0, 0, 1], np.int64)
    runs_start = np.array([1, 5, 2], np.int64)

    def call(*cols: Any, row: Any = None, out: Any = None) -> Any:
        out = np.zeros(6, np.int64) if out is None else out
        return ext.p_lane_refs(row, *cols, idle, 0, P_CODES, out, BLOCK, None, 1), out

    (ids, lo, hi, kept, index), out = call(runs_p, runs_start, runs_start + 1, rid, start,
                                           start + 1)
    assert [np.frombuffer(x, np.int64).tolist() for x in (ids, lo, hi)] == [
        [0, 1], [0, 4], [4, 6]]
    assert kept == 6 and out.tolist() == [
        0 * REF_SOURCES + SRC_RUN, 0 * REF_SOURCES + SRC_INTERVAL, 1 * REF_SOURCES + SRC_RUN,
        1 * REF_SOURCES + SRC_INTERVAL, 2 * REF_SOURCES + SRC_RUN,
        2 * REF_SOURCES + SRC_INTERVAL]
    # Every row lasts 1 ns: Running 3 ns and Idle 3 ns in the one block.
    block_max, cats, cum = (np.frombuffer(x, np.int64).tolist() for x in index)
    assert block_max == [1] and cats == [CAT["Running"], CAT["Idle"]]
    assert cum == [0, 0, 3, 3]
    # The runs as rows 2, 0, 1 of columns laid out in another order.
    (ids2, lo2, hi2, kept2, index2), out2 = call(
        runs_p[[1, 2, 0]], runs_start[[1, 2, 0]], runs_start[[1, 2, 0]] + 1, rid, start,
        start + 1, row=np.array([2, 0, 1], np.int32))
    assert (ids2, lo2, hi2, kept2, index2) == (ids, lo, hi, kept, index)
    assert out2.tolist() == out.tolist()
    assert call(runs_p, np.array([5, 1, 2], np.int64), runs_start + 1, rid, start,
                start + 1)[0] is None
    assert call(runs_p, runs_start, runs_start + 1, rid, np.array([8, 3, 4], np.int64),
                start + 1)[0] is None
    with pytest.raises(ValueError, match="row outside"):
        call(runs_p, runs_start, runs_start + 1, rid, start, start + 1,
             row=np.array([0, 1, 3], np.int32))
    # Rows lasting no time are not kept: the lanes' bounds count the others.
    (ids, lo, hi, kept, index), out = call(runs_p, runs_start, runs_start, rid, start,
                                           start + 1, out=np.zeros(6, np.int32))
    assert kept == 3 and out[:3].tolist() == [r * REF_SOURCES + SRC_INTERVAL for r in (0, 1, 2)]
    assert np.frombuffer(lo, np.int64).tolist() == [0, 2]
    assert np.frombuffer(index[1], np.int64).tolist() == [CAT["Idle"]]
    assert np.frombuffer(index[2], np.int64).tolist() == [0, 3]


def test_m_lane_set_from_go_order_equals_a_sort_by_time(
        loaded: Loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy form's M lanes grouped from the rows in Go's order (no sort by
    time) hold the same rows as when the rows come in (goroutine, time) order,
    which the time sort puts right."""
    for name, f in loaded.frames.items():
        ours = tl._build_m_lanes(f)
        with monkeypatch.context() as m:
            m.setattr(tl, "trace_order", lambda seq, rows: rows)
            sorted_by_time = tl._build_m_lanes(f)
        a, b = _canonical(ours), _canonical(sorted_by_time)
        assert len(a["start"]) > 0, name
        for field, value in b.items():
            np.testing.assert_array_equal(a[field], value, err_msg=f"{name} {field}")
        # Each lane in time order, whichever way it was built.
        for ls in (ours, sorted_by_time):
            for lo, hi in zip(ls.lo.tolist(), ls.hi.tolist(), strict=True):
                assert (np.diff(ls.start[lo:hi]) >= 0).all(), name


def _canonical(ls: LaneSet) -> dict[str, Any]:
    """A lane set's rows ordered by (lane, start, ref): two builders may order
    rows of one lane that start at the same time differently."""
    lane = np.repeat(np.arange(len(ls.ids)), ls.hi - ls.lo)
    order = np.lexsort((ls.ref, np.asarray(ls.start), lane))
    return {"ids": ls.ids, "lo": ls.lo, "hi": ls.hi, "start": ls.start[order],
            "end": ls.end[order], "cat": ls.cat[order], "ref": ls.ref[order]}


@pytest.mark.parametrize(("passes", "stride"), [(1, 1 << 20), (7, 7)])
def test_c_m_lane_set_equals_numpys(loaded: Loaded, monkeypatch: pytest.MonkeyPatch,
                                    passes: int, stride: int) -> None:
    """The C passes keep the M lane set the numpy form builds, array for array,
    index included, wherever they take a trace (they take the benchmark's
    workload), with the seqs placed in ``passes`` windows and pages handed
    back every ``stride`` rows."""
    pytest.importorskip("ingest.derive._lanesets")
    monkeypatch.setattr(tl, "RELEASE_ROWS", stride)
    monkeypatch.setattr(tl, "SCATTERED_RELEASE_ROWS", stride)
    taken = []
    for name, f in loaded.frames.items():
        seqs = int(f.intervals["seq"].max()) + 1
        monkeypatch.setattr(tl, "SEQ_WINDOW", -(-seqs // passes))
        c = tl._m_lanes_c(f)
        if c is None:
            continue  # seqs or times out of the order it needs: numpy sorts
        taken.append(name)
        assert_same_kept(c, kept_rows(tl._build_m_lanes(f)), name)
    assert "httpnet" in taken


def test_c_m_passes_place_by_seq_and_refuse_what_needs_a_sort() -> None:
    """Rows grouped by thread in seq order, whatever the window; their refs
    written over them in place; None for a seq given twice, and for a lane
    whose starts do not ascend in that order; a callback's error comes out."""
    ext = pytest.importorskip("ingest.derive._lanesets")
    wait = STATE_CODE["Waiting"]
    # Goroutine rows 0-5 (row 6 is a proc's): row 3 waits, row 4 has no M.
    state = np.array([RUNNING, SYSCALL, RUNNING, wait, RUNNING, RUNNING, RUNNING], np.int8)
    m = np.array([7, 2, 7, 2, -1, 2, 7], np.int32)
    seq = np.array([40, 10, 30, 5, 20, 0, 1], np.int32)
    start = np.array([400, 100, 300, 50, 200, 0, 10], np.int64)
    codes = bytes([RUNNING, SYSCALL])
    for window in (1, 2, 41, 1 << 20):
        ids, lo, hi, rows = ext.m_lane_rows(state, m, seq, 6, codes, window, None, 1)
        assert [np.frombuffer(x, np.int64).tolist() for x in (ids, lo, hi)] == [
            [2, 7], [0, 2], [2, 4]]
        # thread 2 by seq (0, 10), thread 7 (30, 40)
        assert np.frombuffer(rows, np.int32).tolist() == [5, 1, 2, 0]
    rows = np.frombuffer(rows, np.int32)
    lo64, hi64 = np.array([0, 2], np.int64), np.array([2, 4], np.int64)
    end = start + 10
    end[1] = start[1]  # row 1 lasts no time: not kept
    klo, khi, kept, index = ext.m_lane_refs(rows, lo64, hi64, state, start, end, M_CODES,
                                            rows, 2, None, 1)
    assert kept == 3 and rows[:3].tolist() == [r * REF_SOURCES + SRC_INTERVAL
                                                for r in (5, 2, 0)]
    assert [np.frombuffer(x, np.int64).tolist() for x in (klo, khi)] == [[0, 1], [1, 3]]
    block_max, cats, cum = (np.frombuffer(x, np.int64).tolist() for x in index)
    assert block_max == [10, 10] and cats == [CAT["Running"]] and cum == [0, 20, 30]
    twice = seq.copy()
    twice[2] = 40
    for window in (1, 1 << 20):
        assert ext.m_lane_rows(state, m, twice, 6, codes, window, None, 1) is None
    late = start.copy()
    late[2] = 500  # thread 7: seq 30 starts after seq 40
    rows = np.array([5, 1, 2, 0], np.int32)
    assert ext.m_lane_refs(rows, lo64, hi64, state, late, late + 1, M_CODES,
                           np.zeros(4, np.int64), 2, None, 1) is None

    def broken() -> None:
        raise RuntimeError("the callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        ext.m_lane_rows(state, m, seq, 6, codes, 8, broken, 2)
    with pytest.raises(ValueError, match="out holds"):
        ext.m_lane_refs(rows, lo64, hi64, state, start, end, M_CODES, rows[:2], 2, None, 1)
    # No row taken: no lane, no row, an index of no block and no category.
    ids, lo, hi, none = ext.m_lane_rows(np.full(3, wait, np.int8), m[:3], seq[:3], 3, codes,
                                        8, None, 1)
    assert len(ids) == len(lo) == len(hi) == len(none) == 0
    z = np.zeros(0, np.int64)
    index = tl._index(ext.m_lane_refs(np.zeros(0, np.int32), z, z, state, start, end, M_CODES,
                                      np.zeros(0, np.int32), 2, None, 1)[3])
    assert index is not None and index.cum.shape == (1, 0) and len(index.block_max) == 0


def test_grouping_rows_in_time_order_equals_the_sort() -> None:
    """group_in_time_order on rows in time order, and on rows out of it (it
    sorts those), gives group_sorted's lanes; distinct starts, so one answer."""
    from ingest.derive.lane_grouping import group_in_time_order, group_sorted

    rng = np.random.default_rng(7)
    start = np.cumsum(rng.integers(1, 50, 5000)).astype(np.int64)
    for key in (rng.integers(3, 40, 5000), rng.integers(0, 2**40, 5000) % 7 * 2**33):
        key = key.astype(np.int64)
        for s in (start, rng.permutation(start)):
            order, ids, lo, hi, got_start = group_in_time_order(key, s)
            want = group_sorted(key, s)
            for x, y in zip((order, ids, lo, hi), want, strict=True):
                np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(got_start, s[want[0]])


def test_c_block_index_equals_numpys(loaded: Loaded) -> None:
    """ingest.derive._lanesets' one-pass LaneSetIndex equals the numpy form's on
    the P and M lane sets of the real traces,
    and both say None for rows of a lane that overlap."""
    ext = pytest.importorskip("ingest.derive._lanesets")
    import ingest.derive.lanesets as ls_module

    checked = 0
    for name, f in loaded.frames.items():
        for ls in (tl._p_lanes_numpy(f), tl._build_m_lanes(f)):
            c, ref = ls_module._block_index_c(ext, ls), ls_module._block_index_numpy(ls)
            assert (c is None) == (ref is None), name
            if c is not None and ref is not None:
                for field in ("block_max", "cats", "cum"):
                    a, b = getattr(c, field), getattr(ref, field)
                    assert a.dtype == b.dtype and a.shape == b.shape, (name, field)
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} {field}")
                checked += 1
    assert checked >= 4
    # Two lanes, the second's rows overlapping: None; apart: an index.
    start = np.array([0, 10, 20, 25], np.int64)
    end = np.array([5, 15, 30, 40], np.int64)
    cat = np.array([0, 2, 0, 2], np.int8)
    ls = LaneSet(np.array([1, 2], np.int64), np.array([0, 2], np.int64),
                    np.array([2, 4], np.int64), start, end, cat, np.arange(4, dtype=np.int64))
    assert ls_module._block_index_c(ext, ls) is None and ls_module._block_index_numpy(ls) is None
    ls.end = np.array([5, 15, 25, 40], np.int64)
    c, ref = ls_module._block_index_c(ext, ls), ls_module._block_index_numpy(ls)
    assert c is not None and ref is not None
    assert c.cats.tolist() == [0, 2] and c.cum.tolist() == ref.cum.tolist() == [[0, 0], [10, 20]]
