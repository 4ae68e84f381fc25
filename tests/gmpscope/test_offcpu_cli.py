"""End to end through the CLI (issue 26): `gmpscope record --backend ebpf` of a
real Go program writes sched.parquet beside poller.parquet, `gmpscope ingest DIR`
stores both (the poller loader's hook, ingest/load/os_sched.py), and `gmpscope
diagnose` raises sched.offcpu for the cpuquota workload and not for healthy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingest.load.os_sched import sched_recording_of
from ingest.store.db import make_engine
from tests.support.sched_recordings import NEEDS_BPFTRACE, workload_bin

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, *NEEDS_BPFTRACE]


def gmpscope(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "gmpscope", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"gmpscope {args}: {proc.stderr}"
    return proc.stdout


def recorded(tmp: Path, name: str, *args: str) -> tuple[dict[str, Any], str]:
    out, data = tmp / name, tmp / "data"
    trace = out / "go.trace"
    out.mkdir(parents=True)
    gmpscope("record", "--backend", "ebpf", "-o", str(out), "--go-trace", str(trace), "--",
             str(workload_bin(name)), "-trace", str(trace), *args)
    assert (out / "sched.parquet").is_file()
    res = json.loads(gmpscope("ingest", "--json", "--no-progress", "--data-dir", str(data),
                              str(out)))
    trace_id = str(res[0]["id"] if isinstance(res, list) else res["id"])
    report = json.loads(gmpscope("diagnose", "--format", "json", "--data-dir", str(data),
                                 trace_id))
    return report, trace_id


def test_record_ingest_diagnose(tmp_path: Path) -> None:
    quota, qid = recorded(tmp_path, "cpuquota", "-duration", "600ms")
    healthy, hid = recorded(tmp_path, "healthy", "-duration", "1500ms")
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}")
    for tid in (qid, hid):
        rec = sched_recording_of(engine, int(tid))
        assert rec is not None and rec["intervals"] > 0 and not rec["partial"]
        assert rec["method"] == "clock-snapshot"  # the poller recording's alignment
    status = {r["rule"]: r["status"] for r in quota["rules"]}
    assert status["sched.offcpu"] == "raised"
    assert {r["rule"]: r["status"] for r in healthy["rules"]}["sched.offcpu"] == "clear"
