"""A process that sleeps ``n`` times 5 ms, recorded by the scheduling recorder
(collectors/poller/sched_recorder.py) from before its first sleep: it stops
itself, the probes are attached, then it goes on. Needs root, bpftrace and
tracefs (the callers skip otherwise); the transport is the environment's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Sleeps:
    """The recording's summary and table, and what the sleeper's thread did:
    switched out asleep, woken, switched in (counts of its rows)."""

    summary: dict[str, Any]
    table: Any
    asleep: int
    woken: int
    on: int


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def record_sleeps(out: Path, n: int) -> Sleeps:
    """Record ``n`` sleeps of 5 ms into ``out``."""
    from collectors.poller import sched_parse
    from collectors.poller.sched_recorder import SchedRecorder

    code = ("import os, signal, time; os.kill(os.getpid(), signal.SIGSTOP); "
            f"[time.sleep(0.005) for _ in range({int(n)})]")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        while not _stopped(proc.pid):
            time.sleep(0.001)
        rec = SchedRecorder(proc.pid, out)
        rec.start()
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=120) == 0
        summary = rec.stop()
    finally:
        proc.kill()
    table = sched_parse.read_sched(out)
    assert table is not None
    rows = [r for r in table.to_pylist() if r["tid"] == proc.pid]
    return Sleeps(summary, table,
                  asleep=sum(1 for r in rows if r["event"] == "off" and r["state"] == "sleep"),
                  woken=sum(1 for r in rows if r["event"] == "wakeup"),
                  on=sum(1 for r in rows if r["event"] == "on"))
