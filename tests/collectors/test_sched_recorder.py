"""The scheduling recorder (bpftrace) on real programs: what it records agrees with
the kernel's own per-thread accounting, ``/proc/PID/task/TID/schedstat``
(on-CPU ns, run-queue wait ns, timeslices), and it ends cleanly when the target
exits early or bpftrace is killed.

The workload is collectors/workloads/cmd/cpuquota (GOMAXPROCS 4 under a CPU
quota of 0.25, so its threads wait for a CPU most of the time), held idle
before its load (``-await-stdin``) and after it (``-linger``): both schedstat
readings are taken while every thread sleeps, so neither catches a time slice
or a wait half-accounted.

Tolerances (stated, per thread), each widened by the span of any missed event
(sched_parse.UNKNOWN, about 1 switch in 2,500 here, while another BPF tracer
ran) and by the time the hypervisor stole from the machine's CPUs meanwhile
(/proc/stat steal: the kernel leaves it out of a thread's runtime, the
recording cannot see it; counted in 10 ms ticks per CPU, so known to one tick
per CPU; in a clean-clone CI run a thread's recorded on-CPU time exceeded its
runtime by 15 ms, its waits equal, stolen time's pattern, which that resolution
can hide): timeslices within 2 (a switch between the
reading and the probe); on-CPU plus waiting within 8 ms + 1% (measured: 0.1 to
6 ms); each alone within 8 ms + 15%: the kernel splits the same time between
the two at its own points and clocks (it charges runtime on rq_clock_task, which
leaves out time the hypervisor stole, and waits on rq_clock; on this VM up to
~10% moved between them while the sum held). On a busy machine it moved more:
with three dd writers beside it, the kernel charged 19-29 ms of a thread's
run-queue waits as its runtime (sysmon: ~100 wakeups of ~10 us on a CPU each,
1-14 ms recorded on-CPU against 21-47 ms of schedstat runtime), and the
recording's waits exceeded the kernel's by the same amount (within the unknown
spans): so a thread's on-CPU difference may be made up by what the recording
saw as the other state. Under the quota the recording's
waits exceed the kernel's run_delay: Linux 6.18 takes a throttled thread off
its run queue, so its run_delay stops, while it is still runnable and not running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collectors.poller import sched_parse
from collectors.poller.sched_recorder import SchedRecorder, SchedRecorderError

GO = "1.27.3"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="bpftrace needs root"),
]


@pytest.fixture(scope="module")
def cpuquota() -> Path:
    from tests.support.workload_traces import build_workloads

    return build_workloads(GO) / "cpuquota"


def schedstat(pid: int) -> dict[int, tuple[int, int, int]]:
    """tid -> (on-CPU ns, run-queue wait ns, timeslices) of every thread now."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                run, wait, slices = (int(x) for x in fh.read().split())
        except OSError:
            continue
        out[int(tid)] = (run, wait, slices)
    return out


def steal_ns() -> int:
    """CPU time the hypervisor stole from this machine's CPUs so far (/proc/stat)."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()
    return int(fields[8]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def steal_resolution_ns() -> int:
    """How far the difference of two :func:`steal_ns` readings may be from
    the time stolen between them: /proc/stat counts each CPU's steal in whole
    clock ticks (10 ms), one tick per CPU either way."""
    return (os.cpu_count() or 1) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _any_runnable(pid: int) -> bool:
    """Whether a thread of ``pid`` is running or waiting for a CPU now (state R)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] == "R":
            return True
    return False


def quiet_schedstat(pid: int) -> tuple[int, dict[int, tuple[int, int, int]]]:
    """(wall ns, schedstat) read once no thread is runnable: a wait that spans
    the reading would be counted whole by the kernel (when it ends) but only
    from the recording's start by the recording.

    The wall time is read between two equal schedstat readings, with no thread
    runnable before the first or after the second: the kernel adds a wait when
    it ends and a running thread's runtime when it leaves the CPU, so equal
    readings say nothing ended between them. A single reading after the check
    is not enough on a loaded machine: in a clean-clone run this process was
    off its CPU for longer than a thread woken just after the check waited
    (76 ms), and the kernel's reading held that wait, ended after the wall time.
    """
    while True:
        if not _any_runnable(pid):
            first = schedstat(pid)
            now = time.time_ns()
            second = schedstat(pid)
            if first == second and not _any_runnable(pid):
                return now, second
        time.sleep(0.001)


def _wait_for_line(proc: subprocess.Popen[bytes], text: bytes) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"the workload ended without saying {text!r}")


def _expected(table: Any, a_ns: int, b_ns: int) -> dict[int, tuple[int, int, int, int, int]]:
    """Per thread from the recording, as the kernel accounts between wall times
    a_ns and b_ns: on-CPU ns inside the window, waits that ended (a switch-in)
    inside it counted whole (the kernel adds a wait when it ends), switch-ins,
    and the ns and number of unknown spans (an event missed) inside the window."""
    iv = sched_parse.table_intervals(table)
    kinds = np.asarray(iv.kind)
    ev = np.asarray(table.column("event").to_pylist())
    ts = table.column("ts_ns").to_numpy()
    tids = table.column("tid").to_numpy()

    def inside(sel: Any) -> int:
        return int((np.minimum(iv.end[sel], b_ns) - np.maximum(iv.start[sel], a_ns))
                   .clip(min=0).sum())

    out: dict[int, tuple[int, int, int, int, int]] = {}
    for t in {int(x) for x in tids}:
        sel = iv.tid == t
        w_sel = sel & (kinds == sched_parse.WAITING) & (iv.end > a_ns) & (iv.end <= b_ns)
        wait = int((iv.end[w_sel] - iv.start[w_sel]).sum())
        slices = int(((tids == t) & (ev == "on") & (ts > a_ns) & (ts <= b_ns)).sum())
        unknown = sel & (kinds == sched_parse.UNKNOWN)
        out[t] = (inside(sel & (kinds == sched_parse.ON_CPU)), wait, slices,
                  inside(unknown), int((unknown & (iv.end > a_ns) & (iv.start < b_ns)).sum()))
    return out


def _last_slices(table: Any, b_ns: int) -> dict[int, int]:
    """tid -> the timeslice count of its last switch-out at or before wall ns ``b_ns``."""
    out: dict[int, int] = {}
    for t, ts, ev, n in zip(table.column("tid").to_pylist(), table.column("ts_ns").to_pylist(),
                            table.column("event").to_pylist(), table.column("slices").to_pylist(),
                            strict=True):
        if ev == "off" and ts <= b_ns:  # the table is in time order
            assert n is not None
            out[t] = n
    return out


@pytest.mark.parametrize("mode", ["none", "auto"])
def test_recording_matches_schedstat(cpuquota: Path, tmp_path: Path, mode: str) -> None:
    """``none``: GOMAXPROCS 4 on this machine's CPUs, no limit (its threads
    wait for each other and for the machine's other programs); ``auto``: under
    the quota, where the kernel's run_delay leaves out the time a throttled
    thread spends off its run queue (Linux 6.18 dequeues throttled tasks),
    which the recording counts as waiting for a CPU: runnable, not running."""
    proc = subprocess.Popen([str(cpuquota), "-await-stdin", "-duration", "600ms",
                             "-mode", mode, "-linger", "500ms"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rec = SchedRecorder(proc.pid, tmp_path)
        rec.start()
        a_ns, before = quiet_schedstat(proc.pid)
        stolen = steal_ns()
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        _wait_for_line(proc, b"cpuquota: done")
        b_ns, after = quiet_schedstat(proc.pid)
        stolen = steal_ns() - stolen
        summary = rec.stop()
    finally:
        # Let it end on its own: it leaves and removes its cgroup on the way out.
        proc.wait()
    assert summary["partial"] is False and summary["lost_events"] == 0
    assert summary["stopped_by"] == "stopped"
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    table = pq.read_table(tmp_path / sched_parse.SCHED_FILE)
    assert table.num_rows == summary["rows"] > 100
    got = _expected(table, a_ns, b_ns)
    last_slices = _last_slices(table, b_ns)
    checked = 0
    total_on = total_kernel_on = 0
    for tid, (run1, wait1, n1) in after.items():
        run0, wait0, n0 = before.get(tid, (0, 0, 0))
        d_run, d_wait, d_n = run1 - run0, wait1 - wait0, n1 - n0
        on, wait, n, unknown, missed = got.get(tid, (0, 0, 0, 0, 0))
        # A missed event leaves its span unknown: it may be either, and the
        # switch-in missed is a timeslice fewer.
        slack = 8_000_000 + unknown + stolen + steal_resolution_ns()
        # Time the kernel moved between the two states, seen on both sides: a
        # wait it charged as runtime that the recording saw as a wait, or the
        # reverse (see the module's docstring).
        moved = max(0, min(d_run - on, wait - d_wait)) + max(0, min(on - d_run, d_wait - wait))
        if mode == "none":
            assert abs((on + wait) - (d_run + d_wait)) <= slack + 0.01 * (d_run + d_wait), (
                tid, on, wait, d_run, d_wait, unknown)
            assert abs(wait - d_wait) <= slack + 0.15 * d_wait + moved, (
                tid, wait, d_wait, on, d_run, unknown)
        else:
            assert wait >= d_wait - slack - 0.15 * d_wait - moved, (tid, wait, d_wait, unknown)
        assert abs(on - d_run) <= slack + 0.15 * d_run + moved, (
            tid, on, d_run, wait, d_wait, unknown)
        assert abs(n - d_n) <= 2 + missed, (tid, n, d_n, missed)
        # Asleep at the reading, so its last switch-out came after its last
        # switch-in: the count it carries is the kernel's, exactly.
        if tid in last_slices:
            assert last_slices[tid] == n1 or summary["skipped_runs"], (tid, last_slices[tid], n1)
        total_on += on
        total_kernel_on += d_run
        checked += d_run > 0
    assert checked >= 2
    if mode == "auto":
        # The quota held: 0.6 s at 0.25 CPU is ~150 ms of CPU for 4 Ps' worth of work.
        assert total_kernel_on < 0.6e9 * 0.25 * 1.5
        waits = sum(v[1] for v in got.values())
        assert waits > total_on, "throttled threads wait for a CPU more than they run"


def test_target_exits_early(cpuquota: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([str(cpuquota), "-await-stdin", "-duration", "200ms"],
                            stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    rec = SchedRecorder(proc.pid, tmp_path)
    rec.start()
    proc.communicate(b"go\n")
    summary = rec.stop()
    assert summary["target_exited"] is True and summary["stopped_by"] == "target exited"
    assert summary["partial"] is False and summary["rows"] > 0
    table = sched_parse.read_sched(tmp_path)
    assert table is not None and table.num_rows == summary["rows"]
    # The threads' last switch-outs are their exits (Z or X): nothing after them
    # (all but one: a missed event, sched_parse.UNKNOWN, may be that one).
    states = {}
    for tid, ev, st in zip(table.column("tid").to_pylist(), table.column("event").to_pylist(),
                           table.column("state").to_pylist(), strict=True):
        if ev == "off":
            states[tid] = st
    dead = sum(1 for st in states.values() if st in sched_parse.DEAD_STATES)
    # A probe run the kernel skipped (another BPF program running on that CPU:
    # a parallel test's) may have been an exit: CI once saw 3 of 6 missing.
    skipped = summary["skipped_runs"] or 0
    assert len(states) >= 3 and dead + skipped >= len(states) - 1, (states, skipped)
    assert not list(tmp_path.glob("sched.bpftrace.txt")), "the raw file is removed"


def test_bpftrace_killed_midway(cpuquota: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([str(cpuquota), "-await-stdin", "-duration", "400ms",
                             "-linger", "1s"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rec = SchedRecorder(proc.pid, tmp_path)
        rec.start()
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        time.sleep(0.2)  # let some load be recorded before bpftrace dies
        assert rec._proc is not None
        os.kill(rec._proc.pid, signal.SIGKILL)
        rec._proc.wait()
        summary = rec.stop()
    finally:
        proc.wait()
    assert summary["partial"] is True and "exited (-9) before" in summary["stopped_by"]
    table = sched_parse.read_sched(tmp_path)
    assert table is not None and table.num_rows == summary["rows"] > 0
    assert sched_parse.table_meta(table)["partial"] is True


def test_recorder_killed_leaves_a_partial_recording(cpuquota: Path, tmp_path: Path) -> None:
    """The recorder's own process killed: bpftrace gets SIGINT from the kernel
    (parent-death signal), and the raw file reads as a partial recording."""
    import sys
    import textwrap

    proc = subprocess.Popen([str(cpuquota), "-await-stdin", "-duration", "300ms",
                             "-linger", "1s"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    driver = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from collectors.poller.sched_recorder import SchedRecorder
        SchedRecorder({proc.pid}, Path({str(tmp_path)!r})).start()
        print("ready", flush=True)
        time.sleep(60)
    """)
    repo = Path(__file__).resolve().parents[2]
    rec = subprocess.Popen([sys.executable, "-c", driver], cwd=repo, stdout=subprocess.PIPE)
    try:
        assert rec.stdout is not None
        assert rec.stdout.readline().strip() == b"ready"
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        time.sleep(0.5)
        rec.kill()
        rec.wait()
    finally:
        proc.wait()
    # bpftrace flushes and exits on its parent-death SIGINT; wait for its lines to stop growing.
    raw = tmp_path / sched_parse.RAW_FILE
    size = -1
    while raw.stat().st_size != size:
        size = raw.stat().st_size
        time.sleep(0.3)
    assert not (tmp_path / sched_parse.SCHED_FILE).exists()
    table = sched_parse.read_sched(tmp_path)
    assert table is not None and table.num_rows > 0
    meta = sched_parse.table_meta(table)
    assert meta["partial"] is True and meta["stopped_by"] == "recorder killed"


def test_no_such_process(tmp_path: Path) -> None:
    with pytest.raises(SchedRecorderError, match="no such process"):
        SchedRecorder(2**22 + 7, tmp_path).start()


def test_a_skipped_sleep_is_unknown(tmp_path: Path) -> None:
    """A real recording of 40 sleeps with one sleep's three events taken out, as
    the kernel drops them when it skips the probe runs: the order of events alone
    reads the thread as on the CPU for two sleeps; the switch-outs' timeslice
    counts show the gap, and the time is unknown. Without the counts (a recording
    made before them) it reads as before."""
    from tests.support.sleeps import record_sleeps

    got = record_sleeps(tmp_path, 40)
    rows = got.table.to_pylist()
    sleeper = max({r["tid"] for r in rows}, key=lambda t: sum(r["tid"] == t for r in rows))
    mine = [i for i, r in enumerate(rows) if r["tid"] == sleeper]
    events = [rows[i]["event"] for i in mine]
    # The 20th sleep: its switch-out, wakeup and switch-in.
    k = [j for j in range(len(events) - 3) if events[j:j + 3] == ["off", "wakeup", "on"]
         and rows[mine[j]]["state"] == "sleep"][20]
    gone = set(mine[k:k + 3])
    before, after = rows[mine[k - 1]], rows[mine[k + 3]]
    assert before["event"] == "on" and after["event"] == "off"
    assert after["slices"] == rows[mine[k]]["slices"] + 1  # one timeslice apart, as recorded
    kept = got.table.take([i for i in range(len(rows)) if i not in gone])

    def kind_at(table: Any, ts: int) -> str:
        iv = sched_parse.table_intervals(table)
        hit = [iv.kind[i] for i in range(len(iv))
               if iv.tid[i] == sleeper and iv.start[i] <= ts < iv.end[i]]
        assert len(hit) == 1
        return hit[0]

    middle = rows[mine[k + 1]]["ts_ns"]  # the wakeup taken out
    assert kind_at(got.table, middle) == sched_parse.WAITING
    assert kind_at(kept, middle) == sched_parse.UNKNOWN
    assert kind_at(kept, before["ts_ns"]) == sched_parse.UNKNOWN  # from the last switch-out
    old = kept.drop_columns(["slices"])
    assert kind_at(old, middle) == sched_parse.ON_CPU
