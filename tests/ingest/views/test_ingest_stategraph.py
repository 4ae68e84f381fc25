"""State graphs against Go: edge counts equal the transitions that
``go tool trace -d=parsed`` (Go 1.27) prints, for every committed trace."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from ingest.load.pipeline import IngestResult
from ingest.views import states as stategraph
from tests.support.goparsed import go_parsed
from tests.support.ingest_fixtures import TRACES, decoded, loaded

Loaded = tuple[Engine, Path, dict[str, IngestResult]]

# Fixtures come from ingest_fixtures; pytest finds them as module attributes.
FIXTURES = (decoded, loaded)


@pytest.mark.parametrize("name", [t.name for t in TRACES])
def test_edge_counts_equal_go(loaded: Loaded, name: str) -> None:
    engine, _, results = loaded
    path = next(t for t in TRACES if t.name == name)
    go, err = go_parsed(path)
    assert err is None
    want = Counter((e.resource, e.from_state, e.to_state) for e in go
                   if e.kind == "StateTransition")
    assert want
    for resource in ("goroutine", "proc"):
        g = stategraph.state_graph(engine, results[name].id, resource)
        got = {(resource, e.source, e.target): e.count for e in g.edges}
        assert got == {k: v for k, v in want.items() if k[0] == resource}
        assert g.total == sum(v for k, v in want.items() if k[0] == resource)


def test_dwell_times_by_hand(loaded: Loaded, decoded: dict[str, Path]) -> None:
    """Dwell = time since the resource's previous transition; nearest-rank
    percentiles, computed here with plain Python."""
    engine, _, results = loaded
    name = "go1.22-workers.trace"
    tr = pq.read_table(decoded[name] / "transitions.parquet").to_pylist()
    prev: dict[tuple[str, int], int] = {}
    dwell: dict[tuple[str, str], list[int]] = {}
    for r in tr:
        key = (r["resource"], r["id"])
        if r["resource"] == "goroutine" and key in prev:
            dwell.setdefault((r["from_state"], r["to_state"]), []).append(r["ts"] - prev[key])
        prev[key] = r["ts"]
    g = stategraph.state_graph(engine, results[name].id, "goroutine")
    for e in g.edges:
        d = sorted(dwell.get((e.source, e.target), []))
        assert e.dwell_count == len(d)
        if d:
            assert e.dwell_max_ns == d[-1]
            assert e.dwell_p50_ns == d[max(1, -(-len(d) * 50 // 100)) - 1]
            assert e.dwell_p99_ns == d[max(1, -(-len(d) * 99 // 100)) - 1]
            assert e.dwell_mean_ns == pytest.approx(sum(d) / len(d))


def test_renderers_escape(loaded: Loaded) -> None:
    engine, _, results = loaded
    g = stategraph.state_graph(engine, results[TRACES[-1].name].id, "goroutine")
    doc = stategraph.to_json(g)
    json.dumps(doc)
    assert doc["total"] == sum(e["count"] for e in doc["edges"])
    mer = stategraph.to_mermaid(g)
    assert mer.startswith("flowchart LR\n") and mer.count("-->") == len(g.edges)
    dot = stategraph.to_dot(g)
    assert dot.startswith("digraph") and dot.count("->") == len(g.edges)
    odd = stategraph.StateGraph("goroutine", ['a"b', "c|d>"], [
        stategraph.Edge('a"b', "c|d>", 3, 0, None, None, None, None)])
    assert 'a\\"b' in stategraph.to_dot(odd)
    m = stategraph.to_mermaid(odd)
    assert "a#quot;b" in m and "c#124;d#gt;" in m
    with pytest.raises(ValueError):
        stategraph.state_graph(engine, 1, "thread")
