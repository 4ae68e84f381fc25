"""``gmpscope live``: continuous collection from a running Go service (docs/live.md).

Pulls back-to-back windows from the service's ``/debug/pprof/trace`` and sends
each to a gmpscope server (``serve`` or ``ingest-server``) as the next segment
of a live session, shown at ``/live/<session>``. The work is done by
:mod:`collectors.live.collector`; this module parses arguments and handles
signals.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, CLIError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$")


def parse_window(text: str) -> float:
    """``1s``, ``500ms``, ``0.5`` (seconds) -> seconds, between 0.05 and 300."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 1s, 500ms)")
    value = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    if not 0.05 <= value <= 300:
        raise argparse.ArgumentTypeError("the window must be between 50ms and 300s")
    return value


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "live",
        help="watch a running Go service: pull trace windows into a live session",
        description="Pull back-to-back execution-trace windows from a Go service's "
        "net/http/pprof endpoint (/debug/pprof/trace) and send each to a gmpscope "
        "server as the next segment of a live session (open /live/SESSION there). "
        "Survives the target and the server restarting.",
    )
    p.add_argument("--target", required=True, metavar="URL",
                   help="the service's base URL, e.g. http://127.0.0.1:6060")
    p.add_argument("--window", type=parse_window, default=1.0, metavar="DURATION",
                   help="length of each window (1s; e.g. 500ms, 2s)")
    p.add_argument("--ingest", metavar="URL",
                   default=os.environ.get("GMPSCOPE_INGEST", "http://127.0.0.1:8050"),
                   help="gmpscope server (default: $GMPSCOPE_INGEST or http://127.0.0.1:8050)")
    p.add_argument("--session", metavar="NAME",
                   help="session name (default: from the target's host and port)")
    p.add_argument("--buffer", type=int, default=60, metavar="N",
                   help="windows kept while the server is away; the oldest are dropped "
                   "beyond (60)")
    p.add_argument("--count", type=int, metavar="N",
                   help="stop after N windows (default: run until interrupted)")
    p.add_argument("--os", action="store_true",
                   help="also record the service's OS side (syscalls, epoll waits, the "
                   "kernel's scheduling of its threads) with one eBPF session, attached to "
                   "each window (root and bpftrace; the target must run on this machine)")
    p.add_argument("--os-pid", type=int, metavar="PID",
                   help="the service's pid for --os (implies --os; default: the process "
                   "listening on --target's port)")
    p.add_argument("--quiet", action="store_true", help="log only problems")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from collectors.live.collector import Collector, Config, session_name_for

    if args.buffer < 1:
        raise CLIError("--buffer must be at least 1", EXIT_BAD_INPUT)
    if not re.match(r"^https?://", args.target) or not re.match(r"^https?://", args.ingest):
        raise CLIError("--target and --ingest must be http:// or https:// URLs", EXIT_BAD_INPUT)
    name = args.session or session_name_for(args.target)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", name):
        raise CLIError(f"bad session name {name!r}: letters, digits and ._:-", EXIT_BAD_INPUT)
    cfg = Config(target=args.target, ingest=args.ingest, session=name, window_s=args.window,
                 token=os.environ.get("GMPSCOPE_TOKEN") or None, buffer=args.buffer,
                 max_windows=args.count)

    def log(msg: str) -> None:
        if args.quiet and msg.startswith("window #"):
            return
        stamp = time.strftime("%H:%M:%S")
        print(f"gmpscope live: {stamp} {msg}", file=sys.stderr, flush=True)

    os_side = _os_side(args, log) if args.os or args.os_pid is not None else None
    collector = Collector(cfg, log, os_side=os_side)

    def stop(signum: int, _frame: Any) -> None:
        log(f"{signal.Signals(signum).name}: stopping after the current window")
        collector.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"gmpscope live: session {name}: pulling {args.window:g} s windows from "
          f"{args.target} into {args.ingest} (open {args.ingest.rstrip('/')}/live/{name})",
          flush=True)
    try:
        stats = collector.run()
    finally:
        if os_side is not None:
            os_side.session.stop()
    print(f"gmpscope live: {stats.pulled} windows pulled, {stats.sent} sent, "
          f"{stats.dropped} dropped, {stats.target_failures} failed pulls, "
          f"{len(stats.outages)} target outages", flush=True)
    if os_side is not None:
        o = os_side.stats
        print(f"gmpscope live: OS side attached to {o.attached} windows ({o.failed} failed, "
              f"{o.skipped} without it, {o.restarts} restarts; "
              f"bpftrace {o.tracer_cpu_s:.1f} s CPU, parsing {o.parser_cpu_s:.1f} s)",
              flush=True)
    if collector.fatal:
        raise CLIError(collector.fatal, EXIT_FAILURE)
    return EXIT_OK


def _os_side(args: argparse.Namespace, log: Any) -> Any:
    """The running OS session (``--os``), or None, after one line saying why not."""
    from collectors.live.os_attach import OsAttacher
    from collectors.live.os_side import OsSession, os_missing
    from collectors.live.os_target import OsSideError, pid_of_target

    missing = os_missing()
    if missing is not None:
        log(f"--os: {missing}: live goes on without the OS side")
        return None
    try:
        pid = args.os_pid if args.os_pid is not None else pid_of_target(args.target)
    except OsSideError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    session = OsSession(pid)
    try:
        session.start()
    except OsSideError as e:
        log(f"--os: {e}: live goes on without the OS side")
        return None
    log(f"--os: recording the OS side of pid {pid} ({' '.join(session.command)[:80]}) "
        "with one bpftrace session")

    def again() -> OsSession:
        # The target restarted: the process now listening on its port.
        fresh = OsSession(pid_of_target(args.target))
        fresh.start()
        return fresh

    return OsAttacher(session, restart=again if args.os_pid is None else None)
