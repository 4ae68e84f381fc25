"""State graphs from the frames, against definitions written out by hand: the
thread graph against a plain Python walk over the ``thread_intervals`` view
(the module docstring's rules, lexsort's order), the goroutine groups against
SQL, and the cached whole-trace graphs against building them again."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.derive.cache import derived_dir
from ingest.derive.frames import FrameStore
from ingest.extensions import PURE_ENV
from ingest.load.pipeline import IngestResult
from ingest.views import states_frames, waiting_edges
from ingest.views.states import Edge
from ingest.views.states_frames import (
    CACHE_KEYS,
    goroutine_groups,
    graph_for,
    resource_graph,
    split_graph,
    thread_graph,
)
from tests.support.ingest_fixtures import TRACES, loaded

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
FIXTURES = (loaded,)


def _edges_by_hand(trans: dict[tuple[str, str], list[int | None]]) -> list[Edge]:
    out = []
    for (s, t), dwells in trans.items():
        d = sorted(x for x in dwells if x is not None)
        if d:
            out.append(Edge(s, t, len(dwells), len(d), sum(d) / len(d),
                            d[max(1, math.ceil(0.5 * len(d))) - 1],
                            d[max(1, math.ceil(0.99 * len(d))) - 1], d[-1]))
        else:
            out.append(Edge(s, t, len(dwells), 0, None, None, None, None))
    return sorted(out, key=lambda e: (-e.count, e.source, e.target))


def _thread_graph_by_hand(engine: Engine, tid: int) -> list[Edge]:
    with engine.connect() as conn:
        last_ts = conn.execute(text("SELECT last_ts FROM traces WHERE id = :t"),
                               {"t": tid}).scalar_one()
        rows = conn.execute(text(
            "SELECT m, start_ts, end_ts, state FROM thread_intervals WHERE trace_id = :t "
            "ORDER BY m, start_ts, g, seq"), {"t": tid}).all()
    by_m: dict[int, list[Any]] = defaultdict(list)
    for r in rows:
        by_m[r.m].append(r)
    trans: dict[tuple[str, str], list[int | None]] = defaultdict(list)
    for stays in by_m.values():
        out: list[tuple[int, int, str, str]] = []  # (ts, tie, from, to)
        prev = None
        for r in stays:
            if prev is None:
                out.append((r.start_ts, 1, "Undetermined", r.state))
            elif r.start_ts > prev.end_ts:
                out.append((prev.end_ts, 0, prev.state, "Idle"))
                out.append((r.start_ts, 1, "Idle", r.state))
            elif r.state != prev.state:
                out.append((r.start_ts, 1, prev.state, r.state))
            prev = r
        if prev is not None and prev.end_ts < last_ts:
            out.append((prev.end_ts, 2, prev.state, "Idle"))
        out.sort(key=lambda x: (x[0], x[1]))
        for i, (ts, _, s, t) in enumerate(out):
            trans[(s, t)].append(ts - out[i - 1][0] if i else None)
    return _edges_by_hand(trans)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_thread_graph_by_hand(loaded: Loaded, name: str, monkeypatch: pytest.MonkeyPatch
                              ) -> None:
    """Counts and dwell statistics equal a walk over thread_intervals, both
    through Go's order and through the sort the fast path stands for."""
    engine, data_dir, results = loaded
    tid = results[name].id
    want = _thread_graph_by_hand(engine, tid)
    frames = FrameStore(engine, data_dir).get(tid)
    assert thread_graph(frames).edges == want
    monkeypatch.setattr(states_frames, "_in_go_order", lambda iv, sel, m: sel)
    monkeypatch.setattr(states_frames, "_in_order", lambda m, ts, tie: False)
    assert thread_graph(frames).edges == want


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_goroutine_groups_equal_sql(loaded: Loaded, name: str) -> None:
    engine, data_dir, results = loaded
    tid = results[name].id
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT COALESCE(start_function, '') AS fn, COUNT(*) AS n FROM goroutines "
            "WHERE trace_id = :t GROUP BY fn ORDER BY n DESC, fn"), {"t": tid}).all()
    frames = FrameStore(engine, data_dir).get(tid)
    assert goroutine_groups(engine, frames) == [
        {"group": r.fn, "goroutines": int(r.n)} for r in rows]


def test_group_filter_equals_isin(loaded: Loaded) -> None:
    """A group keeps the rows of its goroutines: as np.isin over the rows."""
    engine, data_dir, results = loaded
    tid = results["go1.22-workers.trace"].id
    store = FrameStore(engine, data_dir)
    frames = store.get(tid)
    group = goroutine_groups(engine, frames)[0]["group"]
    got = graph_for(engine, store, tid, "goroutine", group=group, split_reasons=True)
    with engine.connect() as conn:
        goids = np.asarray(conn.execute(text(
            "SELECT goid FROM goroutines WHERE trace_id = :t AND "
            "COALESCE(start_function, '') = :g"), {"t": tid, "g": group}).scalars().all())
    n_g = int(frames.goroutines.off[-1])
    keep = np.isin(frames.intervals["rid"][:n_g], goids)
    assert 0 < keep.sum() < n_g
    lanes = states_frames._lane_rows(frames.goroutines, np.sort(goids))
    assert np.array_equal(lanes, keep)
    assert got.info["group_goroutines"] == len(goids)
    assert got.total == int(keep.sum())


@pytest.mark.parametrize("key", sorted(CACHE_KEYS))
def test_whole_trace_graph_cached(loaded: Loaded, key: tuple[str, bool]) -> None:
    """The unfiltered split and thread graphs come from their report cache,
    equal to building them again, in a new store (another worker) too."""
    engine, data_dir, results = loaded
    tid = results["go1.22-workers.trace"].id
    resource, split = key
    store = FrameStore(engine, data_dir)
    first = graph_for(engine, store, tid, resource, split_reasons=split)
    d = derived_dir(store.get(tid))
    assert d is not None and (d / f"{CACHE_KEYS[key]}.json").is_file()
    again = graph_for(engine, FrameStore(engine, data_dir), tid, resource, split_reasons=split)
    built = resource_graph(store.get(tid), resource, split_reasons=split)
    for g in (first, again):
        assert g.edges == built.edges and g.nodes == built.nodes and g.info == built.info


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_split_graph_from_the_waiting_rows_equals_every_row(loaded: Loaded, name: str) -> None:
    """The whole-trace split graph built from the rows that touch Waiting and
    the precomputed edges equals the one built from every row."""
    engine, data_dir, results = loaded
    frames = FrameStore(engine, data_dir).get(results[name].id)
    got = split_graph(engine, frames)
    want = resource_graph(frames, "goroutine", split_reasons=True)
    assert any(e.source.startswith("Waiting: ") for e in want.edges)
    assert got.edges == want.edges and got.nodes == want.nodes and got.info == want.info


@pytest.mark.parametrize("form", ["c", "numpy"])
@pytest.mark.parametrize("rows", [1, 7, 1000])
def test_split_graph_part_by_part_equals_every_row(loaded: Loaded, rows: int, form: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Read a few rows at a time (every part boundary inside a wait's chain
    somewhere at 1 and 7 rows), the split graph, its Waiting edges read by the
    C pass (ingest/csrc/waitedges.c) or numpy's, is still the one built from
    every row at once."""
    engine, data_dir, results = loaded
    if form == "c":
        pytest.importorskip("ingest.views._waitedges")
    monkeypatch.setattr(waiting_edges, "SPLIT_ROWS", rows)
    for t in TRACES[:3]:
        frames = FrameStore(engine, data_dir).get(results[t.name].id)
        if form == "numpy":
            monkeypatch.setenv(PURE_ENV, "1")
        got = split_graph(engine, frames)
        monkeypatch.delenv(PURE_ENV, raising=False)
        want = resource_graph(frames, "goroutine", split_reasons=True)
        assert got.edges == want.edges and got.info == want.info
