"""``gmpscope decode TRACE -o DIR``: a Go execution trace to Parquet."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "decode",
        help="decode a Go execution trace into Parquet files",
        description="Decode a trace written by runtime/trace (Go 1.11 to 1.27) into "
        "transitions.parquet, events.parquet, stacks.parquet and meta.json.",
    )
    p.add_argument("trace", type=Path, help="the trace file")
    p.add_argument("-o", "--out", type=Path, required=True, help="output directory")
    p.add_argument("--json", action="store_true", help="print meta.json instead of a summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from collectors.gotrace import TraceFormatError
    from collectors.gotrace.todir import decode_file_to_dir

    src: Path = args.trace
    out: Path = args.out
    if not src.is_file():
        raise CLIError(f"no such trace file: {src}", EXIT_BAD_INPUT)
    if out.exists() and not out.is_dir():
        raise CLIError(f"output exists and is not a directory: {out}", EXIT_BAD_INPUT)
    started = time.perf_counter()
    try:
        # Atomic: a failed decode never leaves a half-written output behind.
        meta = decode_file_to_dir(src, out)
    except TraceFormatError as e:
        raise CLIError(f"{src}: {e}", EXIT_BAD_INPUT) from None
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(meta, indent=2, ensure_ascii=False))
    else:
        print(summary_text(meta, elapsed))
    return EXIT_OK


def summary_text(meta: dict[str, Any], elapsed: float) -> str:
    """A short human summary of a decode."""
    span_ms = (meta["last_ts"] - meta["first_ts"]) / 1e6
    counts = meta["event_counts"]
    lines = [
        f"{meta['source']['name']}: Go trace format {meta['go_version']} ({meta['family']}), "
        f"{meta['source']['size']:,} bytes, {span_ms:,.1f} ms of execution",
        f"  {meta['events']:,} events: {meta['transitions']:,} state transitions, "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items() if k != "StateTransition"),
        f"  {meta['stacks']:,} distinct stacks, {meta['generations']} generations",
        f"  decoded in {elapsed:.2f} s",
    ]
    loss = meta["loss"]
    if loss["error"]:
        lines.append(
            f"  DAMAGED: {loss['bytes_lost']:,} bytes and {loss['generations_lost']} "
            f"generations lost at byte {loss['offset']}: {loss['error']}"
        )
    return "\n".join(lines)

