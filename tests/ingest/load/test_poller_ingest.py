"""Ingesting OS recordings (gmpscope record) and the queries over them.

Data: the real strace captures in tests/data/strace/ (made into recording
directories by tests/support/poller_recordings.py) and the Go 1.27 trace of the
same httpnet run; the slow test records connleak under a 40-descriptor limit.
Expected values come from poller.parquet itself, the decoded Go trace in the
database, or SQL over it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.load.delete import delete_trace
from ingest.load.poller import (
    BadRecordingError,
    ingest_recording_dir,
    read_recording,
)
from ingest.store import models
from ingest.store.db import make_engine
from ingest.store.traces import get_trace
from ingest.views.poller import (
    load_events,
    open_fds,
    os_syscalls,
    poller_marks,
    poller_page,
)
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.poller_recordings import make_recording

REPO = Path(__file__).resolve().parents[3]
CAPTURES = ("httpnet", "connleak", "connleak-attach", "pollmix", "uring_rw")


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")


@pytest.fixture(scope="module")
def recs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recs")
    out = {c: make_recording(c, root / c) for c in CAPTURES}
    out["httpnet+go"] = make_recording("httpnet", root / "httpnet-go", with_go_trace=True)
    return out


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory, recs: dict[str, Path]
           ) -> tuple[Engine, int, Path]:
    """The httpnet recording attached to its Go trace (found through meta.json)."""
    root = tmp_path_factory.mktemp("joined")
    eng = make_engine(f"sqlite:///{root / 'db.sqlite'}")
    res = ingest_recording_dir(eng, recs["httpnet+go"], data_dir=root / "data")
    assert res.attached is not None
    return eng, res.trace.id, root / "data"


def _count(engine: Engine, sql: str, **kw: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(sql), kw).scalar()


@pytest.mark.parametrize("capture", CAPTURES)
def test_counts_equal_the_parquet_rows(engine: Engine, tmp_path: Path, recs: dict[str, Path],
                                       capture: str) -> None:
    res = ingest_recording_dir(engine, recs[capture], data_dir=tmp_path / "data")
    assert res.attached is None and res.trace.created
    rows = pq.read_table(recs[capture] / "poller.parquet").to_pylist()
    tid = res.trace.id
    assert _count(engine, "SELECT count(*) FROM poller_events WHERE trace_id = :t",
                  t=tid) == len(rows)
    with engine.connect() as conn:
        by_name = dict(conn.execute(text(
            "SELECT syscall, count(*) FROM poller_events WHERE trace_id = :t GROUP BY syscall"),
            {"t": tid}).all())
        stored = conn.execute(text(
            "SELECT wall_ns, tid, syscall, fd, result, errno, duration_ns, timeout_ns, epfd, "
            "to_submit, min_complete FROM poller_events WHERE trace_id = :t ORDER BY seq"),
            {"t": tid}).all()
    assert by_name == dict(Counter(r["name"] for r in rows))
    assert [tuple(s) for s in stored] == [
        (r["ts_ns"], r["tid"], r["name"], r["fd"], r["result"], r["errno"], r["duration_ns"],
         r["timeout_ns"], r["epfd"], r["to_submit"], r["min_complete"]) for r in rows]
    # A standalone recording is a trace of its own: source poller, family os, its time
    # the wall clock.
    tr = get_trace(engine, tid)
    assert tr is not None and tr["source"] == "poller" and tr["family"] == "os"
    assert tr["first_ts"] == min(r["ts_ns"] for r in rows)
    # The same recording again is the same trace.
    again = ingest_recording_dir(engine, recs[capture], data_dir=tmp_path / "data")
    assert again.trace.id == tid and not again.trace.created


def test_attach_measures_the_recorders_alignment(joined: tuple[Engine, int, Path],
                                                 recs: dict[str, Path]) -> None:
    """The alignment measured against the stored trace equals what the recorder found
    with the decoded file (collectors.poller.gojoin): same offset, same matched count."""
    engine, tid, _ = joined
    meta = json.loads((recs["httpnet+go"] / "meta.json").read_text())["alignment"]
    with engine.connect() as conn:
        rec = conn.execute(text("SELECT * FROM poller_recordings WHERE trace_id = :t"),
                           {"t": tid}).one()._mapping
        ev = conn.execute(text("SELECT ts, wall_ns, tid, m FROM poller_events "
                               "WHERE trace_id = :t"), {"t": tid}).all()
        go_ms = {r[0] for r in conn.execute(text("SELECT m FROM threads WHERE trace_id = :t"),
                                            {"t": tid})}
    assert rec["method"] == meta["method"] == "clock-snapshot"
    assert rec["offset_ns"] == meta["offset_ns"]
    assert (rec["go_syscalls"], rec["matched"]) == (meta["go_syscalls"], meta["matched"])
    # The syscall pairs alone allow a narrow range of offsets around the snapshot's.
    assert rec["slack_ns"] is not None and 0 < rec["slack_ns"] < 100_000
    assert all(ts == wall - rec["offset_ns"] and m == t for ts, wall, t, m in ev)
    # Go 1.22+: M ids are thread ids; every M of the trace is a recorded thread.
    assert go_ms - {-1} <= {t for _, _, t, _ in ev}


def test_blocking_epoll_pwait_falls_outside_user_code_on_its_m(
        joined: tuple[Engine, int, Path]) -> None:
    """Each blocking epoll_pwait lands on its M lane while that M runs no goroutine
    (the netpoller blocks in the scheduler, between goroutines)."""
    engine, tid, data = joined
    f = FrameStore(engine, data).get(tid)
    iv = f.intervals
    running = (f.resource == models.GOROUTINE) & (f.state == models.RUNNING)
    ev = load_events(engine, tid)
    checked = 0
    for i in range(len(ev)):
        if ev["syscall"][i] != "epoll_pwait" or ev["duration_ns"][i] is None:
            continue
        if ev["timeout_ns"][i] == 0:
            continue  # non-blocking polls may run inside a goroutine (startTheWorld)
        start, end, m = ev["ts"][i], ev["ts"][i] + ev["duration_ns"][i], ev["m"][i]
        if start < f.first_ts or end > f.last_ts:
            continue
        on_m = running & (iv["m"] == m)
        assert on_m.any(), f"M{m} never runs a goroutine"
        overlap = on_m & (iv["start_ts"] < end) & (iv["end_ts"] > start)
        assert not overlap.any(), (ev["seq"][i], iv["g"][overlap].tolist())
        checked += 1
    assert checked >= 5
    # The same waits are marks on their M's lane in the timeline data.
    marks = poller_marks(engine, tid, f.first_ts, f.last_ts + 1, max_marks=100_000)
    waits = [mk for mk in marks["marks"] if mk["syscall"] == "epoll_pwait"]
    assert not marks["merged"] and len(waits) == sum(
        1 for i in range(len(ev)) if ev["syscall"][i] == "epoll_pwait"
        and f.first_ts <= ev["ts"][i] < f.last_ts + 1)


def test_marks_merge_when_too_many(joined: tuple[Engine, int, Path]) -> None:
    engine, tid, _ = joined
    tr = get_trace(engine, tid)
    assert tr is not None
    full = poller_marks(engine, tid, tr["first_ts"], tr["last_ts"] + 1, max_marks=100_000)
    few = poller_marks(engine, tid, tr["first_ts"], tr["last_ts"] + 1, max_marks=40)
    assert few["merged"] and len(few["marks"]) < full["total"]
    assert sum(mk["count"] for mk in few["marks"]) == full["total"]
    for m in {mk["m"] for mk in full["marks"]}:
        assert sum(mk["count"] for mk in few["marks"] if mk["m"] == m) == sum(
            1 for mk in full["marks"] if mk["m"] == m)


def test_p_handoffs_agree_with_the_go_syscalls_table(joined: tuple[Engine, int, Path]) -> None:
    """Calls shown as having made the runtime hand off a P: a Go syscall on the same M
    with p_lost contains each of them (checked by SQL against the syscalls table)."""
    engine, tid, _ = joined
    o = os_syscalls(engine, tid, limit=10_000)
    assert o["joined"] and o["p_handoffs"]["calls"] > 0
    assert 0 < o["inside_go_syscall"] <= o["calls"]
    sql = ("SELECT count(*) FROM syscalls s JOIN row_ranges r ON r.trace_id = :t AND "
           "r.table_name = 'syscalls' AND s.id BETWEEN r.first_id AND r.last_id "
           "WHERE s.m = :m AND s.start_ts <= :a AND s.end_ts >= :b AND s.p_lost")
    for c in o["p_handoffs"]["slowest"]:
        gs = c["go_syscall"]
        assert gs["p_lost"] and gs["start_ts"] <= c["ts"]
        assert c["ts"] + c["duration_ns"] <= gs["end_ts"]
        assert _count(engine, sql, t=tid, m=c["m"], a=c["ts"], b=c["ts"] + c["duration_ns"]) == 1
    # The slowest list is sorted and by_name accounts for every timed call.
    durs = [c["duration_ns"] for c in o["slowest"]]
    assert durs == sorted(durs, reverse=True)
    assert sum(r["count"] for r in o["by_name"]) == o["calls"]


def test_fd_leak_line_only_climbs(engine: Engine, tmp_path: Path,
                                  recs: dict[str, Path]) -> None:
    """connleak attached mid-run: sockets are accepted and dialed, never closed."""
    res = ingest_recording_dir(engine, recs["connleak-attach"], data_dir=tmp_path / "d")
    fds = open_fds(load_events(engine, res.trace.id))
    socks = fds["sockets"]
    assert fds["sockets_only_climb"] and np.all(np.diff(socks) >= 0)
    rows = pq.read_table(recs["connleak-attach"] / "poller.parquet").to_pylist()
    accepted = sum(1 for r in rows if r["name"] == "accept4" and r["new_fd"] is not None)
    assert socks[-1] - socks[0] >= accepted > 10
    # The spawned run: the line climbs until the program shuts down and closes them all.
    res2 = ingest_recording_dir(engine, recs["connleak"], data_dir=tmp_path / "d")
    ev = load_events(engine, res2.trace.id)
    fds2 = open_fds(ev)
    first_close = min(int(ev["wall_ns"][i]) for i in range(len(ev))
                      if ev["syscall"][i] == "close" and ev["fd_kind"][i] == "tcp")
    last_accept = max(int(ev["wall_ns"][i]) for i in range(len(ev))
                      if ev["syscall"][i] == "accept4" and ev["new_fd"][i] is not None)
    assert last_accept < first_close
    before = [s for t, s in zip(fds2["t"], fds2["sockets"], strict=True)
              if t + ev.origin < first_close]
    assert np.all(np.diff(before) >= 0) and before[-1] >= 20


def test_io_uring_submissions(engine: Engine, tmp_path: Path, recs: dict[str, Path]) -> None:
    res = ingest_recording_dir(engine, recs["uring_rw"], data_dir=tmp_path / "d")
    u = poller_page(engine, res.trace.id)["io_uring"]
    rows = [r for r in pq.read_table(recs["uring_rw"] / "poller.parquet").to_pylist()
            if r["name"] == "io_uring_enter"]
    assert u["enters"] == len(rows) == 4 and u["setups"] == 1
    assert u["to_submit"] == sum(r["to_submit"] for r in rows) == 16
    assert u["submitted"] == sum(r["result"] for r in rows)
    assert [c["min_complete"] for c in u["calls"]] == [r["min_complete"] for r in rows]


def test_waits_of_every_kind(engine: Engine, tmp_path: Path, recs: dict[str, Path]) -> None:
    """pollmix makes each readiness call; timed-out waits lasted at least their timeout."""
    res = ingest_recording_dir(engine, recs["pollmix"], data_dir=tmp_path / "d")
    d = poller_page(engine, res.trace.id)
    w = d["waits"]
    rows = [r for r in pq.read_table(recs["pollmix"] / "poller.parquet").to_pylist()
            if r["name"] in ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
                             "select", "pselect6") and r["duration_ns"] is not None]
    assert w["count"] == len(rows) and set(w["by_call"]) == {r["name"] for r in rows}
    timed_out = [r for r in rows if r["result"] == 0 and (r["timeout_ns"] or 0) > 0]
    assert w["timed_out"] == len(timed_out) and w["jitter_negative"] == 0
    assert sum(w["events_per_wakeup"]) == sum(1 for r in rows if r["result"] >= 0)
    epfds = {r["epfd"] for r in rows if r["epfd"] is not None}
    assert {ln["epfd"] for ln in d["epoll"]["lanes"]} == epfds


def test_delete_removes_poller_rows(joined: tuple[Engine, int, Path], tmp_path: Path,
                                    recs: dict[str, Path]) -> None:
    eng = make_engine(f"sqlite:///{tmp_path / 'del.sqlite'}")
    a = ingest_recording_dir(eng, recs["httpnet+go"], data_dir=tmp_path / "d")
    b = ingest_recording_dir(eng, recs["pollmix"], data_dir=tmp_path / "d")
    assert delete_trace(eng, a.trace.id, data_dir=tmp_path / "d")
    assert _count(eng, "SELECT count(*) FROM poller_events WHERE trace_id = :t",
                  t=a.trace.id) == 0
    assert _count(eng, "SELECT count(*) FROM poller_recordings WHERE trace_id = :t",
                  t=a.trace.id) == 0
    assert delete_trace(eng, b.trace.id)
    assert _count(eng, "SELECT count(*) FROM poller_events") == 0


@pytest.mark.parametrize("backend", backends())
def test_a_users_delete_of_the_traces_row_removes_poller_rows(
        backend: str, tmp_path: Path, recs: dict[str, Path]) -> None:
    """Deleting traces rows by hand (no delete_trace) takes their recordings:
    SQLite's ON DELETE CASCADE, PostgreSQL's trigger on traces (0006)."""
    from ingest.store import models
    from tests.support.consistency import database_problems

    urls = make_db_url(backend, tmp_path)
    eng = make_engine(next(urls))
    try:
        ingest_recording_dir(eng, recs["httpnet+go"], data_dir=tmp_path / "d")
        ingest_recording_dir(eng, recs["pollmix"], data_dir=tmp_path / "d")
        assert _count(eng, "SELECT count(*) FROM poller_events") > 0
        with eng.begin() as conn:
            conn.execute(models.traces.delete())
        for table in models.TRACE_TABLES:
            assert _count(eng, f"SELECT count(*) FROM {table.name}") == 0, table.name
        assert database_problems(eng) == []
    finally:
        eng.dispose()
        urls.close()


def test_attach_to_a_stored_trace_and_replace(tmp_path: Path, recs: dict[str, Path]) -> None:
    eng = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    from ingest.load.pipeline import ingest_trace_file

    go = ingest_trace_file(eng, REPO / "tests/data/strace/httpnet-go1.27.trace",
                           data_dir=tmp_path / "d")
    # A recording made without --go-trace attaches as well: the alignment is measured here.
    r1 = ingest_recording_dir(eng, recs["httpnet"], data_dir=tmp_path / "d", attach=go.id)
    assert r1.attached is not None and r1.attached.method == "clock-snapshot"
    again = ingest_recording_dir(eng, recs["httpnet"], data_dir=tmp_path / "d", attach=go.id)
    assert again.attached is not None and not again.attached.created
    # Another recording replaces it (one recording per trace).
    r2 = ingest_recording_dir(eng, recs["pollmix"], data_dir=tmp_path / "d", attach=go.id)
    assert r2.attached is not None and r2.attached.replaced
    n = pq.read_metadata(recs["pollmix"] / "poller.parquet").num_rows
    assert _count(eng, "SELECT count(*) FROM poller_events WHERE trace_id = :t", t=go.id) == n
    with pytest.raises(LookupError):
        ingest_recording_dir(eng, recs["httpnet"], data_dir=tmp_path / "d", attach=go.id + 99)


def test_bad_recording_directories(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with pytest.raises(BadRecordingError, match="no poller.parquet"):
        read_recording(tmp_path / "a")
    (tmp_path / "a" / "poller.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(BadRecordingError, match="not a readable Parquet"):
        read_recording(tmp_path / "a")


def test_one_migration_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(REPO / "ingest" / "store" / "migrations"))
    from ingest.store.db import newest_revision

    assert ScriptDirectory.from_config(cfg).get_heads() == [newest_revision()]


def _cli(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "GMPSCOPE_DATA": str(data)}
    env.pop("GMPSCOPE_DB", None)
    return subprocess.run([sys.executable, "-m", "gmpscope", "ingest", *args], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=300)


def test_cli_ingest_recording(tmp_path: Path, recs: dict[str, Path]) -> None:
    data = tmp_path / "data"
    out = _cli(str(recs["httpnet+go"]), "--json", data=data)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["recording"] == "attached" and got["attach"]["method"] == "clock-snapshot"
    # The Go trace was ingested first: ingesting it again finds it by hash.
    again = _cli(str(recs["httpnet+go"] / "httpnet-go1.27.trace"), data=data)
    assert again.stdout.startswith(f"{got['id']}\texisting")
    alone = _cli(str(recs["pollmix"]), data=data)
    assert alone.returncode == 0 and "OS recording without a Go trace" in alone.stdout
    att = _cli(str(recs["connleak"]), "--attach", str(got["id"]), data=data)
    assert att.returncode == 0 and f"-> trace {got['id']}" in att.stdout
    bad = _cli(str(recs["connleak"]), "--attach", "999", data=data)
    assert bad.returncode == 2 and "no such trace" in bad.stderr
    (tmp_path / "empty").mkdir()
    worse = _cli(str(tmp_path / "empty"), "--attach", str(got["id"]), data=data)
    assert worse.returncode == 2 and "poller.parquet" in worse.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None or shutil.which("prlimit") is None,
                    reason="needs strace and prlimit")
def test_emfile_counted_for_a_real_leak(tmp_path: Path) -> None:
    """connleak recorded under a 40-descriptor limit: EMFILE counted as in poller.parquet."""
    from tests.support.workload_traces import build_workloads

    bin_dir = build_workloads("1.27.3")
    rec = tmp_path / "rec"
    proc = subprocess.run([sys.executable, "-m", "gmpscope", "record", "--backend", "strace",
                           "-o", str(rec), "--",
                           "prlimit", "--nofile=40", str(bin_dir / "connleak"), "-max-conns",
                           "60", "-duration", "10s"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(rec / "poller.parquet").to_pylist()
    want = Counter((r["name"], r["errno"]) for r in rows if r["errno"] == "EMFILE")
    assert want
    eng = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    res = ingest_recording_dir(eng, rec, data_dir=tmp_path / "d")
    d = poller_page(eng, res.trace.id)
    got = {(e["syscall"], e["errno"]): e["count"] for e in d["errors"] if e["errno"] == "EMFILE"}
    assert got == dict(want)
    # The sockets climbed to the limit's neighbourhood before the first EMFILE.
    assert d["open_fds"]["max"] >= 30


def test_serve_takes_a_recording_on_its_command_line(tmp_path: Path,
                                                     recs: dict[str, Path]) -> None:
    """`gmpscope serve RECORDING_DIR` stores the Go trace the recording names with the
    recording attached, as `gmpscope ingest` does."""
    from tests.support.server import Served

    with Served(tmp_path / "data", [recs["httpnet+go"]]) as srv:
        traces = srv.get("/api/traces").json()["traces"]
        assert len(traces) == 1
        tid = traces[0]["id"]
        # 404 for a trace without a recording; this one has it attached.
        poller = srv.get(f"/api/traces/{tid}/poller")
        assert poller.status_code == 200, poller.text
        alignment = srv.get(f"/api/traces/{tid}/poller/alignment")
        assert alignment.status_code == 200, alignment.text
