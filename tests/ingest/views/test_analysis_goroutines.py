"""Goroutine groups and one goroutine's detail, on the real sample traces:
category times tile each goroutine's lifetime, agree with the goroutines
table and with plain SQL over the intervals; counts agree with the
goroutines table; the JSON API answers and rejects as documented."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from ingest.views.goroutine import created_by, goroutine_detail
from ingest.views.goroutines import (
    CATEGORIES,
    MEMBER_SORTS,
    WAIT_CATEGORY,
    goroutine_groups,
    goroutine_times,
    group_names,
)
from tests.support.analysis import Store, open_store
from tests.support.server import Served

SAMPLES = ("go1.27-connleak.trace", "go1.27-gcpressure.trace", "go1.27-httpnet.trace",
           "go1.27-mutex.trace", "go1.27-syscallblock.trace", "go1.27-timers.trace")


@pytest.fixture(scope="module")
def store(samples_server: Served, sample_ids: dict[str, int]) -> Store:
    return open_store(samples_server, sample_ids)


@pytest.mark.parametrize("name", SAMPLES)
def test_categories_tile_lifetime(store: Store, name: str) -> None:
    """Each goroutine's categories add up to its lifetime: from its first
    interval to its end (ended_ts of the goroutines table, or the trace's end)."""
    f = store.get(name)
    gt = goroutine_times(store.engine, f)
    assert (gt.times >= 0).all()
    assert (gt.times.sum(axis=1) == gt.lifetime).all()
    rows = {r.goid: r for r in store.rows(
        "SELECT goid, first_ts, ended_ts, running_ns, runnable_ns, waiting_ns, syscall_ns "
        "FROM goroutines WHERE trace_id = :t", t=f.trace_id)}
    assert sorted(rows) == gt.goid.tolist()
    for i, goid in enumerate(gt.goid.tolist()):
        r = rows[goid]
        assert gt.first_ts[i] == r.first_ts
        assert gt.end_ts[i] == (f.last_ts if r.ended_ts is None else r.ended_ts)
        t = dict(zip(CATEGORIES, gt.times[i].tolist(), strict=True))
        assert t["runnable"] == r.runnable_ns
        assert t["syscall"] == r.syscall_ns
        # Waiting splits by reason; assist time inside Running moves to gc_assist.
        assert (t["running"] + t["network"] + t["sync"] + t["gc_assist"] + t["other_wait"]
                == r.running_ns + r.waiting_ns)


@pytest.mark.parametrize("name", SAMPLES)
def test_wait_split_equals_sql(store: Store, name: str) -> None:
    """Network and sync time per goroutine = plain SQL sums over interval_view."""
    f = store.get(name)
    gt = goroutine_times(store.engine, f)
    want: dict[str, dict[int, int]] = {"network": defaultdict(int), "sync": defaultdict(int)}
    for rid, reason, d in store.rows(
            "SELECT rid, reason, SUM(duration_ns) FROM interval_view WHERE trace_id = :t "
            "AND resource = 'goroutine' AND state = 'Waiting' GROUP BY rid, reason",
            t=f.trace_id):
        cat = WAIT_CATEGORY.get(reason)
        if cat in want:
            want[cat][rid] += d
    for cat in ("network", "sync"):
        got = {g: v for g, v in zip(gt.goid.tolist(), gt.times[:, CATEGORIES.index(cat)]
                                    .tolist(), strict=True) if v}
        assert got == {g: v for g, v in want[cat].items() if v}


def test_gc_assist_by_hand(store: Store) -> None:
    """gcpressure: GC assist = Waiting "GC mark assist wait for work" time plus
    Running time inside the goroutine's "GC mark assist" ranges (plain loops)."""
    f = store.get("go1.27-gcpressure.trace")
    ivs = store.rows("SELECT rid, state, reason, start_ts, end_ts FROM interval_view "
                     "WHERE trace_id = :t AND resource = 'goroutine'", t=f.trace_id)
    ranges = store.rows("SELECT scope_id, start_ts, end_ts FROM ranges WHERE trace_id = :t "
                        "AND name = 'GC mark assist' AND scope = 'goroutine'", t=f.trace_id)
    assert ranges, "gcpressure has mark assists"
    want: dict[int, int] = defaultdict(int)
    for rid, state, reason, s, e in ivs:
        if state == "Waiting" and reason == "GC mark assist wait for work":
            want[rid] += e - s
    for g, rs, re_ in ranges:
        rs = f.first_ts if rs is None else rs
        re_ = f.last_ts if re_ is None else re_
        for rid, state, _, s, e in ivs:
            if rid == g and state == "Running":
                want[g] += max(0, min(e, re_) - max(s, rs))
    gt = goroutine_times(store.engine, f)
    col = gt.times[:, CATEGORIES.index("gc_assist")]
    got = {g: v for g, v in zip(gt.goid.tolist(), col.tolist(), strict=True) if v}
    assert got == {g: v for g, v in want.items() if v}
    assert sum(got.values()) > 0


@pytest.mark.parametrize("name", SAMPLES)
def test_group_counts_equal_goroutines_table(store: Store, name: str) -> None:
    f = store.get(name)
    data = goroutine_groups(store.engine, f)
    rows = store.rows("SELECT goid, start_function, final_state FROM goroutines "
                      "WHERE trace_id = :t", t=f.trace_id)
    assert data["goroutines"] == len(rows) == sum(g["count"] for g in data["groups"])
    by_group = {g["name"]: g for g in data["groups"]}
    known = Counter(r.start_function for r in rows if r.start_function is not None)
    alive = Counter(r.start_function for r in rows
                    if r.start_function is not None and r.final_state != "NotExist")
    finals: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.start_function is not None:
            finals[r.start_function][r.final_state] += 1
    gt = goroutine_times(store.engine, f)
    names, was_known = group_names(store.engine, f, gt.goid)
    guessed = Counter(n for n, k in zip(names, was_known.tolist(), strict=True) if not k)
    for fn, n in known.items():
        assert by_group[fn]["count"] == n + guessed.get(fn, 0)
        if not guessed.get(fn):
            assert by_group[fn]["alive_at_end"] == alive[fn]
            assert by_group[fn]["final_states"] == dict(finals[fn])
    for g in data["groups"]:
        assert sum(g["times"].values()) == g["lifetime_ns"]


def test_connleak_goroutines_stay_parked(store: Store) -> None:
    """connleak leaks connections: the goroutines reading them are still parked
    in the netpoller at the end, so their group is all alive and Waiting."""
    f = store.get("go1.27-connleak.trace")
    data = goroutine_groups(store.engine, f)
    leaked = [g for g in data["groups"] if g["times"]["network"] > 0
              and g["alive_at_end"] == g["count"] and g["count"] > 100]
    assert leaked
    for g in leaked:
        assert g["final_states"] == {"Waiting": g["count"]}


def test_mutex_time_is_sync(store: Store) -> None:
    f = store.get("go1.27-mutex.trace")
    data = goroutine_groups(store.engine, f)
    total = {c: sum(g["times"][c] for g in data["groups"]) for c in CATEGORIES}
    assert total["sync"] > 0 and total["network"] == 0


def test_group_members(store: Store) -> None:
    f = store.get("go1.27-httpnet.trace")
    data = goroutine_groups(store.engine, f)
    big = data["groups"][0]
    one = goroutine_groups(store.engine, f, big["name"], limit=5)
    assert one["members_total"] == big["count"] and len(one["members"]) == min(5, big["count"])
    assert [m["goid"] for m in one["members"]] == sorted(m["goid"] for m in one["members"])
    with pytest.raises(LookupError):
        goroutine_groups(store.engine, f, "no such function")
    for key in MEMBER_SORTS[1:]:
        by = goroutine_groups(store.engine, f, big["name"], limit=big["count"], sort=key)
        vals = [m["lifetime_ns"] if key == "lifetime" else m["times"][key]
                for m in by["members"]]
        assert vals == sorted(vals, reverse=True)
        assert sorted(m["goid"] for m in by["members"]) == sorted(
            m["goid"] for m in goroutine_groups(store.engine, f, big["name"],
                                                limit=big["count"])["members"])


@pytest.mark.parametrize("name", ["go1.27-mutex.trace", "go1.27-syscallblock.trace"])
def test_detail_matches_groups(store: Store, name: str) -> None:
    f = store.get(name)
    gt = goroutine_times(store.engine, f)
    for i, goid in enumerate(gt.goid.tolist()):
        d = goroutine_detail(store.engine, f, goid, 0, 10_000)
        assert [d["times"][c] for c in CATEGORIES] == gt.times[i].tolist()
        assert d["lifetime_ns"] == int(gt.lifetime[i])
        assert d["intervals_total"] == len(d["transitions"])
        seg = d["segments"]
        assert sum(e - s for s, e in zip(seg["start"], seg["end"], strict=True)) \
            == d["lifetime_ns"]
        # Transitions are the goroutine's intervals in time order, contiguous.
        tr = d["transitions"]
        assert all(a["end_ts"] == b["start_ts"] for a, b in zip(tr, tr[1:], strict=False))
    with pytest.raises(LookupError):
        goroutine_detail(store.engine, f, 10**9)


def test_detail_stacks_and_parent(store: Store) -> None:
    f = store.get("go1.27-httpnet.trace")
    row = store.rows("SELECT goid, parent_goid, start_function FROM goroutines WHERE "
                     "trace_id = :t AND parent_goid IS NOT NULL ORDER BY goid LIMIT 1",
                     t=f.trace_id)[0]
    d = goroutine_detail(store.engine, f, row.goid)
    assert d["parent_goid"] == row.parent_goid
    assert d["start_stack"] and d["start_stack"][0]["function"] == row.start_function
    assert d["created_at_stack"]
    parent = goroutine_detail(store.engine, f, row.parent_goid, limit=0)
    assert row.goid in parent["children"]


@pytest.mark.parametrize("name", SAMPLES)
def test_children_from_the_frames_are_the_tables(store: Store, name: str) -> None:
    """Each goroutine's children found in the frames (its first interval's
    creation) are the goroutines table's, by ``parent_goid``."""
    f = store.get(name)
    by_parent: dict[int, list[int]] = defaultdict(list)
    for r in store.rows("SELECT goid, parent_goid FROM goroutines WHERE trace_id = :t "
                        "AND parent_goid IS NOT NULL ORDER BY goid", t=f.trace_id):
        by_parent[int(r.parent_goid)].append(int(r.goid))
    assert by_parent
    for goid in [*by_parent, *(int(g) for g in f.goroutines.ids[:20]), -1]:
        assert created_by(f, goid, 10**6) == by_parent.get(goid, []), goid


# --------------------------------------------------------------------------
# JSON API


def test_api_groups(samples_server: Served, sample_ids: dict[str, int], store: Store) -> None:
    tid = sample_ids["go1.27-mutex.trace"]
    r = samples_server.get(f"/api/traces/{tid}/goroutine-groups")
    assert r.status_code == 200
    doc = r.json()
    assert doc["categories"] == list(CATEGORIES)
    want = goroutine_groups(store.engine, store.get("go1.27-mutex.trace"))
    assert doc["groups"] == want["groups"]
    name = doc["groups"][0]["name"]
    r = samples_server.get(f"/api/traces/{tid}/goroutine-groups", params={"group": name})
    assert r.status_code == 200 and r.json()["members_total"] == doc["groups"][0]["count"]
    assert samples_server.get(f"/api/traces/{tid}/goroutine-groups",
                              params={"group": "nope"}).status_code == 404
    assert samples_server.get(f"/api/traces/{tid}/goroutine-groups",
                              params={"limit": "x"}).status_code == 400
    r = samples_server.get(f"/api/traces/{tid}/goroutine-groups",
                           params={"group": name, "sort": "sync", "limit": 2})
    assert r.status_code == 200 and r.json()["sort"] == "sync"
    assert samples_server.get(f"/api/traces/{tid}/goroutine-groups",
                              params={"group": name, "sort": "size"}).status_code == 400
    assert samples_server.get("/api/traces/999999/goroutine-groups").status_code == 404


def test_api_goroutine(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-syscallblock.trace"]
    r = samples_server.get(f"/api/traces/{tid}/goroutines/1", params={"limit": 3})
    assert r.status_code == 200
    doc = r.json()
    assert doc["goid"] == 1 and len(doc["transitions"]) == min(3, doc["intervals_total"])
    assert sum(doc["times"].values()) == doc["lifetime_ns"]
    assert doc["timeline"]["mode"] == "g" and doc["timeline"]["g"] == 1
    assert samples_server.get(f"/api/traces/{tid}/goroutines/987654321").status_code == 404
    r = samples_server.get(f"/api/traces/{tid}/goroutines/1", params={"offset": "-1"})
    assert r.status_code == 400 and "error" in r.json()
    assert np.isfinite(doc["lifetime_ns"])


# --------------------------------------------------------------------------
# exportable diagrams

ANALYSIS_DIAGRAMS = ("goroutines", "goroutine", "syscalls", "netpoll", "handoff",
                     "netpoll-over-time", "latency", "latency-over-time", "latency-per-p")


@pytest.mark.parametrize("diagram", ANALYSIS_DIAGRAMS)
def test_diagrams_build(store: Store, diagram: str) -> None:
    """Every analysis diagram builds through the export registry, with data."""
    from app.figures.registry import build_figure
    from app.figures.source import DiagramSource

    src = DiagramSource(store.engine, store.frames)
    tid = store.ids["go1.27-connleak.trace"]
    fig = build_figure(src, tid, diagram, {"g": "1"} if diagram == "goroutine" else {})
    # x may be a list or a numpy array (sent to Plotly as a typed array).
    assert fig.data and any(len(x) for t in fig.data if (x := getattr(t, "x", None)) is not None)
    if diagram in ("goroutines", "goroutine"):
        with pytest.raises(LookupError):
            build_figure(src, tid, diagram, {"group": "nope", "g": "987654321"})
    with pytest.raises(LookupError):
        build_figure(src, 987654, diagram, {"g": "1"})


def test_category_times_are_kept_exactly_past_int32() -> None:
    """Kept as int32 where a goroutine's times all fit and int64 for the
    others, the times read back are the times built, at the int32 edges too."""
    from ingest.views.goroutines import CategoryTimes

    big = 2**31
    times = np.array([[0, 1, 2, 3, 4, 5, 6],
                      [big - 1, 0, 0, 0, 0, 0, -big],
                      [big, 0, 0, 0, 0, 0, 0],
                      [5, 20 * 10**9, 0, 0, 0, 0, 7],
                      [0, 0, 0, 0, 0, 0, -big - 1]], np.int64)
    kept = CategoryTimes.of(times)
    assert kept.short.dtype == np.int32
    assert kept.long_at.tolist() == [2, 3, 4]
    np.testing.assert_array_equal(kept.times(), times)
    assert kept.times().dtype == np.int64
