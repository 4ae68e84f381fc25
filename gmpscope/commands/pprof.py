"""``gmpscope pprof TRACE_OR_ID --type TYPE [--window T1,T2] -o FILE``: a
pprof profile of one trace (docs/pprof.md).

The waiting profiles (net, sync, syscall, sched) are those of ``go tool
trace -pprof=TYPE``; chan and lock are sync's two halves; cpu is the
trace's CPU samples. TRACE_OR_ID is a stored trace id, or a raw trace /
decoded directory (found by its hash when stored, ingested first otherwise).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from gmpscope import trace_ref
from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError

#: The profile types (ingest.views.pprof.TYPES, spelled here so that --help
#: needs no import of the views).
TYPES = ("net", "sync", "syscall", "sched", "cpu", "chan", "lock")

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(ns|us|ms|s)?\s*")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "pprof",
        help="a pprof profile of a trace: network, sync, syscall, scheduler waits, CPU samples",
        description="Write a pprof profile (gzipped profile.proto, for go tool pprof) of one "
        "trace: net, sync, syscall and sched are go tool trace -pprof=TYPE's profiles "
        "(contentions and delay per stack); chan and lock split sync into channel/select "
        "and mutex/cond/wait group waits; cpu counts the trace's CPU samples. "
        "TRACE_OR_ID is a stored trace id or a trace file (ingested first when new).",
    )
    p.add_argument("trace", metavar="TRACE_OR_ID",
                   help="stored trace id, or a raw trace / decoded Parquet directory")
    p.add_argument("--type", "-t", required=True, choices=TYPES, help="which profile")
    p.add_argument("--window", metavar="T1,T2",
                   help="only this part of the trace: absolute trace ns (as the API's t1, t2), "
                   "or offsets from the trace's start with a unit (0.5s,1.2s; ns, us, ms, s)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the profile file to write ('-' for standard output)")
    p.add_argument("--db", metavar="URL", help="database URL (default: $GMPSCOPE_DB, else "
                   "sqlite:///$GMPSCOPE_DATA/gmpscope.db)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="raw traces, caches and the default database (default: $GMPSCOPE_DATA)")
    p.set_defaults(run=run)


def parse_window(text: str, first_ts: int) -> tuple[int, int]:
    """``T1,T2`` as absolute trace ns: plain integers are absolute, values
    with a unit are offsets from ``first_ts``. Raises ValueError."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"--window takes T1,T2, not {text!r}")
    out = []
    for part in parts:
        m = _TIME.fullmatch(part)
        if m is None:
            raise ValueError(f"--window: {part.strip()!r} is not a time (e.g. 1500000, 0.5s, 20ms)")
        if m.group(2) is None:
            if "." in m.group(1):
                raise ValueError(f"--window: absolute times are whole ns, not {m.group(1)}")
            out.append(int(m.group(1)))
        else:
            out.append(first_ts + round(float(m.group(1)) * _UNITS[m.group(2)]))
    if out[1] <= out[0]:
        raise ValueError("--window: T2 must be after T1")
    return out[0], out[1]


def run(args: argparse.Namespace) -> int:
    from ingest.config import Settings
    from ingest.derive.frames import FrameStore
    from ingest.store.db import make_engine
    from ingest.views.pprof import profile
    from ingest.views.pprof_proto import encode

    settings = Settings.from_env(db_url=args.db, data_dir=args.data_dir)
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    try:
        trace_id = trace_ref.resolve_trace(engine, settings, args.trace, "pprof")
        frames = FrameStore(engine, settings.data_dir).get(trace_id)
        t1 = t2 = None
        if args.window:
            try:
                t1, t2 = parse_window(args.window, frames.first_ts)
            except ValueError as e:
                raise CLIError(str(e), EXIT_BAD_INPUT) from None
        prof = profile(engine, frames, args.type, t1, t2)
    finally:
        engine.dispose()
    data = encode(prof)
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        Path(args.output).write_bytes(data)
    totals = prof.totals()
    what = ", ".join(f"{v} {name}" + (" ns" if unit == "nanoseconds" else "")
                     for (name, unit), v in zip(prof.sample_types, totals, strict=True))
    dest = "standard output" if args.output == "-" else args.output
    print(f"gmpscope pprof: {args.type} profile of trace {trace_id}: {len(prof.samples)} stacks, "
          f"{what} -> {dest}", file=sys.stderr)
    return EXIT_OK
