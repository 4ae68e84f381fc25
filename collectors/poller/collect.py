"""One recording end to end: strace -> parse -> poller.parquet + meta.json.

The raw strace output is kept next to the Parquet as ``strace.txt``: it is
the source of every row, and what a bug report about the parser needs.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.poller import recorder
from collectors.poller.parquet_out import Summary, collect_table, write_recording
from collectors.poller.records import COVERED_SYSCALLS
from collectors.poller.strace_parse import ParseStats, StraceParser, iter_file_lines, iter_rows

RAW_FILE = "strace.txt.gz"
_RAW_TMP = "strace.txt"


@dataclass
class Options:
    """What to record and how."""

    out_dir: Path
    command: Sequence[str] = ()
    pid: int | None = None
    duration: float | None = None
    go_trace: Path | None = None
    strace: str | None = None
    baseline: bool = False  # spawn mode: run the command once untraced first
    seccomp_bpf: bool = True
    backend: str = "strace"  # "strace" or "ebpf" (collectors.poller.backend.choose)
    bpftrace: str | None = None
    sched: bool = True  # eBPF: also record the kernel's scheduling (sched.parquet)


def record(opts: Options) -> dict[str, Any]:
    """Record, parse and write; returns meta.json's content."""
    if opts.backend == "ebpf":
        return record_ebpf(opts)
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    raw = opts.out_dir / _RAW_TMP
    raw.unlink(missing_ok=True)
    exe = recorder.find_strace(opts.strace)
    baseline: tuple[float, int] | None = None
    if opts.pid is not None:
        if opts.duration is None:
            raise recorder.RecorderError("attaching needs a --duration")
        rec = recorder.record_attach(opts.pid, opts.duration, raw, strace=exe)
    else:
        if opts.baseline:
            baseline = recorder.run_baseline(opts.command, opts.duration)
        rec = recorder.record_spawn(
            opts.command, raw, strace=exe, duration=opts.duration, seccomp_bpf=opts.seccomp_bpf
        )
    parser = StraceParser(default_tid=rec.pid or 0, attached=rec.mode == "attach")
    table, summary = collect_table(iter_rows(parser, iter_file_lines(raw)))
    _gzip(raw, opts.out_dir / RAW_FILE)
    if rec.pid is None and table.num_rows:
        # Spawn mode: the program's main thread is the only one before its first clone.
        rec.pid = int(table.column("tid")[0].as_py())
    meta = build_meta(opts, rec, summary, parser.stats, recorder.strace_version(exe), baseline)
    meta["backend"] = "strace"
    meta["alignment"] = _alignment(opts.go_trace, table, rec.clock)
    write_recording(opts.out_dir, table, meta)
    return meta


def record_ebpf(opts: Options) -> dict[str, Any]:
    """The eBPF backend (collect_ebpf): bpftrace, with the scheduling recorder
    started on the same target before it runs, when there is one."""
    from collectors.poller import collect_ebpf
    from collectors.poller.ebpf_recorder import EbpfRecorder

    if opts.pid is not None and opts.duration is None:
        raise recorder.RecorderError("attaching needs a --duration")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    baseline = None
    if opts.baseline and opts.pid is None:
        baseline = recorder.run_baseline(opts.command, opts.duration)
    sched: list[Any] = []
    sched_note: dict[str, Any] = {}

    def start_sched(pid: int) -> None:
        if not opts.sched:
            return
        try:
            from collectors.poller.sched_recorder import SchedRecorder, SchedRecorderError
        except ImportError:
            return
        rec = SchedRecorder(pid, opts.out_dir)
        try:
            rec.start()
        except SchedRecorderError as e:
            sched_note["error"] = str(e)
            return
        sched.append(rec)

    ebpf = EbpfRecorder(opts.out_dir, bpftrace=opts.bpftrace)
    try:
        run = ebpf.run(command=opts.command, pid=opts.pid, duration=opts.duration,
                       on_attached=start_sched)
    finally:
        for s in sched:
            sched_note.update(s.stop())
    notes = {"mode": run.mode, "command": run.command, "pid": run.pid, "clock": run.clock,
             "io_uring": run.io_uring, "started_ns": run.started_ns}
    meta = collect_ebpf.write(opts.out_dir, notes, run, baseline, {})
    meta["ebpf"]["version"] = collect_ebpf.bpftrace_version(ebpf.exe)
    if opts.go_trace is not None:
        path = opts.go_trace.resolve()
        meta["go_trace"] = {"path": str(path), "name": path.name, "exists": path.is_file(),
                            "size": path.stat().st_size if path.is_file() else None}
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        meta["alignment"] = _alignment(opts.go_trace,
                                       pq.read_table(opts.out_dir / "poller.parquet"), run.clock)
    else:
        meta["alignment"] = None
    meta["sched"] = sched_note or None
    import pyarrow.parquet as pq

    write_recording(opts.out_dir, pq.read_table(opts.out_dir / "poller.parquet"), meta)
    return meta


def _alignment(go_trace: Path | None, table: Any, clock: dict[str, int]) -> dict[str, Any] | None:
    """How the Go trace of the same run lines up with the recording (None without one)."""
    if go_trace is None:
        return None
    from collectors.gotrace import TraceFormatError
    from collectors.poller.gojoin import align_with_trace

    if not go_trace.is_file():
        return {"method": "none", "note": f"the Go trace was not written: {go_trace}"}
    try:
        found, _meta = align_with_trace(go_trace, table, clock or None)
    except (TraceFormatError, OSError) as e:
        return {"method": "none", "note": f"the Go trace could not be decoded: {e}"}
    return found.as_dict()


def _gzip(src: Path, dest: Path) -> None:
    with open(src, "rb") as fin, gzip.open(dest, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    src.unlink()


def overhead(
    rec: recorder.Recording, summary: Summary, baseline: tuple[float, int] | None
) -> dict[str, Any]:
    """The collector's cost: wall time traced vs untraced, strace's own CPU."""
    syscalls = summary.syscalls
    wall = rec.wall_s
    out: dict[str, Any] = {
        "traced_wall_s": round(wall, 6),
        "baseline_wall_s": None,
        "baseline_exit_status": None,
        "slowdown": None,
        "added_us_per_syscall": None,
        "strace_cpu_s": round(rec.strace_cpu_s, 3),
        "strace_cpu_share": round(rec.strace_cpu_s / wall, 4) if wall > 0 else None,
        "syscalls_recorded": syscalls,
        "syscalls_per_s": round(syscalls / wall, 1) if wall > 0 else None,
        "method": (
            "the same command run untraced, then traced; slowdown = traced/untraced wall time"
            if baseline is not None
            else "strace's own CPU time sampled from /proc while recording (no untraced run)"
        ),
    }
    if baseline is not None:
        out["baseline_wall_s"] = round(baseline[0], 6)
        out["baseline_exit_status"] = baseline[1]
        if baseline[0] > 0:
            out["slowdown"] = round(wall / baseline[0], 3)
        if syscalls:
            # What each stop cost the program, if the stops were all of it.
            out["added_us_per_syscall"] = round((wall - baseline[0]) / syscalls * 1e6, 1)
    return out


def build_meta(
    opts: Options,
    rec: recorder.Recording,
    summary: Summary,
    stats: ParseStats,
    version: str,
    baseline: tuple[float, int] | None,
) -> dict[str, Any]:
    """meta.json for one recording (keys documented in docs/schema.md)."""
    tids = sorted(summary.tids)
    go_trace: dict[str, Any] | None = None
    if opts.go_trace is not None:
        path = opts.go_trace.resolve()
        go_trace = {
            "path": str(path),
            "name": path.name,
            "exists": path.is_file(),
            "size": path.stat().st_size if path.is_file() else None,
        }
    return {
        "mode": rec.mode,
        "command": rec.command,
        "pid": rec.pid,
        "tids": tids,
        "start_wall_ns": rec.started_ns,
        "end_wall_ns": rec.ended_ns,
        "first_ts_ns": summary.first_ts_ns,
        "last_ts_ns": summary.last_ts_ns,
        "exit_status": rec.exit_status,
        "strace_exit_status": rec.strace_status,
        "stopped_by": rec.stopped_by,
        "clock": rec.clock,
        "go_trace": go_trace,
        "strace": {
            "path": rec.strace_argv[0],
            "version": version,
            "argv": rec.strace_argv,
            "stderr": rec.stderr[-4000:],
            "raw_file": RAW_FILE,
            "syscalls": list(COVERED_SYSCALLS),
        },
        "parse": stats.as_dict(),
        "overhead": overhead(rec, summary, baseline),
        "host": {"cpus": os.cpu_count(), "kernel": os.uname().release},
    }
