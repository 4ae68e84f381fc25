"""The probe runs the kernel skips, counted and reported by the recorders.

A tracing BPF program does not run for an event that comes while another BPF
program runs on the same CPU; the kernel counts it per program. Reproduced for
real: a second bpftrace program that spins on every system call, with two
processes making system calls as fast as they can, so a timer's wakeup often
lands inside it. The scheduling recorder then misses some of a sleeper's
wakeups, and says at most how many: ``skipped_runs`` >= the wakeups missing.
Needs root, bpftrace and tracefs (skipped otherwise). The spinning program makes
every other BPF recording on the machine skip events too, so these tests are
marked ``alone``: ``make test`` runs them after the rest, by themselves.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.poller import bpf_misses, sched_parse
from collectors.poller.backend import ebpf_missing
from collectors.poller.ebpf_recorder import TRANSPORT_ENV
from tests.support.sleeps import record_sleeps

SLEEPS = 400


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "eBPF recording needs root (tests run as a user)"
    return ebpf_missing()


pytestmark = [pytest.mark.skipif(_why_not() is not None, reason=str(_why_not())),
              pytest.mark.alone]


@pytest.fixture
def busy_bpf() -> Iterator[subprocess.Popen[bytes]]:
    """A bpftrace program spinning 3000 times on every system call, and two
    processes calling getppid() in a loop: most of the CPUs' time is in BPF."""
    bpftrace = shutil.which("bpftrace")
    assert bpftrace is not None
    spin = ("tracepoint:raw_syscalls:sys_enter { $i = 0; while ($i < 3000) { $i++; } }")
    tracer = subprocess.Popen([bpftrace, "-e", spin], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    assert tracer.stdout is not None
    assert tracer.stdout.readline().startswith(b"Attaching")
    loop = "import os\nwhile True: os.getppid()"
    callers = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        yield tracer
    finally:
        for p in [*callers, tracer]:
            p.send_signal(signal.SIGINT if p is tracer else signal.SIGKILL)
        for p in [*callers, tracer]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_a_process_without_bpf_programs_has_no_count() -> None:
    assert bpf_misses.skipped_runs(os.getpid()) is None
    assert bpf_misses.skipped_runs(2**22 + 1) is None  # no such process


def test_a_tracer_holding_programs_has_a_count(
        busy_bpf: subprocess.Popen[bytes]) -> None:
    time.sleep(0.5)
    first = bpf_misses.skipped_runs(busy_bpf.pid)
    assert first is not None
    time.sleep(0.5)
    second = bpf_misses.skipped_runs(busy_bpf.pid)
    assert second is not None and second >= first  # a counter: it only grows


@pytest.mark.parametrize("transport", ["ringbuf", "bpftrace"])
def test_missing_wakeups_are_within_the_skipped_runs(
        transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        busy_bpf: subprocess.Popen[bytes]) -> None:
    """400 sleeps of 5 ms under the scheduling recorder beside a spinning probe:
    the kernel skips some of our runs (some of the sleeper's wakeups among them),
    and every wakeup missing is within the count the recorder reports."""
    monkeypatch.setenv(TRANSPORT_ENV, transport)
    got = record_sleeps(tmp_path, SLEEPS)
    summary, asleep, woken = got.summary, got.asleep, got.woken
    assert summary["transport"] == transport and summary["lost_events"] == 0
    skipped = summary["skipped_runs"]
    assert skipped is not None and skipped > 0
    assert sched_parse.table_meta(got.table)["skipped_runs"] == skipped
    assert asleep + skipped >= SLEEPS and woken + skipped >= SLEEPS, (asleep, woken, skipped)
