"""Ranges, tasks, regions, logs and metrics in the database against the
decoded events.parquet, paired by hand here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, select

from ingest.load.eventrows import range_kind
from ingest.load.pipeline import IngestResult
from ingest.store import models
from tests.support.ingest_fixtures import decoded, loaded

# Fixtures come from ingest_fixtures; pytest finds them as module attributes.
FIXTURES = (decoded, loaded)

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
NAMES = ["go1.21-mixed.trace", "go1.26-workers.trace"]


def _events(d: Path) -> list[dict[str, Any]]:
    return list(pq.read_table(d / "events.parquet").to_pylist())


def _rows(engine: Engine, table: Any, trace_id: int) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(table).where(table.c.trace_id == trace_id)).all())


@pytest.mark.parametrize("name", NAMES)
def test_ranges_paired(loaded: Loaded, decoded: dict[str, Path], name: str) -> None:
    engine, _, results = loaded
    ev = _events(decoded[name])
    open_: dict[tuple[str, str, int], list[int]] = {}
    want: list[tuple[str, str, int, int | None, int | None]] = []
    for e in ev:
        if e["kind"] not in ("RangeBegin", "RangeActive", "RangeEnd"):
            continue
        key = (e["name"], e["scope"], e["scope_id"])
        stack = open_.setdefault(key, [])
        if e["kind"] == "RangeEnd" and stack:
            i = stack.pop()
            want[i] = (*want[i][:4], e["ts"])
        elif e["kind"] == "RangeEnd":
            want.append((e["name"], e["scope"], e["scope_id"], None, e["ts"]))
        else:
            stack.append(len(want))
            want.append((e["name"], e["scope"], e["scope_id"], e["ts"], None))
    rows = _rows(engine, models.ranges, results[name].id)
    got = [(r.name, r.scope, r.scope_id, r.start_ts, r.end_ts) for r in
           sorted(rows, key=lambda r: r.id)]
    assert got == want and want
    assert all(r.kind == range_kind(r.name) for r in rows)
    assert {r.kind for r in rows} & {"gc", "stw"}


@pytest.mark.parametrize("name", NAMES)
def test_tasks_regions_logs_metrics(loaded: Loaded, decoded: dict[str, Path],
                                    name: str) -> None:
    engine, _, results = loaded
    tid = results[name].id
    ev = _events(decoded[name])
    begins = {e["task_id"]: e for e in ev if e["kind"] == "TaskBegin"}
    ends = {e["task_id"]: e for e in ev if e["kind"] == "TaskEnd"}
    tasks = {r.task_id: r for r in _rows(engine, models.tasks, tid)}
    assert set(tasks) == set(begins) | set(ends) and tasks
    for t, r in tasks.items():
        if t in begins:
            assert (r.start_ts, r.name, r.start_g) == (
                begins[t]["ts"], begins[t]["name"], begins[t]["g"])
        if t in ends:
            assert r.end_ts == ends[t]["ts"]
    # Regions: per goroutine and type, an end closes the latest open begin.
    open_: dict[tuple[int, str], list[int]] = {}
    want: list[list[Any]] = []
    for e in ev:
        if e["kind"] == "RegionBegin":
            open_.setdefault((e["g"], e["name"]), []).append(len(want))
            want.append([e["g"], e["name"], e["ts"], None])
        elif e["kind"] == "RegionEnd":
            stack = open_.get((e["g"], e["name"]))
            if stack:
                want[stack.pop()][3] = e["ts"]
            else:
                want.append([e["g"], e["name"], None, e["ts"]])
    regions = sorted(_rows(engine, models.regions, tid), key=lambda r: r.id)
    assert [[r.g, r.name, r.start_ts, r.end_ts] for r in regions] == want and want
    logs = _rows(engine, models.logs, tid)
    assert sorted((r.seq, r.category, r.message) for r in logs) == [
        (e["seq"], e["category"], e["message"]) for e in ev if e["kind"] == "Log"]
    metrics = _rows(engine, models.metrics, tid)
    assert sorted((r.seq, r.name, r.value) for r in metrics) == [
        (e["seq"], e["name"], e["value"]) for e in ev if e["kind"] == "Metric"]


def test_metric_values_above_2_63_wrap_and_nulls_stay_null() -> None:
    import pyarrow as pa

    from ingest.load.event_split import split_events
    from ingest.load.eventrows import metrics as metrics_of

    def metrics(events: pa.Table) -> dict[str, Any]:
        (one,) = metrics_of(split_events(events))  # a few rows: one part
        return one

    from collectors.gotrace.parquet_out import EVENTS_SCHEMA

    events = pa.Table.from_pylist([
        {"seq": 1, "kind": "Metric", "ts": 5, "m": 1, "name": "/gc/heap/goal:bytes",
         "value": 2**64 - 1},
        {"seq": 2, "kind": "Sync", "ts": 6, "m": 1},
        {"seq": 3, "kind": "Metric", "ts": 7, "m": 2, "value_str": "x"}],
        schema=EVENTS_SCHEMA)
    got = metrics(events)
    assert got["seq"].tolist() == [1, 3] and got["ts"].tolist() == [5, 7]
    assert got["name"].tolist() == ["/gc/heap/goal:bytes", ""]
    assert got["value"].values[0] == -1, "2**64-1 as a signed 64-bit integer"
    assert got["value"].null.tolist() == [False, True]
    assert got["value_str"].tolist() == [None, "x"]
    assert len(metrics(events.slice(0, 0))["seq"]) == 0


@pytest.mark.parametrize("name", NAMES)
def test_regions_paired_in_parts_as_at_once(decoded: dict[str, Path], name: str,
                                            monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    """The regions' table of a real trace when its events are paired by the
    sorts a few goroutines at a time (parts of 2 events) and handed over 7 rows
    at a time from a spill file equals the table paired (in one pass in C,
    where built) and handed over at once."""
    from ingest.load import eventrows, pairing
    from ingest.load.event_split import split_events

    events = pq.read_table(decoded[name] / "events.parquet")
    whole = list(eventrows.regions(split_events(events)))
    real = pairing.pair_nested_in_parts
    monkeypatch.setattr(eventrows, "pair_by_goroutine",
                        lambda g, key, begin: real(g, [g, key], begin, part_events=2))
    monkeypatch.setattr(eventrows, "PART_ROWS", 7)
    parted = list(eventrows.regions(split_events(events, tmp_path)))
    assert len(whole) == 1 and len(whole[0]["id"]) >= 5
    assert len(parted) == -(-len(whole[0]["id"]) // 7)
    assert all(list(p) == list(whole[0]) for p in parted)
    for col in whole[0]:
        assert _joined(parted, col) == _plain(whole[0][col]), col
    assert not list(tmp_path.iterdir()), "the spill files are unnamed"


def _joined(parts: list[dict[str, Any]], col: str) -> Any:
    """One column of a table's parts as :func:`_plain` gives the whole's."""
    got = [_plain(p[col]) for p in parts]
    if isinstance(got[0], tuple):
        return ([v for g in got for v in g[0]], [v for g in got for v in g[1]])
    return [v for g in got for v in g]


def _plain(col: Any) -> Any:
    """A column as lists (a Nullable as its values and NULLs)."""
    from ingest.columns import Nullable

    if isinstance(col, Nullable):
        return (col.values.tolist(), col.null.tolist())
    return list(col.tolist()) if hasattr(col, "tolist") else list(col)
