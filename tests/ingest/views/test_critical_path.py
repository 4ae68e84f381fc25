"""The critical path on the chain workload (collectors/workloads/cmd/chain):
each round's consumer waited on a channel fed by a feeder that waited on a
mutex held by a holder sleeping (i + 1) * 10 ms then working 3 ms inside it.
The path of the consumer, or of its task, must be consumer <- feeder <-
holder, with the holder's sleep and work on it, timed by the trace's own
timestamps (SQL over the same trace), and the hand-offs at Go's own
unblock events (the feeder's wait for the holder's "locked" send among them
when it began after the consumer's wait)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ingest.views.critical_path import critical_path
from tests.support.causality import Loaded, backends, go_unblocks, load_traces

NAMES = ("chain-1.27", "chain-1.22", "chain-1.21", "chain-1.19")
SLEEP_NS = 10_000_000  # cmd/chain's sleepBase
WORK_NS = 3_000_000  # cmd/chain's workFor


@pytest.fixture(scope="module", params=backends())
def store(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    yield from load_traces(request.param, tmp_path_factory, NAMES)


def _rounds(store: Loaded, name: str) -> list[tuple[int, int, int]]:
    """(consumer, feeder, holder) of each round, in creation order."""
    by: dict[str, list[int]] = {}
    for fn, goid in store.rows("SELECT start_function, goid FROM goroutines WHERE "
                               "trace_id = :t AND start_function IN ('main.consumer', "
                               "'main.feeder', 'main.holder') ORDER BY created_ts, goid",
                               t=store.ids[name]):
        by.setdefault(fn, []).append(goid)
    rounds = list(zip(by["main.consumer"], by["main.feeder"], by["main.holder"],
                      strict=True))
    assert len(rounds) == 3
    return rounds


def _wait(store: Loaded, name: str, goid: int, reason: str, after: int) -> Any:
    """goid's first Waiting interval for ``reason`` that ended after ``after``."""
    return store.rows("SELECT start_ts, end_ts FROM interval_view WHERE trace_id = :t "
                      "AND resource = 'goroutine' AND rid = :g AND state = 'Waiting' "
                      "AND reason = :r AND end_ts > :a ORDER BY start_ts LIMIT 1",
                      t=store.ids[name], g=goid, r=reason, a=after)[0]


def _check_path(store: Loaded, name: str, d: dict[str, Any], rnd: int,
                chain: tuple[int, int, int]) -> None:
    consumer, feeder, holder = chain
    links = d["links"]
    assert d["chain"] == [consumer, feeder, holder]
    # The links tile the window, in time order.
    assert sum(x["duration_ns"] for x in links) == d["total_ns"] == d["t2"] - d["t1"]
    assert all(a["end_ts"] == b["start_ts"] for a, b in zip(links, links[1:], strict=False))
    # The consumer's channel wait is the feeder's and the holder's time.
    recv = _wait(store, name, consumer, "chan receive", d["t1"])
    inside = [x for x in links if recv.start_ts <= x["start_ts"] < recv.end_ts]
    assert inside and all(x["goroutine"] in (feeder, holder) for x in inside)
    assert sum(x["duration_ns"] for x in inside) == recv.end_ts - recv.start_ts
    # The holder's sleep is a link of its own, from when both the consumer and
    # the feeder were waiting (the holder may have fallen asleep a little
    # before) to the sleep's end, as the trace says.
    sleep = _wait(store, name, holder, "sleep", d["t1"])
    # The feeder's wait for the lock: the hop from the holder that ended a
    # wait on sync (a hop before it, from the holder too, can be the
    # feeder's wait for the holder's "locked" send, when that wait began after
    # the consumer's: cmd/chain's feeder receives it before it locks).
    locked = [h for h in d["hops"] if (h["from"], h["to"]) == (holder, feeder)
              and h["wait"]["reason"] == "sync"]
    assert len(locked) == 1
    lock = store.rows("SELECT start_ts FROM interval_view WHERE trace_id = :t AND "
                      "resource = 'goroutine' AND rid = :g AND state = 'Waiting' AND "
                      "reason = 'sync' AND end_ts = :e", t=store.ids[name], g=feeder,
                      e=locked[0]["ts"])
    assert len(lock) == 1
    slept = [x for x in links if x["goroutine"] == holder and x["state"] == "Waiting"]
    assert len(slept) == 1 and slept[0]["reason"] == "sleep"
    assert (slept[0]["start_ts"], slept[0]["end_ts"]) == \
        (max(sleep.start_ts, lock[0].start_ts, recv.start_ts), sleep.end_ts)
    assert sleep.end_ts - sleep.start_ts >= (rnd + 1) * SLEEP_NS
    assert slept[0]["duration_ns"] >= 0.9 * (rnd + 1) * SLEEP_NS
    # Then the holder worked (ran, or waited for a P) until it unlocked.
    after = [x for x in links if x["goroutine"] == holder and x["start_ts"] >= sleep.end_ts]
    assert sum(x["duration_ns"] for x in after) >= WORK_NS
    assert {x["state"] for x in after} <= {"Running", "Runnable"}
    # The hand-offs are Go's own unblocks: holder -> feeder, feeder -> consumer.
    wakes = {(g, w) for _, g, w, _ in go_unblocks(store.files[name])}
    hops = [(h["from"], h["to"]) for h in d["hops"]]
    assert hops[-2:] == [(holder, feeder), (feeder, consumer)]
    assert d["hops"][-2] is locked[0]
    assert all(h["wait"]["reason"] == "chan receive" and (h["from"], h["to"]) == (holder, feeder)
               for h in d["hops"][:-2])
    assert all((to, frm) in wakes for frm, to in hops)
    assert d["hops"][-1]["ts"] == recv.end_ts


@pytest.mark.parametrize("name", NAMES)
def test_consumer_path_is_feeder_then_holder(store: Loaded, name: str) -> None:
    f = store.get(name)
    for rnd, chain in enumerate(_rounds(store, name)):
        d = critical_path(store.engine, f, chain[0])
        _check_path(store, name, d, rnd, chain)
        ns = {x["goroutine"]: x["ns"] for x in d["goroutines"]}
        assert max(ns, key=lambda g: ns[g]) == chain[2], "the holder's time dominates"


@pytest.mark.parametrize("name", NAMES)
def test_task_path(store: Loaded, name: str) -> None:
    f = store.get(name)
    tasks = store.rows("SELECT task_id, start_ts, end_ts, end_g FROM tasks WHERE "
                       "trace_id = :t AND name = 'request' ORDER BY start_ts",
                       t=store.ids[name])
    for rnd, (chain, task) in enumerate(zip(_rounds(store, name), tasks, strict=True)):
        d = critical_path(store.engine, f, task=task.task_id)
        assert task.end_g == chain[0]
        assert (d["t1"], d["t2"]) == (task.start_ts, task.end_ts)
        _check_path(store, name, d, rnd, chain)


def test_window_and_unknowns(store: Loaded) -> None:
    f = store.get("chain-1.27")
    consumer, feeder, holder = _rounds(store, "chain-1.27")[0]
    sleep = _wait(store, "chain-1.27", holder, "sleep", 0)
    # A window from the holder's run into its sleep, ending inside the sleep:
    # the wait has not ended, nobody is blamed for it yet. (Not a fixed time
    # before the sleep: the holder's channel send before it can end, woken
    # by the feeder, less than a microsecond before the sleep begins.)
    ran = store.rows("SELECT start_ts FROM interval_view WHERE trace_id = :t AND "
                     "resource = 'goroutine' AND rid = :g AND state = 'Running' AND "
                     "end_ts = :e", t=store.ids["chain-1.27"], g=holder, e=sleep.start_ts)
    assert len(ran) == 1
    d = critical_path(store.engine, f, holder, ran[0].start_ts,
                      (sleep.start_ts + sleep.end_ts) // 2)
    assert d["chain"] == [holder] and d["links"][-1]["state"] == "Waiting"
    assert sum(x["duration_ns"] for x in d["links"]) == d["total_ns"]
    with pytest.raises(LookupError):
        critical_path(store.engine, f, 10**9)
    with pytest.raises(LookupError):
        critical_path(store.engine, f, task=10**9)
