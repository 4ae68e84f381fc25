"""``gmpscope record``: a program's system calls, as the OS sees them, to Parquet.

``gmpscope record [--go-trace FILE] -o DIR -- COMMAND ARGS...`` runs COMMAND
under strace; ``gmpscope record --pid PID --duration S -o DIR`` attaches to a
running process. Both write DIR/poller.parquet and DIR/meta.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, CLIError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "record",
        help="record a program's system calls (epoll, poll, io_uring, fds) with strace",
        description="Run COMMAND under strace, or attach to --pid for --duration seconds, "
        "and write poller.parquet and meta.json into DIR. Pass the Go program's own -trace "
        "flag yourself and name the file with --go-trace to tie the two together.",
        usage="gmpscope record [-h] -o DIR [--go-trace FILE] [--duration S] [--baseline] "
        "(--pid PID | -- COMMAND [ARGS...])",
    )
    p.add_argument("-o", "--out", type=Path, required=True, help="output directory")
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
    from collectors.poller.collect import Options, record
    from collectors.poller.recorder import RecorderError

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
    opts = Options(
        out_dir=args.out,
        command=command,
        pid=args.pid,
        duration=args.duration,
        go_trace=args.go_trace,
        strace=args.strace,
        baseline=args.baseline,
        seccomp_bpf=not args.no_seccomp_bpf,
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


def summary_text(meta: dict[str, Any], out: Path) -> str:
    """A short human summary of a recording."""
    parse, ov = meta["parse"], meta["overhead"]
    top = sorted(parse["by_name"].items(), key=lambda kv: -kv[1])[:8]
    span = ""
    if meta["first_ts_ns"] is not None:
        span = f" over {(meta['last_ts_ns'] - meta['first_ts_ns']) / 1e9:.3f} s"
    lines = [
        f"{out}/poller.parquet: {parse['syscalls']:,} syscalls on {len(meta['tids'])} threads"
        f"{span} ({meta['mode']}, pid {meta['pid']}, stopped by {meta['stopped_by']})",
        "  " + ", ".join(f"{k} {v:,}" for k, v in top),
        f"  {parse['signals']:,} signals, {parse['unknown']:,} unknown lines, "
        f"{parse['never_resumed']:,} calls unfinished at the end",
        f"  overhead: traced {ov['traced_wall_s']:.3f} s"
        + (f", untraced {ov['baseline_wall_s']:.3f} s (x{ov['slowdown']})"
           if ov["baseline_wall_s"] is not None else "")
        + f", strace CPU {ov['strace_cpu_s']:.2f} s",
    ]
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
