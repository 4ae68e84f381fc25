"""Diagnostic rules on real workload traces (Go 1.27.3): each rule is raised by
the workload that reproduces its problem, with numbers re-derived here from the
database by plain SQL and arithmetic, and the healthy control raises nothing."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.diagnose import RULES, ConfigError, diagnose, load_config, rule_defaults
from ingest.diagnose.config import parse_config
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.histo import nearest_rank
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow

GO = "1.27.3"
WORKLOADS = ("syscallblock", "schedlatency", "goroutineleak", "connleak", "mutex",
             "gcpressure", "httpnet", "healthy", "timers")
ALL_RULES = {r.id for r in RULES}


class DB:
    def __init__(self, engine: Engine, frames: FrameStore, ids: dict[str, int]) -> None:
        self.engine, self.frames, self.ids = engine, frames, ids

    def report(self, workload: str, config: Any = None) -> dict[str, Any]:
        return diagnose(self.engine, self.frames.get(self.ids[workload]), config)

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DB]:
    d = tmp_path_factory.mktemp("diagnose")
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    ids = {w: ingest_trace_file(engine, workload_trace(GO, w), w, data_dir=d).id
           for w in WORKLOADS}
    yield DB(engine, FrameStore(engine, d), ids)
    engine.dispose()


def findings(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == rule]


def only(report: dict[str, Any], rule: str) -> dict[str, Any]:
    fs = findings(report, rule)
    assert len(fs) == 1, [f["rule"] for f in report["findings"]]
    return fs[0]


def assert_links(f: dict[str, Any], trace_id: int) -> None:
    assert f["link"].startswith(f"/traces/{trace_id}/timeline?mode=")
    for r in f["ranges"]:
        assert r["t1"] < r["t2"] or r["t1"] == r["t2"] - 1
        assert f"t1={r['t1']}&t2={r['t2']}" in r["link"]
        if r["g"] is not None and "mode=g" in r["link"]:
            assert f"&g={r['g']}" in r["link"]
    for g in f["goroutines"]:
        assert g["link"] == f"/traces/{trace_id}/goroutines/{g['goid']}"


# --------------------------------------------------------------------------
# the control


def test_healthy_control_raises_nothing(db: DB) -> None:
    rep = db.report("healthy")
    assert rep["findings"] == []
    # Rules that read an OS recording (poller, sched) are skipped: the trace has none.
    assert {r["rule"]: r["status"] for r in rep["rules"]} == {
        r.id: "skipped" if r.requires - {"frames"} else "clear" for r in RULES}


@pytest.mark.parametrize("workload", ["timers"])
def test_other_quiet_workloads_raise_nothing(db: DB, workload: str) -> None:
    assert db.report(workload)["findings"] == []


# --------------------------------------------------------------------------
# syscalls


def runnable_rows(db: DB, tid: int) -> list[tuple[int, int, int]]:
    return [(int(r.rid), int(r.start_ts), int(r.end_ts)) for r in db.rows(
        "SELECT rid, start_ts, end_ts FROM interval_view WHERE trace_id = :t "
        "AND resource = 'goroutine' AND state = 'Runnable'", t=tid)]


def overlap(rows: list[tuple[int, int, int]], a: int, b: int) -> int:
    return sum(max(0, min(e, b) - max(s, a)) for _g, s, e in rows)


def union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def syscall_rows(db: DB, tid: int) -> list[Any]:
    return db.rows("SELECT goid, start_ts, end_ts, duration_ns, m, p, start_known, p_lost, "
                   "stolen_ts, stolen_by_m FROM syscalls WHERE trace_id = :t", t=tid)


def held_until(r: Any) -> int:
    if r.p_lost:
        return int(r.stolen_ts) if r.stolen_ts is not None else int(r.start_ts)
    return int(r.end_ts)


def test_blocking_syscall_gomaxprocs1_long_read(db: DB) -> None:
    tid = db.ids["syscallblock"]
    f = only(db.report("syscallblock"), "syscall.blocking")
    cfg = f["thresholds"]
    run = runnable_rows(db, tid)
    hit = []
    for r in syscall_rows(db, tid):
        if r.duration_ns >= cfg["long_syscall_ns"] and held_until(r) > r.start_ts:
            w = overlap(run, int(r.start_ts), held_until(r))
            if w > 0:
                hit.append((r, w))
    assert hit
    m = f["measures"]
    assert m["syscalls"] == len(hit)
    assert m["syscall_ns"] == sum(int(r.end_ts) - int(r.start_ts) for r, _ in hit)
    assert m["p_held_ns"] == sum(held_until(r) - int(r.start_ts) for r, _ in hit)
    total = sum(overlap(run, a, b) for a, b in union(
        [(int(r.start_ts), held_until(r)) for r, _ in hit]))
    assert m["runnable_waiting_ns"] == total >= cfg["min_waiting_ns"]
    assert m["gomaxprocs"] == 1
    # Threads blocked at once: the most hit syscalls overlapping at any start.
    spans = [(int(r.start_ts), int(r.end_ts)) for r, _ in hit]
    assert m["max_threads_blocked"] == max(sum(1 for a, b in spans if a <= t < b)
                                           for t, _ in spans) > 1
    longest = max(hit, key=lambda x: x[0].duration_ns)[0]
    assert m["longest_ns"] == longest.duration_ns and m["longest_goid"] == longest.goid
    # Each evidence range is one syscall row: [start, end), its goroutine and thread.
    rows = {(int(r.goid), int(r.start_ts)): r for r, _ in hit}
    for ev in f["ranges"]:
        r = rows[(ev["g"], ev["t1"])]
        assert ev["t2"] == r.end_ts and ev["duration_ns"] == r.end_ts - r.start_ts
        assert ev["m"] == r.m and f"m={r.m}" in ev["link"]
    # Who waited: the CPU-bound goroutines of the workload (main.main.func4).
    spinners = {int(r.goid) for r in db.rows(
        "SELECT goid FROM goroutines WHERE trace_id = :t AND start_function = 'main.main.func4'",
        t=tid)}
    assert len(spinners) == 4
    assert spinners <= {g["goid"] for g in f["goroutines"]}
    # The stacks are the blocking reads (and fsyncs) of the workload.
    fns = {fr["function"] for s in f["stacks"] for fr in s["frames"]}
    assert "syscall.Read" in fns
    assert f["severity"] in ("warning", "critical")
    assert "GOMAXPROCS=1" in f["summary"] and f"{len(hit)} syscalls" in f["summary"]
    assert_links(f, tid)


def test_slow_handoff(db: DB) -> None:
    tid = db.ids["syscallblock"]
    f = only(db.report("syscallblock"), "syscall.slow-handoff")
    cfg = f["thresholds"]
    run = runnable_rows(db, tid)
    hit = [r for r in syscall_rows(db, tid)
           if r.start_known and held_until(r) - r.start_ts >= cfg["handoff_ns"]
           and overlap(run, int(r.start_ts), held_until(r)) >= cfg["min_waiting_each_ns"]]
    m = f["measures"]
    held = sorted(held_until(r) - int(r.start_ts) for r in hit)
    assert m["syscalls"] == len(hit) >= cfg["min_syscalls"]
    assert m["handoff_max_ns"] == held[-1]
    assert m["handoff_p50_ns"] == nearest_rank(held, 0.5)  # type: ignore[arg-type]
    assert m["kept_p"] == sum(1 for r in hit if not r.p_lost)
    assert m["runnable_waiting_ns"] == sum(overlap(run, a, b) for a, b in union(
        [(int(r.start_ts), held_until(r)) for r in hit]))
    by_start = {(int(r.goid), int(r.start_ts)): r for r in hit}
    for ev in f["ranges"]:
        r = by_start[(ev["g"], ev["t1"])]
        assert ev["t2"] == held_until(r) and ev["duration_ns"] == ev["t2"] - ev["t1"]
        if r.p_lost:
            assert f"taken by M{r.stolen_by_m}" in ev["label"]
        assert f"mode=p&t1={ev['t1']}&t2={ev['t2']}&p={r.p}" in ev["link"]


# --------------------------------------------------------------------------
# scheduler latency


def latencies(db: DB, tid: int) -> list[tuple[int, int, int]]:
    """(latency, goid, runnable_ts) of every Runnable spell (one Runnable
    interval or several in a row) followed by Running, whose start is known."""
    rows = db.rows("SELECT rid, state, from_state, start_ts FROM interval_view "
                   "WHERE trace_id = :t AND resource = 'goroutine' ORDER BY id", t=tid)
    out = []
    spell: Any = None
    for prev, cur in zip([None, *rows[:-1]], rows, strict=True):
        same = prev is not None and prev.rid == cur.rid
        if cur.state == "Runnable" and not (same and prev.state == "Runnable"):
            spell = cur
        if (same and cur.state == "Running" and prev.state == "Runnable"
                and spell.from_state != "Undetermined"):
            out.append((int(cur.start_ts) - int(spell.start_ts), int(cur.rid),
                        int(spell.start_ts)))
    return out


def test_sched_latency_cpu_bound_over_gomaxprocs(db: DB) -> None:
    tid = db.ids["schedlatency"]
    f = only(db.report("schedlatency"), "sched.latency")
    lat = sorted(x[0] for x in latencies(db, tid))
    m = f["measures"]
    assert m["samples"] == len(lat) >= f["thresholds"]["min_samples"]
    assert m["p99_ns"] == nearest_rank(lat, 0.99)  # type: ignore[arg-type]
    assert m["p50_ns"] == nearest_rank(lat, 0.5)  # type: ignore[arg-type]
    assert m["max_ns"] == lat[-1]
    assert m["p99_ns"] >= f["thresholds"]["p99_ns"]
    assert m["gomaxprocs"] == 2
    over = [x for x in latencies(db, tid) if x[0] >= f["thresholds"]["p99_ns"]]
    assert m["over_threshold"] == len(over) and m["over_ns"] == sum(x[0] for x in over)
    # The worst waits are the evidence, each exactly one Runnable interval.
    worst = sorted(latencies(db, tid), key=lambda x: (-x[0], x[2]))
    assert f["ranges"][0]["duration_ns"] == worst[0][0]
    assert (f["ranges"][0]["g"], f["ranges"][0]["t1"]) == (worst[0][1], worst[0][2])
    for ev in f["ranges"]:
        assert ev["t2"] - ev["t1"] == ev["duration_ns"]
    spinners = {int(r.goid) for r in db.rows(
        "SELECT goid FROM goroutines WHERE trace_id = :t AND start_function = 'main.main.func1'",
        t=tid)}
    assert {g["goid"] for g in f["goroutines"]} & spinners
    assert_links(f, tid)


def test_sched_latency_also_in_syscallblock_but_not_in_control(db: DB) -> None:
    assert findings(db.report("syscallblock"), "sched.latency")
    assert not findings(db.report("healthy"), "sched.latency")
    assert not findings(db.report("goroutineleak"), "sched.latency")


# --------------------------------------------------------------------------
# goroutine leak


def test_goroutine_leak_grouped_by_blocking_stack(db: DB) -> None:
    tid = db.ids["goroutineleak"]
    rep = db.report("goroutineleak")
    assert [f["rule"] for f in rep["findings"]] == ["goroutine.leak"]
    f = rep["findings"][0]
    leaked = {int(r.goid) for r in db.rows(
        "SELECT goid FROM goroutines WHERE trace_id = :t AND created_ts IS NOT NULL "
        "AND ended_ts IS NULL AND final_state = 'Waiting' "
        "AND start_function = 'main.handle.func1'", t=tid)}
    ended = db.rows("SELECT count(*) AS n FROM goroutines WHERE trace_id = :t "
                    "AND start_function = 'main.handle.func1' AND ended_ts IS NOT NULL", t=tid)
    m = f["measures"]
    assert m["goroutines"] == len(leaked) >= f["thresholds"]["min_goroutines"]
    assert ended[0].n > 0  # the fast requests' workers did end
    assert m["reason"] == "chan send" and m["start_functions"] == ["main.handle.func1"]
    assert {g["goid"] for g in f["goroutines"]} <= leaked
    (stack,) = f["stacks"]
    assert stack["stack_id"] == m["stack_id"] and stack["count"] == len(leaked)
    assert [fr["function"] for fr in stack["frames"][:2]] == ["runtime.chansend1",
                                                             "main.handle.func1"]
    # Each leaked goroutine's last interval: Waiting on 'chan send' at that stack.
    last = db.rows("SELECT v.rid, v.reason, v.stack_id FROM interval_view v JOIN goroutines g "
                   "ON g.trace_id = v.trace_id AND v.id = g.last_interval "
                   "WHERE g.trace_id = :t AND g.start_function = 'main.handle.func1' "
                   "AND g.ended_ts IS NULL", t=tid)
    assert {(int(r.rid), r.reason, int(r.stack_id)) for r in last} == {
        (g, "chan send", m["stack_id"]) for g in leaked}
    assert f"{len(leaked)} goroutines" in f["summary"]
    assert_links(f, tid)


# --------------------------------------------------------------------------
# netpoller


def network_waits(db: DB, tid: int) -> list[Any]:
    return db.rows(
        "SELECT rid, from_state, start_ts, end_ts, stack_id, "
        "LEAD(id) OVER (PARTITION BY rid ORDER BY id) AS next_id, reason, state "
        "FROM interval_view WHERE trace_id = :t AND resource = 'goroutine'", t=tid)


def test_parked_leak_connections_never_closed(db: DB) -> None:
    tid = db.ids["connleak"]
    f = only(db.report("connleak"), "netpoll.parked-leak")
    rows = [r for r in network_waits(db, tid) if r.state == "Waiting" and r.reason == "network"]
    never = [r for r in rows if r.next_id is None and r.from_state != "Undetermined"]
    fr = db.frames.get(tid)
    mid = fr.first_ts + (fr.last_ts - fr.first_ts) // 2
    m = f["measures"]
    assert m["parked_at_end"] == len(never) >= f["thresholds"]["min_parked"]
    assert m["parked_at_mid"] == sum(1 for r in rows if r.start_ts <= mid < r.end_ts)
    assert m["parked_at_start"] == sum(1 for r in rows if r.start_ts <= fr.first_ts < r.end_ts)
    assert m["parked_at_end"] >= f["thresholds"]["growth"] * max(1, m["parked_at_start"])
    assert m["first_parked_ts"] == min(r.start_ts for r in never)
    assert sum(s["count"] for s in f["stacks"]) == len(never)
    assert {g["goid"] for g in f["goroutines"]} <= {int(r.rid) for r in never}
    assert f"{len(never)} goroutines parked" in f["summary"]
    assert_links(f, tid)


def test_parked_leak_not_on_healthy_or_httpnet(db: DB) -> None:
    for w in ("healthy", "httpnet"):
        assert not findings(db.report(w), "netpoll.parked-leak")


def test_netpoll_long_tail(db: DB) -> None:
    # Whether httpnet's waits have a long tail at the defaults depends on the
    # host (a busy one raises the p50: 1.7 ms against p99 9.6 ms in one run),
    # so the rule must be raised exactly when the waits, re-derived here, meet
    # the defaults; with thresholds these waits meet, its numbers are checked.
    tid = db.ids["httpnet"]
    durs = sorted(int(r.end_ts) - int(r.start_ts) for r in network_waits(db, tid)
                  if r.state == "Waiting" and r.reason == "network" and r.next_id is not None
                  and r.from_state != "Undetermined")
    p50, p99 = nearest_rank(durs, 0.5), nearest_rank(durs, 0.99)
    assert p50 is not None and p99 is not None
    d = rule_defaults()["netpoll.long-tail"]
    meets = len(durs) >= d["min_waits"] and p99 >= d["p99_ns"] and p99 >= d["tail_ratio"] * p50
    assert bool(findings(db.report("httpnet"), "netpoll.long-tail")) == meets
    ratio = math.floor(p99 / max(p50, 1) * 100) / 100  # met by these waits, no rounding
    assert ratio > 1.0  # network waits are never all alike
    cfg = parse_config({"netpoll.long-tail": {"p99_ns": p99, "tail_ratio": ratio}},
                       rule_defaults())
    f = only(db.report("httpnet", cfg), "netpoll.long-tail")
    m = f["measures"]
    assert m["waits"] == len(durs)
    assert m["p50_ns"] == p50
    assert m["p99_ns"] == p99
    assert m["p99_ns"] >= f["thresholds"]["tail_ratio"] * m["p50_ns"]
    assert m["tail_waits"] == sum(1 for d in durs if d >= m["p99_ns"])
    assert not findings(db.report("healthy"), "netpoll.long-tail")
    assert_links(f, tid)


# --------------------------------------------------------------------------
# lock contention and GC


def test_lock_contention(db: DB) -> None:
    tid = db.ids["mutex"]
    f = only(db.report("mutex"), "sync.contention")
    wg = {int(r.stack_id) for r in db.rows(
        "SELECT DISTINCT stack_id FROM stacks WHERE trace_id = :t "
        "AND function = 'sync.(*WaitGroup).Wait'", t=tid)}
    blocks = [r for r in db.rows(
        "SELECT rid, start_ts, end_ts, stack_id FROM interval_view WHERE trace_id = :t "
        "AND resource = 'goroutine' AND state = 'Waiting' AND reason = 'sync'", t=tid)
        if int(r.stack_id) not in wg]
    total = sum(int(r.end_ts) - int(r.start_ts) for r in blocks)
    fr = db.frames.get(tid)
    m = f["measures"]
    assert m["blocks"] == len(blocks) and m["blocked_ns"] == total
    share = round(total / (fr.last_ts - fr.first_ts), 4)
    assert m["share"] == share >= f["thresholds"]["min_share"]
    assert m["top_stack_ns"] == f["stacks"][0]["total_ns"]
    assert sum(s["total_ns"] for s in f["stacks"]) <= total
    assert not findings(db.report("healthy"), "sync.contention")
    assert_links(f, tid)


def test_gc_pressure(db: DB) -> None:
    tid = db.ids["gcpressure"]
    f = only(db.report("gcpressure"), "gc.pressure")
    m = f["measures"]
    fr = db.frames.get(tid)
    gcs = db.rows("SELECT count(*) AS n FROM ranges WHERE trace_id = :t AND kind = 'gc'", t=tid)
    stw = db.rows("SELECT coalesce(start_ts, :f) AS a, coalesce(end_ts, :l) AS b FROM ranges "
                  "WHERE trace_id = :t AND kind = 'stw' AND name NOT LIKE '%trace)'",
                  t=tid, f=fr.first_ts, l=fr.last_ts)
    assert m["gcs"] == gcs[0].n >= 2
    assert m["stw_pauses"] == len(stw)
    assert m["stw_ns"] == sum(b - a for a, b in union([(r.a, r.b) for r in stw]))
    assert m["assist_share"] == round(m["assist_ns"] / (m["assist_ns"] + m["running_ns"]), 4)
    assert (m["assist_share"] >= f["thresholds"]["assist_share"]
            or m["stw_share"] >= f["thresholds"]["stw_share"])
    assert m["assist_ns"] > 0 and f["goroutines"]
    assert not findings(db.report("healthy"), "gc.pressure")


# --------------------------------------------------------------------------
# thresholds from a config file


def test_config_overrides_and_disables(db: DB, tmp_path: Path) -> None:
    cfg = tmp_path / "diag.toml"
    cfg.write_text('disabled = ["goroutine.leak"]\n\n'
                   '["sched.latency"]\np99_ns = 10_000_000_000\nmax_ns = 10_000_000_000\n')
    conf = load_config(cfg, rule_defaults())
    rep = db.report("syscallblock", conf)
    assert not findings(rep, "sched.latency")
    status = {r["rule"]: r["status"] for r in rep["rules"]}
    assert status["goroutine.leak"] == "disabled" and status["sched.latency"] == "clear"
    assert rep["config"] == str(cfg)
    # Lowering a threshold raises a finding the defaults do not.
    low = parse_config({"netpoll.long-tail": {"min_waits": 1, "p99_ns": 0, "tail_ratio": 0}},
                       rule_defaults())
    assert findings(db.report("connleak", low), "netpoll.long-tail")


@pytest.mark.parametrize("body, message", [
    ('["no.such.rule"]\nx = 1\n', "unknown rule"),
    ('["sched.latency"]\np99 = 1\n', "has no threshold"),
    ('["sched.latency"]\np99_ns = "5ms"\n', "must be a number"),
    ('["sched.latency"]\np99_ns = -1\n', "must not be negative"),
    ('disabled = ["nope"]\n', "unknown rule"),
    ("p99_ns = \n", "not valid TOML"),
])
def test_bad_config_is_an_error(tmp_path: Path, body: str, message: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_config(cfg, rule_defaults())
