"""``gmpscope ingest PATH... [--db URL]``: raw traces or decoded Parquet
directories into the ingest database; prints the trace ids."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help="load traces (raw files or decoded Parquet directories) into the database",
        description="Decode and load Go execution traces, or directories written by "
        "`gmpscope decode`, into the ingest database (SQLite by default, or any "
        "postgresql+psycopg:// URL). Prints one line per input: the trace id, 'new' or "
        "'existing', and the name.",
    )
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                   help="trace file or decoded Parquet directory")
    p.add_argument("--db", help="database URL (default: $GMPSCOPE_DB, else "
                   "sqlite:///$GMPSCOPE_DATA/gmpscope.db)")
    p.add_argument("--data-dir", type=Path, help="where raw traces are kept "
                   "(default: $GMPSCOPE_DATA or ~/.local/share/gmpscope)")
    p.add_argument("--name", help="trace name (default: the file or directory name)")
    p.add_argument("--json", action="store_true", help="print one JSON object per input")
    p.add_argument("--attach", type=int, metavar="ID",
                   help="attach the OS recording(s) given (directories holding poller.parquet, "
                   "from `gmpscope record`) to stored trace ID")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument("--no-warm", action="store_true",
                   help="store only: the pages build their whole-trace reports when first "
                        "opened (default: built before this returns)")
    p.set_defaults(run=run)


class _Bar:
    """A tqdm progress bar per stage, on stderr, only when it is a terminal."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: Any = None
        self.stage = ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm  # type: ignore[import-untyped]

        if stage != self.stage:
            self.close()
            self.stage = stage
            unit = {"load": "rows", "reports": "report"}.get(stage, "step")
            self.bar = tqdm(total=total, desc=f"{self.label}: {stage}", unit=unit,
                            unit_scale=stage == "load", leave=False, file=sys.stderr)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            if done >= total:
                # tqdm skips a redraw within mininterval of the last one: the end of a
                # stage is always drawn, so the bar never stops short of its total.
                self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


#: Below this many events every whole-trace report builds on its first request
#: well within a page's 1 s (the slowest, the overview, 0.39 s on the 5.1 M-event
#: benchmark trace), so building them ahead would only lengthen the ingest (0.8 s
#: and 40 MB more peak there); above, they take seconds (the 32 M-event busyservice
#: trace: overview 1.3 s, findings 1.4-1.8 s, goroutine groups and latency ~1 s).
WARM_MIN_EVENTS = 10_000_000
#: Up to this many events the reports are built two at a time (two cores: the
#: 32 M-event busyservice trace's 5.3 s of reports take 3.2 s, the peak 631 ->
#: 741 MB); above, one at a time, so that a 1 GB trace's (166 M events; one
#: report alone reaches 1.3 GB) stay within the 1.5 GB the load holds to.
WARM_PAIRED_MAX_EVENTS = 64_000_000


def ingest_path(engine: Any, path: Path, name: str, data_dir: Path,
                progress: Any = None, ahead: Any = None, warm: bool = True) -> Any:
    """Ingest a raw trace file or a decoded Parquet directory; its IngestResult.

    ``ahead``: the file's DecodeAhead, when one was started. The timeline's
    lane sets are built after the load, and with ``warm``, for a new trace
    of WARM_MIN_EVENTS events or more, its whole-trace reports beside them
    (ingest.api.warm), all before this returns, so that its pages open
    without building them. Raises ingest.load.pipeline.IngestError for input
    that is not one.
    """
    from ingest.load.pipeline import ingest_trace_file, load_parquet_dir

    if path.is_dir():
        res = load_parquet_dir(engine, path, name, progress=progress, data_dir=data_dir,
                               lanes=False)
    else:
        res = ingest_trace_file(engine, path, name, data_dir=data_dir, progress=progress,
                                ahead=ahead, lanes=False)
    if res.created:
        from ingest.api.warm import warm_reports
        from ingest.timings import Timings

        reports = warm and res.events >= WARM_MIN_EVENTS
        timings = Timings()
        # The second worker a forked process (the command's only thread by
        # now): the two share no GIL.
        warm_reports(engine, data_dir, res.id, timings, progress if reports else None,
                     threads=2 if reports and res.events <= WARM_PAIRED_MAX_EVENTS else 1,
                     lanes=True, reports=reports, fork=True)
        res.timings.update(timings.as_dict())
    return res


def run(args: argparse.Namespace) -> int:
    from ingest.config import Settings
    from ingest.load.decode_ahead import DecodeAhead

    for path in args.paths:
        if not path.exists():
            raise CLIError(f"no such file or directory: {path}", EXIT_BAD_INPUT)
    # The first trace decodes (C, without the GIL) while the database is
    # opened below: imports and, on a new database, its schema (docs/ingest.md).
    first = args.paths[0]
    data_dir = Settings.from_env(db_url=args.db, data_dir=args.data_dir).data_dir
    ahead = (DecodeAhead(first, data_dir) if first.is_file() and args.attach is None
             else None)
    if ahead is not None:
        ahead.wait_imports()  # see ingest/load/decode_ahead.py: never two importers at once
    try:
        return _run(args, ahead)
    finally:
        if ahead is not None:
            ahead.cancel()  # a no-op once its result was taken


def _run(args: argparse.Namespace, ahead: Any) -> int:
    from ingest.config import Settings
    from ingest.load.pipeline import IngestError
    from ingest.load.poller import is_recording_dir
    from ingest.store.db import make_engine

    settings = Settings.from_env(db_url=args.db, data_dir=args.data_dir)
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    # What the imports made lives as long as the process: out of the cyclic
    # collector's sight, its full collections during a load have little to
    # walk (they took ~0.1 s of the benchmark's ingest).
    gc.freeze()
    try:
        for path in args.paths:
            name = args.name or path.name
            bar = _Bar(name, not args.no_progress)
            try:
                if is_recording_dir(path) or args.attach is not None:
                    _recording(engine, path, args, settings.data_dir, name)
                    continue
                res = ingest_path(engine, path, name, settings.data_dir, bar,
                                  ahead if path is args.paths[0] else None,
                                  warm=not args.no_warm)
            except IngestError as e:
                raise CLIError(str(e), EXIT_BAD_INPUT) from None
            except LookupError as e:
                raise CLIError(f"no such trace: {e}", EXIT_BAD_INPUT) from None
            finally:
                bar.close()
            if args.json:
                print(json.dumps({**res.as_dict(), "created": res.created, "name": name,
                                  "timings": res.timings}))
            else:
                print(f"{res.id}\t{'new' if res.created else 'existing'}\t{name}")
            sys.stdout.flush()
    finally:
        engine.dispose()
    return EXIT_OK


def _recording(engine: Any, path: Path, args: argparse.Namespace, data_dir: Path,
               name: str) -> None:
    """An OS recording (poller.parquet + meta.json): attached to ``--attach ID``, or
    to the Go trace its meta.json names (ingested first), or stored on its own."""
    from ingest.load.poller import ingest_recording_dir

    res = ingest_recording_dir(engine, path, data_dir=data_dir, attach=args.attach,
                               name=args.name)
    if args.json:
        print(json.dumps({**res.as_dict(), "name": name}))
    elif res.attached is None:
        print(f"{res.trace.id}\t{'new' if res.trace.created else 'existing'}\t{name} "
              "(OS recording without a Go trace)")
    else:
        a = res.attached
        quality = "" if a.quality is None else f", {100 * a.quality:.1f}% of Go syscalls matched"
        print(f"{res.trace.id}\t{'attached' if a.created else 'existing'}\t{name} -> trace "
              f"{res.trace.id} ({a.rows} OS events, aligned by {a.method}{quality})")
    sys.stdout.flush()
