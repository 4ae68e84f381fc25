"""State graphs of the views (ingest.views.states_frames, /api/traces/<id>/states):
edge counts equal the decoded transitions (the database's transitions view,
Go's own parse), filters select exactly the transitions they name, the reason
split only refines the Waiting node, and the derived thread graph agrees with
the goroutine transitions it comes from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.load.pipeline import IngestResult
from ingest.views import states as stategraph
from ingest.views.states_frames import graph_for, resource_graph, thread_graph
from ingest.views.wait_reasons import wait_category
from tests.support.goparsed import go_parsed
from tests.support.ingest_fixtures import TRACES, loaded
from tests.support.server import Served

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
FIXTURES = (loaded,)
SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def _counts(graph: stategraph.StateGraph, collapse: bool = False) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for e in graph.edges:
        s, t = e.source, e.target
        if collapse:
            s, t = s.split(":")[0], t.split(":")[0]
        out[(s, t)] += e.count
    return out


def _sql_counts(engine: Engine, trace_id: int, resource: str, where: str = "",
                **params: Any) -> Counter[tuple[str, str]]:
    sql = ("SELECT t.from_state, t.to_state, COUNT(*) FROM transitions t "
           "WHERE t.trace_id = :tid AND t.resource = :res " + where +
           " GROUP BY t.from_state, t.to_state")
    with engine.connect() as conn:
        rows = conn.execute(text(sql), {"tid": trace_id, "res": resource, **params}).all()
    return Counter({(r[0], r[1]): int(r[2]) for r in rows})


def _edge_key(e: stategraph.Edge) -> tuple[str, str]:
    return (e.source, e.target)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_frames_graph_equals_precomputed(loaded: Loaded, name: str) -> None:
    """Unfiltered graphs from the frames equal state_edges exactly (dwell stats too)
    and the transitions view's counts."""
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    for resource in ("goroutine", "proc"):
        want = sorted(stategraph.state_graph(engine, tid, resource).edges, key=_edge_key)
        got = sorted(resource_graph(frames, resource).edges, key=_edge_key)
        assert got == want
        assert _counts(resource_graph(frames, resource)) == _sql_counts(engine, tid, resource)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_split_refines_waiting(loaded: Loaded, name: str) -> None:
    """Collapsing ``Waiting: <category>`` back to Waiting gives the plain graph;
    an edge into a category node counts the transitions with reasons of it."""
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    split = resource_graph(frames, "goroutine", split_reasons=True)
    assert _counts(split, collapse=True) == _counts(resource_graph(frames, "goroutine"))
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT from_state, reason, COUNT(*) FROM transitions WHERE trace_id = :t "
            "AND resource = 'goroutine' AND to_state = 'Waiting' AND from_state <> 'Waiting' "
            "GROUP BY from_state, reason"), {"t": tid}).all()
    want: Counter[tuple[str, str]] = Counter()
    for frm, reason, n in rows:
        want[(frm, f"Waiting: {wait_category(reason)}")] += int(n)
    got = Counter({k: v for k, v in _counts(split).items()
                   if k[1].startswith("Waiting: ") and not k[0].startswith("Waiting")})
    assert got == want


def test_window_and_group_filters(loaded: Loaded) -> None:
    """A window keeps the transitions with t1 <= ts < t2; a group keeps its
    goroutines' transitions (both checked against SQL over the transitions view)."""
    engine, data_dir, results = loaded
    name = "go1.22-workers.trace"
    tid = results[name].id
    store = FrameStore(engine, data_dir)
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id = :t"),
                                   {"t": tid}).one()
        group = conn.execute(text(
            "SELECT start_function FROM goroutines WHERE trace_id = :t AND start_function "
            "IS NOT NULL GROUP BY start_function ORDER BY COUNT(*) DESC LIMIT 1"),
            {"t": tid}).scalar_one()
    t1 = first + (last - first) // 3
    t2 = first + 2 * (last - first) // 3
    for resource in ("goroutine", "proc"):
        g = graph_for(engine, store, tid, resource, t1=t1, t2=t2)
        assert _counts(g) == _sql_counts(engine, tid, resource,
                                         "AND t.ts >= :t1 AND t.ts < :t2", t1=t1, t2=t2)
        assert g.total > 0
    g = graph_for(engine, store, tid, "goroutine", group=group)
    want = _sql_counts(engine, tid, "goroutine",
                       "AND t.id IN (SELECT goid FROM goroutines WHERE trace_id = :tid "
                       "AND start_function = :grp)", grp=group)
    assert _counts(g) == want and g.total > 0
    with pytest.raises(ValueError):
        graph_for(engine, store, tid, "proc", group=group)
    with pytest.raises(LookupError):
        graph_for(engine, store, tid, "goroutine", group="no such function")


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_thread_graph(loaded: Loaded, name: str) -> None:
    """A goroutine entering or leaving a syscall does it on its thread, so the
    thread graph's Running<->Syscall edges equal those goroutine transitions
    (on a known M); every thread with a goroutine interval is entered once."""
    engine, data_dir, results = loaded
    tid = results[name].id
    g = thread_graph(FrameStore(engine, data_dir).get(tid))
    got = _counts(g)
    with engine.connect() as conn:
        n_threads = conn.execute(text(
            "SELECT COUNT(DISTINCT m) FROM thread_intervals WHERE trace_id = :t"),
            {"t": tid}).scalar_one()
        into_syscall = conn.execute(text(
            "SELECT COUNT(*) FROM transitions WHERE trace_id = :t AND resource = 'goroutine' "
            "AND from_state = 'Running' AND to_state = 'Syscall' AND m <> -1"),
            {"t": tid}).scalar_one()
    assert sum(v for (s, _), v in got.items() if s == "Undetermined") == n_threads
    assert got[("Running", "Syscall")] == into_syscall
    assert all(e.source != e.target for e in g.edges)


@pytest.mark.slow
@pytest.mark.parametrize("sample", ["go1.27-httpnet.trace", "go1.27-annotations.trace",
                                    "go1.27-syscallblock.trace"])
def test_api_counts_equal_go(samples_server: Served, sample_ids: dict[str, int],
                             sample: str) -> None:
    """The API's graphs (split and not) count exactly the transitions Go 1.27 parses."""
    events, err = go_parsed(SAMPLES / sample)
    assert err is None
    want = Counter((e.resource, e.from_state, e.to_state) for e in events
                   if e.kind == "StateTransition")
    tid = sample_ids[sample]
    for resource in ("goroutine", "proc"):
        for split in ("", "1"):
            if split and resource == "proc":
                continue
            doc = samples_server.get(f"/api/traces/{tid}/states?resource={resource}"
                                     f"&split_reasons={split}").json()
            got: Counter[tuple[str, str, str]] = Counter()
            for e in doc["edges"]:
                got[(resource, e["source"].split(":")[0], e["target"].split(":")[0])] += (
                    e["count"])
            assert got == Counter({k: v for k, v in want.items() if k[0] == resource})
            assert doc["total"] == sum(got.values())


def test_api_formats_and_errors(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet.trace"]
    plain = samples_server.get(f"/api/traces/{tid}/states").json()
    # The older route keeps its documented answer: the same graph.
    old = samples_server.get(f"/api/traces/{tid}/stategraph").json()
    assert {(e["source"], e["target"], e["count"]) for e in plain["edges"]} == {
        (e["source"], e["target"], e["count"]) for e in old["edges"]}
    mer = samples_server.get(f"/api/traces/{tid}/states?split_reasons=1&format=mermaid")
    assert mer.headers["content-type"].startswith("text/plain")
    split = samples_server.get(f"/api/traces/{tid}/states?split_reasons=1").json()
    assert mer.text.startswith("flowchart LR") and mer.text.count("-->") == len(split["edges"])
    dot = samples_server.get(f"/api/traces/{tid}/states?resource=thread&format=dot").text
    thread = samples_server.get(f"/api/traces/{tid}/states?resource=thread").json()
    assert dot.startswith('digraph "thread"') and dot.count("->") == len(thread["edges"])
    groups = samples_server.get(f"/api/traces/{tid}/states/groups").json()["groups"]
    assert sum(g["goroutines"] for g in groups) == samples_server.get(
        f"/api/traces/{tid}").json()["goroutines"]
    for path, status in ((f"/api/traces/{tid}/states?resource=heap", 400),
                         (f"/api/traces/{tid}/states?format=png", 400),
                         (f"/api/traces/{tid}/states?t1=abc", 400),
                         (f"/api/traces/{tid}/states?t1=10&t2=5", 400),
                         (f"/api/traces/{tid}/states?resource=proc&split_reasons=1", 400),
                         (f"/api/traces/{tid}/states?group=nope", 404),
                         ("/api/traces/999999/states", 404),
                         ("/api/traces/999999/states?split_reasons=1", 404)):
        r = samples_server.get(path)
        assert r.status_code == status, path
        assert "error" in r.json()
