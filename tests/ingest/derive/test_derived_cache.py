"""The timeline's lane sets on disk (ingest.derive.cache): the loader builds them right
after a load, a server reads them back memory-mapped instead of sorting millions of rows
again, and what it reads equals a fresh build; a torn or foreign copy is built again."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from ingest.config import Settings, sqlite_url
from ingest.derive import cache as derived_cache
from ingest.derive import precompute, proc_thread_lanes
from ingest.derive import range_lanes as range_lanes_module
from ingest.derive.cache import DERIVED_VERSION
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.derive.lanesets import (
    LaneSetIndex,
    RowCats,
    RowLanes,
    RowTimes,
    kept_rows,
    lane_search,
)
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.derive.range_lanes import range_lanes
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-httpnet.trace"  # 2 Ps, several Ms, GC ranges
KEYS = ("p_lanes", "m_lanes", "goroutines", "ranges")
#: The other caches the loader stages from the tables it stores
#: (ingest/load/staged_caches.py): the overview's counters, the annotation index.
STAGED = {"overview_counters", "annotations_tasks", "annotations_regions", "annotations_logs",
          # what opening the frames keeps (ingest.derive.frames.Opened)
          "frames_opened"}


def lane_dirs(root: Path) -> list[str]:
    """The lane sets among the value directories in ``root`` (the loader's
    other staged caches left out; anything else fails)."""
    names = {p.name for p in root.iterdir() if p.is_dir()}
    assert names - set(KEYS) <= STAGED, names
    return sorted(names & set(KEYS))


def lane_values(engine: Engine, frames: TraceFrames) -> dict[str, Any]:
    return {"p_lanes": p_lanes(frames),
            "m_lanes": m_lanes(frames),
            "goroutines": goroutine_table(engine, frames),
            "ranges": range_lanes(engine, frames)}


def assert_same_value(got: Any, want: Any, where: str = "") -> None:
    """Field by field: arrays equal in value and dtype, nested dataclasses alike."""
    assert type(got) is type(want), where
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        name = f"{where}.{f.name}"
        if isinstance(b, RowTimes | RowCats):
            assert type(a) is type(b), name
            every = np.arange(len(b))
            np.testing.assert_array_equal(a[every], b[every], err_msg=name)
        elif isinstance(b, np.ndarray):
            assert np.asarray(a).dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=name)
        elif dataclasses.is_dataclass(b):
            assert_same_value(a, b, name)
        else:
            assert a == b, name


def fresh_build(engine: Engine, frames: TraceFrames) -> dict[str, Any]:
    """The same values built in memory only (a copy of the frames without a directory)."""
    copy = TraceFrames(trace_id=frames.trace_id, first_ts=frames.first_ts,
                       last_ts=frames.last_ts, kinds=frames.kinds,
                       intervals=frames.intervals, proc_runs=frames.proc_runs,
                       syscalls=frames.syscalls, directory=None)
    return lane_values(engine, copy)


@pytest.fixture()
def loaded(tmp_path: Path) -> tuple[FrameStore, int]:
    return load_sample(tmp_path)


def load_sample(tmp_path: Path, trace: Path = SAMPLE) -> tuple[FrameStore, int]:
    """``trace`` ingested into a new database and data directory under tmp_path."""
    settings = Settings.from_env({}, data_dir=tmp_path, db_url=sqlite_url(tmp_path / "t.db"))
    engine = make_engine(settings.db_url)
    res = ingest_trace_file(engine, trace, data_dir=settings.data_dir)
    return FrameStore(engine, settings.data_dir), res.id


def derived_root(store: FrameStore, trace_id: int) -> Path:
    root = derived_cache.derived_dir(store.get(trace_id))
    assert root is not None
    return root


@pytest.fixture(params=[SAMPLE, REPO / "samples" / "go1.27-syscallblock.trace",
                        REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace"],
                ids=lambda p: p.name)
def loaded_any(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FrameStore, int]:
    return load_sample(tmp_path, request.param)


def test_the_loader_stores_the_lane_sets_and_they_equal_a_fresh_build(
        loaded_any: tuple[FrameStore, int]) -> None:
    """The goroutine table and the range lanes are made by the loader from
    memory before its commit, the others from the frames after it: each equals
    a build from the database."""
    store, tid = loaded_any
    root = derived_root(store, tid)
    assert lane_dirs(root) == sorted(KEYS)
    frames = store.get(tid)
    got = lane_values(store.engine, frames)
    # Read from disk, not built: the arrays are memory maps of the stored files.
    assert isinstance(got["m_lanes"].ref.base, np.memmap)  # a plain view of the mapping
    assert got["p_lanes"].index is not None and isinstance(got["p_lanes"].index.cum, np.memmap)
    want = fresh_build(store.engine, frames)
    assert len(want["p_lanes"].ids) >= 1 and len(want["m_lanes"].ids) >= 2
    for key in KEYS:
        assert_same_value(got[key], want[key], key)


def test_the_range_lanes_come_from_the_loaders_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Made before the commit from the ranges' columns: the database is never
    asked for them during the load, and they equal its answer afterwards."""
    def no_query(*_: object) -> None:
        raise AssertionError("the range lanes were built from the database")

    with monkeypatch.context() as m:
        m.setattr(precompute, "range_lanes", no_query)
        store, tid = load_sample(tmp_path)
    engine = store.engine
    assert (derived_root(store, tid) / "ranges").is_dir()
    frames = store.get(tid)
    got = range_lanes(engine, frames)
    assert isinstance(got.lanes.start, np.memmap)  # read back, not built
    assert len(got.lanes.start) > 0
    assert_same_value(got, fresh_build(engine, frames)["ranges"], "ranges")


def test_a_server_restart_reads_them_back_without_building(
        loaded: tuple[FrameStore, int], monkeypatch: pytest.MonkeyPatch) -> None:
    store, tid = loaded
    want = fresh_build(store.engine, store.get(tid))

    def no_sorting(*_: object) -> None:
        raise AssertionError("a stored lane set was built again")

    for module in (proc_thread_lanes, range_lanes_module):
        monkeypatch.setattr(module, "group_sorted", no_sorting)
    restarted = FrameStore(store.engine, store.data_dir)
    got = lane_values(store.engine, restarted.get(tid))
    for key in KEYS:
        assert_same_value(got[key], want[key], key)


@pytest.mark.parametrize("damage", ["missing array", "bad manifest", "foreign manifest"])
def test_a_torn_copy_is_built_again(loaded: tuple[FrameStore, int], damage: str) -> None:
    store, tid = loaded
    root = derived_root(store, tid)
    d = root / "m_lanes"
    if damage == "missing array":
        (d / "ref.npy").unlink()
    elif damage == "bad manifest":
        (d / "manifest.json").write_text("{not json")
    else:
        (d / "manifest.json").write_text('{"type": "Popen", "fields": {}}')
    want = fresh_build(store.engine, store.get(tid))["m_lanes"]
    got = m_lanes(FrameStore(store.engine, store.data_dir).get(tid))
    assert_same_value(got, want, "m_lanes")
    # Stored again, whole.
    assert_same_value(derived_cache.load_value(d, (RowLanes, LaneSetIndex)),
                      kept_rows(want), "disk")


def test_the_p_and_m_lanes_rows_read_through_their_refs_are_the_built_ones(
        loaded_any: tuple[FrameStore, int]) -> None:
    """Kept without their times and categories (RowLanes), the P and M lane
    sets read each row's from the frames through its ref: the same as the
    builders put into the lane sets they made (C and numpy forms)."""
    store, tid = loaded_any
    frames = store.get(tid)
    built = {"p_lanes": proc_thread_lanes._p_lanes_numpy(frames),
             "m_lanes": proc_thread_lanes._build_m_lanes(frames)}
    # The C passes make the set as kept (RowLanes), never holding the times.
    made_kept = {"p_lanes": proc_thread_lanes._p_lanes_c(frames),
                 "m_lanes": proc_thread_lanes._m_lanes_c(frames)}
    got = {"p_lanes": p_lanes(frames), "m_lanes": m_lanes(frames)}
    for key, ls in built.items():
        kept = got[key]
        assert isinstance(kept.start, RowTimes) and isinstance(kept.end, RowTimes)
        assert isinstance(kept.cat, RowCats)
        every = np.arange(len(kept.ref))
        assert len(every) > 0, key
        np.testing.assert_array_equal(ls.ref, kept.ref, err_msg=key)
        np.testing.assert_array_equal(kept.start[every], ls.start, err_msg=key)
        np.testing.assert_array_equal(kept.end[every], ls.end, err_msg=key)
        np.testing.assert_array_equal(kept.cat[every], ls.cat, err_msg=key)
        assert kept.cat[every].dtype == np.int8
        # One row at a time, and a slice, read the same.
        mid = len(every) // 2
        assert kept.start[mid] == int(ls.start[mid]), key
        assert kept.cat[mid] == int(ls.cat[mid]), key
        np.testing.assert_array_equal(kept.end[mid:mid + 5], ls.end[mid:mid + 5])
        if made_kept[key] is not None:  # None: no C extension (GMPSCOPE_PURE=1)
            assert_same_value(made_kept[key], kept_rows(ls), key)


def test_a_failed_write_still_answers_from_memory(
        loaded: tuple[FrameStore, int], monkeypatch: pytest.MonkeyPatch) -> None:
    store, tid = loaded
    shutil.rmtree(derived_root(store, tid))

    def disk_full(d: Path, value: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(derived_cache, "save_value", disk_full)
    frames = FrameStore(store.engine, store.data_dir).get(tid)
    got = p_lanes(frames)
    assert_same_value(got, fresh_build(store.engine, frames)["p_lanes"], "p_lanes")
    assert not (derived_root(store, tid) / "p_lanes").exists()


def test_a_value_whose_directory_goes_right_after_it_is_saved_still_answers(
        loaded: tuple[FrameStore, int], monkeypatch: pytest.MonkeyPatch) -> None:
    # As a concurrent delete of the trace (or, before it was fixed, another
    # process replacing the frame set) did under load: a 500 from the timeline.
    store, tid = loaded
    shutil.rmtree(derived_root(store, tid))
    save = derived_cache.save_value

    def saved_then_gone(d: Path, value: Any) -> None:
        save(d, value)
        shutil.rmtree(d)

    monkeypatch.setattr(derived_cache, "save_value", saved_then_gone)
    frames = FrameStore(store.engine, store.data_dir).get(tid)
    got = range_lanes(store.engine, frames)
    assert_same_value(got, fresh_build(store.engine, frames)["ranges"], "ranges")


def test_unknown_field_types_are_refused(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Odd:
        x: object

    with pytest.raises(TypeError, match="cannot persist"):
        derived_cache.save_value(tmp_path / "odd", Odd(x=1.5))
    assert not list(tmp_path.iterdir()), "nothing half-written is left"


def test_whole_trace_reports_are_kept_and_equal_fresh_ones(
        loaded: tuple[FrameStore, int]) -> None:
    """The analysis pages' whole-trace reports are built once, stored as JSON and read
    back by a restarted server equal to what the query functions compute afresh."""
    from ingest.views import goroutines as goroutine_stats
    from ingest.views import latency as sched_latency
    from ingest.views import syscalls as syscall_stats

    store, tid = loaded

    def reports(s: FrameStore) -> dict[str, Any]:
        f = s.get(tid)
        return {"groups": goroutine_stats.goroutine_groups(s.engine, f),
                "latency": sched_latency.latency_report(f),
                "syscalls": syscall_stats.syscall_summary(s.engine, f),
                "netpoll": syscall_stats.netpoll_summary(s.engine, f)}

    first = reports(store)
    root = derived_root(store, tid)
    stored = sorted(p.name for p in root.glob("*.json"))
    assert stored == ["goroutine_groups_summary.json", "latency_report-worst50.json",
                      "netpoll_summary-top10.json", "syscall_summary-top10.json"]
    first["groups"]["groups"].clear()  # a caller's change never reaches the cache
    restarted = reports(FrameStore(store.engine, store.data_dir))
    f = store.get(tid)
    gt = goroutine_stats._goroutine_times(store.engine, f)
    names, known = goroutine_stats.group_names(store.engine, f, gt.goid)
    fresh = {
        "latency": sched_latency._latency_report(f),
        "syscalls": syscall_stats._syscall_summary(store.engine, f),
        "netpoll": syscall_stats._netpoll_summary(store.engine, f),
    }
    for key, want in fresh.items():
        assert restarted[key] == want, key
    assert restarted["latency"]["samples"] > 0 and restarted["syscalls"]["count"] > 0
    groups = {g["name"]: g["count"] for g in restarted["groups"]["groups"]}
    assert sum(groups.values()) == len(gt.goid)
    assert groups == {n: names.count(n) for n in set(names)}
    # Windowed reports are computed, not taken from the whole trace's.
    mid = (f.first_ts + f.last_ts) // 2
    assert sched_latency.latency_report(f, t1=mid) == sched_latency._latency_report(f, t1=mid)


def test_the_server_warms_the_reports_of_an_upload(tmp_path: Path) -> None:
    """After a real server stores an upload, its whole-trace reports appear beside the
    frames without anyone asking for them (built in the background)."""
    import time

    from tests.support.server import Served

    with Served(tmp_path, []) as served:
        r = served.post("/api/traces?name=warm", data=SAMPLE.read_bytes(),
                        headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        tid = r.json()["id"]
        frames_dir = next((tmp_path / "frames").glob(f"{tid}-*"))
        want = {"goroutine_groups_summary.json", "latency_report-worst50.json",
                "netpoll_summary-top10.json", "syscall_summary-top10.json"}
        deadline = time.monotonic() + 120  # a wait, not a speed check
        while time.monotonic() < deadline:
            have = {p.name for p in (frames_dir / f"derived-v{DERIVED_VERSION}").glob("*.json")}
            if want <= have:
                break
            time.sleep(0.2)
        assert want <= have
        # The page's API answers from them.
        g = served.get(f"/api/traces/{tid}/goroutine-groups")
        assert g.status_code == 200 and g.json()["goroutines"] > 0


def test_a_failed_goroutine_table_before_the_commit_is_built_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ingest.load.insert_tables

    def broken(*_: object) -> bool:
        raise ValueError("a bug in the staged goroutine table")

    monkeypatch.setattr(ingest.load.insert_tables, "stage_goroutine_table", broken)
    settings = Settings.from_env({}, data_dir=tmp_path, db_url=sqlite_url(tmp_path / "t.db"))
    engine = make_engine(settings.db_url)
    res = ingest_trace_file(engine, SAMPLE, data_dir=settings.data_dir)
    assert res.created
    store = FrameStore(engine, settings.data_dir)
    root = derived_root(store, res.id)
    assert lane_dirs(root) == sorted(KEYS)
    want = fresh_build(engine, store.get(res.id))["goroutines"]
    assert_same_value(goroutine_table(engine, store.get(res.id)), want, "g")


def test_a_search_through_the_refs_finds_what_searchsorted_finds(
        loaded: tuple[FrameStore, int]) -> None:
    """lane_search over the times read through the refs = np.searchsorted over
    the same times as an array, on each side, at the rows' own starts and ends
    (ties) and between them, and past either end of each lane."""
    store, tid = loaded
    frames = store.get(tid)
    for ls in (p_lanes(frames), m_lanes(frames)):
        assert isinstance(ls.start, RowTimes)
        for i in range(len(ls.ids)):
            lo, hi = int(ls.lo[i]), int(ls.hi[i])
            times = ls.start[lo:hi]
            probe = np.concatenate([times[::7], ls.end[lo:hi][::5], times[::11] + 1,
                                    [times[0] - 1, int(ls.end[hi - 1]) + 1]])
            for side in ("left", "right"):
                want = lo + np.searchsorted(times, probe, side=side)
                np.testing.assert_array_equal(lane_search(ls.start, lo, hi, probe, side), want)
                np.testing.assert_array_equal(lane_search(times, 0, hi - lo, probe, side),
                                              want - lo)
            assert list(lane_search(ls.start, lo, lo, probe[:3], "left")) == [lo] * 3


@pytest.mark.parametrize("values", [
    [], [0], [5], [3, 3, 3], [10, 2**40, 5, 7, -3, 2**62],
    [0, 254, 509, 509 + 255, 2000],  # steps at and past uint8's largest
    list(range(0, 70_000 * 3, 70_000)),  # past uint16's
], ids=lambda v: f"n{len(v)}")
def test_steps_give_back_the_column_exactly(values: list[int], tmp_path: Path) -> None:
    """A column kept as steps (derived_cache.Steps) reads back the same
    int64 values, through a save and a load too, whatever its steps."""
    want = np.array(values, np.int64)
    kept = derived_cache.Steps.of(want)
    assert len(kept) == len(want)
    np.testing.assert_array_equal(kept.values(), want)
    assert kept.values().dtype == np.int64
    derived_cache.save_value(tmp_path / "steps", kept)
    back = derived_cache.load_value(tmp_path / "steps", (derived_cache.Steps,))
    np.testing.assert_array_equal(back.values(), want)


def test_steps_take_the_narrowest_type_that_holds_them() -> None:
    steps = derived_cache.Steps.of(np.cumsum(np.full(1000, 300, np.int64)))
    assert steps.step.dtype == np.uint16 and not len(steps.big)
    steps = derived_cache.Steps.of(np.cumsum(np.r_[np.full(1000, 3), [10**12]]))
    assert steps.step.dtype == np.uint8 and steps.big.tolist() == [10**12]


@pytest.mark.parametrize("part", [1, 2, 7])
def test_steps_made_in_parts_are_those_made_whole(part: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps.of a part of the steps at a time (here 1, 2 and 7 values) keeps
    the same type, steps and big steps as at once."""
    col = np.cumsum(np.r_[[5], np.full(40, 3), [10**12, -7], np.full(30, 70_000), [-1]])
    whole = derived_cache.Steps.of(col)
    monkeypatch.setattr(derived_cache, "_STEP_PART", part)
    parted = derived_cache.Steps.of(col)
    assert parted.step.dtype == whole.step.dtype
    assert parted.step.tolist() == whole.step.tolist()
    assert parted.big.tolist() == whole.big.tolist() and len(whole.big)
    assert (parted.n, parted.first) == (whole.n, whole.first)
    np.testing.assert_array_equal(parted.values(), col)
