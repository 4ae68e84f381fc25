"""``gmpscope live --os`` end to end: a real Go service under load, a real
collector with its one eBPF session, a real ``gmpscope serve`` (SQLite and PostgreSQL).

Each window gets its OS recording attached (poller_events, os_sched_intervals),
cut by the trace's own wall-clock span; the per-second OS numbers the server
stored are recounted from those rows, read with plain SQL (sums of clipped
spans, a count of epoll returns; for the off-CPU time each Running interval
against each of its thread's OS intervals, every pair's clipped overlap summed
with numpy: the same interval join in SQL took 2-11 s a bin, nested loops over
thousands of rows each side) and must agree exactly (docs/live.md, "The OS side").
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.live import sessions as live
from ingest.live.stats import bin_edges
from ingest.store.db import make_engine
from tests.support.demo import Demo, LoadGen, demo_binaries, free_port, start_collector
from tests.support.ingest_fixtures import db_url  # noqa: F401 - a fixture
from tests.support.server import Served

#: A hang guard for the collector, not a speed limit.
GUARD_S = 300.0
WINDOWS = 3

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="recording the OS side with eBPF needs root"),
    pytest.mark.skipif(shutil.which("bpftrace") is None,
                       reason="recording the OS side needs bpftrace (apt-get install bpftrace)"),
]


def _one(engine: Engine, sql: str, **args: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql), args).scalar() or 0)


def _overlap_ns(engine: Engine, a: int, b: int, **args: Any) -> int:
    """Sum over every (Running interval, OS interval of kind ``k``) pair on the
    same M of their common time within [a, b): no order or nesting assumed."""
    with engine.connect() as conn:
        runs = np.array(conn.execute(text(
            "SELECT m, start_ts, end_ts FROM thread_intervals WHERE trace_id = :t "
            "AND state = 'Running' AND end_ts > :a AND start_ts < :b"),
            {**args, "a": a, "b": b}).all(), np.int64).reshape(-1, 3)
        os_side = np.array(conn.execute(text(
            "SELECT m, start_ts, end_ts FROM os_sched_intervals WHERE trace_id = :t "
            "AND m IS NOT NULL AND kind = :k AND end_ts > :a AND start_ts < :b"),
            {**args, "a": a, "b": b}).all(), np.int64).reshape(-1, 3)
    total = 0
    for m in np.intersect1d(runs[:, 0], os_side[:, 0]):
        r, o = runs[runs[:, 0] == m], os_side[os_side[:, 0] == m]
        for lo in range(0, len(r), 512):
            rb = r[lo:lo + 512]
            ends = np.minimum(np.minimum(rb[:, 2, None], o[None, :, 2]), b)
            starts = np.maximum(np.maximum(rb[:, 1, None], o[None, :, 1]), a)
            total += int((ends - starts).clip(min=0).sum())
    return total


def recount(engine: Engine, trace_id: int, first: int, last: int) -> list[dict[str, int]]:
    """Per bin, the OS numbers from the attached rows, in SQL."""
    edges = [int(e) for e in bin_edges(first, last)]
    pg = engine.dialect.name == "postgresql"
    least, greatest = ("LEAST", "GREATEST") if pg else ("MIN", "MAX")  # SQLite: scalar MIN/MAX
    out = []
    with engine.connect() as conn:
        waits = conn.execute(text(
            "SELECT ts + COALESCE(duration_ns, 0), ready_fds FROM poller_events "
            "WHERE trace_id = :t AND kind = 'syscall' AND ts IS NOT NULL AND syscall IN "
            "('epoll_wait', 'epoll_pwait', 'epoll_pwait2')"), {"t": trace_id}).all()
    for k in range(len(edges) - 1):
        a, b = edges[k], edges[k + 1]
        last_bin = k == len(edges) - 2
        mine = [w for w in waits if a <= w[0] < b or (last_bin and w[0] == b)]
        args = {"t": trace_id, "a": a, "b": b}
        spans = (f"SELECT SUM({least}(end_ts, :b) - {greatest}(start_ts, :a)) "
                 "FROM os_sched_intervals "
                 "WHERE trace_id = :t AND m IS NOT NULL AND kind = :k AND end_ts > :a "
                 "AND start_ts < :b")
        running = (f"SELECT SUM({least}(end_ts, :b) - {greatest}(start_ts, :a)) "
                   "FROM thread_intervals "
                   "WHERE trace_id = :t AND state = 'Running' AND end_ts > :a AND start_ts < :b "
                   "AND m IN (SELECT m FROM os_sched_intervals WHERE trace_id = :t "
                   "AND m IS NOT NULL)")
        out.append({
            "epoll_waits": len(mine),
            "epoll_ready": sum(len(w[1].split(",")) for w in mine if w[1]),
            "threads_oncpu_ns": _one(engine, spans, **args, k="on_cpu"),
            "threads_waiting_ns": _one(engine, spans, **args, k="waiting"),
            "offcpu_waiting_ns": _overlap_ns(engine, a, b, t=trace_id, k="waiting"),
            "offcpu_asleep_ns": _overlap_ns(engine, a, b, t=trace_id, k="asleep"),
            "running_ns": _one(engine, running, **args),
        })
    return out


@pytest.mark.slow
def test_live_os_attaches_each_window_and_agrees(tmp_path: Path, db_url: str) -> None:  # noqa: F811
    bindir = demo_binaries()
    demo = Demo(bindir)
    load = LoadGen(bindir, demo.url, rps=100, clients=4)
    log = tmp_path / "collector.log"
    try:
        with Served(tmp_path / "data", db_url=db_url) as srv:
            col = start_collector(demo.url, srv.url, "os", log, count=WINDOWS, extra=("--os",))
            assert col.wait(GUARD_S) == 0, log.read_text()[-3000:]
            engine = make_engine(db_url)
            segs = live.segments(engine, "os", 10)
            # Bad input: an unknown segment or session is a 404 with one line.
            gone = srv.post("/api/live/sessions/os/segments/999999/os", json={})
            assert gone.status_code == 404 and "no segment 999999" in gone.json()["error"]
            nobody = srv.post("/api/live/sessions/nobody/segments/1/os", json={})
            assert nobody.status_code == 404
            rows = live.seconds_series(engine, "os")
            counts = live.session_counts(engine, "os")
    finally:
        load.stop()
        demo.stop()
    text_log = log.read_text()
    assert f"OS side attached to {WINDOWS} windows (0 failed, 0 without" in text_log, \
        text_log[-3000:]
    assert len(segs) == WINDOWS
    assert counts["os_seconds"] == counts["seconds"] == len(rows) > 0

    for seg in segs:
        t, first, last = seg["trace_id"], seg["first_ts"], seg["last_ts"]
        assert _one(engine, "SELECT COUNT(*) FROM poller_recordings WHERE trace_id = :t", t=t) == 1
        assert _one(engine, "SELECT COUNT(*) FROM os_sched_recordings WHERE trace_id = :t",
                    t=t) == 1
        # Cut by the trace's own span: every call returned inside the window.
        outside = _one(engine, "SELECT COUNT(*) FROM poller_events WHERE trace_id = :t AND "
                       "(ts + COALESCE(duration_ns, 0) < :a OR ts + COALESCE(duration_ns, 0) "
                       "> :b OR ts IS NULL)", t=t, a=first, b=last)
        assert outside == 0
        stored = sorted((r for r in rows if r["trace_id"] == t), key=lambda r: r["bin"])
        expected = recount(engine, t, first, last)
        assert len(stored) == len(expected)
        for got, want in zip(stored, expected, strict=True):
            assert {k: got[f"os_{k}"] for k in want} == want

    total = {k: sum(r[f"os_{k}"] for r in rows) for k in
             ("epoll_waits", "epoll_ready", "threads_oncpu_ns", "running_ns")}
    # 100 requests a second: the netpoller wakes up, threads run, goroutines run.
    assert all(v > 0 for v in total.values()), total
    engine.dispose()


def _sched_pid(engine: Engine, trace_id: int) -> int | None:
    with engine.connect() as conn:
        meta = conn.execute(text("SELECT meta FROM os_sched_recordings WHERE trace_id = :t"),
                            {"t": trace_id}).scalar()
    return None if meta is None else int(json.loads(meta)["pid"])


@pytest.mark.slow
def test_live_os_follows_a_restarted_target(tmp_path: Path) -> None:
    """The service dies and comes back on the same port (a new process): the windows
    without it have no OS side (not zeros), and the OS side follows the new process."""
    bindir = demo_binaries()
    port = free_port()
    demo = Demo(bindir, port)
    log = tmp_path / "collector.log"
    try:
        with Served(tmp_path / "data") as srv:
            col = start_collector(demo.url, srv.url, "restart", log, extra=("--os",))
            try:
                def os_windows() -> int:
                    got = srv.get("/api/live/sessions/restart")
                    return int(got.json()["os_seconds"]) if got.status_code == 200 else 0

                wait_for("two windows with their OS side", lambda: os_windows() >= 2)
                old_pid = demo.proc.pid
                demo.stop()
                demo = Demo(bindir, port)
                wait_for("the OS side restarted",
                         lambda: "again (the target restarted)" in log.read_text())
                before = os_windows()
                wait_for("a window of the new process with its OS side",
                         lambda: os_windows() >= before + 1)
            finally:
                col.terminate()
                col.wait(GUARD_S)
            engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}")
            segs = live.segments(engine, "restart", 100)
            rows = live.seconds_series(engine, "restart")
    finally:
        demo.stop()
    text_log = log.read_text()
    assert f"recording pid {demo.proc.pid} again (the target restarted)" in text_log, text_log
    with_os = {r["trace_id"] for r in rows if r["os_epoll_waits"] is not None}
    pids = {s["trace_id"]: _sched_pid(engine, s["trace_id"]) for s in segs}
    # Every window with an OS side was recorded from the process it traced.
    assert {pids[t] for t in with_os} == {old_pid, demo.proc.pid}
    assert all(pids[t] is None for t in pids if t not in with_os)
    engine.dispose()


def wait_for(what: str, check: Any) -> None:
    deadline = time.monotonic() + GUARD_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
