"""Record the kernel's scheduling of a process's threads into ``sched.parquet``.

``SchedRecorder(pid, out_dir)``: :meth:`~SchedRecorder.start` runs the tracer
(returning once its probes are attached), :meth:`~SchedRecorder.stop` stops it
and writes ``sched.parquet`` (:mod:`.sched_parse`), returning a summary. The
tracer is, as for the system calls (:mod:`.ebpf_recorder`), the libbpf
ring-buffer loader of ``csrc/sched.bpf.c`` (``sched_loader``, built at first use
by :mod:`.ebpf_build`; no wake-up of the reader per context switch), or, when
it cannot be built or ``$GMPSCOPE_EBPF_TRANSPORT=bpftrace``, Debian's bpftrace
with the program of :mod:`.sched_probes`; both print the same lines.

The tracer writes its lines to a file in ``out_dir`` (``sched.bpftrace.txt``)
as they come, with the recorder's notes beside it (``sched.meta.json``: the
clock reading, the target); both are removed once sched.parquet is written.
If the recorder itself is killed, they stay, and reading the directory
(:func:`.sched_parse.read_sched`) turns them into a recording marked partial.
bpftrace is started with a parent-death signal (SIGINT), so it stops, flushing
its output, when the recorder dies. A bpftrace killed mid-way, or one that
exits on its own, gives a recording marked partial too. A target that exits
early is no error: the recording ends with its last thread (``target_exited``).
The summary's ``skipped_runs`` is the kernel's count of the probes' runs it
skipped (:mod:`.bpf_misses`): at most that many events are missing besides
``lost_events``.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from collectors.poller import bpf_misses, ebpf_build, sched_parse, sched_probes
from collectors.poller.recorder import clock_pair, stop_tracer

#: Where bpftrace needs tracefs (Debian does not mount it by default).
TRACEFS = Path("/sys/kernel/tracing")
#: How long bpftrace may take to attach its probes.
READY_TIMEOUT_S = 60.0
#: How long bpftrace may take to exit after SIGINT before it is killed.
STOP_GRACE_S = 10.0
#: Per-CPU perf buffer pages for bpftrace's output (its default is 64): a busy
#: Go program switches threads tens of thousands of times a second.
PERF_RB_PAGES = 1024
#: Stopping waits until bpftrace's output has not grown for DRAIN_QUIET_S (at most DRAIN_MAX_S).
DRAIN_QUIET_S = 0.1
DRAIN_MAX_S = 2.0
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.02


class SchedRecorderError(RuntimeError):
    """bpftrace is missing, may not run, or the target is not there."""


def find_bpftrace() -> str:
    """bpftrace's path, or SchedRecorderError saying what is missing."""
    found = shutil.which("bpftrace")
    if not found:
        raise SchedRecorderError("bpftrace not found: install it (Debian: apt-get install "
                                 "bpftrace); strace is the fallback, without scheduling")
    if os.geteuid() != 0:
        raise SchedRecorderError("recording the scheduler with bpftrace needs root "
                                 "(CAP_BPF and CAP_PERFMON)")
    if not (TRACEFS / "events" / "sched" / "sched_switch").is_dir():
        raise SchedRecorderError(f"tracefs is not mounted at {TRACEFS} (mount -t tracefs "
                                 f"nodev {TRACEFS}) or has no sched tracepoints")
    return found


def bpftrace_version(exe: str) -> str:
    """``v0.17.0`` from ``bpftrace --version``."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.strip().split()[-1] if out.strip() else "unknown"


def _die_with_parent() -> None:
    # In the child before exec: SIGINT when the recorder's thread dies, so an
    # orphaned bpftrace stops (and flushes) instead of recording for ever.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")


class SchedRecorder:
    """One bpftrace session over process ``pid``'s threads, written into ``out_dir``."""

    def __init__(self, pid: int, out_dir: Path) -> None:
        self.pid = pid
        self.out_dir = Path(out_dir)
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._clock_start: dict[str, int] = {}
        self._started_wall = 0
        self._seeded: list[int] = []
        self._version = "unknown"
        self._script: Path = self.out_dir / ".sched.bt"
        self.summary: dict[str, Any] | None = None
        self.transport = "bpftrace"  # or "ringbuf", chosen by start
        self.transport_note: str | None = None

    @property
    def raw_path(self) -> Path:
        """bpftrace's output file while recording."""
        return self.out_dir / sched_parse.RAW_FILE

    def start(self) -> None:
        """Start bpftrace; return once its probes are attached."""
        if self._proc is not None:
            raise SchedRecorderError("already started")
        exe = find_bpftrace()
        if not _alive(self.pid):
            raise SchedRecorderError(f"no such process: {self.pid}")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._seeded = sched_probes.thread_ids(self.pid)
        argv = self._ringbuf_argv()
        if argv is None:
            self._version = bpftrace_version(exe)
            self._script.write_text(sched_probes.script(self.pid, self._seeded),
                                    encoding="utf-8")
            argv = [exe, "-B", "line", str(self._script)]
        self.raw_path.unlink(missing_ok=True)
        env = {**os.environ, "BPFTRACE_MAP_KEYS_MAX": str(sched_probes.MAX_THREADS),
               "BPFTRACE_PERF_RB_PAGES": str(PERF_RB_PAGES)}
        self._stderr = open(self.out_dir / ".sched.stderr", "w+b")  # noqa: SIM115 - closed in stop
        try:
            # Line-buffered into the file (bpftrace's own -o file is fully
            # buffered): the BEGIN line says the probes are attached as soon as
            # they are, and a killed bpftrace loses no finished line.
            # (The ring-buffer loader writes the file itself, once per 50 ms drain.)
            with open(self.raw_path, "wb") as raw:
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL,
                    stdout=raw if self.transport == "bpftrace" else self._stderr,
                    stderr=self._stderr, env=env, preexec_fn=_die_with_parent)
        except OSError as e:
            self._cleanup(failed=True)
            raise SchedRecorderError(f"cannot run {argv[0]}: {e}") from None
        self._clock_start = clock_pair()
        self._started_wall = self._clock_start["realtime_ns"]
        self._write_notes()
        self._wait_ready()

    def _ringbuf_argv(self) -> list[str] | None:
        """The ring-buffer loader's command line; None (and why, in
        ``transport_note``) when bpftrace must record instead."""
        if os.environ.get(ebpf_build.TRANSPORT_ENV, "ringbuf") == "bpftrace":
            return None
        try:
            exe = str(ebpf_build.loader(ebpf_build.SCHED_LOADER_NAME))
        except ebpf_build.BuildError as e:
            self.transport_note = f"the ring-buffer loader is unavailable ({e})"
            return None
        self.transport = "ringbuf"
        self._version = bpftrace_version(exe)
        return [exe, "-p", str(self.pid), "-o", str(self.raw_path),
                "-T", ",".join(str(t) for t in self._seeded)]

    def _write_notes(self) -> None:
        notes = self._meta(partial=True, stopped_by=None, clock_end=None)
        tmp = self.out_dir / f".{sched_parse.RAW_META_FILE}.tmp"
        tmp.write_text(json.dumps(notes, sort_keys=True), encoding="utf-8")
        tmp.replace(self.out_dir / sched_parse.RAW_META_FILE)

    def _stderr_text(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        text: str = self._stderr.read().decode(errors="replace")
        self._stderr.seek(0, os.SEEK_END)
        return text

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._ready_mono() is not None:
                return
            if self._proc.poll() is not None:
                err = " ".join(line for line in self._stderr_text().splitlines()
                               if "RLIMIT_MEMLOCK" not in line)
                if self.transport == "ringbuf":  # libbpf prints the verifier's log: its last line
                    err = err.strip().splitlines()[-1] if err.strip() else ""
                self._cleanup(failed=True)
                raise SchedRecorderError(f"{self._tool()} exited ({self._proc.returncode}) "
                                         f"before its probes were attached: "
                                         f"{err.strip() or 'no message'}")
            time.sleep(_POLL_S)
        self._terminate()
        self._cleanup(failed=True)
        raise SchedRecorderError(f"{self._tool()} did not attach its probes in "
                                 f"{READY_TIMEOUT_S:.0f} s")

    def _tool(self) -> str:
        return "the ring-buffer loader" if self.transport == "ringbuf" else "bpftrace"

    def _ready_mono(self) -> int | None:
        try:
            with open(self.raw_path, encoding="utf-8", errors="replace") as fh:
                for _, line in zip(range(4), fh, strict=False):
                    if line.startswith("R ") and line.endswith("\n"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None

    def _meta(self, *, partial: bool, stopped_by: str | None,
              clock_end: dict[str, int] | None) -> dict[str, Any]:
        cs = self._clock_start
        clock = sched_parse.Clock(cs["monotonic_ns"], cs["realtime_minus_monotonic_ns"],
                                  None if clock_end is None else clock_end["monotonic_ns"],
                                  None if clock_end is None
                                  else clock_end["realtime_minus_monotonic_ns"])
        tool = "libbpf ring buffer" if self.transport == "ringbuf" else "bpftrace"
        return {"pid": self.pid, "tool": tool, "bpftrace_version": self._version,
                "transport": self.transport, "transport_note": self.transport_note,
                "probes": ["sched:sched_switch", "sched:sched_wakeup",
                           "sched:sched_wakeup_new", "task:task_newtask"],
                "clock": clock.as_dict(), "seeded_threads": len(self._seeded),
                "started_ns": self._started_wall,
                "ended_ns": None if clock_end is None else clock_end["realtime_ns"],
                "partial": partial, "stopped_by": stopped_by}

    def running(self) -> bool:
        """bpftrace is still recording."""
        return self._proc is not None and self._proc.poll() is None

    def target_alive(self) -> bool:
        """The target process is still there."""
        return _alive(self.pid)

    def _terminate(self) -> int | None:
        assert self._proc is not None
        return stop_tracer(self._proc, STOP_GRACE_S)

    def _cleanup(self, failed: bool = False) -> None:
        self._script.unlink(missing_ok=True)
        if failed:  # nothing was recorded: leave no raw file to be read as a recording
            self.raw_path.unlink(missing_ok=True)
            (self.out_dir / sched_parse.RAW_META_FILE).unlink(missing_ok=True)
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.close()
        (self.out_dir / ".sched.stderr").unlink(missing_ok=True)

    def _drain(self) -> None:
        # bpftrace drops what its perf buffers still hold when it is stopped:
        # let it write out what happened until now (a target's exit, just
        # seen, included) before stopping it.
        settled_at = time.monotonic() + DRAIN_MAX_S
        size = -1
        while time.monotonic() < settled_at:
            now = self.raw_path.stat().st_size if self.raw_path.exists() else 0
            if now == size:
                return
            size = now
            time.sleep(DRAIN_QUIET_S)

    def stop(self) -> dict[str, Any]:
        """Stop bpftrace, write sched.parquet; a summary: rows, lost events, partial, ..."""
        if self.summary is not None:
            return self.summary
        if self._proc is None:
            raise SchedRecorderError("not started")
        asked = clock_pair()  # the recording's end, unless the target ended it before
        died_early = self._proc.poll() is not None
        target_exited = not self.target_alive()
        if not died_early and (self.transport == "bpftrace" or target_exited):
            # The ring-buffer loader drains its buffer itself when stopped, but
            # a target that exited may not be done: a thread leaves its group
            # (and the process can be reaped) before its last switch out, so
            # let that be written first, whatever the transport.
            self._drain()
        # Read while the programs are loaded: the kernel's count of their runs it
        # skipped, for events that came while another BPF program ran on that CPU.
        skipped = None if died_early else bpf_misses.skipped_runs(self._proc.pid)
        status = self._terminate()
        clock_end = clock_pair()
        stderr = self._stderr_text()
        with open(self.raw_path, encoding="utf-8", errors="replace") as fh:
            parsed = sched_parse.parse_lines(fh)
        lost_lines = [ln for ln in stderr.splitlines() if ln.startswith("Lost ")]
        parsed.lost_events += sched_parse.parse_lines(lost_lines).lost_events
        if died_early:
            stopped_by = f"{self._tool()} exited ({status}) before it was stopped"
        elif target_exited:
            stopped_by = "target exited"
        else:
            stopped_by = "stopped"
        partial = died_early or parsed.lost_events > 0
        meta = self._meta(partial=partial, stopped_by=stopped_by, clock_end=clock_end)
        if parsed.ready_mono is not None:
            clock = sched_parse.Clock.of(meta["clock"])
            meta["started_ns"] = int(clock.wall(np.asarray([parsed.ready_mono], np.int64))[0])
        meta["ended_ns"] = asked["realtime_ns"]
        if (target_exited or died_early) and parsed.mono:
            # Nothing happened after the last event (the target's exit, or
            # bpftrace's death): the recording ends there.
            last = sched_parse.Clock.of(meta["clock"]).wall(
                np.asarray([max(parsed.mono)], np.int64))[0]
            meta["ended_ns"] = int(min(asked["realtime_ns"], last))
        meta.update(lost_events=parsed.lost_events, skipped_runs=skipped,
                    bad_lines=parsed.bad_lines,
                    new_threads=parsed.new_threads, target_exited=target_exited,
                    bpftrace_status=status)
        table = sched_parse.to_table(parsed, sched_parse.Clock.of(meta["clock"]), meta)
        path = sched_parse.write_table(table, self.out_dir)
        self.raw_path.unlink(missing_ok=True)
        (self.out_dir / sched_parse.RAW_META_FILE).unlink(missing_ok=True)
        self._cleanup()
        self.summary = {"path": str(path), "rows": int(table.num_rows),
                        "threads": len(set(parsed.tid)), "lost_events": parsed.lost_events,
                        "skipped_runs": skipped,
                        "bad_lines": parsed.bad_lines, "partial": partial,
                        "stopped_by": stopped_by, "target_exited": target_exited,
                        "started_ns": meta["started_ns"], "ended_ns": meta["ended_ns"],
                        "bpftrace_version": self._version, "transport": self.transport,
                        "transport_note": self.transport_note}
        return self.summary
