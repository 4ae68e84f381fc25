"""``gmpscope diagnose TRACE_OR_ID [--format text|json|markdown] [--config FILE]``:
automatic findings (ingest.diagnose) for one trace, without a server.

TRACE_OR_ID is a stored trace id, or the path of a raw trace or decoded Parquet
directory: found by its content hash when stored, ingested first otherwise.
Exit status 0 whether or not there are findings (``--fail-on`` changes that).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gmpscope import trace_ref
from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError

FORMATS = ("text", "json", "markdown")
#: Exit status with --fail-on when a finding of that severity or worse exists.
EXIT_FINDINGS = 3


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "diagnose",
        help="automatic findings: blocking syscalls, scheduler latency, netpoller, leaks, "
        "lock contention, GC pressure",
        description="Run the diagnostic rules over one trace and print each finding with "
        "its evidence (time ranges, goroutines, threads, stacks) and a timeline link. "
        "TRACE_OR_ID is a stored trace id or a trace file (ingested first when new). "
        "docs/diagnostics.md describes the rules and thresholds.",
    )
    p.add_argument("trace", nargs="?", metavar="TRACE_OR_ID",
                   help="stored trace id, or a raw trace / decoded Parquet directory")
    p.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="TOML file of threshold overrides (see docs/diagnostics.md)")
    p.add_argument("--base-url", default="", metavar="URL",
                   help="prefix for the timeline links (e.g. http://localhost:8050)")
    p.add_argument("--fail-on", choices=("critical", "warning", "info"),
                   help=f"exit with status {EXIT_FINDINGS} when a finding at least this "
                   "severe is raised")
    p.add_argument("--list-rules", action="store_true",
                   help="list the rules and their default thresholds, then exit")
    p.add_argument("--db", metavar="URL", help="database URL (default: $GMPSCOPE_DB, else "
                   "sqlite:///$GMPSCOPE_DATA/gmpscope.db)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="raw traces, caches and the default database (default: $GMPSCOPE_DATA)")
    p.set_defaults(run=run)


def resolve_trace(engine: Any, settings: Any, ref: str) -> int:
    """A stored trace id from an id or a trace path (ingested when new)."""
    return trace_ref.resolve_trace(engine, settings, ref, "diagnose")


def _list_rules() -> int:
    from ingest.diagnose import RULES

    for r in RULES:
        needs = ", ".join(sorted(r.requires))
        print(f"{r.id}  [{r.family}; needs {needs}]\n  {r.title}\n  {r.doc}")
        for k, v in r.defaults.items():
            print(f"    {k} = {json.dumps(v)}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.list_rules:
        return _list_rules()
    if not args.trace:
        raise CLIError("give TRACE_OR_ID (a stored trace id or a trace file)", EXIT_BAD_INPUT)
    from ingest.config import Settings
    from ingest.derive.frames import FrameStore
    from ingest.diagnose import (
        ConfigError,
        diagnose,
        load_config,
        render_markdown,
        render_text,
        rule_defaults,
    )
    from ingest.store.db import make_engine

    try:
        config = load_config(args.config, rule_defaults())
    except ConfigError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    settings = Settings.from_env(db_url=args.db, data_dir=args.data_dir)
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    try:
        trace_id = resolve_trace(engine, settings, args.trace)
        frames = FrameStore(engine, settings.data_dir).get(trace_id)
        report = diagnose(engine, frames, config)
    finally:
        engine.dispose()
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report, args.base_url))
    else:
        sys.stdout.write(render_text(report, args.base_url))
    if args.fail_on:
        from ingest.diagnose.base import SEVERITIES

        worst = SEVERITIES.index(args.fail_on)
        if any(SEVERITIES.index(f["severity"]) <= worst for f in report["findings"]):
            return EXIT_FINDINGS
    return EXIT_OK
