"""The query layer against hand-checkable arithmetic on transitions.parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from ingest.load.pipeline import IngestResult
from ingest.store import traces
from ingest.views import intervals
from tests.support.ingest_fixtures import decoded, loaded

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
NAME = "go1.26-workers.trace"

# Fixtures come from ingest_fixtures; pytest finds them as module attributes.
FIXTURES = (decoded, loaded)


def _by_hand(decoded_dir: Path) -> tuple[list[dict[str, Any]], int]:
    import json

    tr = pq.read_table(decoded_dir / "transitions.parquet").to_pylist()
    for seq, r in enumerate(tr):
        r["seq"] = seq
    return tr, json.loads((decoded_dir / "meta.json").read_text())["last_ts"]


def _intervals(tr: list[dict[str, Any]], last_ts: int, resource: str, rid: int
               ) -> list[tuple[str, int, int]]:
    """(state, start, end) of one resource: from each of its transitions to the next."""
    mine = [r for r in tr if r["resource"] == resource and r["id"] == rid]
    ends = [r["ts"] for r in mine[1:]] + [last_ts]
    return [(r["to_state"], r["ts"], e) for r, e in zip(mine, ends, strict=True)]


def _busiest_goroutine(tr: list[dict[str, Any]]) -> int:
    from collections import Counter

    c = Counter(r["id"] for r in tr if r["resource"] == "goroutine")
    return c.most_common(1)[0][0]


def test_goroutine_intervals_window(loaded: Loaded, decoded: dict[str, Path]) -> None:
    engine, _, results = loaded
    tr, last_ts = _by_hand(decoded[NAME])
    goid = _busiest_goroutine(tr)
    mine = _intervals(tr, last_ts, "goroutine", goid)
    assert len(mine) > 10
    tid = results[NAME].id
    # The whole trace: every interval.
    every = intervals.goroutine_intervals(engine, tid, goid, tr[0]["ts"], last_ts + 1)
    assert [(i["state"], i["start_ts"], i["end_ts"]) for i in every] == mine
    # A window starting in the middle of the 5th interval and ending inside
    # the 9th: intervals 5 to 9 (the 5th is in progress at t1).
    s5, e5 = mine[4][1], mine[4][2]
    t1 = s5 + max(1, (e5 - s5) // 2) if e5 > s5 else s5
    t2 = mine[8][1] + 1
    got = intervals.goroutine_intervals(engine, tid, goid, t1, t2)
    want = [iv for iv in mine if iv[1] < t2 and (iv[2] > t1 or iv[1] >= t1)]
    assert [(i["state"], i["start_ts"], i["end_ts"]) for i in got] == want
    assert got[0]["id"] == goid and got[0]["resource"] == "goroutine"
    # An empty window past the end, and an unknown goroutine.
    assert intervals.goroutine_intervals(engine, tid, goid, last_ts + 10, last_ts + 20) == (
        [] if mine[-1][2] <= last_ts + 10 else got[-1:])
    assert intervals.goroutine_intervals(engine, tid, 10**12, 0, last_ts) == []


def test_who_ran_on_proc(loaded: Loaded, decoded: dict[str, Path]) -> None:
    """At the midpoint of each goroutine Running interval (from the
    transitions: to Running with context P, until the goroutine's next
    transition), that goroutine is the one on that P."""
    engine, _, results = loaded
    tr, last_ts = _by_hand(decoded[NAME])
    tid = results[NAME].id
    checked = 0
    goids = {r["id"] for r in tr if r["resource"] == "goroutine"}
    cases = []
    for goid in sorted(goids)[:40]:
        mine = [r for r in tr if r["resource"] == "goroutine" and r["id"] == goid]
        ends = [r["ts"] for r in mine[1:]] + [last_ts]
        cases += [(goid, r, end) for r, end in zip(mine, ends, strict=True)
                  if r["to_state"] == "Running" and r["p"] >= 0 and end > r["ts"] + 1]
    # An evenly spread sample: each lookup is a few round trips to the server.
    for goid, r, end in cases[:: max(1, len(cases) // 300)]:
        t = (r["ts"] + end) // 2
        who = intervals.who_ran_on_proc(engine, tid, r["p"], t)
        assert who is not None and who["g"] == goid, (goid, r, t)
        assert who["start_ts"] == r["ts"] and who["end_ts"] == end
        checked += 1
    assert checked > 20
    assert intervals.who_ran_on_proc(engine, tid, 0, tr[0]["ts"] - 1) is None


def test_proc_intervals_window(loaded: Loaded, decoded: dict[str, Path]) -> None:
    engine, _, results = loaded
    tr, last_ts = _by_hand(decoded[NAME])
    tid = results[NAME].id
    first = tr[0]["ts"]
    t1 = first + (last_ts - first) // 3
    t2 = t1 + (last_ts - first) // 10
    got = intervals.proc_intervals(engine, tid, t1, t2)
    pids = sorted({r["id"] for r in tr if r["resource"] == "proc"})
    want = []
    for pid in pids:
        for st, s, e in _intervals(tr, last_ts, "proc", pid):
            if s < t2 and (e > t1 or s >= t1):
                want.append((pid, st, s, e))
    assert [(i["id"], i["state"], i["start_ts"], i["end_ts"]) for i in got] == want
    # Goroutines listed on a Running proc interval really ran on that P then
    # (an evenly spread sample: each lookup is a few round trips to the server).
    runs = [(iv["id"], run) for iv in got for run in iv["goroutines"]
            if run["end_ts"] > run["start_ts"]]
    assert runs
    for pid, run in runs[:: max(1, len(runs) // 200)]:
        who = intervals.who_ran_on_proc(engine, tid, pid, run["start_ts"])
        assert who is not None and who["g"] == run["g"]


def test_trace_summary_and_list(loaded: Loaded, decoded: dict[str, Path]) -> None:
    from collections import Counter

    engine, _, results = loaded
    tr, _ = _by_hand(decoded[NAME])
    s = traces.trace_summary(engine, results[NAME].id)
    assert s is not None
    want = Counter((r["resource"], r["from_state"], r["to_state"], r["reason"] or "")
                   for r in tr)
    got = {(c["resource"], c["from"], c["to"], c["reason"]): c["count"]
           for c in s["transition_counts"]}
    assert got == dict(want)
    assert s["transitions_by_resource"]["goroutine"] == sum(
        1 for r in tr if r["resource"] == "goroutine")
    assert s["syscall_count"] == sum(1 for r in tr if r["resource"] == "goroutine"
                                     and r["to_state"] == "Syscall")
    listed = {t["id"] for t in traces.list_traces(engine)}
    assert {r.id for r in results.values()} <= listed
    assert traces.trace_summary(engine, 10**9) is None


@pytest.mark.parametrize("name", ["go1.21-mixed.trace", "go1.26-workers.trace"])
def test_syscalls_follow_transitions(loaded: Loaded, decoded: dict[str, Path],
                                     name: str) -> None:
    """One syscall per transition into Syscall; 'returned' ones are followed
    by Syscall->Running on the same P, 'blocked' ones by Syscall->Runnable."""
    from sqlalchemy import select

    from ingest.store import models

    engine, _, results = loaded
    tr, _ = _by_hand(decoded[name])
    nxt: dict[int, dict[str, Any]] = {}
    latest: dict[int, int] = {}
    for r in tr:
        if r["resource"] != "goroutine":
            continue
        if r["id"] in latest:
            nxt[latest[r["id"]]] = r
        latest[r["id"]] = r["seq"]
    into = {r["seq"]: r for r in tr if r["resource"] == "goroutine"
            and r["to_state"] == "Syscall"}
    sc = models.syscalls
    with engine.connect() as conn:
        rows = conn.execute(select(sc).where(sc.c.trace_id == results[name].id)).all()
    assert {r.seq for r in rows} == set(into)
    for r in rows:
        after = nxt.get(r.seq)
        if after is None:
            assert r.outcome == "unfinished"
            continue
        assert r.end_ts == after["ts"] and r.duration_ns == after["ts"] - r.start_ts
        if after["to_state"] == "Running" and after["p"] == into[r.seq]["p"]:
            assert r.outcome == "returned" and not r.p_lost
        if after["to_state"] == "Runnable":
            assert r.outcome == "blocked" and r.p_lost


def test_thread_summaries_by_hand(loaded: Loaded, decoded: dict[str, Path]) -> None:
    """A thread's running/syscall time sums the goroutine Running/Syscall
    intervals begun on it (transition context m); its transitions count
    those made on it."""
    from collections import Counter

    from sqlalchemy import select

    from ingest.store import models

    engine, _, results = loaded
    tr, last_ts = _by_hand(decoded[NAME])
    nxt: dict[int, int] = {}
    latest: dict[tuple[str, int], int] = {}
    for r in tr:
        key = (r["resource"], r["id"])
        if key in latest:
            nxt[latest[key]] = r["ts"]
        latest[key] = r["seq"]
    run: Counter[int] = Counter()
    sysc: Counter[int] = Counter()
    made: Counter[int] = Counter(r["m"] for r in tr if r["m"] >= 0)
    for r in tr:
        if r["resource"] == "goroutine" and r["m"] >= 0:
            dur = nxt.get(r["seq"], last_ts) - r["ts"]
            if r["to_state"] == "Running":
                run[r["m"]] += dur
            elif r["to_state"] == "Syscall":
                sysc[r["m"]] += dur
    t = models.threads
    with engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.trace_id == results[NAME].id)).all()
    got = {r.m: (r.transitions, r.running_ns, r.syscall_ns) for r in rows}
    for m, n in made.items():
        assert got[m] == (n, run[m], sysc[m])


def test_thread_intervals_window(loaded: Loaded, decoded: dict[str, Path]) -> None:
    from collections import Counter

    engine, _, results = loaded
    tr, last_ts = _by_hand(decoded[NAME])
    m = Counter(r["m"] for r in tr if r["m"] >= 0).most_common(1)[0][0]
    first = tr[0]["ts"]
    t1 = first + (last_ts - first) // 4
    t2 = t1 + (last_ts - first) // 8
    nxt: dict[int, int] = {}
    latest: dict[tuple[str, int], int] = {}
    for r in tr:
        key = (r["resource"], r["id"])
        if key in latest:
            nxt[latest[key]] = r["ts"]
        latest[key] = r["seq"]
    want = sorted(
        (r["ts"], r["id"], r["to_state"], nxt.get(r["seq"], last_ts)) for r in tr
        if r["resource"] == "goroutine" and r["m"] == m
        and r["to_state"] in ("Running", "Syscall")
        and r["ts"] < t2 and nxt.get(r["seq"], last_ts) > t1)
    got = intervals.thread_intervals(engine, results[NAME].id, m, t1, t2)
    assert sorted((i["start_ts"], i["g"], i["state"], i["end_ts"]) for i in got) == want
    assert want


def test_first_from_is_a_bisection_of_the_stored_starts(loaded: Loaded) -> None:
    """The one-statement binary search (a recursive query) answers what
    Python's bisect answers on the goroutine's stored start times, at every
    start, between starts, before the first and after the last."""
    import bisect

    from sqlalchemy import select

    from ingest.store import models

    engine, _, results = loaded
    tid = results[NAME].id
    g, iv = models.goroutines, models.intervals
    with engine.connect() as conn:
        lo, hi = conn.execute(select(g.c.first_interval, g.c.last_interval)
                              .where(g.c.trace_id == tid)
                              .order_by((g.c.last_interval - g.c.first_interval).desc())
                              .limit(1)).one()
        starts = list(conn.execute(select(iv.c.start_ts).where(iv.c.id.between(lo, hi))
                                   .order_by(iv.c.id)).scalars())
        assert len(starts) > 50 and starts == sorted(starts)
        probes = sorted({starts[0] - 1, starts[-1], starts[-1] + 1,
                         *starts[:: max(1, len(starts) // 40)],
                         *(s + 1 for s in starts[:: max(1, len(starts) // 40)])})
        for t in probes:
            assert intervals._first_from(conn, iv, lo, hi, t) == lo + bisect.bisect_left(
                starts, t), t
        # Sub-ranges, down to one row and none.
        assert intervals._first_from(conn, iv, lo + 5, lo + 5, starts[5]) == lo + 5
        assert intervals._first_from(conn, iv, lo + 5, lo + 5, starts[5] + 1) == lo + 6
        assert intervals._first_from(conn, iv, lo + 5, lo + 4, 0) == lo + 5
