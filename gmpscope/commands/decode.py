"""``gmpscope decode TRACE -o DIR``: a Go execution trace to Parquet."""

from __future__ import annotations

import argparse
import json
import os
import sys
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


def _import_pyarrow_without_numpy() -> None:
    """Import pyarrow with numpy hidden, when nothing has imported either yet.

    pyarrow works without numpy (and decoding to Parquet needs none of it),
    but imports it when it can: ~0.12 s of a ~1 s decode. Only this one-shot
    CLI process does this; other users of pyarrow in it would find no numpy
    interop, and there are none. Falls back to a plain import if this pyarrow
    insists on numpy.
    """
    if "pyarrow" in sys.modules or "numpy" in sys.modules:
        return
    if os.environ.get("GMPSCOPE_PURE") == "1":
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]  # makes `import numpy` fail
    try:
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
            del sys.modules[name]
    finally:
        del sys.modules["numpy"]


def run(args: argparse.Namespace) -> int:
    _import_pyarrow_without_numpy()
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

