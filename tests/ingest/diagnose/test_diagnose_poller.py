"""The OS-poller diagnostic rules (ingest/diagnose/poller.py) on the committed
real strace captures (tests/data/strace/), attached to the Go trace of the same
run where there is one (httpnet, connleak under ``prlimit --nofile=40``) or
stored on their own (connleak spawned and attached mid-run, io_uring, pollmix).
Every number a finding reports is derived again here by plain SQL over
``poller_events``; the healthy httpnet run and the io_uring run are controls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.diagnose import RULES, ConfigError, diagnose, load_config
from ingest.diagnose.config import DiagnoseConfig, parse_config
from ingest.diagnose.runner import rule_defaults
from ingest.load.pipeline import ingest_trace_file
from ingest.load.poller import ingest_recording_dir
from ingest.store.db import make_engine
from ingest.views.poller import SOCKET_KINDS, WAIT_CALLS
from tests.support.poller_recordings import DATA, make_recording

REPO = Path(__file__).resolve().parents[3]
POLLER_RULES = {r.id for r in RULES if "poller" in r.requires}
STANDALONE = ("connleak", "connleak-attach", "uring_rw", "pollmix")
#: Standalone captures that are not controls for every rule.
PROBLEMS = ("uring_sqfull",)
WAITS = "(" + ", ".join(f"'{c}'" for c in WAIT_CALLS) + ")"
SOCKETS = "(" + ", ".join(f"'{k}'" for k in SOCKET_KINDS) + ")"


@dataclass
class DB:
    engine: Engine
    frames: FrameStore
    ids: dict[str, int]

    def report(self, name: str, config: DiagnoseConfig | None = None) -> dict[str, Any]:
        return diagnose(self.engine, self.frames.get(self.ids[name]), config)

    def rows(self, name: str, sql: str) -> list[Any]:
        """``sql`` over one trace's poller_events (``:t`` is its trace id)."""
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), {"t": self.ids[name]}).all())

    def one(self, name: str, sql: str) -> Any:
        return self.rows(name, sql)[0][0]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DB]:
    root = tmp_path_factory.mktemp("diag-poller")
    data = root / "data"
    engine = make_engine(f"sqlite:///{root / 'db.sqlite'}")
    ids: dict[str, int] = {}
    # httpnet: meta.json names its Go trace, which is ingested and the recording attached.
    res = ingest_recording_dir(engine, make_recording("httpnet", root / "httpnet",
                                                      with_go_trace=True), data_dir=data)
    assert res.attached is not None and res.attached.method == "clock-snapshot"
    ids["httpnet"] = res.trace.id
    # connleak under a 40-descriptor limit, with the Go trace of the same run.
    go = ingest_trace_file(engine, DATA / "connleak-emfile-go1.27.trace", "connleak-emfile",
                           data_dir=data)
    res = ingest_recording_dir(engine, make_recording("connleak-emfile", root / "emfile"),
                               data_dir=data, attach=go.id)
    assert res.attached is not None and res.attached.method == "clock-snapshot"
    ids["emfile"] = go.id
    for cap in STANDALONE + PROBLEMS:
        ids[cap] = ingest_recording_dir(engine, make_recording(cap, root / cap),
                                        data_dir=data).trace.id
    ids["no-recording"] = ingest_trace_file(engine, REPO / "samples/go1.27-mutex.trace",
                                            "mutex", data_dir=data).id
    yield DB(engine, FrameStore(engine, data), ids)
    engine.dispose()


def status(rep: dict[str, Any]) -> dict[str, str]:
    return {r["rule"]: r["status"] for r in rep["rules"] if r["rule"] in POLLER_RULES}


def only(rep: dict[str, Any], rule: str) -> dict[str, Any]:
    fs = [f for f in rep["findings"] if f["rule"] == rule]
    assert len(fs) == 1, [f["rule"] for f in rep["findings"]]
    found: dict[str, Any] = fs[0]
    return found


def assert_evidence(db: DB, name: str, f: dict[str, Any]) -> None:
    """Each range: a link to the M timeline around it (on its thread when it has one)."""
    tid = db.ids[name]
    assert f["link"] == f["ranges"][0]["link"]
    for r in f["ranges"]:
        link = r["link"]
        assert link.startswith(f"/traces/{tid}/timeline?mode=m&")
        args = dict(kv.split("=") for kv in link.split("?")[1].split("&"))
        assert int(args["t1"]) < r["t1"] and int(args["t2"]) > r["t2"]
        assert r["t2"] - r["t1"] == r["duration_ns"] >= 0
        if r["m"] is not None:
            assert int(args["m"]) == r["m"] and r["m"] in f["threads"]


def span_ns(db: DB, name: str) -> int:
    return int(db.one(name, "SELECT MAX(wall_ns + COALESCE(duration_ns, 0)) - MIN(wall_ns) "
                            "FROM poller_events WHERE trace_id = :t"))


# --------------------------------------------------------------------------
# the runner: poller rules need a recording


def test_skipped_without_a_recording(db: DB) -> None:
    rep = db.report("no-recording")
    assert set(status(rep).values()) == {"skipped"} and len(status(rep)) == 5
    assert not [f for f in rep["findings"] if f["rule"] in POLLER_RULES]
    reasons = {r["reason"] for r in rep["rules"] if r["rule"] in POLLER_RULES}
    assert reasons == {"needs poller data, not recorded for this trace"}


def test_healthy_httpnet_raises_no_poller_rule(db: DB) -> None:
    assert set(status(db.report("httpnet")).values()) == {"clear"}


# --------------------------------------------------------------------------
# fd.emfile


def test_emfile_counts_the_rows_with_emfile(db: DB) -> None:
    f = only(db.report("emfile"), "fd.emfile")
    rows = db.rows("emfile", "SELECT ts, m, syscall, fd FROM poller_events "
                             "WHERE trace_id = :t AND errno = 'EMFILE' ORDER BY seq")
    assert db.one("emfile", "SELECT COUNT(*) FROM poller_events WHERE trace_id = :t "
                            "AND errno = 'ENFILE'") == 0
    assert f["measures"]["count"] == len(rows) == 2
    by_call: dict[str, int] = {}
    for r in rows:
        by_call[r.syscall] = by_call.get(r.syscall, 0) + 1
    assert {c["syscall"]: c["count"] for c in f["measures"]["by_call"]} == by_call
    assert set(by_call) == {"accept4", "openat"}
    assert [(r["t1"], r["m"]) for r in f["ranges"]] == [(r.ts, r.m) for r in rows]
    assert f["threads"] == sorted({r.m for r in rows})
    assert f["measures"]["fds"] == sorted({r.fd for r in rows if r.fd is not None})
    # Under a 40-descriptor limit, with stdin/out/err open and not seen by strace.
    assert f["measures"]["sockets_at_first"] <= f["measures"]["open_at_first"] <= 37
    # The failures are inside the Go trace of the same run.
    first, last = db.rows("emfile", "SELECT first_ts, last_ts FROM traces WHERE id = :t")[0]
    assert all(first <= r.ts <= last for r in rows)
    assert_evidence(db, "emfile", f)


@pytest.mark.parametrize("name", ["httpnet", *STANDALONE])
def test_no_emfile_where_none_was_recorded(db: DB, name: str) -> None:
    assert db.one(name, "SELECT COUNT(*) FROM poller_events WHERE trace_id = :t "
                        "AND errno IN ('EMFILE', 'ENFILE')") == 0
    assert status(db.report(name))["fd.emfile"] == "clear"


def test_errnos_come_from_the_config(db: DB) -> None:
    cfg = parse_config({"fd.emfile": {"errnos": ["ENFILE"]}}, rule_defaults())
    assert status(db.report("emfile", cfg))["fd.emfile"] == "clear"


# --------------------------------------------------------------------------
# fd.leak


def socket_closes(db: DB, name: str) -> list[int]:
    """Wall times of successful closes of socket descriptors."""
    return [int(r[0]) for r in db.rows(name, "SELECT wall_ns FROM poller_events WHERE "
                                             f"trace_id = :t AND syscall = 'close' AND result = 0 "
                                             f"AND fd_kind IN {SOCKETS} ORDER BY seq")]


def sockets_before(db: DB, name: str, wall: int) -> int:
    """Distinct socket descriptors seen up to ``wall`` (none is closed before it)."""
    return int(db.one(name, f"""
        SELECT COUNT(*) FROM (
          SELECT fd AS d FROM poller_events WHERE trace_id = :t AND fd_kind IN {SOCKETS}
            AND fd >= 0 AND syscall != 'close' AND wall_ns <= {wall}
          UNION
          SELECT new_fd FROM poller_events WHERE trace_id = :t AND new_fd >= 0
            AND syscall IN ('accept', 'accept4') AND wall_ns <= {wall})"""))


@pytest.mark.parametrize("name", ["connleak", "connleak-attach", "emfile"])
def test_sockets_only_climbing_raise_fd_leak(db: DB, name: str) -> None:
    f = only(db.report(name), "fd.leak")
    m = f["measures"]
    first = int(db.one(name, "SELECT MIN(wall_ns) FROM poller_events WHERE trace_id = :t"))
    closes = socket_closes(db, name)
    span = span_ns(db, name)
    # The climb runs from the recording's start to the first socket close (or its end),
    # and the sockets at its peak are every socket seen before that close.
    end = closes[0] - first if closes else span
    assert (m["stretch_ns"], m["span_ns"]) == (end, span)
    assert m["sockets_start"] == 0
    assert m["sockets_peak"] == m["growth"] == sockets_before(db, name, first + end)
    assert m["growth"] >= 20 and m["span_share"] >= 0.8
    accepted = db.one(name, "SELECT COUNT(*) FROM poller_events WHERE trace_id = :t AND "
                            f"syscall IN ('accept', 'accept4') AND new_fd >= 0 "
                            f"AND wall_ns - {first} <= {end}")
    assert m["accepted"] == accepted
    assert_evidence(db, name, f)


def test_connleak_attached_mid_run_never_closes_a_socket(db: DB) -> None:
    m = only(db.report("connleak-attach"), "fd.leak")["measures"]
    assert socket_closes(db, "connleak-attach") == []
    assert m["sockets_only_climb"] and m["span_share"] == 1.0 and m["sockets_peak"] == 42


def test_spawned_connleak_closes_its_sockets_only_at_exit(db: DB) -> None:
    """connleak closes what it leaked after stopping its trace: the closes come in
    the last few ms, so the line does not only climb over the whole recording."""
    m = only(db.report("connleak"), "fd.leak")["measures"]
    closes = socket_closes(db, "connleak")
    first = int(db.one("connleak", "SELECT MIN(wall_ns) FROM poller_events "
                                   "WHERE trace_id = :t"))
    assert not m["sockets_only_climb"]
    assert closes and min(closes) - first == m["stretch_ns"]
    assert m["span_ns"] - m["stretch_ns"] < 0.05 * m["span_ns"]


def test_httpnet_closes_sockets_midway_no_leak(db: DB) -> None:
    closes = socket_closes(db, "httpnet")
    first = int(db.one("httpnet", "SELECT MIN(wall_ns) FROM poller_events WHERE trace_id = :t"))
    # The keep-alive clients climb to 13 sockets, then connections come and go.
    assert closes and (closes[0] - first) / span_ns(db, "httpnet") < 0.8
    assert status(db.report("httpnet"))["fd.leak"] == "clear"


# --------------------------------------------------------------------------
# io_uring


def test_uring_capture_has_no_refused_submission(db: DB) -> None:
    """The real io_uring run (4 enters of 4 entries each) submitted everything it
    asked: the rule must not fire. (No real capture shows a refusal.)"""
    rows = db.rows("uring_rw", "SELECT to_submit, result, errno FROM poller_events "
                               "WHERE trace_id = :t AND syscall = 'io_uring_enter'")
    assert len(rows) == 4 and sum(r.to_submit for r in rows) == 16
    assert all(r.result == r.to_submit and r.errno is None for r in rows)
    assert db.one("uring_rw", "SELECT COUNT(*) FROM poller_events WHERE trace_id = :t AND "
                              "syscall = 'io_uring_setup' AND errno IS NOT NULL") == 0
    assert status(db.report("uring_rw"))["iouring.refused"] == "clear"


def test_batches_bigger_than_the_ring_raise_iouring_refused(db: DB) -> None:
    """uring_sqfull (collectors/workloads/c/uring_sqfull.c): batches of 6 no-ops on a
    4-entry ring; the kernel submits what the queue held, 4 of the 6 asked."""
    f = only(db.report("uring_sqfull"), "iouring.refused")
    rows = db.rows("uring_sqfull", "SELECT ts, tid, fd, to_submit, result FROM poller_events "
                                   "WHERE trace_id = :t AND syscall = 'io_uring_enter' "
                                   "ORDER BY seq")
    short = [r for r in rows if r.result < r.to_submit]
    m = f["measures"]
    assert len(rows) == len(short) == m["enters"] == m["refused_enters"] == 3
    assert m["to_submit"] == sum(r.to_submit for r in rows) == 18
    assert m["submitted"] == sum(r.result for r in rows) == 12
    assert m["refused_entries"] == 6 and m["short_submits"] == 3 and m["setup_failed"] == 0
    assert m["fds"] == sorted({r.fd for r in rows})
    # A recording on its own: its time is the wall clock, its threads are tids.
    assert [(r["t1"], r["m"]) for r in f["ranges"]] == [(r.ts, r.tid) for r in short]
    assert_evidence(db, "uring_sqfull", f)


# --------------------------------------------------------------------------
# readiness waits: jitter and empty wakeups


def jitters(db: DB, name: str) -> list[tuple[int, int]]:
    """(seq, duration - timeout) of the waits that timed out: 0 events after a
    finite timeout."""
    return [(int(r.seq), int(r.j)) for r in db.rows(name, f"""
        SELECT seq, duration_ns - timeout_ns AS j FROM poller_events WHERE trace_id = :t
        AND syscall IN {WAITS} AND duration_ns IS NOT NULL AND result = 0
        AND timeout_ns > 0 ORDER BY seq""")]


@pytest.mark.parametrize("name", ["httpnet", "emfile", *STANDALONE])
def test_jitter_default_threshold(db: DB, name: str) -> None:
    """Default: 3 waits at least 1 ms late. No real capture has that (the worst:
    one wait 3.8 ms late in connleak attached, one 3.5 ms in the EMFILE run)."""
    late = [j for _, j in jitters(db, name) if j >= 1_000_000]
    assert len(late) <= 1
    assert status(db.report(name))["poller.epoll-jitter"] == "clear"


@pytest.mark.parametrize(("late_ns", "name"), [(0, "emfile"), (1_000_000, "emfile"),
                                               (0, "pollmix"), (1_000_000, "connleak-attach")])
def test_jitter_numbers_equal_the_rows(db: DB, late_ns: int, name: str) -> None:
    cfg = parse_config({"poller.epoll-jitter": {"late_ns": late_ns, "min_late": 1}},
                       rule_defaults())
    f = only(db.report(name, cfg), "poller.epoll-jitter")
    js = jitters(db, name)
    late = sorted(((j, s) for s, j in js if j >= late_ns), key=lambda x: (-x[0], x[1]))
    values = sorted(j for _, j in js)
    m = f["measures"]
    assert m["timed_out"] == len(js) and m["late"] == len(late) >= 1
    assert m["late_jitter_ns"] == sum(j for j, _ in late)
    assert m["max_jitter_ns"] == values[-1]
    # Nearest rank: the ceil(q * n)-th smallest.
    assert m["jitter_p50_ns"] == values[math.ceil(0.5 * len(values)) - 1]
    assert m["jitter_p99_ns"] == values[math.ceil(0.99 * len(values)) - 1]
    assert all(j >= 0 for j in values)  # a wait never returns before its timeout
    ts = {int(r.seq): (r.ts, r.m, r.tid) for r in db.rows(
        name, "SELECT seq, ts, m, tid FROM poller_events WHERE trace_id = :t")}
    want = [(ts[s][0], ts[s][1] if ts[s][1] is not None else ts[s][2]) for _, s in late[:10]]
    assert [(r["t1"], r["m"]) for r in f["ranges"]] == want
    assert_evidence(db, name, f)


def blocking_waits(db: DB, name: str) -> tuple[int, int]:
    """(blocking waits, those that returned no events)."""
    r = db.rows(name, f"""
        SELECT COUNT(*), SUM(result = 0) FROM poller_events WHERE trace_id = :t
        AND syscall IN {WAITS} AND duration_ns IS NOT NULL AND result >= 0
        AND timeout_ns IS NOT NULL AND timeout_ns != 0""")[0]
    return int(r[0]), int(r[1] or 0)


def test_empty_wakeups_in_the_emfile_run(db: DB) -> None:
    """connleak keeps dialing on a 1 ms ticker after EMFILE: threads wake for the
    timer, not for I/O."""
    f = only(db.report("emfile"), "poller.empty-wakeups")
    m = f["measures"]
    n, empty = blocking_waits(db, "emfile")
    span = span_ns(db, "emfile")
    assert (m["blocking_waits"], m["empty"], m["span_ns"]) == (n, empty, span)
    assert m["share"] == round(empty / n, 4) and m["share"] >= 0.5
    assert m["per_second"] == round(empty / (span / 1e9), 1) and m["per_second"] >= 100
    assert m["timed_out"] + m["before_timeout"] == empty >= 20
    assert sum(m["by_thread"].values()) == empty
    assert f["severity"] == "info"
    assert_evidence(db, "emfile", f)


@pytest.mark.parametrize("name", ["httpnet", *STANDALONE])
def test_few_empty_wakeups_elsewhere(db: DB, name: str) -> None:
    n, empty = blocking_waits(db, name)
    assert empty < 20 or empty / n < 0.5
    assert status(db.report(name))["poller.empty-wakeups"] == "clear"


# --------------------------------------------------------------------------
# config


def test_config_checks_poller_thresholds(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('["fd.leak"]\nmin_grow = 3\n')
    with pytest.raises(ConfigError, match="has no threshold 'min_grow'"):
        load_config(bad, rule_defaults())
    ok = tmp_path / "ok.toml"
    ok.write_text('disabled = ["poller.empty-wakeups"]\n["fd.leak"]\nmin_growth = 50\n')
    cfg = load_config(ok, rule_defaults())
    assert cfg.for_rule("fd.leak", rule_defaults()["fd.leak"])["min_growth"] == 50


def test_config_changes_the_outcome(db: DB) -> None:
    cfg = parse_config({"disabled": ["poller.empty-wakeups"],
                        "fd.leak": {"min_growth": 50}}, rule_defaults())
    st = status(db.report("emfile", cfg))
    assert st["poller.empty-wakeups"] == "disabled" and st["fd.leak"] == "clear"
    assert st["fd.emfile"] == "raised"
