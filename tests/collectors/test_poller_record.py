"""``gmpscope record`` on real programs: the Go workloads, a C io_uring program,
attach mode, and the errors a user meets (no strace, no such pid, no ptrace).

Every test runs strace for real (Debian's /usr/bin/strace).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.poller.parquet_out import read_rows

REPO = Path(__file__).resolve().parents[2]
C_DIR = REPO / "collectors" / "workloads" / "c"
GO = "1.27.3"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed"),
]


def gmpscope(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    if args[:1] == ("record",):  # these are strace's tests (eBPF is the default as root)
        args = ("record", "--backend", "strace", *args[1:])
    proc = subprocess.run(
        [sys.executable, "-m", "gmpscope", *args], cwd=REPO, capture_output=True, text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"gmpscope {args} failed ({proc.returncode}): {proc.stderr}")
    return proc


def load(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta = json.loads((out / "meta.json").read_text())
    return meta, read_rows(out / "poller.parquet")


@pytest.fixture(scope="module")
def go_bin() -> Path:
    from tests.support.workload_traces import build_workloads

    return build_workloads(GO)


@pytest.fixture(scope="module")
def httpnet_run(go_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """httpnet recorded with its Go trace and an untraced baseline run first."""
    work = tmp_path_factory.mktemp("httpnet")
    trace = work / "run.trace"
    gmpscope("record", "--baseline", "--go-trace", str(trace), "-o", str(work / "rec"), "--",
             str(go_bin / "httpnet"), "-trace", str(trace), "-max-requests", "300",
             "-duration", "20s")
    from collectors.gotrace.todir import decode_file_to_dir

    decode_file_to_dir(trace, work / "decoded")
    return work


def test_httpnet_epoll_waits_are_recorded(httpnet_run: Path) -> None:
    meta, rows = load(httpnet_run / "rec")
    waits = [r for r in rows if r["name"] == "epoll_pwait" and r["result"] is not None]
    assert len(waits) >= 10
    assert {w["maxevents"] for w in waits} == {128}
    assert all(w["timeout_ns"] is not None for w in waits)
    assert any(w["timeout_ns"] == 0 for w in waits)  # findRunnable's non-blocking polls
    assert all(w["epfd"] is not None and w["fd_path"] == "anon_inode:[eventpoll]" for w in waits)
    assert meta["exit_status"] == 0 and meta["stopped_by"] == "exit"
    assert meta["parse"]["unknown"] == 0, meta["parse"].get("unknown_samples")
    assert len({r["tid"] for r in rows}) >= 3
    assert sorted({r["tid"] for r in rows}) == meta["tids"]
    assert meta["pid"] in meta["tids"]


def test_overhead_is_measured(httpnet_run: Path) -> None:
    meta, _ = load(httpnet_run / "rec")
    ov = meta["overhead"]
    for key in ("traced_wall_s", "baseline_wall_s", "slowdown", "strace_cpu_s",
                "syscalls_per_s"):
        assert isinstance(ov[key], (int, float)) and ov[key] > 0, (key, ov)
    assert ov["baseline_exit_status"] == 0


def test_go_trace_of_the_same_run_shares_threads_and_time(httpnet_run: Path) -> None:
    """Go 1.22+ traces name Ms by OS thread id; Go 1.25+ carry a wall-clock snapshot."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    meta, rows = load(httpnet_run / "rec")
    assert meta["go_trace"]["exists"] and meta["go_trace"]["size"] > 0
    decoded = httpnet_run / "decoded"
    gmeta = json.loads((decoded / "meta.json").read_text())
    ms = set(pq.read_table(decoded / "transitions.parquet").column("m").to_pylist()) - {-1}
    assert ms and ms <= set(meta["tids"])
    wc = gmeta["wall_clock"]
    to_wall = wc["wall_ns"] - wc["trace_ns"]
    assert meta["first_ts_ns"] <= gmeta["first_ts"] + to_wall
    assert gmeta["last_ts"] + to_wall <= meta["last_ts_ns"]
    # The recorder aligned them itself, from the snapshot.
    al = meta["alignment"]
    assert al["method"] == "clock-snapshot" and al["offset_ns"] == to_wall
    assert al["go_syscalls"] > 0 and al["quality"] > 0.5


def test_recorder_clock_pair_agrees_with_the_go_trace(httpnet_run: Path) -> None:
    """Without the snapshot (Go 1.22-1.24), the recorder's realtime-monotonic
    difference is the offset, and the syscalls of both sides confirm it."""
    import pyarrow.parquet as pq

    from collectors.poller.align import align
    from collectors.poller.gojoin import os_calls, syscall_intervals

    meta, _ = load(httpnet_run / "rec")
    table = pq.read_table(httpnet_run / "decoded" / "transitions.parquet")
    found = align(syscall_intervals(table), os_calls(pq.read_table(httpnet_run / "rec" /
                                                                   "poller.parquet")),
                  None, meta["clock"]["realtime_minus_monotonic_ns"])
    assert found.method == "monotonic-clock", found
    assert found.matched == meta["alignment"]["matched"]


def test_raw_output_is_kept(httpnet_run: Path) -> None:
    from collectors.poller.strace_parse import parse_file

    meta, rows = load(httpnet_run / "rec")
    again, stats = parse_file(httpnet_run / "rec" / meta["strace"]["raw_file"])
    assert len(again) == len(rows) == meta["parse"]["rows"]
    assert meta["strace"]["version"] not in ("", "unknown")


def test_connleak_descriptors_climb(go_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    gmpscope("record", "-o", str(out), "--", str(go_bin / "connleak"),
             "-max-conns", "40", "-duration", "10s")
    _, rows = load(out)
    live: set[int] = set()
    at_accept: list[int] = []
    for r in rows:
        if r["name"] == "accept4" and r["new_fd"] is not None:
            live.add(r["new_fd"])
            at_accept.append(len(live))
        elif r["name"] == "close" and (r["fd_path"] or "").startswith("TCP:"):
            live.discard(r["fd"])
    # 40 connections accepted, none closed until the program exits.
    assert len(at_accept) == 40
    assert at_accept == list(range(1, 41)), _accepts_and_closes(rows)


def _accepts_and_closes(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a failure of the test above needs to be understood: every accept and
    close, in the order the test reads them."""
    return [(r["name"], r["tid"], r["ts_ns"], r["duration_ns"], r["fd"], r["new_fd"],
             r["result"], r["fd_path"]) for r in rows if r["name"] in ("accept4", "close")]


@pytest.fixture
def running_connleak(go_bin: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([str(go_bin / "connleak"), "-max-conns", "100000",
                             "-duration", "30s"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_attach_records_a_running_program(
    running_connleak: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    out = tmp_path / "rec"
    pid = running_connleak.pid
    gmpscope("record", "--pid", str(pid), "--duration", "1", "-o", str(out))
    tasks = {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    assert running_connleak.poll() is None  # detached, still running
    meta, rows = load(out)
    assert meta["mode"] == "attach" and meta["pid"] == pid and meta["stopped_by"] == "duration"
    tids = {r["tid"] for r in rows}
    assert len(tids) >= 2 and tids <= tasks  # the threads /proc shows
    assert any(r["name"] == "accept4" for r in rows)
    assert any(r["partial"] for r in rows)
    assert meta["overhead"]["strace_cpu_s"] > 0 and meta["overhead"]["baseline_wall_s"] is None


def test_spawn_stopped_by_duration(go_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    gmpscope("record", "--duration", "1", "-o", str(out), "--", str(go_bin / "connleak"),
             "-max-conns", "100000", "-duration", "60s")
    meta, rows = load(out)
    assert meta["stopped_by"] == "duration"
    # Stopped, not run to its 60 s end: every thread ends killed by our SIGINT (no
    # wall-clock bound here: strace takes its time to let go on a busy machine).
    assert meta["exit_status"] is None
    with pytest.raises(ProcessLookupError):  # and the program is gone
        os.kill(int(meta["pid"]), 0)
    # The exits strace saw are our SIGINT (on a loaded machine strace may be made to
    # let go before it writes them: none at all is possible, another reason is not).
    exits = [r for r in rows if r["kind"] == "exit"]
    assert all(r["name"] == "killed" and r["args"] == "SIGINT" for r in exits)


@pytest.fixture(scope="module")
def c_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    out = tmp_path_factory.mktemp("cbin")
    for name in ("uring_rw", "pollmix"):
        subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(out / name),
                        str(C_DIR / f"{name}.c")], check=True)
    return out


def test_io_uring_workload(c_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    proc = gmpscope("record", "-o", str(out), "--", str(c_bin / "uring_rw"),
                    str(tmp_path / "data.bin"), "5", check=False)
    meta, rows = load(out)
    (setup,) = [r for r in rows if r["name"] == "io_uring_setup"]
    if setup["result"] is None or setup["result"] < 0:
        # The kernel refuses io_uring here; that refusal is what was recorded.
        assert setup["errno"] in ("ENOSYS", "EPERM") and meta["exit_status"] == 2
        pytest.skip(f"io_uring disabled on this kernel: {setup['errno']}")
    assert proc.returncode == 0 and meta["exit_status"] == 0
    enters = [r for r in rows if r["name"] == "io_uring_enter"]
    assert len(enters) == 5 * 2  # a write batch and a read batch per round
    assert all((e["fd"], e["to_submit"], e["min_complete"], e["result"])
               == (setup["new_fd"], 4, 4, 4) for e in enters)
    assert {r["op"] for r in rows if r["name"] == "io_uring_register"} == {
        "IORING_REGISTER_FILES", "IORING_UNREGISTER_FILES"}


def test_pollmix_records_every_wait(c_bin: Path, tmp_path: Path) -> None:
    from collectors.poller.records import COVERED_SYSCALLS

    out = tmp_path / "rec"
    gmpscope("record", "-o", str(out), "--", str(c_bin / "pollmix"), "2")
    meta, rows = load(out)
    io_uring = {"io_uring_setup", "io_uring_enter", "io_uring_register"}
    assert set(COVERED_SYSCALLS) - io_uring <= set(meta["parse"]["by_name"])
    timed_out = [r for r in rows if r["timeout_ns"] == 3_000_000 and r["result"] == 0]
    assert len(timed_out) >= 7 * 2  # every kind of wait, each round
    assert all(r["duration_ns"] >= r["timeout_ns"] for r in timed_out)


def test_no_such_pid(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    proc = gmpscope("record", "--pid", str(dead.pid), "--duration", "1", "-o",
                    str(tmp_path / "rec"), check=False)
    assert proc.returncode == 1 and "no such process" in proc.stderr


def test_missing_strace(tmp_path: Path) -> None:
    proc = gmpscope("record", "--strace", str(tmp_path / "no-strace"), "-o",
                    str(tmp_path / "rec"), "--", "true", check=False)
    assert proc.returncode == 1 and "strace not found" in proc.stderr


def test_ptrace_refused(tmp_path: Path) -> None:
    """A process can have one tracer: attaching to a traced one is refused by ptrace."""
    with tempfile.TemporaryDirectory() as work:
        tracer = subprocess.Popen(["strace", "-q", "-o", f"{work}/first", "sleep", "30"])
        try:
            sleeper = None
            for _ in range(200):
                # strace forks short-lived children of its own at start (its
                # ptrace feature probes): wait for the one that became sleep.
                out = subprocess.run(["pgrep", "-P", str(tracer.pid), "-x", "sleep"],
                                     capture_output=True, text=True).stdout.split()
                if out:
                    sleeper = int(out[0])
                    break
                time.sleep(0.05)
            assert sleeper is not None
            proc = gmpscope("record", "--pid", str(sleeper), "--duration", "1", "-o",
                            str(tmp_path / "rec"), check=False)
        finally:
            # strace waits for the program it started: end that first.
            if sleeper is not None:
                os.kill(sleeper, signal.SIGKILL)
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
    assert proc.returncode == 1
    assert "ptrace not permitted" in proc.stderr and "Operation not permitted" in proc.stderr


def test_leak_until_emfile(go_bin: Path, tmp_path: Path) -> None:
    """connleak under a 40-descriptor limit: the leak ends in EMFILE, as in production."""
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    out = tmp_path / "rec"
    gmpscope("record", "-o", str(out), "--", "prlimit", "--nofile=40",
             str(go_bin / "connleak"), "-max-conns", "60", "-duration", "10s")
    meta, rows = load(out)
    emfile = [r for r in rows if r["errno"] == "EMFILE"]
    assert emfile and {r["name"] for r in emfile} <= {"accept4", "openat"}
    # Descriptors handed out before the failure reach the limit's neighbourhood.
    created = [r["new_fd"] for r in rows if r["new_fd"] is not None
               and r["ts_ns"] < emfile[0]["ts_ns"]]
    assert max(created) >= 30


@pytest.mark.parametrize(("go_version", "method"), [
    ("1.23.9", "monotonic-clock"),  # M = thread id, no clock snapshot
    ("1.21.13", "none"),  # old format: M ids are the runtime's own
])
def test_alignment_without_a_clock_snapshot(go_version: str, method: str,
                                            tmp_path: Path) -> None:
    from tests.support.workload_traces import build_workloads

    binary = build_workloads(go_version) / "httpnet"
    trace = tmp_path / "run.trace"
    gmpscope("record", "--go-trace", str(trace), "-o", str(tmp_path / "rec"), "--",
             str(binary), "-trace", str(trace), "-max-requests", "200")
    meta, _ = load(tmp_path / "rec")
    al = meta["alignment"]
    assert al["method"] == method, al
    if method == "none":
        assert al["offset_ns"] is None and "not OS thread ids" in al["note"]
    else:
        assert al["offset_ns"] == meta["clock"]["realtime_minus_monotonic_ns"]
        assert al["quality"] > 0.3 and al["slack_ns"] is not None
