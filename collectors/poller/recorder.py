"""Run strace over a program: spawn a command, or attach to a running process.

strace writes its output to a file (``-o``), never through a pipe, so a busy
program is not slowed down further by our reading. The recorder waits for
the traced program to end, for ``duration`` to pass, or for Ctrl-C, then
stops strace cleanly with SIGINT (an attached process is detached and keeps
running; a spawned one gets the SIGINT too, as from a terminal) and reads
the file. While waiting it samples strace's own CPU time from
``/proc/PID/stat``: the collector's cost on the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.poller.records import COVERED_SYSCALLS

#: Flags that give the output strace_parse expects: thread ids, ns wall-clock
#: timestamps and ns durations, fds decorated with paths and socket addresses.
STRACE_FLAGS: tuple[str, ...] = (
    "-f",
    "-q",
    "--absolute-timestamps=format:unix,precision:ns",
    "--syscall-times=ns",
    "-yy",
    "-s",
    "64",
)
#: How long strace may take to detach and exit after SIGINT before it is killed.
STOP_GRACE_S = 15.0
_POLL_S = 0.02


class RecorderError(RuntimeError):
    """strace is missing, may not trace, or failed."""


@dataclass
class Recording:
    """What a run of strace produced, before parsing."""

    mode: str  # "spawn" or "attach"
    strace_argv: list[str]
    output: Path
    command: list[str]
    pid: int | None  # the traced process (spawned child or the attached pid)
    started_ns: int  # wall clock when strace was started
    ended_ns: int  # wall clock when strace had exited
    exit_status: int | None  # the command's exit status (spawn mode, when it exited)
    strace_status: int | None  # strace's own exit status (negative: killed by that signal)
    stopped_by: str  # "exit", "duration" or "interrupt"
    strace_cpu_s: float  # strace's own user+system CPU time (sampled)
    stderr: str = ""
    #: CLOCK_REALTIME and CLOCK_MONOTONIC read back to back when strace started:
    #: Go 1.22+ trace time is the monotonic clock, so this maps it to the wall.
    clock: dict[str, int] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        """Seconds strace ran."""
        return (self.ended_ns - self.started_ns) / 1e9


def find_strace(strace: str | None = None) -> str:
    """Path of the strace binary, or RecorderError saying how to get one."""
    found = shutil.which(strace or "strace")
    if not found:
        raise RecorderError(
            f"strace not found ({strace or 'strace'}): install it (Debian: apt-get install "
            "strace) or pass --strace PATH"
        )
    return found


def strace_version(strace: str) -> str:
    """``6.1`` from ``strace -V``; ``unknown`` if it does not say."""
    try:
        out = subprocess.run([strace, "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"version\s+(\S+)", out)
    return m.group(1) if m else "unknown"


def strace_argv(
    strace: str,
    output: Path,
    *,
    command: Sequence[str] | None = None,
    pid: int | None = None,
    syscalls: Sequence[str] = COVERED_SYSCALLS,
    seccomp_bpf: bool = True,
) -> list[str]:
    """The strace command line for spawning ``command`` or attaching to ``pid``."""
    argv = [strace, *STRACE_FLAGS, "-e", "trace=" + ",".join(syscalls), "-o", str(output)]
    if pid is not None:
        return [*argv, "-p", str(pid)]
    if not command:
        raise RecorderError("nothing to record: give a command or a pid")
    # seccomp-bpf stops the tracee only on the traced calls: far less
    # overhead. It needs a spawned tracee and -f (both true here).
    return [*argv, *(["--seccomp-bpf"] if seccomp_bpf else []), "--", *command]


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child_of(ppid: int) -> int | None:
    """A child process of ``ppid`` (the spawned tracee), from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == ppid:
            return int(entry)
    return None


def _explain_failure(stderr: str, pid: int | None) -> str:
    if "Operation not permitted" in stderr:
        where = f"process {pid}" if pid is not None else "the command"
        return (
            f"strace may not trace {where} (ptrace not permitted: it needs CAP_SYS_PTRACE "
            "or kernel.yama.ptrace_scope allowing it; in a container, run it with "
            f"--cap-add SYS_PTRACE): {stderr.strip()}"
        )
    if "No such process" in stderr:
        return f"no such process: {pid}: {stderr.strip()}"
    return f"strace failed: {stderr.strip() or 'no message'}"


def run_strace(
    argv: list[str],
    output: Path,
    *,
    mode: str,
    command: Sequence[str],
    pid: int | None,
    duration: float | None,
) -> Recording:
    """Run strace until the traced program ends, ``duration`` passes or Ctrl-C."""
    stderr_path = output.with_name(output.name + ".stderr")
    clock = clock_pair()
    started = time.time_ns()
    with open(stderr_path, "w+") as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=err)
        except OSError as e:
            raise RecorderError(f"cannot run {argv[0]}: {e}") from None
        deadline = None if duration is None else time.monotonic() + duration
        cpu = 0.0
        stopped_by = "exit"
        tracee = pid
        try:
            while proc.poll() is None:
                sample = _cpu_seconds(proc.pid)
                if sample is not None:
                    cpu = sample
                if deadline is not None and time.monotonic() >= deadline:
                    stopped_by = "duration"
                    break
                time.sleep(_POLL_S)
        except KeyboardInterrupt:
            stopped_by = "interrupt"
        if proc.poll() is None:
            if mode == "spawn":
                # Looked up now, not at start: strace forks short-lived
                # helpers of its own (the seccomp-bpf probe) before the tracee.
                tracee = _child_of(proc.pid)
            _stop(proc, tracee if mode == "spawn" else None)
        status = proc.returncode
        ended = time.time_ns()
        err.seek(0)
        stderr = err.read()
    stderr_path.unlink(missing_ok=True)
    produced = output.is_file() and output.stat().st_size > 0
    if not produced and status != 0:
        raise RecorderError(_explain_failure(stderr, pid))
    return Recording(
        mode=mode,
        strace_argv=list(argv),
        output=output,
        command=list(command),
        pid=tracee,
        started_ns=started,
        ended_ns=ended,
        exit_status=status if mode == "spawn" and stopped_by == "exit" else None,
        strace_status=status,
        stopped_by=stopped_by,
        strace_cpu_s=cpu,
        stderr=stderr,
        clock=clock,
    )


def stop_tracer(proc: subprocess.Popen[Any], grace_s: float) -> int | None:
    """Stop a tracer (bpftrace) as politely as it allows: SIGINT (its END block
    runs and it flushes) for ``grace_s``, then SIGTERM, then SIGKILL; its status."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except ProcessLookupError:
            break
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
    return proc.returncode


def clock_pair() -> dict[str, int]:
    """CLOCK_REALTIME and CLOCK_MONOTONIC, read back to back (the tighter of 3 tries)."""
    best: tuple[int, int, int] | None = None
    for _ in range(3):
        r1 = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r2 = time.clock_gettime_ns(time.CLOCK_REALTIME)
        if best is None or r2 - r1 < best[2]:
            best = ((r1 + r2) // 2, m, r2 - r1)
    assert best is not None
    return {"realtime_ns": best[0], "monotonic_ns": best[1],
            "realtime_minus_monotonic_ns": best[0] - best[1], "uncertainty_ns": best[2]}


def _stop(proc: subprocess.Popen[bytes], tracee: int | None) -> None:
    """Stop a recording: SIGINT the spawned program (as Ctrl-C in a terminal
    would) and let strace see it exit; SIGINT strace itself (it detaches from
    an attached process), then insist if it hangs."""
    if tracee is not None:
        try:
            os.kill(tracee, signal.SIGINT)
            proc.wait(timeout=STOP_GRACE_S)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        except KeyboardInterrupt:
            pass
    for sig, wait in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting politely
            continue


def record_spawn(
    command: Sequence[str],
    output: Path,
    *,
    strace: str | None = None,
    duration: float | None = None,
    seccomp_bpf: bool = True,
) -> Recording:
    """Run ``command`` under strace, writing strace's output to ``output``."""
    exe = find_strace(strace)
    if command and shutil.which(command[0]) is None:
        raise RecorderError(f"no such command (or not executable): {command[0]}")
    argv = strace_argv(exe, output, command=command, seccomp_bpf=seccomp_bpf)
    return run_strace(argv, output, mode="spawn", command=command, pid=None, duration=duration)


def record_attach(
    pid: int, duration: float, output: Path, *, strace: str | None = None
) -> Recording:
    """Attach to every thread of ``pid`` for ``duration`` seconds, then detach."""
    exe = find_strace(strace)
    if not os.path.exists(f"/proc/{pid}"):
        raise RecorderError(f"no such process: {pid}")
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            command = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        command = []
    argv = strace_argv(exe, output, pid=pid)
    return run_strace(argv, output, mode="attach", command=command, pid=pid, duration=duration)


def run_baseline(command: Sequence[str], duration: float | None = None) -> tuple[float, int]:
    """Run ``command`` without strace; (wall seconds, exit status).

    The same command timed with and without the tracer is the overhead the
    traced program felt. A ``duration`` stops it with SIGINT as the traced
    run would be stopped.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL)
    except OSError as e:
        raise RecorderError(f"cannot run {command[0]}: {e}") from None
    try:
        proc.wait(timeout=duration)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait()
    return time.monotonic() - started, proc.returncode
