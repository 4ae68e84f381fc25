"""Live sessions end to end: a real demo service (Go, net/http/pprof), a real
``gmpscope live`` collector and a real ``gmpscope serve``.

The per-second numbers the server computed from each window's frames are checked
against the same windows ingested offline and recounted from the database's
tables with plain SQL and Python (interval_view, syscalls, ranges, metrics): an
independent path to the same definitions (docs/live.md).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import Engine, text

from collectors.live.buffer import Window, WindowBuffer
from collectors.live.collector import Collector, Config, session_name_for
from ingest.derive.frames import FrameStore
from ingest.live import sessions as live
from ingest.live.retention import Retention, apply_retention
from ingest.live.stats import bin_edges
from ingest.load.pipeline import ingest_trace_file
from ingest.load.raw_copy import raw_path, read_raw
from ingest.store.db import make_engine
from tests.support.demo import Demo, LoadGen, demo_binaries, free_port, start_collector
from tests.support.server import SAMPLES, Served

#: A hang guard for waits on real processes, not a speed limit.
GUARD_S = 180.0


def wait_for(what: str, check: Callable[[], Any], guard: float = GUARD_S) -> Any:
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def bindir() -> Path:
    return demo_binaries()


# --------------------------------------------------------------------------
# recounting a window from the database, without the frames


def nearest_rank(values: list[int], q: float) -> int | None:
    if not values:
        return None
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


def recount(engine: Engine, trace_id: int, durations: list[int]) -> list[dict[str, Any]]:
    """Per-bin numbers of one trace from its SQL tables, bins as the server cut them."""
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id=:t"),
                                   {"t": trace_id}).one()
        ivs = conn.execute(text(
            "SELECT rid, state, from_state, reason, start_ts, end_ts FROM interval_view "
            "WHERE trace_id=:t AND resource='goroutine' ORDER BY rid, id"),
            {"t": trace_id}).all()
        sys_rows = conn.execute(text(
            "SELECT start_ts, end_ts, start_known, p_lost, stolen_ts FROM syscalls "
            "WHERE trace_id=:t"), {"t": trace_id}).all()
        spans = conn.execute(text(
            "SELECT kind, start_ts, end_ts FROM ranges WHERE trace_id=:t "
            "AND kind IN ('gc', 'stw')"), {"t": trace_id}).all()
        heap = conn.execute(text(
            "SELECT ts, value FROM metrics WHERE trace_id=:t AND "
            "name='/memory/classes/heap/objects:bytes' ORDER BY ts, seq"),
            {"t": trace_id}).all()
    edges = [first]
    for d in durations:
        edges.append(edges[-1] + d)
    assert edges[-1] == last, "the bins cover the window exactly"
    nb = len(durations)

    def bin_of(t: int) -> int | None:
        for k in range(nb):
            if edges[k] <= t < edges[k + 1] or (k == nb - 1 and t == edges[-1]):
                return k
        return None

    out: list[dict[str, Any]] = [defaultdict(int) for _ in range(nb)]
    sched: list[list[int]] = [[] for _ in range(nb)]
    net: list[list[int]] = [[] for _ in range(nb)]
    waiting_ns = [0.0] * nb
    lanes: dict[int, list[Any]] = defaultdict(list)
    for r in ivs:
        lanes[r.rid].append(r)
    for lane in lanes.values():
        for i, r in enumerate(lane):
            nxt = lane[i + 1] if i + 1 < len(lane) else None
            start = max(first, min(last, r.start_ts))
            end = max(first, min(last, r.end_ts))
            if i == 0 and r.from_state == "Undetermined":
                start = first  # in that state since the window began
            if r.from_state == "NotExist" and (k := bin_of(start)) is not None:
                out[k]["g_created"] += 1
            if r.state == "Waiting":
                for k in range(nb):
                    waiting_ns[k] += max(0, min(end, edges[k + 1]) - max(start, edges[k]))
            known = r.from_state != "Undetermined"
            if (nxt is not None and known and r.state == "Runnable" and nxt.state == "Running"
                    and (k := bin_of(end)) is not None):
                sched[k].append(end - start)
            if (nxt is not None and known and r.state == "Waiting" and r.reason == "network"
                    and (k := bin_of(end)) is not None):
                net[k].append(end - start)
    for s in sys_rows:
        if s.start_known and (k := bin_of(s.start_ts)) is not None:
            out[k]["syscalls"] += 1
        when = s.stolen_ts if s.stolen_ts is not None else s.end_ts
        if s.p_lost and (k := bin_of(when)) is not None:
            out[k]["p_handoffs"] += 1
    for k in range(nb):
        o = out[k]
        for key in ("g_created", "syscalls", "p_handoffs"):
            o[key] += 0  # present when zero too
        o["sched_n"] = len(sched[k])
        o["sched_p50_ns"] = nearest_rank(sched[k], 0.5)
        o["sched_p99_ns"] = nearest_rank(sched[k], 0.99)
        o["netpoll_waits"] = len(net[k])
        o["netpoll_p99_ns"] = nearest_rank(net[k], 0.99)
        o["g_waiting"] = waiting_ns[k] / (edges[k + 1] - edges[k])
        for col, kind in (("gc_ns", "gc"), ("stw_ns", "stw")):
            o[col] = sum(max(0, min(last if e is None else e, edges[k + 1])
                             - max(first if s is None else s, edges[k]))
                         for kd, s, e in spans if kd == kind)
        before = [v for ts, v in heap if ts <= edges[k + 1] and v is not None]
        o["heap_bytes"] = before[-1] if before else None
    return [dict(o) for o in out]


EXACT = ("g_created", "syscalls", "p_handoffs", "sched_n", "sched_p50_ns", "sched_p99_ns",
         "netpoll_waits", "netpoll_p99_ns", "gc_ns", "stw_ns", "heap_bytes")


# --------------------------------------------------------------------------
# end to end


@pytest.mark.slow
def test_session_fills_and_agrees_with_offline_ingest(tmp_path: Path, bindir: Path) -> None:
    demo = Demo(bindir)
    load = LoadGen(bindir, demo.url)
    try:
        with Served(tmp_path / "data") as srv:
            col = start_collector(demo.url, srv.url, "agree", tmp_path / "collector.log",
                                  count=4)
            assert col.wait(GUARD_S) == 0, (tmp_path / "collector.log").read_text()
            sessions = srv.get("/api/live/sessions").json()["sessions"]
            assert [s["name"] for s in sessions] == ["agree"]
            assert sessions[0]["target"] == demo.url and sessions[0]["segments"] == 4
            segs = srv.get("/api/live/sessions/agree/segments").json()["segments"]
            secs = srv.get("/api/live/sessions/agree/seconds").json()["seconds"]
            raw = {}
            for seg in segs:
                sha = srv.get(f"/api/traces/{seg['trace_id']}").json()["sha256"]
                raw[seg["id"]] = raw_path(srv.data_dir, sha)
            page = srv.get("/live/agree")
            assert page.status_code == 200
            # The windows stay out of the library's list unless asked for.
            windows = {seg["trace_id"] for seg in segs}
            listed = {t["id"] for t in srv.get("/api/traces").json()["traces"]}
            assert not windows & listed
            every = {t["id"] for t in srv.get("/api/traces?live_windows=1").json()["traces"]}
            assert windows <= every and listed <= every
    finally:
        load.stop()
        demo.stop()
    assert sorted(s["seq"] for s in segs) == [1, 2, 3, 4]
    # Back-to-back: each window starts right where the previous ended (one round trip).
    ordered = sorted(segs, key=lambda s: s["seq"])
    for a, b in zip(ordered, ordered[1:], strict=False):
        assert 0 <= b["wall_start_ns"] - a["wall_end_ns"] < 1e9
    offline = make_engine(f"sqlite:///{tmp_path / 'offline.db'}")
    for seg in segs:
        rows = sorted((s for s in secs if s["segment_id"] == seg["id"]), key=lambda s: s["bin"])
        assert rows, "every window has per-second rows"
        copy = tmp_path / f"window-{seg['seq']}.trace"
        copy.write_bytes(b"".join(read_raw(raw[seg["id"]])))
        res = ingest_trace_file(offline, copy, copy.name, data_dir=tmp_path / "offline")
        with offline.connect() as conn:
            first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id=:t"),
                                       {"t": res.id}).one()
        assert (first, last) == (seg["first_ts"], seg["last_ts"])
        edges = bin_edges(first, last)
        assert [r["duration_ns"] for r in rows] == [int(d) for d in edges[1:] - edges[:-1]]
        expected = recount(offline, res.id, [r["duration_ns"] for r in rows])
        for got, want in zip(rows, expected, strict=True):
            assert {k: got[k] for k in EXACT} == {k: want[k] for k in EXACT}
            assert got["g_waiting"] == pytest.approx(want["g_waiting"], rel=1e-9, abs=1e-9)
    # The service was busy: the numbers are not all zero.
    assert sum(s["syscalls"] for s in secs) > 0 and sum(s["netpoll_waits"] for s in secs) > 0
    offline.dispose()


@pytest.mark.slow
def test_target_killed_and_restarted_mid_session(tmp_path: Path, bindir: Path) -> None:
    port = free_port()
    demo = Demo(bindir, port)
    log = tmp_path / "collector.log"
    with Served(tmp_path / "data") as srv:
        col = start_collector(demo.url, srv.url, "restart", log)
        try:
            def stored() -> int:
                r = srv.get("/api/live/sessions/restart")
                return int(r.json()["segments"]) if r.status_code == 200 else 0

            wait_for("two windows", lambda: stored() >= 2)
            demo.stop()
            wait_for("a failed pull", lambda: "failed" in log.read_text())
            time.sleep(2.0)  # the target stays down a while: several failed pulls
            before = stored()
            demo = Demo(bindir, port)
            wait_for("windows after the restart", lambda: stored() >= before + 2)
            assert col.poll() is None, "the collector survived the target going away"
        finally:
            col.send_signal(signal.SIGTERM)
            code = col.wait(GUARD_S)
            demo.stop()
        session = srv.get("/api/live/sessions/restart").json()
        segs = srv.get("/api/live/sessions/restart/segments").json()["segments"]
    assert code == 0
    text_log = log.read_text()
    assert "retrying with backoff" in text_log and "target back after" in text_log
    assert session["target_failures"] >= 2
    back = [s for s in segs if s["note"].startswith("target back after")]
    assert len(back) == 1
    # The gap the collector reported is the one between the stored windows.
    assert back[0]["gap_before_ns"] > 2e9
    assert "target back after" in session["last_status"] or session["last_status"]


@pytest.mark.slow
def test_ingest_down_buffers_then_delivers_and_counts_drops(tmp_path: Path,
                                                            bindir: Path) -> None:
    demo = Demo(bindir)
    port = free_port()
    ingest = f"http://127.0.0.1:{port}"
    logs: list[str] = []
    c = Collector(Config(target=demo.url, ingest=ingest, session="buffered", window_s=0.2,
                         buffer=2, max_windows=5, max_backoff_s=1.0), logs.append)
    runner = threading.Thread(target=c.run, daemon=True)
    server: subprocess.Popen[bytes] | None = None
    try:
        runner.start()
        wait_for("five windows pulled", lambda: c.stats.pulled == 5)
        assert c.buffer.dropped == 3 and len(c.buffer) == 2
        assert any("ingest service" in m and "failed" in m for m in logs)
        data = tmp_path / "data"
        env = {k: v for k, v in os.environ.items() if k not in ("GMPSCOPE_TOKEN", "GMPSCOPE_DB")}
        server = subprocess.Popen(
            [sys.executable, "-m", "gmpscope", "serve", "--port", str(port), "--workers", "1",
             "--data-dir", str(data)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        runner.join(GUARD_S)
        assert not runner.is_alive()
        session = requests.get(f"{ingest}/api/live/sessions/buffered", timeout=60).json()
    finally:
        c.stop_event.set()
        demo.stop()
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(60)
    assert c.stats.sent == 2
    assert session["segments"] == 2 and session["dropped"] == 3
    assert any("ingest service back" in m for m in logs)
    assert any("dropped window #1" in m for m in logs)


@pytest.mark.slow
def test_retention_job_removes_old_detail_and_keeps_aggregates(
        tmp_path: Path, bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GMPSCOPE_LIVE_DETAIL_S", "3")
    monkeypatch.setenv("GMPSCOPE_LIVE_RETENTION_EVERY_S", "0.5")
    demo = Demo(bindir)
    try:
        with Served(tmp_path / "data") as srv:
            col = start_collector(demo.url, srv.url, "short", tmp_path / "c.log",
                                  window="500ms", count=2)
            assert col.wait(GUARD_S) == 0
            # Each window was stored with its detail (the collector logs the trace id);
            # retention may already have taken them by now.
            ids = [int(m) for m in re.findall(r"-> trace (\d+)", (tmp_path / "c.log").read_text())]
            assert len(ids) == 2

            def expired() -> bool:
                s = srv.get("/api/live/sessions/short").json()
                return bool(s["detail_segments"] == 0 and s["expired_segments"] == 2)

            wait_for("retention", expired)
            session = srv.get("/api/live/sessions/short").json()
            gone = [srv.get(f"/api/traces/{t}").status_code for t in ids]
            left = srv.get("/api/live/sessions/short/seconds").json()["seconds"]
            page = srv.get("/live/short")
    finally:
        demo.stop()
    assert set(gone) == {404}
    # The raw windows went with their traces (this server holds nothing else).
    assert not list((tmp_path / "data" / "traces").glob("*.trace*"))
    assert session["seconds"] == len(left) >= 2
    assert {r["trace_id"] for r in left} == {None}
    assert page.status_code == 200


# --------------------------------------------------------------------------
# in process: storage, pause, retention policy on real traces


def _add(engine: Engine, frames: FrameStore, data: Path, name: str, trace: Path, seq: int,
         start_ns: int) -> dict[str, Any]:
    return live.add_segment(engine, frames, data, name, trace, target="http://t", seq=seq,
                            wall_start_ns=start_ns, wall_end_ns=start_ns + 10**9, window_s=1.0)


def test_pause_refuses_segments_and_retention_policy(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    data = tmp_path / "data"
    frames = FrameStore(engine, data)
    traces = [p for p in SAMPLES if "timers" in p.name or "syscallblock" in p.name][:2]
    assert len(traces) == 2
    t0 = 1_800_000_000 * 10**9
    a = _add(engine, frames, data, "s", traces[0], 1, t0)
    live.set_state(engine, "s", "paused")
    with pytest.raises(live.SessionPaused):
        _add(engine, frames, data, "s", traces[1], 2, t0 + 10**9)
    assert live.get_session(engine, "s")["segments"] == 1  # type: ignore[index]
    live.set_state(engine, "s", "running")
    b = _add(engine, frames, data, "s", traces[1], 2, t0 + 100 * 10**9)
    n_secs = live.session_counts(engine, "s")["seconds"]
    assert n_secs == a["seconds"] + b["seconds"]
    with engine.connect() as conn:
        lo, hi = conn.execute(text("SELECT min(t_ns), max(t_ns) FROM live_seconds")).one()
    # The seconds carry the traces' own wall clock (when the samples were recorded).
    now1 = t0 + 71 * 10**9
    keep_s = (now1 - min(lo, t0)) / 1e9 + 3600
    policy = Retention(detail_s=60, keep_s=keep_s)
    # 70 s after the first window: only the first loses its detail.
    done = apply_retention(engine, data, policy, now_ns=now1)
    assert done == {"traces": 1, "segments": 0, "seconds": 0}
    assert live.session_counts(engine, "s") == {
        "detail_segments": 1, "expired_segments": 1, "seconds": n_secs, "os_seconds": 0}
    # Past the aggregate horizon of both: everything but the session goes.
    now2 = max(hi, t0 + 101 * 10**9) + int(keep_s * 1e9) + 10**9
    done = apply_retention(engine, data, policy, now_ns=now2)
    assert done["traces"] == 1 and done["segments"] == 2 and done["seconds"] == n_secs
    assert live.session_counts(engine, "s") == {
        "detail_segments": 0, "expired_segments": 0, "seconds": 0, "os_seconds": 0}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM traces")).scalar() == 0
    engine.dispose()


def test_buffer_drops_oldest_and_counts() -> None:
    buf = WindowBuffer(2)
    ws = [Window(i, b"go 1.27 trace", i, i + 1) for i in range(1, 5)]
    evicted = [buf.put(w) for w in ws]
    assert evicted == [None, None, ws[0], ws[1]]
    assert buf.dropped == 2 and len(buf) == 2
    head = buf.peek(0)
    assert head is ws[2]
    buf.done(head)
    assert buf.peek(0) is ws[3]


def test_default_session_name() -> None:
    assert session_name_for("http://127.0.0.1:6060") == "127.0.0.1-6060"
    assert session_name_for("http://[::1]:80/x") == "1--80"
    assert live.check_name(session_name_for("http://[::1]:80/x"))
