"""The OS side of a live session (``gmpscope live --os``): one eBPF session for the whole run.

One bpftrace process runs both programs of ``gmpscope record --backend ebpf``
(:mod:`collectors.poller.ebpf_program`: the target's system calls, epoll waits
with the events they returned) and of the scheduling recorder
(:mod:`collectors.poller.sched_probes`: sched_switch / sched_wakeup of its
threads), merged by :func:`combined_program` (bpftrace allows one BEGIN and one
END: their bodies are joined; the scheduling lines get a ``K`` prefix, as both
programs use ``R`` and ``O``). It starts once, before the first window, and
writes to a pipe (fully buffered: the canary probe's lines, printed for this
process's own ``getppid`` calls, push a buffer out when a window is cut) that
a reader thread parses as it comes: system-call lines
through :class:`~collectors.poller.ebpf_parse.EbpfParser`, scheduling lines
kept raw until their window is cut.

:meth:`OsSession.cut` turns what happened in one window's wall-clock span into
a recording directory (``poller.parquet``, ``meta.json``, ``sched.parquet``)
that ``POST /api/traces/<id>/poller`` attaches to that window's trace. A call
belongs to the window in which it returned (an epoll wait counts when it
delivers its events); a scheduling event to the window it happened in.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.live.os_target import OsSideError, registered
from collectors.poller import bpf_misses, sched_parse, sched_probes
from collectors.poller.backend import ebpf_missing, tracefs_path, uring_submit_tracepoint
from collectors.poller.ebpf_fds import Describer, Snapshot, snapshot
from collectors.poller.ebpf_parse import EbpfParser
from collectors.poller.ebpf_program import program
from collectors.poller.parquet_out import rows_to_table, write_recording
from collectors.poller.ready import ReadyResolver
from collectors.poller.recorder import clock_pair, stop_tracer
from collectors.poller.records import KIND_SYSCALL, Row

__all__ = ["OsSession", "OsSideError", "Slice", "combined_program", "os_missing"]

#: Scheduling lines carry this prefix in the merged program's output.
SCHED_TAG = "K"
READY_GUARD_S = 120.0  # bpftrace attaching ~60 tracepoints on a busy machine: a hang guard
#: How long after a window's end its events are taken: bpftrace reads its
#: per-CPU buffers in rounds, so an event is on the pipe a little after it happened.
LAG_S = 0.25
#: Events not yet cut are kept this long (a paused session, windows buffered while
#: the server is away): older ones are dropped and counted, so memory stays bounded.
KEEP_S = 120.0
#: And at most this many rows, whatever their age.
MAX_PENDING = 500_000
PERF_RB_PAGES = 1024
_PR_SET_PDEATHSIG = 1


def os_missing() -> str | None:
    """Why eBPF recording cannot run here (one line), None when it can."""
    missing = ebpf_missing()
    if missing is not None:
        return missing.split("; strace is the fallback")[0]
    if not (tracefs_path() / "events" / "sched" / "sched_switch").is_dir():
        return f"tracefs at {tracefs_path()} has no sched tracepoints"
    return None


# --------------------------------------------------------------------------
# the merged program


_BEGIN = re.compile(r"^BEGIN\n\{\n(.*?)\n\}\n", re.S)
_END = re.compile(r"\nEND\n\{\n(.*?)\n\}\n$", re.S)


def combined_program(pid: int, tids: list[int], canary_pid: int) -> str:
    """One bpftrace program: the eBPF backend's syscall probes and the scheduling probes.

    OsSideError when either program's text is not in the shape this merge expects.
    """
    calls = program(pid, canary_pid, io_uring=uring_submit_tracepoint())
    sched = sched_probes.script(pid, tids)
    n = 0
    for tag in ("R", "F", "O", "W", "N"):
        sched, k = re.subn(rf'printf\("{tag} ', f'printf("{SCHED_TAG}{tag} ', sched)
        n += k
    b, e = _BEGIN.search(sched), _END.search(sched)
    head = 'BEGIN { printf("B %llu\\n", nsecs); }'
    lines = calls.rstrip("\n").split("\n")
    if n != 5 or b is None or e is None or lines[0] != head or not lines[-1].startswith("END { "):
        raise OsSideError("the syscall and scheduling probe programs changed shape: "
                          "cannot merge them (collectors/live/os_side.py)")
    middle = sched[b.end():e.start()]
    begin = f'BEGIN {{ printf("B %llu\\n", nsecs);\n{b.group(1)}\n}}'
    end = "END { " + e.group(1).strip() + " " + lines[-1][len("END { "):]
    return "\n".join([begin, *lines[1:-1], middle.strip("\n"), end]) + "\n"


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Slice:
    """What one window's cut wrote."""

    directory: Path
    rows: int
    sched_events: int
    epoll_waits: int
    lost_events: int
    tracer_cpu_s: float
    parser_cpu_s: float


@dataclass
class _Pending:
    rows: list[Row] = field(default_factory=list)
    sched: list[tuple[int, str]] = field(default_factory=list)  # (monotonic ns, line)
    dropped: int = 0
    canaries: int = 0
    lost: int = 0


class OsSession:
    """One bpftrace process over process ``pid`` for a whole live run."""

    def __init__(self, pid: int, *, bpftrace: str = "bpftrace") -> None:
        self.pid = pid
        self.exe = bpftrace
        self.clock: dict[str, int] = {}
        self.started_ns = 0  # wall clock when the probes were attached
        self.command: list[str] = []
        self.ended = threading.Event()  # bpftrace exited (the target did, or it failed)
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = _Pending()
        self._parser: EbpfParser | None = None
        self._ready = threading.Event()
        self._stderr: list[str] = []
        self._ctls: dict[tuple[int, int], Row] = {}  # the latest epoll_ctl of each (epfd, fd)
        self._snaps: list[Snapshot] = []
        self._tracer_cpu = 0.0
        self._parser_cpu = 0.0  # CPU the reader thread spent parsing
        self._skipped = 0  # the probes' skipped runs counted at the last cut

    def start(self) -> None:
        """Start bpftrace; return once its probes are attached (OsSideError if they cannot be)."""
        missing = os_missing()
        if missing:
            raise OsSideError(missing)
        try:
            with open(f"/proc/{self.pid}/cmdline", "rb") as fh:
                self.command = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            raise OsSideError(f"no such process: {self.pid}") from None
        text = combined_program(self.pid, sched_probes.thread_ids(self.pid), os.getpid())
        env = {**os.environ, "BPFTRACE_PERF_RB_PAGES": str(PERF_RB_PAGES),
               "BPFTRACE_MAP_KEYS_MAX": str(max(131072, sched_probes.MAX_THREADS))}
        try:
            self._proc = subprocess.Popen(
                [self.exe, "-q", "-B", "full", "-e", text], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                env=env, preexec_fn=_die_with_parent)
        except OSError as e:
            raise OsSideError(f"cannot run {self.exe}: {e}") from None
        self._reader = threading.Thread(target=self._read, name="live-os-reader", daemon=True)
        self._reader.start()
        threading.Thread(target=self._read_stderr, name="live-os-stderr", daemon=True).start()
        deadline = time.monotonic() + READY_GUARD_S
        # bpftrace's output is fully buffered (a write per line would cost it more
        # than the probes): the canary lines of our getppid calls fill its buffer
        # once the probes are attached, and push the first lines out.
        while not self._ready.wait(0.002):
            self._canary(64)
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                err = " ".join(ln for ln in self._stderr if "RLIMIT_MEMLOCK" not in ln)
                raise OsSideError(f"bpftrace did not attach its probes: {err or 'no message'}")
        self._snap()
        self._ctls.update(registered(self.pid))

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            if len(self._stderr) < 50:
                self._stderr.append(line.strip())
            m = re.search(r"Lost (\d+) events", line)
            if m:
                with self._lock:
                    self._pending.lost += int(m.group(1))

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        clock_started = False
        t_cpu = time.thread_time()
        for line in self._proc.stdout:
            if line.startswith(SCHED_TAG):
                body = line[1:]
                try:
                    mono = int(body.split(" ", 2)[1])
                except (IndexError, ValueError):
                    continue
                with self._lock:
                    self._pending.sched.append((mono, body))
                continue
            if not clock_started and line.startswith("B "):
                # The probes are attached: the clock pair that maps their time to the wall.
                self.clock = clock_pair()
                self.started_ns = self.clock["realtime_ns"]
                self._parser = EbpfParser(to_wall=self._to_wall)
                clock_started = True
                self._parser.feed(line)
                self._ready.set()
                continue
            if line.startswith("C "):
                with self._lock:
                    self._pending.canaries += 1
                continue
            if self._parser is None:
                continue
            row = self._parser.feed(line)
            if row is not None:
                with self._lock:
                    p = self._pending
                    p.rows.append(row)
                    if len(p.rows) > MAX_PENDING:
                        cut = MAX_PENDING // 4
                        del p.rows[:cut]
                        p.dropped += cut
            now = time.thread_time()
            if now - t_cpu > 0.05:
                self._parser_cpu += now - t_cpu
                t_cpu = now
                self._trim()
        self._parser_cpu += time.thread_time() - t_cpu
        self.ended.set()

    def _trim(self) -> None:
        """Forget events older than KEEP_S that no window took."""
        cut = time.time_ns() - int(KEEP_S * 1e9)
        d0 = self.clock["realtime_minus_monotonic_ns"]
        with self._lock:
            p = self._pending
            if p.rows and (p.rows[0].end_ns or p.rows[0].ts_ns) < cut:
                keep = [r for r in p.rows if (r.end_ns or r.ts_ns) >= cut]
                p.dropped += len(p.rows) - len(keep)
                p.rows = keep
            if p.sched and p.sched[0][0] + d0 < cut:
                p.sched = [(m, ln) for m, ln in p.sched if m + d0 >= cut]

    def _to_wall(self, mono: int) -> int:
        return mono + self.clock["realtime_minus_monotonic_ns"]

    def _snap(self) -> None:
        s = snapshot(self.pid, time.time_ns())
        if s is not None:
            self._snaps = [*self._snaps[-3:], s]

    def _catch_up(self, end_wall_ns: int) -> None:
        """Wait until what happened before ``end_wall_ns`` has come through the pipe."""
        late = end_wall_ns + int(LAG_S * 1e9) - time.time_ns()
        if late > 0:
            time.sleep(late / 1e9)
        if self.ended.is_set():
            return
        with self._lock:
            seen = self._pending.canaries
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not self.ended.is_set():
            self._canary(64)  # enough of them flush bpftrace's buffer: all before is out
            with self._lock:
                if self._pending.canaries > seen:
                    return
            time.sleep(0.002)

    @staticmethod
    def _canary(n: int) -> None:
        for _ in range(n):
            os.getppid()  # the program's canary probe prints a line for this process's getppid

    def cut(self, start_ns: int, end_ns: int, out_dir: Path,
            label: dict[str, Any] | None = None) -> Slice:
        """Write the events of the wall-clock span [start_ns, end_ns) as a recording
        directory in ``out_dir``; events before ``end_ns`` are forgotten."""
        self._catch_up(end_ns)
        self._snap()
        d0 = self.clock["realtime_minus_monotonic_ns"]
        with self._lock:
            p = self._pending
            rows = [r for r in p.rows if start_ns <= (r.end_ns or r.ts_ns) < end_ns]
            p.rows = [r for r in p.rows if (r.end_ns or r.ts_ns) >= end_ns]
            sched = [ln for m, ln in p.sched if start_ns <= m + d0 < end_ns]
            p.sched = [(m, ln) for m, ln in p.sched if m + d0 >= end_ns]
            lost, p.lost = p.lost, 0
            dropped, p.dropped = p.dropped, 0
        rows.sort(key=lambda r: (r.ts_ns, r.tid))
        self._resolve_ready(rows)
        describer = Describer(rows, self._snaps)
        for r in rows:
            describer.feed(r)
        cpu = _cpu_s(self._proc.pid) if self._proc is not None else 0.0
        tracer, self._tracer_cpu = cpu - self._tracer_cpu, cpu
        # The kernel's count of the probes' runs it skipped, since the last cut.
        total = bpf_misses.skipped_runs(self._proc.pid) if self._proc is not None else None
        skipped = None if total is None else total - self._skipped
        self._skipped = total if total is not None else self._skipped
        parser_cpu, self._parser_cpu = self._parser_cpu, 0.0
        waits = sum(1 for r in rows if r.kind == KIND_SYSCALL and r.name.startswith("epoll_")
                    and r.name != "epoll_ctl" and r.name != "epoll_create1")
        out_dir.mkdir(parents=True, exist_ok=True)
        wall = (end_ns - start_ns) / 1e9
        meta = self._meta(rows, start_ns, end_ns, lost, dropped, tracer, parser_cpu, wall)
        meta["ebpf"]["skipped_runs"] = skipped
        # A window that began before the probes were attached (the first after a restart).
        late = start_ns < self.started_ns
        meta["partial"] = bool(meta["partial"] or late)
        meta["live"] = {**(label or {}), "probes_attached_ns": self.started_ns}
        write_recording(out_dir, rows_to_table(rows), meta)
        parsed = sched_parse.parse_lines(sched)
        sched_meta = {
            "pid": self.pid, "tool": "bpftrace", "probes": ["sched:sched_switch",
                                                           "sched:sched_wakeup",
                                                           "sched:sched_wakeup_new",
                                                           "task:task_newtask"],
            "clock": sched_parse.Clock(self.clock["monotonic_ns"], d0).as_dict(),
            "started_ns": start_ns, "ended_ns": end_ns,
            "partial": lost > 0 or dropped > 0 or late,
            "stopped_by": "live window", "lost_events": lost, "skipped_runs": skipped,
            "bad_lines": parsed.bad_lines,
            "new_threads": parsed.new_threads}
        sched_parse.write_table(sched_parse.to_table(
            parsed, sched_parse.Clock(self.clock["monotonic_ns"], d0), sched_meta), out_dir)
        return Slice(out_dir, len(rows), len(parsed.mono), waits, lost, tracer, parser_cpu)

    def _resolve_ready(self, rows: list[Row]) -> None:
        """ready_fds of the window's epoll waits, with the registrations of every window so far
        (Go registers a connection once, long before most of its waits)."""
        resolver = ReadyResolver()
        for ctl in self._ctls.values():
            resolver.note(-1, ctl)
        for i, r in enumerate(rows):
            resolver.note(i, r)
        for i, fds in resolver.resolve().items():
            if i >= 0:
                rows[i].ready_fds = fds
        for r in rows:
            if (r.kind == KIND_SYSCALL and r.name == "epoll_ctl" and r.result == 0
                    and r.epfd is not None and r.fd is not None):
                if r.op == "EPOLL_CTL_DEL":
                    self._ctls.pop((r.epfd, r.fd), None)
                else:
                    self._ctls[(r.epfd, r.fd)] = r

    def _meta(self, rows: list[Row], start_ns: int, end_ns: int, lost: int, dropped: int,
              tracer: float, parser_cpu: float, wall: float) -> dict[str, Any]:
        from collectors.poller.collect_meta import overhead

        syscalls = sum(1 for r in rows if r.kind == KIND_SYSCALL)
        parse = self._parser.stats.as_dict() if self._parser is not None else {}
        return {
            "backend": "ebpf", "partial": lost > 0 or dropped > 0, "mode": "attach",
            "command": self.command, "pid": self.pid, "tids": sorted({r.tid for r in rows}),
            "start_wall_ns": start_ns, "end_wall_ns": end_ns,
            "first_ts_ns": rows[0].ts_ns if rows else None,
            "last_ts_ns": max(((r.end_ns or r.ts_ns) for r in rows), default=None),
            "exit_status": None, "strace_exit_status": None, "stopped_by": "live window",
            "clock": self.clock, "go_trace": None, "strace": None,
            "ebpf": {"tool": "bpftrace", "argv": [self.exe, "-q", "-B", "full", "-e", "..."],
                     "session": "one bpftrace process for the whole live run (syscalls and "
                                "scheduling), cut into windows", "lost_events": lost,
                     "dropped_rows": dropped, "stderr": " ".join(self._stderr)[-2000:]},
            "parse": parse,
            "overhead": {**overhead(wall, tracer, syscalls, None),
                         "parser_cpu_s": round(parser_cpu, 3)},
        }

    def stop(self) -> None:
        """Stop bpftrace (SIGINT, then harder) and the reader."""
        proc = self._proc
        if proc is None:
            return
        stop_tracer(proc, 10.0)
        if self._reader is not None:
            self._reader.join(10)
