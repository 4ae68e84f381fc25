"""Syscalls and netpoller waits against the syscalls table and plain SQL over
the intervals: counts, P losses and handoff times, top stacks, the
connleak goroutines parked in the netpoller; the JSON API."""

from __future__ import annotations

from collections import Counter

import pytest

from ingest.views.histo import log_histogram
from ingest.views.syscalls import netpoll_summary, syscall_summary
from tests.support.analysis import Store, open_store
from tests.support.server import Served

SAMPLES = ("go1.27-connleak.trace", "go1.27-gcpressure.trace", "go1.27-httpnet.trace",
           "go1.27-mutex.trace", "go1.27-syscallblock.trace")


@pytest.fixture(scope="module")
def store(samples_server: Served, sample_ids: dict[str, int]) -> Store:
    return open_store(samples_server, sample_ids)


def _sys_rows(store: Store, trace_id: int) -> list[object]:
    return store.rows("SELECT s.* FROM syscalls s JOIN row_ranges r ON r.trace_id = :t AND "
                      "r.table_name = 'syscalls' AND s.id BETWEEN r.first_id AND r.last_id",
                      t=trace_id)


@pytest.mark.parametrize("name", SAMPLES)
def test_syscalls_equal_table(store: Store, name: str) -> None:
    f = store.get(name)
    rows = _sys_rows(store, f.trace_id)
    d = syscall_summary(store.engine, f, top=5)
    assert d["count"] == len(rows)
    assert d["p_lost"] == sum(1 for r in rows if r.p_lost)
    assert d["total_ns"] == sum(r.duration_ns for r in rows)
    assert d["unfinished"] == sum(1 for r in rows if r.outcome == "unfinished")
    complete = sorted(r.duration_ns for r in rows
                      if r.start_known and r.outcome != "unfinished")
    assert d["complete"] == len(complete) == sum(d["histogram"]["counts"])
    if complete:
        assert d["duration"]["max_ns"] == complete[-1]
    handoff = sorted(r.stolen_ts - r.start_ts for r in rows
                     if r.p_lost and r.stolen_ts is not None and r.start_known)
    assert d["handoff_found"] == len(handoff)
    if handoff:
        assert (d["handoff"]["max_ns"], d["handoff"]["sum_ns"]) == (handoff[-1], sum(handoff))
    ot = d["over_time"]
    assert sum(ot["syscalls"]) == len(rows) and sum(ot["p_lost"]) == d["p_lost"]
    assert sum(ot["handoffs"]) == len(handoff)
    by_count = Counter(r.stack_id for r in rows)
    top = d["stacks"]["by_count"]
    assert top[0]["count"] == max(by_count.values())
    assert [s["count"] for s in top] == sorted(by_count.values(), reverse=True)[:5]
    assert all(s["frames"] for s in top if s["stack_id"] > 0)
    longest = [x["duration_ns"] for x in d["longest"]]
    assert longest == sorted((r.duration_ns for r in rows), reverse=True)[:len(longest)]


def test_syscallblock_hands_off_its_p(store: Store) -> None:
    """GOMAXPROCS(1) with long blocking reads: syscalls lose the only P to
    another M, and each handoff lies inside its syscall."""
    d = syscall_summary(store.engine, store.get("go1.27-syscallblock.trace"))
    assert d["p_lost"] > 0 and d["handoff_found"] > 0
    assert 0 <= d["handoff"]["max_ns"] <= d["duration"]["max_ns"]
    assert d["stacks"]["by_total"][0]["frames"][0]["function"] == "syscall.read"


def _net_rows(store: Store, trace_id: int) -> list[object]:
    return store.rows("SELECT rid, from_state, start_ts, end_ts, stack_id, id FROM "
                      "interval_view WHERE trace_id = :t AND resource = 'goroutine' AND "
                      "state = 'Waiting' AND reason = 'network'", t=trace_id)


@pytest.mark.parametrize("name", ["go1.27-connleak.trace", "go1.27-httpnet.trace",
                                  "go1.27-syscallblock.trace"])
def test_netpoll_equals_sql(store: Store, name: str) -> None:
    f = store.get(name)
    rows = _net_rows(store, f.trace_id)
    d = netpoll_summary(store.engine, f)
    last_iv = {r.goid: r.last_interval for r in store.rows(
        "SELECT goid, last_interval FROM goroutines WHERE trace_id = :t", t=f.trace_id)}
    unfinished = [r for r in rows if r.id == last_iv[r.rid]]
    assert d["count"] == len(rows)
    assert d["goroutines"] == len({r.rid for r in rows})
    assert d["unfinished"] == d["parked_at_end"] == len(unfinished)
    complete = sorted(r.end_ts - r.start_ts for r in rows
                      if r.from_state != "Undetermined" and r.id != last_iv[r.rid])
    assert d["complete"] == len(complete)
    assert d["histogram"] == log_histogram(complete)
    assert d["total_ns"] == sum(r.end_ts - r.start_ts for r in rows)
    # Parked at each bin start, counted by hand.
    ot = d["over_time"]
    for k in (0, len(ot["parked"]) // 2, len(ot["parked"]) - 1):
        t = ot["edges"][k]
        assert ot["parked"][k] == sum(1 for r in rows if r.start_ts <= t < r.end_ts)


def test_connleak_parked_forever(store: Store) -> None:
    """connleak's leaked connections: hundreds of goroutines still parked in
    the netpoller at the end, the count growing over the trace."""
    d = netpoll_summary(store.engine, store.get("go1.27-connleak.trace"))
    assert d["parked_at_end"] > 100
    parked = d["over_time"]["parked"]
    assert parked[-1] > parked[len(parked) // 4] > parked[0]
    assert d["stacks"]["by_total"][0]["frames"][0]["function"] == "internal/poll.(*FD).Read"


def test_log_histogram_edges() -> None:
    h = log_histogram([0, 1, 9, 10, 11, 100, 1000])
    assert sum(h["counts"]) == 7 and h["zero"] == 1
    # An exact power of ten starts its own bin.
    edges, counts = h["edges"], h["counts"]
    for v in (1, 10, 100, 1000):
        i = max(j for j in range(len(edges) - 1) if edges[j] <= v * (1 + 1e-12))
        assert counts[i] >= 1
    assert log_histogram([]) == {"edges": [], "counts": [], "zero": 0}


def test_api(samples_server: Served, sample_ids: dict[str, int], store: Store) -> None:
    name = "go1.27-syscallblock.trace"
    tid = sample_ids[name]
    f = store.get(name)
    r = samples_server.get(f"/api/traces/{tid}/syscalls/summary", params={"top": 3})
    assert r.status_code == 200
    assert r.json() == syscall_summary(store.engine, f, top=3)
    mid = (f.first_ts + f.last_ts) // 2
    r = samples_server.get(f"/api/traces/{tid}/syscalls/summary", params={"t1": mid})
    assert r.json()["count"] == sum(1 for x in _sys_rows(store, tid) if x.start_ts >= mid)
    r = samples_server.get(f"/api/traces/{sample_ids['go1.27-connleak.trace']}/netpoll")
    assert r.status_code == 200 and r.json()["parked_at_end"] > 100
    assert samples_server.get(f"/api/traces/{tid}/netpoll",
                              params={"top": 0}).status_code == 400
    assert samples_server.get(f"/api/traces/{tid}/syscalls/summary",
                              params={"t1": "soon"}).status_code == 400
    assert samples_server.get("/api/traces/999999/netpoll").status_code == 404
    assert samples_server.get("/api/traces/999999/syscalls/summary").status_code == 404


@pytest.mark.parametrize("name", SAMPLES)
def test_summaries_part_by_part_equal_one_pass(store: Store, name: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The syscall and netpoll summaries read a few rows at a time (parts of
    7 syscalls, of 11 interval rows) equal those of one pass, windows too."""
    from ingest.derive import frame_layout
    from ingest.views import syscalls

    f = store.get(name)
    mid = (f.first_ts + f.last_ts) // 2
    for t1, t2 in ((None, None), (mid, None), (None, mid)):
        monkeypatch.setattr(frame_layout, "GATHER_ROWS", 1 << 40)
        monkeypatch.setattr(syscalls, "_ROWS", 1 << 40)
        whole = (syscalls._syscall_summary(store.engine, f, t1, t2),
                 syscalls._netpoll_summary(store.engine, f, t1, t2))
        monkeypatch.setattr(frame_layout, "GATHER_ROWS", 7)
        monkeypatch.setattr(syscalls, "_ROWS", 11)
        assert (syscalls._syscall_summary(store.engine, f, t1, t2),
                syscalls._netpoll_summary(store.engine, f, t1, t2)) == whole, (t1, t2)
