"""Ingest of the committed real traces: what the database holds equals what
the decoder wrote, row for row."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, func, select, text

from ingest.load.pipeline import IngestResult, file_sha256, load_parquet_dir
from ingest.store import models
from tests.support.ingest_fixtures import TRACES, decoded, loaded

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
NAMES = [t.name for t in TRACES]

# Fixtures come from ingest_fixtures; pytest finds them as module attributes.
FIXTURES = (decoded, loaded)


def _count(engine: Engine, table: str, trace_id: int) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table} WHERE trace_id = :t"),
                                {"t": trace_id}).scalar_one())


@pytest.mark.parametrize("name", NAMES)
def test_counts_equal_decoded(loaded: Loaded, decoded: dict[str, Path], name: str) -> None:
    engine, _, results = loaded
    res = results[name]
    meta = json.loads((decoded[name] / "meta.json").read_text())
    assert res.created and res.go_version == meta["go_version"]
    assert res.events == meta["events"]
    assert _count(engine, "intervals", res.id) == meta["transitions"]
    assert _count(engine, "transitions", res.id) == meta["transitions"]
    counts = meta["event_counts"]
    assert _count(engine, "metrics", res.id) == counts.get("Metric", 0)
    assert _count(engine, "logs", res.id) == counts.get("Log", 0)
    other = sum(counts.get(k, 0) for k in ("Sync", "Label", "StackSample", "Experimental"))
    assert _count(engine, "other_events", res.id) == other
    stacks = pq.read_table(decoded[name] / "stacks.parquet")
    assert _count(engine, "stacks", res.id) == stacks.num_rows
    tstacks = pq.read_table(decoded[name] / "transition_stacks.parquet")
    assert _count(engine, "transition_stacks", res.id) == tstacks.num_rows
    with engine.connect() as conn:
        row = conn.execute(select(models.traces).where(models.traces.c.id == res.id)).one()
        total = conn.execute(select(func.sum(models.transition_counts.c["count"]))
                             .where(models.transition_counts.c.trace_id == res.id)).scalar()
    assert row.events == meta["events"] and row.transitions == meta["transitions"]
    assert json.loads(row.event_counts) == meta["event_counts"]
    assert row.first_ts == meta["first_ts"] and row.last_ts == meta["last_ts"]
    assert total == meta["transitions"]
    # Goroutines/procs: every id that has a transition, once.
    tr = pq.read_table(decoded[name] / "transitions.parquet")
    ids = Counter(zip(tr.column("resource").to_pylist(), tr.column("id").to_pylist(),
                      strict=True))
    assert row.goroutines == len({i for r, i in ids if r == "goroutine"})
    assert row.procs == len({i for r, i in ids if r == "proc"})
    assert _count(engine, "goroutines", res.id) == row.goroutines


@pytest.mark.parametrize("name", NAMES)
def test_transitions_view_reproduces_parquet(loaded: Loaded, decoded: dict[str, Path],
                                             name: str) -> None:
    """The transitions view, ordered by seq, is transitions.parquet exactly."""
    engine, _, results = loaded
    tr = pq.read_table(decoded[name] / "transitions.parquet").to_pylist()
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT ts, resource, id, from_state, to_state, reason, m, p, g, stack_id "
            "FROM transitions WHERE trace_id = :t ORDER BY seq"), {"t": results[name].id}).all()
    assert [dict(r._mapping) for r in rows] == [
        {**r, "reason": r["reason"] or ""} for r in tr]


@pytest.mark.parametrize("name", NAMES)
def test_intervals_end_at_next_transition(loaded: Loaded, decoded: dict[str, Path],
                                          name: str) -> None:
    """Each interval ends where its resource's next transition happens (by hand
    from transitions.parquet), the last one at the trace's end."""
    engine, _, results = loaded
    tr = pq.read_table(decoded[name] / "transitions.parquet").to_pylist()
    last_ts = json.loads((decoded[name] / "meta.json").read_text())["last_ts"]
    expect: dict[int, int] = {}
    latest: dict[tuple[str, int], int] = {}
    for seq, r in enumerate(tr):
        key = (r["resource"], r["id"])
        if key in latest:
            expect[latest[key]] = r["ts"]
        latest[key] = seq
    for seq in latest.values():
        expect[seq] = last_ts
    with engine.connect() as conn:
        got = dict(conn.execute(text("SELECT seq, end_ts FROM intervals WHERE trace_id = :t"),
                                {"t": results[name].id}).all())
    assert got == expect


def test_reingest_returns_same_id(loaded: Loaded) -> None:
    from ingest.load.pipeline import ingest_trace_file

    engine, data_dir, results = loaded
    path = TRACES[0]
    again = ingest_trace_file(engine, path, "another name", data_dir=data_dir)
    assert again.id == results[path.name].id and not again.created
    assert again.sha256 == file_sha256(path)


def test_parquet_dir_is_the_same_trace(loaded: Loaded, decoded: dict[str, Path]) -> None:
    """A decoded directory carries its trace's sha256: loading it finds the trace."""
    engine, _, results = loaded
    name = TRACES[-1].name
    res = load_parquet_dir(engine, decoded[name], "dir")
    assert res.id == results[name].id and not res.created


def test_raw_file_kept_by_sha(loaded: Loaded) -> None:
    _, data_dir, results = loaded
    for t in TRACES:
        from ingest.load.raw_copy import raw_path, read_raw

        kept = raw_path(data_dir, results[t.name].sha256)
        assert kept.stat().st_size < t.stat().st_size, "kept compressed"
        assert b"".join(read_raw(kept)) == t.read_bytes()


def test_goroutine_summary_from_creation(loaded: Loaded, decoded: dict[str, Path]) -> None:
    """created_ts, parent and start function come from the creation transition
    (NotExist -> ...) and its transition stack, checked by hand."""
    engine, _, results = loaded
    name = "go1.26-workers.trace"
    d = decoded[name]
    tr = pq.read_table(d / "transitions.parquet").to_pylist()
    tst = dict(zip(*(pq.read_table(d / "transition_stacks.parquet").to_pydict().values()),
                   strict=True))
    frames = pq.read_table(d / "stacks.parquet").to_pylist()
    top = {f["stack_id"]: f["function"] for f in frames if f["depth"] == 0}
    created = {}
    for seq, r in enumerate(tr):
        if r["resource"] == "goroutine" and r["from_state"] == "NotExist" \
                and r["id"] not in created:
            created[r["id"]] = (r["ts"], r["g"] if r["g"] >= 0 else None,
                                top.get(tst.get(seq, -1)))
    assert created
    g = models.goroutines
    with engine.connect() as conn:
        rows = conn.execute(select(g.c.goid, g.c.created_ts, g.c.parent_goid,
                                   g.c.start_function)
                            .where(g.c.trace_id == results[name].id,
                                   g.c.created_ts.is_not(None))).all()
    assert {r.goid: (r.created_ts, r.parent_goid, r.start_function) for r in rows} == created
    assert any(fn and fn.startswith("main.") for _, _, fn in created.values())
