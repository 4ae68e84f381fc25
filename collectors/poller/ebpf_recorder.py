"""Run the eBPF backend over one process, spawned or attached.

Two transports carry the probes' records to ``ebpf.txt`` (the same text lines
either way, :mod:`collectors.poller.ebpf_program` documents them):

- ``ringbuf`` (the default): the libbpf program of ``csrc/`` (built at first
  use, :mod:`collectors.poller.ebpf_build`) writes binary records into a BPF
  ring buffer without waking the reader, and its loader drains it every 50 ms;
  the traced threads pay no wake-up per call;
- ``bpftrace``: the generated bpftrace program, whose printf wakes its reader
  for every event (2.7x slower on a loopback server, bench/RESULTS.md). Used when
  the ring-buffer loader cannot be built or loaded (one line says why), or when
  ``$GMPSCOPE_EBPF_TRANSPORT=bpftrace`` asks for it.

Spawn mode starts the command *stopped* (a tiny Python prologue sends itself
SIGSTOP before ``exec``), attaches the probes filtered on its pid, and only
then lets it run (SIGCONT): nothing it does is missed, and nothing of any other
process is recorded. Attach mode filters on the given pid from the moment the
probes are attached.

The tracer writes to a file in the output directory (``ebpf.txt``, in large
blocks: a write per event would cost the machine more than the probes).
Readiness is known by a canary: a last probe prints a line when the recorder
itself calls ``getppid``, and the recorder calls it until that line reaches the
file. Beside the raw file the recorder keeps its notes (``.ebpf.notes.json``:
the clock reading, the target, the transport) and the descriptor snapshots
(``fds.jsonl``), so a recorder killed mid-way leaves a directory that
:func:`collectors.poller.collect_ebpf.finish` turns into a recording marked
partial. The tracer gets SIGINT when the recorder dies (a parent-death signal):
it prints its END block and flushes, instead of recording for ever.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.poller import bpf_misses, ebpf_build
from collectors.poller.backend import tracefs_path, uring_submit_tracepoint
from collectors.poller.ebpf_fds import SNAPSHOT_EVERY_S, snapshot
from collectors.poller.ebpf_program import ALL_CALLS, CANARY_PAD, program
from collectors.poller.recorder import RecorderError, clock_pair, stop_tracer

RINGBUF = "ringbuf"
BPFTRACE = "bpftrace"
TRANSPORTS = (RINGBUF, BPFTRACE)
#: Names the transport (tests compare both on one workload); unset: ringbuf.
TRANSPORT_ENV = ebpf_build.TRANSPORT_ENV
RAW_FILE = "ebpf.txt"
NOTES_FILE = ".ebpf.notes.json"
FDS_FILE = "fds.jsonl"
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 15.0
#: Per-CPU perf buffer pages (bpftrace's default is 64): a loopback server
#: makes a hundred thousand calls a second.
PERF_RB_PAGES = 2048
MAP_KEYS_MAX = 65536
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.02
#: Runs before the command: stop, and exec it once the recorder sends SIGCONT.
_STOPPED_EXEC = ("import os, signal, sys; os.kill(os.getpid(), signal.SIGSTOP); "
                 "os.execv(sys.argv[1], sys.argv[1:])")


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[0]


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    f = stat[stat.rfind(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class EbpfRun:
    """What one tracer run (ring-buffer loader or bpftrace) produced, before parsing."""

    mode: str  # "spawn" or "attach"
    argv: list[str]
    raw: Path
    command: list[str]
    pid: int
    started_ns: int  # wall clock when the probes were attached
    ended_ns: int  # wall clock when the tracer had stopped (it takes seconds to detach)
    exit_status: int | None
    bpftrace_status: int | None  # the tracer's exit status (either transport)
    stopped_by: str  # "exit", "duration", "interrupt", "terminated"
    cpu_s: float  # the tracer's own CPU time
    stderr: str
    clock: dict[str, int]  # read when the probes were attached
    clock_end: dict[str, int]
    io_uring: str | None  # the submission tracepoint used, or None
    extra: dict[str, Any] = field(default_factory=dict)
    transport: str = BPFTRACE  # "ringbuf" or "bpftrace"
    transport_note: str | None = None  # why not the ring buffer, when it fell back

    @property
    def wall_s(self) -> float:
        """Seconds recorded."""
        return (self.ended_ns - self.started_ns) / 1e9


class EbpfRecorder:
    """One recording; :meth:`run` does it all, ``on_attached`` runs before the target resumes."""

    def __init__(self, out_dir: Path, *, bpftrace: str | None = None,
                 transport: str | None = None) -> None:
        self.out_dir = out_dir
        self.bpftrace = shutil.which(bpftrace or "bpftrace") or "bpftrace"
        self.exe = self.bpftrace  # the tracer run: bpftrace or the ring-buffer loader
        self.transport = transport or os.environ.get(TRANSPORT_ENV) or RINGBUF
        if self.transport not in TRANSPORTS:
            raise RecorderError(f"unknown eBPF transport {self.transport!r} "
                                f"(${TRANSPORT_ENV}: one of {', '.join(TRANSPORTS)})")
        self.transport_note: str | None = None
        self.raw = out_dir / RAW_FILE
        self._script = out_dir / ".ebpf.bt"
        self._fds = out_dir / FDS_FILE
        self._last_fds: dict[int, str] | None = None
        self._known_sockets: dict[str, str] = {}  # inode -> description, fixed once connected

    def _fall_back(self, why: str) -> None:
        """Use bpftrace's printf transport from now on, saying why in one line."""
        self.transport, self.exe = BPFTRACE, self.bpftrace
        self.transport_note = (f"the eBPF ring-buffer transport is unavailable ({why}); "
                               f"recording through bpftrace's printf, which slows the "
                               f"program more")
        print(f"gmpscope record: {self.transport_note}", file=sys.stderr, flush=True)

    def _argv(self, target: int, uring: str | None) -> list[str]:
        if self.transport == RINGBUF:
            try:
                self.exe = str(ebpf_build.loader())
            except ebpf_build.BuildError as e:
                self._fall_back(str(e))
        if self.transport == RINGBUF:
            slots = ",".join(str(c.slots) for c in ALL_CALLS)
            return [self.exe, "-p", str(target), "-c", str(os.getpid()), "-o", str(self.raw),
                    "-s", slots, "-u", uring or "none", "-t", str(tracefs_path())]
        self._script.write_text(program(target, os.getpid(), io_uring=uring), encoding="utf-8")
        return [self.exe, "-q", "-B", "full", "-o", str(self.raw), str(self._script)]

    def _start(self, target: int) -> tuple[subprocess.Popen[bytes], Any, str | None]:
        uring = uring_submit_tracepoint()
        argv = self._argv(target, uring)
        self.raw.unlink(missing_ok=True)
        self._fds.unlink(missing_ok=True)
        env = {**os.environ, "BPFTRACE_PERF_RB_PAGES": str(PERF_RB_PAGES),
               "BPFTRACE_MAP_KEYS_MAX": str(MAP_KEYS_MAX)}
        err = open(self.out_dir / ".ebpf.stderr", "w+b")  # noqa: SIM115 - closed by run
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    env=env, preexec_fn=_die_with_parent)
        except OSError as e:
            err.close()
            raise RecorderError(f"cannot run {self.exe}: {e}") from None
        return proc, err, uring

    def _start_attached(self, target: int) -> tuple[subprocess.Popen[bytes], Any, str | None]:
        """Start the tracer and wait for its probes; a ring-buffer loader that
        cannot load them (an older kernel's verifier, ...) gives way to bpftrace."""
        proc, err, uring = self._start(target)
        try:
            self._wait_attached(proc, err)
        except RecorderError as e:
            if self.transport != RINGBUF or proc.poll() is None:
                self._cleanup(err)
                raise
            self._cleanup(err)
            self._fall_back(str(e).split(": ", 1)[-1].split("; strace")[0][:300])
            proc, err, uring = self._start(target)
            try:
                self._wait_attached(proc, err)
            except BaseException:
                self._cleanup(err)
                raise
        except BaseException:
            self._cleanup(err)
            raise
        return proc, err, uring

    def _wait_attached(self, proc: subprocess.Popen[bytes], err: Any) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        mark = b"C " + CANARY_PAD.encode()
        pos = 0
        while time.monotonic() < deadline:
            os.getppid()  # the canary
            try:
                with open(self.raw, "rb") as fh:
                    fh.seek(max(0, pos - len(mark)))
                    chunk = fh.read()
                    if mark in chunk:
                        return
                    pos = fh.tell()
            except OSError:
                pass
            if proc.poll() is not None:
                # libbpf prints the verifier's whole log: its last line says it.
                why = _stderr(err, last=self.transport == RINGBUF)
                raise RecorderError(f"{self._tracer()} exited before its probes were attached: "
                                    + why + "; strace is the fallback (--backend strace)")
            time.sleep(0.002)
        _stop(proc)
        raise RecorderError(f"{self._tracer()} did not attach its probes in "
                            f"{READY_TIMEOUT_S:.0f} s")

    def _tracer(self) -> str:
        return "the ring-buffer loader" if self.transport == RINGBUF else "bpftrace"

    def _snapshot(self, pid: int) -> None:
        snap = snapshot(pid, time.time_ns(), self._known_sockets)
        if snap is None or snap.fds == self._last_fds:
            return
        self._last_fds = snap.fds
        with open(self._fds, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"wall_ns": snap.wall_ns, "fds": snap.fds}) + "\n")

    def _notes(self, **kv: Any) -> None:
        tmp = self.out_dir / f"{NOTES_FILE}.tmp"
        tmp.write_text(json.dumps(kv, sort_keys=True), encoding="utf-8")
        tmp.replace(self.out_dir / NOTES_FILE)

    def run(self, *, command: Sequence[str] = (), pid: int | None = None,
            duration: float | None = None,
            on_attached: Callable[[int], None] | None = None) -> EbpfRun:
        """Record ``command`` (spawned stopped) or ``pid`` until it exits, ``duration``
        passes, Ctrl-C or SIGTERM."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        child: subprocess.Popen[bytes] | None = None
        if pid is None:
            exe = shutil.which(command[0]) if command else None
            if exe is None:
                raise RecorderError(f"no such command (or not executable): {command[0]}")
            child = subprocess.Popen([sys.executable, "-c", _STOPPED_EXEC, exe, *command[1:]],
                                     stdin=subprocess.DEVNULL)
            while _state(child.pid) not in ("T", None):
                time.sleep(0.001)
            target, mode = child.pid, "spawn"
        else:
            if _state(pid) in (None, "Z", "X"):
                raise RecorderError(f"no such process: {pid}")
            target, mode = pid, "attach"
            command = _cmdline(pid)
        try:
            proc, err, uring = self._start_attached(target)
        except BaseException:
            if child is not None:
                child.kill()
                child.wait()
            raise
        clock = clock_pair()
        self._notes(mode=mode, command=list(command), pid=target, clock=clock, io_uring=uring,
                    bpftrace_argv=proc.args, started_ns=clock["realtime_ns"],
                    transport=self.transport, transport_note=self.transport_note)
        if child is None:  # a spawned target is still the stopped prologue: nothing to see
            self._snapshot(target)
        if on_attached is not None:
            on_attached(target)
        if child is not None:
            os.kill(child.pid, signal.SIGCONT)
        stopped_by, cpu = self._wait(proc, child, target, duration)
        target_done = time.time_ns()
        if child is not None and child.poll() is None:
            self._snapshot(target)
            _interrupt(child)
        if proc.poll() is None and child is None:
            self._snapshot(target)
        skipped = bpf_misses.skipped_runs(proc.pid) if proc.poll() is None else None
        status = _stop(proc)
        clock_end = clock_pair()
        stderr = _stderr(err)
        self._cleanup(err)
        return EbpfRun(mode=mode, argv=[str(a) for a in proc.args], raw=self.raw,  # type: ignore[union-attr]
                       command=list(command), pid=target, started_ns=clock["realtime_ns"],
                       ended_ns=clock_end["realtime_ns"],
                       exit_status=child.returncode if child is not None and stopped_by == "exit"
                       else None, bpftrace_status=status, stopped_by=stopped_by, cpu_s=cpu,
                       stderr=stderr, clock=clock, clock_end=clock_end, io_uring=uring,
                       extra={"target_done_ns": target_done, "skipped_runs": skipped},
                       transport=self.transport, transport_note=self.transport_note)

    def _wait(self, proc: subprocess.Popen[bytes], child: subprocess.Popen[bytes] | None,
              target: int, duration: float | None) -> tuple[str, float]:
        deadline = None if duration is None else time.monotonic() + duration
        next_snap = time.monotonic() + SNAPSHOT_EVERY_S
        cpu = 0.0
        old = signal.getsignal(signal.SIGTERM)

        def _term(signum: int, frame: Any) -> None:
            raise _Terminated

        in_main = _is_main_thread()
        if in_main:
            signal.signal(signal.SIGTERM, _term)
        try:
            while True:
                if child is not None and child.poll() is not None:
                    return "exit", cpu
                if child is None and _state(target) in (None, "Z", "X"):
                    return "exit", cpu
                if proc.poll() is not None:  # the tracer ended by itself: the group exited
                    return "exit", cpu
                sample = _cpu_seconds(proc.pid)
                cpu = sample if sample is not None else cpu
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return "duration", cpu
                if now >= next_snap:
                    self._snapshot(target)
                    next_snap = now + SNAPSHOT_EVERY_S
                time.sleep(_POLL_S)
        except KeyboardInterrupt:
            return "interrupt", cpu
        except _Terminated:
            return "terminated", cpu
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, old)

    def _cleanup(self, err: Any) -> None:
        self._script.unlink(missing_ok=True)
        if not err.closed:
            err.close()
        (self.out_dir / ".ebpf.stderr").unlink(missing_ok=True)


class _Terminated(Exception):
    pass


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _stderr(err: Any, *, last: bool = False) -> str:
    if err.closed:
        return ""
    err.flush()
    err.seek(0)
    text: str = err.read().decode(errors="replace")
    if last:
        return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
    # bpftrace 0.17 warns about RLIMIT_MEMLOCK on kernels that account BPF
    # memory by cgroup (5.11+), where the limit no longer matters.
    return " ".join(ln.strip() for ln in text.splitlines()
                    if ln.strip() and "RLIMIT_MEMLOCK" not in ln)


def _interrupt(child: subprocess.Popen[bytes]) -> None:
    """SIGINT the spawned program (as Ctrl-C would), then insist."""
    for sig, wait in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            child.send_signal(sig)
            child.wait(timeout=wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired, KeyboardInterrupt):
            continue


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGINT the tracer (its END block prints the calls still open, then it flushes)."""
    return stop_tracer(proc, STOP_GRACE_S)
