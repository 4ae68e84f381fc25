"""The timeline's level of detail (ingest.views.timeline, ingest.views.timeline_lod) on real traces.

For every drawn lane and window, the shapes are checked against the raw rows of
the frames, lane by lane, with arithmetic of their own (prefix sums over the
raw intervals, not the code under test): a single shape is exactly one raw
interval clipped to the window, a merged shape's mix is the raw time of each
category inside it, shapes never overlap, and together they hold all of the
lane's time in the window. The indexed reduction (prefix sums, block maxima)
gives exactly what the row-by-row one gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import Engine, select

from ingest.config import Settings, sqlite_url
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.lanesets import (
    CAT,
    CATEGORIES,
    REF_SOURCES,
    SRC_INTERVAL,
    SRC_RUN,
    category_of,
)
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.load.pipeline import ingest_trace_file
from ingest.store import models
from ingest.store.db import make_engine
from ingest.views.timeline import (
    MIN_BUCKETS,
    BadRequest,
    Params,
    parse_params,
    span_details,
    timeline,
)
from ingest.views.timeline_lod import reduce_indexed, reduce_window

REPO = Path(__file__).resolve().parents[3]
SAMPLES = {"httpnet": REPO / "samples" / "go1.27-httpnet.trace",
           "gcpressure": REPO / "samples" / "go1.27-gcpressure.trace",
           "mixed121": REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace"}
I64 = npt.NDArray[np.int64]


@dataclass
class Loaded:
    engine: Engine
    frames: dict[str, TraceFrames]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    d = tmp_path_factory.mktemp("timeline")
    settings = Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db"))
    engine = make_engine(settings.db_url)
    store = FrameStore(engine, d)
    frames = {name: store.get(ingest_trace_file(engine, path, data_dir=d).id)
              for name, path in SAMPLES.items()}
    yield Loaded(engine, frames)
    engine.dispose()


# --------------------------------------------------------------------------
# the raw truth, lane by lane, straight from the frames


@dataclass
class Raw:
    """One lane's raw intervals (sorted, non-overlapping) and their categories."""

    start: I64
    end: I64
    cat: I64
    ref: I64

    def occupancy(self, c: int, a: I64, b: I64) -> I64:
        """ns of category ``c`` inside each [a[i], b[i])."""
        sel = self.cat == c
        s, e = self.start[sel], self.end[sel]
        cum = np.r_[0, np.cumsum(e - s)]

        def before(t: I64) -> I64:  # time of category c before t
            k = np.searchsorted(e, t, side="right")  # intervals ended by t
            inside = np.zeros(len(t), np.int64)
            has = k < len(s)
            kk = np.minimum(k, max(len(s) - 1, 0))
            if len(s):
                inside = np.where(has & (s[kk] < t), t - s[kk], 0)
            return cum[k] + inside

        return before(b) - before(a)


def _interval_cat(f: TraceFrames) -> I64:
    kc = np.array([category_of(f.kinds[k].to_state, f.kinds[k].reason) if k in f.kinds else -1
                   for k in range(max(f.kinds) + 1)], dtype=np.int64)
    return kc[f.intervals["kind"]]


def raw_lane(f: TraceFrames, lane_type: str, lane_id: int) -> Raw:
    iv = f.intervals
    rid, res = iv["rid"], f.resource
    rows_all = np.arange(len(iv), dtype=np.int64)
    cat = _interval_cat(f)
    if lane_type == "g":
        rows = rows_all[(rid == lane_id) & (res == models.GOROUTINE)]
        raw = Raw(iv["start_ts"][rows], iv["end_ts"][rows], cat[rows],
                  rows * REF_SOURCES + SRC_INTERVAL)
    elif lane_type == "m":
        st = f.state
        rows = rows_all[(iv["m"] == lane_id) & (res == models.GOROUTINE)
                        & ((st == models.RUNNING) | (st == models.SYSCALL))]
        rows = rows[np.argsort(iv["start_ts"][rows], kind="stable")]
        raw = Raw(iv["start_ts"][rows], iv["end_ts"][rows],
                  np.where(st[rows] == models.SYSCALL, CAT["Syscall"], CAT["Running"]),
                  rows * REF_SOURCES + SRC_INTERVAL)
    else:
        runs = f.proc_runs
        r = np.flatnonzero(runs["p"] == lane_id)
        idle = rows_all[(rid == lane_id) & (res == models.PROC)
                        & (f.state == models.STATE_CODE["Idle"])]
        start = np.r_[runs["start_ts"][r], iv["start_ts"][idle]]
        order = np.argsort(start, kind="stable")
        raw = Raw(start[order], np.r_[runs["end_ts"][r], iv["end_ts"][idle]][order],
                  np.r_[np.full(len(r), CAT["Running"]), np.full(len(idle), CAT["Idle"])][order],
                  np.r_[r * REF_SOURCES + SRC_RUN, idle * REF_SOURCES + SRC_INTERVAL][order])
    keep = (raw.end > raw.start) & (raw.cat >= 0)
    return Raw(raw.start[keep], raw.end[keep], raw.cat[keep], raw.ref[keep])


def check_lanes(f: TraceFrames, data: dict[str, Any]) -> int:
    """Check every P/M/G lane of one answer against the raw rows; returns lanes checked."""
    t1, t2 = data["t1"], data["t2"]
    sh = {k: np.asarray(v, dtype=np.int64) for k, v in data["shapes"].items()}
    start = t1 + sh["s"]
    end = start + sh["d"]
    mix = data["mix"]
    checked = 0
    for lane_no, (typ, lane_id) in enumerate(zip(data["lanes"]["type"], data["lanes"]["id"],
                                                 strict=True)):
        sel = np.flatnonzero(sh["lane"] == lane_no)
        if typ not in ("p", "m", "g"):
            continue
        raw = raw_lane(f, typ, lane_id)
        s, e = start[sel], end[sel]
        assert (s >= t1).all() and (e <= t2).all() and (e > s).all(), "inside the window"
        assert (s[1:] >= e[:-1]).all(), f"lane {lane_no}: shapes overlap"
        assert len(sel) <= 2 * data["buckets"], "at most two shapes per bucket"
        # The shapes hold all of the lane's time in the window, once.
        in_window = sum(int(raw.occupancy(c, np.array([t1]), np.array([t2]))[0])
                        for c in range(len(CATEGORIES)))
        held = 0
        for j, i in enumerate(sel):
            if sh["n"][i] == 1:
                k = np.flatnonzero(raw.ref == sh["ref"][i])
                assert len(k) == 1, "a single shape is one raw interval"
                k0 = int(k[0])
                assert max(int(raw.start[k0]), t1) == s[j]
                assert min(int(raw.end[k0]), t2) == e[j]
                assert raw.cat[k0] == sh["cat"][i]
                assert data["shapes"]["cover"][i] == 1.0
                held += int(e[j] - s[j])
            else:
                assert sh["ref"][i] == -1 and mix[i] is not None
                got = dict(zip(mix[i][0::2], mix[i][1::2], strict=True))
                want = {c: int(raw.occupancy(c, s[j:j + 1], e[j:j + 1])[0])
                        for c in range(len(CATEGORIES))}
                assert got == {c: v for c, v in want.items() if v}, f"mix of shape {i}"
                assert sh["cat"][i] == max(got, key=lambda c: (got[c], -c)), "dominant"
                # Non-overlapping rows: the covered share is the mix over the span.
                cover = data["shapes"]["cover"][i]
                assert 0 < cover <= 1 and abs(cover - sum(got.values()) / (e[j] - s[j])) <= (
                    0.0005 if cover > 0.001 else 0.001), f"cover of shape {i}"
                held += sum(got.values())
        assert held == in_window, f"lane {lane_no} ({typ}{lane_id}): time lost or doubled"
        checked += 1
    return checked


def check_range_lanes(engine: Engine, f: TraceFrames, data: dict[str, Any]) -> int:
    """GC/STW/sweep/assist lanes (ranges of different goroutines or procs overlap):
    a single shape is one raw range clipped to the window, and all shapes together
    hold the raw ranges' time in the window exactly once."""
    r = models.ranges
    t1, t2 = data["t1"], data["t2"]
    sh = data["shapes"]
    checked = 0
    for lane_no, (typ, key) in enumerate(zip(data["lanes"]["type"], data["lanes"]["key"],
                                             strict=True)):
        if typ != "range":
            continue
        with engine.connect() as conn:
            rows = conn.execute(select(r.c.start_ts, r.c.end_ts).where(
                r.c.trace_id == f.trace_id, r.c.kind == key)).all()
        rs = np.array([f.first_ts if x.start_ts is None else x.start_ts for x in rows])
        re_ = np.array([f.last_ts if x.end_ts is None else x.end_ts for x in rows])
        cs, ce = np.maximum(rs, t1), np.minimum(re_, t2)
        clipped = set(zip(cs[ce > cs].tolist(), ce[ce > cs].tolist(), strict=True))
        total = 0
        for i in (i for i, ln in enumerate(sh["lane"]) if ln == lane_no):
            a, b = t1 + sh["s"][i], t1 + sh["s"][i] + sh["d"][i]
            if sh["n"][i] == 1:
                assert (a, b) in clipped, f"{key} shape {i} is a raw range"
                total += b - a
            else:
                total += sum(data["mix"][i][1::2])
        assert total == int(np.clip(ce - cs, 0, None).sum()), f"{key}: time lost or doubled"
        checked += 1
    return checked


def windows(f: TraceFrames) -> list[tuple[int, int]]:
    a, b = f.first_ts, f.last_ts
    span = b - a
    return [(a, b), (a + span // 3, a + span // 3 + span // 50),
            (a + span // 2, a + span // 2 + 20_000), (a - span // 10, a + span // 5),
            (b - span // 7, b + span // 7)]


@pytest.mark.parametrize("mode", ["p", "m", "g"])
@pytest.mark.parametrize("name", list(SAMPLES))
def test_shapes_match_raw_intervals(loaded: Loaded, name: str, mode: str) -> None:
    f = loaded.frames[name]
    total = 0
    for t1, t2 in windows(f):
        for px in (64, 900):
            data = timeline(loaded.engine, f, Params(mode=mode, t1=t1, t2=t2, px=px,
                                                     limit=25, cap=20000))
            assert data["buckets"] == px, "no capping at this size"
            total += check_lanes(f, data)
            check_range_lanes(loaded.engine, f, data)
    assert total > 0


def test_long_goroutine_lanes_through_the_index(loaded: Loaded,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Goroutines with many intervals are reduced from prefix sums: same truth."""
    import ingest.views.timeline

    monkeypatch.setattr(ingest.views.timeline, "BIG_LANE", 20)
    for name in ("httpnet", "mixed121"):
        f = loaded.frames[name]
        for t1, t2 in windows(f):
            for px in (64, 900):
                data = timeline(loaded.engine, f, Params(mode="g", t1=t1, t2=t2, px=px,
                                                         limit=25, cap=20000))
                check_lanes(f, data)


def test_merging_happens_and_cuts_shapes(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    data = timeline(loaded.engine, f, Params(mode="m", px=200))
    assert data["stats"]["merged"] > 0
    assert data["stats"]["shapes"] < data["stats"]["rows"] / 5


@pytest.mark.parametrize("mode", ["p", "m"])
def test_indexed_reduction_equals_row_by_row(loaded: Loaded, mode: str) -> None:
    for name in ("httpnet", "gcpressure", "mixed121"):
        f = loaded.frames[name]
        ls = p_lanes(f) if mode == "p" else m_lanes(f)
        assert ls.index is not None
        lanes = [(i, i) for i in range(len(ls.ids))]
        for t1, t2 in windows(f):
            for nb in (1, 7, 300, 2000):
                fast = reduce_indexed(ls, lanes, t1, t2, nb)
                idx = np.concatenate([np.arange(ls.lo[i], ls.hi[i]) for i, _ in lanes])
                lane = np.concatenate([np.full(ls.hi[i] - ls.lo[i], i) for i, _ in lanes])
                slow = reduce_window(ls.start[idx], ls.end[idx], ls.cat[idx], ls.ref[idx],
                                     lane.astype(np.int64), t1, t2, nb)
                for field in ("lane", "start", "end", "cat", "n", "ref", "mix", "covered"):
                    np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field),
                                                  err_msg=f"{name} {mode} {nb} {field}")


def test_cap_bounds_the_answer(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    for mode in ("p", "m", "g"):
        data = timeline(loaded.engine, f, Params(mode=mode, px=2000, cap=150, limit=40))
        assert data["stats"]["shapes"] <= 150 or data["buckets"] == MIN_BUCKETS
        check_lanes(f, data)


def test_window_edges_clip(loaded: Loaded) -> None:
    """A window that starts and ends inside intervals: the shapes start at t1 and end
    at t2 exactly where the lane has time there."""
    f = loaded.frames["httpnet"]
    span = f.last_ts - f.first_ts
    t1, t2 = f.first_ts + span // 3 + 12_345, f.first_ts + span // 3 + 5_000_017
    data = timeline(loaded.engine, f, Params(mode="g", t1=t1, t2=t2, px=500, limit=30))
    sh = data["shapes"]
    for lane_no, (typ, gid) in enumerate(zip(data["lanes"]["type"], data["lanes"]["id"],
                                             strict=True)):
        if typ != "g":
            continue
        raw = raw_lane(f, "g", gid)
        mine = [i for i, ln in enumerate(sh["lane"]) if ln == lane_no]
        at_t1 = np.flatnonzero((raw.start <= t1) & (raw.end > t1))
        if len(at_t1):
            assert mine and sh["s"][mine[0]] == 0, "clipped at t1"
        at_t2 = np.flatnonzero((raw.start < t2) & (raw.end >= t2))
        if len(at_t2):
            assert mine and sh["s"][mine[-1]] + sh["d"][mine[-1]] == t2 - t1, "clipped at t2"


def test_goroutine_lanes_grouping_paging_focus(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    eng = loaded.engine
    g = models.goroutines
    with eng.connect() as conn:
        fn = dict(conn.execute(select(g.c.goid, g.c.start_function)
                               .where(g.c.trace_id == f.trace_id)).all())
    full = timeline(eng, f, Params(mode="g", limit=500))
    groups = full["groups"]
    assert sum(x["count"] for x in groups) >= len(groups) > 1
    big = groups[0]["name"]
    page1 = timeline(eng, f, Params(mode="g", group=big, limit=10, offset=0))
    page2 = timeline(eng, f, Params(mode="g", group=big, limit=10, offset=10))
    ids1 = [i for i, t in zip(page1["lanes"]["id"], page1["lanes"]["type"], strict=True)
            if t == "g"]
    ids2 = [i for i, t in zip(page2["lanes"]["id"], page2["lanes"]["type"], strict=True)
            if t == "g"]
    assert len(ids1) == 10 and ids1 == sorted(ids1) and ids2 and min(ids2) > max(ids1)
    assert all((fn.get(x) or "") == big for x in ids1 + ids2)
    assert page1["total_lanes"] == groups[0]["count"]
    target = ids2[-1]
    focused = timeline(eng, f, Params(mode="g", group=big, g=target, limit=10))
    lane = focused["focus"]
    assert focused["lanes"]["id"][lane] == target and focused["lanes"]["type"][lane] == "g"
    with pytest.raises(BadRequest):
        timeline(eng, f, Params(mode="g", group="no such function"))


def test_span_details_match_the_database(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    eng = loaded.engine
    span = f.last_ts - f.first_ts
    data = timeline(eng, f, Params(mode="g", t1=f.first_ts + span // 2,
                                   t2=f.first_ts + span // 2 + span // 100, limit=80))
    sh = data["shapes"]
    singles = [i for i, r in enumerate(sh["ref"]) if r >= 0 and data["lanes"]["type"][
        sh["lane"][i]] == "g"]
    assert singles
    st = models.stacks
    seen_stack = False
    for i in singles[:40]:
        d = span_details(eng, f, sh["ref"][i])
        row = sh["ref"][i] // REF_SOURCES
        k = f.kinds[int(f.intervals["kind"][row])]
        assert (d["state"], d["reason"], d["goroutine"]) == (k.to_state, k.reason,
                                                             sh["g"][i])
        assert d["start_ts"] <= data["t1"] + sh["s"][i]
        with eng.connect() as conn:
            frames = conn.execute(select(st.c.function, st.c.file, st.c.line).where(
                st.c.trace_id == f.trace_id, st.c.stack_id == d["stack_id"])
                .order_by(st.c.depth)).all()
        assert [(x["function"], x["file"], x["line"]) for x in d["stack"]] == \
            [tuple(r) for r in frames]
        seen_stack = seen_stack or bool(frames)
    assert seen_stack
    with pytest.raises(LookupError):
        span_details(eng, f, -1)
    with pytest.raises(LookupError):
        span_details(eng, f, len(f.intervals) * REF_SOURCES)


def test_proc_run_details_name_the_goroutine(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    data = timeline(loaded.engine, f, Params(mode="p", t1=f.first_ts,
                                             t2=f.first_ts + 2_000_000, px=2000))
    runs = [r for r in data["shapes"]["ref"] if r >= 0 and r % REF_SOURCES == SRC_RUN]
    assert runs
    d = span_details(loaded.engine, f, runs[0])
    row = runs[0] // REF_SOURCES
    assert d["goroutine"] == int(f.proc_runs["g"][row])
    assert d["p"] == int(f.proc_runs["p"][row]) and d["state"] == "Running"
    assert d["interval"]["goroutine"] == d["goroutine"]
    assert d["interval"]["start_ts"] <= d["start_ts"] < d["interval"]["end_ts"]


def test_parse_params_rejects_bad_values() -> None:
    for bad in ({"mode": "x"}, {"t1": "abc"}, {"t1": "5", "t2": "5"}, {"px": "1"},
                {"limit": "0"}, {"offset": "-1"}, {"t1": "nan"}):
        with pytest.raises(BadRequest):
            parse_params(bad)
    p = parse_params({"mode": "G", "t1": "10", "t2": "2e3", "g": "17"})
    assert (p.mode, p.t1, p.t2, p.g) == ("g", 10, 2000, 17)
