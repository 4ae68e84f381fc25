"""End to end through the CLI (issue 26): `gmpscope record --backend ebpf` of a
real Go program writes sched.parquet beside poller.parquet, `gmpscope ingest DIR`
stores both (the poller loader's hook, ingest/load/os_sched.py), and `gmpscope
diagnose` raises sched.offcpu for the cpuquota workload and not for healthy."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ingest.load.os_sched import sched_recording_of
from ingest.store.db import make_engine
from ingest.views.offcpu import offcpu_summary
from tests.support.sched_recordings import NEEDS_BPFTRACE, workload_bin

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, *NEEDS_BPFTRACE]


def gmpscope(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "gmpscope", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"gmpscope {args}: {proc.stderr}"
    return proc.stdout


#: The machine's CPU pressure (/proc/pressure/cpu "some": the share of time some
#: runnable task waited for a CPU) above which a run's off-CPU time is not only its
#: own: other processes (a parallel test run) held the CPUs, as noisy neighbours would.
CONTENDED = 0.10


def cpu_pressure_us() -> int | None:
    """/proc/pressure/cpu's "some" total (us), None where the kernel has no PSI."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except OSError:
        return None
    return int(line.rsplit("total=", 1)[1])


def recorded(tmp: Path, name: str, *args: str) -> tuple[dict[str, Any], str, float]:
    """(diagnose report, trace id, the machine's CPU pressure during the record)."""
    out, data = tmp / name, tmp / "data"
    trace = out / "go.trace"
    out.mkdir(parents=True)
    p0, t0 = cpu_pressure_us(), time.monotonic()
    gmpscope("record", "--backend", "ebpf", "-o", str(out), "--go-trace", str(trace), "--",
             str(workload_bin(name)), "-trace", str(trace), *args)
    p1, t1 = cpu_pressure_us(), time.monotonic()
    pressure = (p1 - p0) / 1e6 / (t1 - t0) if p0 is not None and p1 is not None else 0.0
    assert (out / "sched.parquet").is_file()
    res = json.loads(gmpscope("ingest", "--json", "--no-progress", "--data-dir", str(data),
                              str(out)))
    trace_id = str(res[0]["id"] if isinstance(res, list) else res["id"])
    report = json.loads(gmpscope("diagnose", "--format", "json", "--data-dir", str(data),
                                 trace_id))
    return report, trace_id, pressure


def test_record_ingest_diagnose(tmp_path: Path) -> None:
    quota, qid, _ = recorded(tmp_path, "cpuquota", "-duration", "600ms")
    healthy, hid, pressure = recorded(tmp_path, "healthy", "-duration", "1500ms")
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}")
    for tid in (qid, hid):
        rec = sched_recording_of(engine, int(tid))
        assert rec is not None and rec["intervals"] > 0 and not rec["partial"]
        assert rec["method"] == "clock-snapshot"  # the poller recording's alignment
    status = {r["rule"]: r["status"] for r in quota["rules"]}
    assert status["sched.offcpu"] == "raised"
    healthy_status = {r["rule"]: r["status"] for r in healthy["rules"]}["sched.offcpu"]
    if pressure < CONTENDED:
        assert healthy_status == "clear", pressure
    else:
        # Other processes held the CPUs meanwhile (a parallel test run): the rule may
        # rightly see the healthy program's threads off the CPU too. Its own quota
        # still makes cpuquota's share the larger.
        q, h = offcpu_summary(engine, int(qid)), offcpu_summary(engine, int(hid))
        assert q is not None and h is not None
        assert q["share"] > h["share"], (pressure, q["share"], h["share"], healthy_status)
