"""Real scheduling recordings for the tests: a Go workload run with ``-trace``
while collectors/poller/sched_recorder.py records its threads (bpftrace, root),
the Go trace and sched.parquet in one directory, then stored.

``record(binary, args, out)`` runs it (``await_stdin``: the workload waits for a
line before its load, so the recorder is attached first; the others run
``-duration`` long enough that the recorder attaches early in their load).
``stored(engine, out, data_dir)`` ingests the trace and attaches the recording.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine

from collectors.poller.sched_recorder import SchedRecorder
from ingest.load.os_sched import attach_sched_dir
from ingest.load.pipeline import ingest_trace_file

TRACE = "go.trace"
GO = "1.27.3"

#: Skip marks for tests that record: bpftrace as root.
NEEDS_BPFTRACE = [
    pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="bpftrace needs root"),
]


def workload_bin(name: str) -> Path:
    """A workload binary built with Go 1.27 (tests/support/workload_traces.py)."""
    from tests.support.workload_traces import build_workloads

    return build_workloads(GO) / name


def record(binary: Path, args: Sequence[str], out: Path, await_stdin: bool = False) -> Path:
    """Run ``binary -trace out/go.trace args`` under the scheduling recorder."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(binary), "-trace", str(out / TRACE), *args]
    if await_stdin:
        argv.append("-await-stdin")
    proc = subprocess.Popen(argv, cwd=out, stdin=subprocess.PIPE if await_stdin
                            else subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)
    rec = SchedRecorder(proc.pid, out)
    try:
        rec.start()
        if await_stdin:
            proc.communicate(b"go\n")
        else:
            proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if rec.running():
            rec.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{binary.name} exited {proc.returncode}")
    return out


def stored(engine: Engine, out: Path, data_dir: Path) -> int:
    """Ingest out/go.trace and attach out/sched.parquet to it; the trace id."""
    res = ingest_trace_file(engine, out / TRACE, f"{out.name}.trace", data_dir=data_dir)
    attach_sched_dir(engine, res.id, out)
    return int(res.id)
