"""``gmpscope record``: a program's system calls, as the OS sees them, to Parquet.

``gmpscope record [--go-trace FILE] -o DIR -- COMMAND ARGS...`` runs COMMAND
under the recorder; ``gmpscope record --pid PID --duration S -o DIR`` attaches
to a running process. Both write DIR/poller.parquet and DIR/meta.json.
``--backend ebpf`` records with eBPF (the default where it can run: a libbpf
ring buffer built at first use, else bpftrace),
``--backend strace`` with strace (collectors/poller/backend.py).
``gmpscope record --finish DIR`` makes a recording of what a killed recorder left.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, CLIError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "record",
        help="record a program's system calls (epoll, poll, io_uring, fds) with eBPF or strace",
        description="Run COMMAND under the recorder (eBPF with bpftrace where it can run, "
        "else strace), or attach to --pid for --duration seconds, "
        "and write poller.parquet and meta.json into DIR. Pass the Go program's own -trace "
        "flag yourself and name the file with --go-trace to tie the two together.",
        usage="gmpscope record [-h] -o DIR [--backend ebpf|strace] [--go-trace FILE] "
        "[--duration S] [--baseline] (--pid PID | -- COMMAND [ARGS...]) | --finish DIR",
    )
    p.add_argument("-o", "--out", type=Path, help="output directory")
    p.add_argument("--backend", choices=("ebpf", "strace"),
                   help="ebpf (bpftrace; needs root or CAP_BPF, tracefs) or strace; default: "
                   "ebpf when it can run here, else strace")
    p.add_argument("--bpftrace", help="bpftrace binary (default: bpftrace on PATH)")
    p.add_argument("--no-sched", action="store_true",
                   help="eBPF: do not record the kernel's scheduling (sched.parquet)")
    p.add_argument("--finish", type=Path, metavar="DIR",
                   help="make a recording (marked partial) of what a killed eBPF recorder "
                   "left in DIR")
    p.add_argument("--pid", type=int, help="attach to this running process instead")
    p.add_argument("--duration", type=float,
                   help="seconds to record (required with --pid; stops a command early)")
    p.add_argument("--go-trace", type=Path,
                   help="the Go execution trace the same run writes (recorded in meta.json)")
    p.add_argument("--baseline", action="store_true",
                   help="run COMMAND once without strace first, to measure the overhead")
    p.add_argument("--strace", help="strace binary (default: strace on PATH)")
    p.add_argument("--no-seccomp-bpf", action="store_true",
                   help="stop the tracee on every syscall (slower; for old kernels)")
    p.add_argument("--json", action="store_true", help="print meta.json instead of a summary")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND",
                   help="-- COMMAND ARGS...: the program to run under strace")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from collectors.poller.backend import choose
    from collectors.poller.collect import Options, record
    from collectors.poller.recorder import RecorderError

    if args.finish is not None:
        return _finish(args)
    if args.out is None:
        raise CLIError("-o DIR is required", EXIT_BAD_INPUT)
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if args.pid is not None and command:
        raise CLIError("give either --pid or a command, not both", EXIT_BAD_INPUT)
    if args.pid is None and not command:
        raise CLIError("nothing to record: give -- COMMAND ARGS... or --pid PID", EXIT_BAD_INPUT)
    if args.pid is not None and args.duration is None:
        raise CLIError("--pid needs --duration SECONDS", EXIT_BAD_INPUT)
    if args.duration is not None and args.duration <= 0:
        raise CLIError("--duration must be positive", EXIT_BAD_INPUT)
    if args.baseline and args.pid is not None:
        raise CLIError("--baseline needs a command to run twice, not --pid", EXIT_BAD_INPUT)
    if args.out.exists() and not args.out.is_dir():
        raise CLIError(f"output exists and is not a directory: {args.out}", EXIT_BAD_INPUT)
    backend, why_not = choose(args.backend, args.bpftrace)
    if backend == "ebpf" and why_not is not None:
        raise CLIError(why_not, EXIT_FAILURE)
    if why_not is not None and args.backend is None:
        print(f"gmpscope record: {why_not}", file=sys.stderr)
    opts = Options(
        out_dir=args.out,
        command=command,
        pid=args.pid,
        duration=args.duration,
        go_trace=args.go_trace,
        strace=args.strace,
        baseline=args.baseline,
        seccomp_bpf=not args.no_seccomp_bpf,
        backend=backend,
        bpftrace=args.bpftrace,
        sched=not args.no_sched,
    )
    try:
        meta = record(opts)
    except RecorderError as e:
        raise CLIError(str(e), EXIT_FAILURE) from None
    if args.json:
        print(json.dumps(meta, indent=2, ensure_ascii=False))
    else:
        print(summary_text(meta, args.out))
    return EXIT_OK


def _finish(args: argparse.Namespace) -> int:
    from collectors.poller.collect_ebpf import finish

    if not args.finish.is_dir():
        raise CLIError(f"not a directory: {args.finish}", EXIT_BAD_INPUT)
    meta = finish(args.finish)
    if meta is None:
        raise CLIError(f"{args.finish}: nothing to finish (no raw eBPF output and notes of a "
                       "killed recorder there)", EXIT_BAD_INPUT)
    print(json.dumps(meta, indent=2, ensure_ascii=False) if args.json
          else summary_text(meta, args.finish))
    return EXIT_OK


def summary_text(meta: dict[str, Any], out: Path) -> str:
    """A short human summary of a recording."""
    parse, ov = meta["parse"], meta["overhead"]
    from collectors.poller.collect_meta import recorder_name

    backend = recorder_name(meta)
    top = sorted(parse["by_name"].items(), key=lambda kv: -kv[1])[:8]
    span = ""
    if meta["first_ts_ns"] is not None:
        span = f" over {(meta['last_ts_ns'] - meta['first_ts_ns']) / 1e9:.3f} s"
    lines = [
        f"{out}/poller.parquet: {parse['syscalls']:,} syscalls on {len(meta['tids'])} threads"
        f"{span} ({backend}, {meta['mode']}, pid {meta['pid']}, stopped by {meta['stopped_by']})"
        + (" PARTIAL" if meta.get("partial") else ""),
        "  " + ", ".join(f"{k} {v:,}" for k, v in top),
        f"  {parse['signals']:,} signals, {parse['unknown']:,} unknown lines, "
        f"{parse['never_resumed']:,} calls unfinished at the end",
        f"  overhead: traced {ov['traced_wall_s']:.3f} s"
        + (f", untraced {ov['baseline_wall_s']:.3f} s (x{ov['slowdown']})"
           if ov["baseline_wall_s"] is not None else "")
        + f", {backend} CPU {ov['strace_cpu_s']:.2f} s",
    ]
    if backend == "ebpf":
        lines.append(f"  {parse.get('ready_events', 0):,} ready epoll events, "
                     f"{parse.get('uring_requests', 0):,} io_uring requests, "
                     f"{parse.get('lost', 0):,} events lost")
    if meta["go_trace"] is not None:
        gt = meta["go_trace"]
        lines.append(f"  Go trace: {gt['path']}" + ("" if gt["exists"] else " (not written)"))
        al = meta.get("alignment") or {}
        if al.get("offset_ns") is not None:
            lines.append(
                f"  aligned by {al['method']}: {al['matched']:,} of {al['go_syscalls']:,} Go "
                "syscalls contain an OS call of their thread"
            )
        elif al:
            lines.append(f"  not aligned: {al.get('note', '')}")
    return "\n".join(lines)
