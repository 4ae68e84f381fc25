"""meta.json of an eBPF recording: the strace backend's keys, plus ``ebpf``.

The keys every reader uses (``mode``, ``command``, ``pid``, ``tids``, the wall
span, ``stopped_by``, ``clock``, ``parse``, ``overhead``) mean what they mean
for strace (docs/schema.md); ``backend`` says which recorded, ``partial``
whether the recording is cut short (recorder killed, events lost).
"""

from __future__ import annotations

import os
from typing import Any

from collectors.poller.ebpf_parse import EbpfParser
from collectors.poller.ebpf_recorder import EbpfRun
from collectors.poller.parquet_out import Summary


def overhead(wall_s: float, cpu_s: float, syscalls: int,
             baseline: tuple[float, int] | None) -> dict[str, Any]:
    """The tracer's cost, as the strace backend reports it (``strace_cpu_s`` is the
    tracer's CPU whichever it is: the key keeps its first name)."""
    out: dict[str, Any] = {
        "traced_wall_s": round(wall_s, 6), "baseline_wall_s": None,
        "baseline_exit_status": None, "slowdown": None, "added_us_per_syscall": None,
        "strace_cpu_s": round(cpu_s, 3), "tracer_cpu_s": round(cpu_s, 3),
        "strace_cpu_share": round(cpu_s / wall_s, 4) if wall_s > 0 else None,
        "syscalls_recorded": syscalls,
        "syscalls_per_s": round(syscalls / wall_s, 1) if wall_s > 0 else None,
        "method": ("the same command run untraced, then traced; slowdown = traced/untraced "
                   "wall time" if baseline is not None else
                   "bpftrace's own CPU time sampled from /proc while recording (no untraced run)"),
    }
    if baseline is not None:
        out["baseline_wall_s"] = round(baseline[0], 6)
        out["baseline_exit_status"] = baseline[1]
        if baseline[0] > 0:
            out["slowdown"] = round(wall_s / baseline[0], 3)
        if syscalls:
            out["added_us_per_syscall"] = round((wall_s - baseline[0]) / syscalls * 1e6, 3)
    return out


def ebpf_meta(notes: dict[str, Any], run: EbpfRun | None, summary: Summary,
              parser: EbpfParser, baseline: tuple[float, int] | None,
              clock_method: str) -> dict[str, Any]:
    """meta.json for one eBPF recording (``run`` None: the recorder was killed)."""
    stats = parser.stats
    started = run.started_ns if run is not None else int(notes["started_ns"])
    ended = run.ended_ns if run is not None else (summary.last_ts_ns or started)
    # The target's time under the probes: from attach to when it ended or the
    # recording was stopped, not bpftrace's own detaching afterwards.
    done = run.extra.get("target_done_ns", ended) if run is not None else ended
    wall = (done - started) / 1e9
    partial = run is None or stats.lost > 0 or not stats.ended
    pid = int(notes["pid"])
    return {
        "backend": "ebpf",
        "partial": partial,
        "mode": notes["mode"],
        "command": notes["command"],
        "pid": pid,
        "tids": sorted(summary.tids),
        "start_wall_ns": started,
        "end_wall_ns": ended,
        "first_ts_ns": summary.first_ts_ns,
        "last_ts_ns": summary.last_ts_ns,
        "exit_status": run.exit_status if run is not None else None,
        "strace_exit_status": None,
        "stopped_by": run.stopped_by if run is not None else "recorder killed",
        "clock": notes["clock"],
        "go_trace": None,
        "strace": None,
        "ebpf": {
            "tool": "bpftrace",
            "argv": run.argv if run is not None else notes.get("bpftrace_argv"),
            "exit_status": run.bpftrace_status if run is not None else None,
            "stderr": (run.stderr if run is not None else "")[-4000:],
            "raw_file": "ebpf.txt.gz",
            "clock_end": run.clock_end if run is not None else None,
            "clock_method": clock_method,
            "io_uring_tracepoint": notes.get("io_uring"),
            "lost_events": stats.lost,
            # The probes' runs the kernel skipped (collectors/poller/bpf_misses.py).
            "skipped_runs": run.extra.get("skipped_runs") if run is not None else None,
            "complete": stats.ended,
            "not_filled": ["args (a short name=value list instead of strace's text)",
                           "fd_path/new_fd_path of descriptors neither a snapshot nor the "
                           "creating call describes"],
        },
        "parse": stats.as_dict(),
        "overhead": overhead(wall, run.cpu_s if run is not None else 0.0, summary.syscalls,
                             baseline),
        "host": {"cpus": os.cpu_count(), "kernel": os.uname().release},
    }


def recorder_name(meta: dict[str, Any]) -> str:
    """What recorded the system calls, from a recording's meta.json: strace,
    or eBPF through the libbpf ring buffer or bpftrace (recordings made before
    the ring buffer name no transport: bpftrace)."""
    if meta.get("backend") != "ebpf":
        return "strace"
    transport = (meta.get("ebpf") or {}).get("transport") or "bpftrace"
    return "eBPF (ring buffer)" if transport == "ringbuf" else "eBPF (bpftrace)"
