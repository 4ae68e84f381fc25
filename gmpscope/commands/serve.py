"""``gmpscope serve``: the explorer UI and the ingest API on one server (gunicorn).

Traces named on the command line are ingested first (already stored content is
found by its hash, so restarting with the same files is quick), then the server
starts and prints its URL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gmpscope.commands.ingest_server import parse_size
from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the explorer UI (and the ingest API) in the browser",
        description="Run the gmpscope explorer: library, overview, timelines by P/M/G, "
        "state graphs, goroutine, syscall, netpoller and scheduler-latency pages, "
        "exports. Also serves the ingest API under /api.",
    )
    p.add_argument("traces", type=Path, nargs="*", metavar="TRACE",
                   help="raw traces or decoded Parquet directories to ingest first")
    p.add_argument("--db", metavar="URL",
                   help="database URL (sqlite:///FILE or postgresql+psycopg://...; "
                   "default: $GMPSCOPE_DB or SQLite in the data directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port (8050; 0 picks a free one)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="raw traces, caches and the default database (default: $GMPSCOPE_DATA)")
    p.add_argument("--max-upload", type=parse_size, metavar="SIZE",
                   help="largest upload accepted, e.g. 2G (default 2 GiB)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    p.add_argument("--threads", type=int, default=8, help="threads per worker (8)")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.set_defaults(run=run)


def _ingest_first(settings: Any, paths: list[Path]) -> None:
    from gmpscope.commands.ingest import _Bar
    from ingest.db import make_engine
    from ingest.load import IngestError, ingest_trace_file, load_parquet_dir

    for path in paths:
        if not path.exists():
            raise CLIError(f"no such file or directory: {path}", EXIT_BAD_INPUT)
    engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        for path in paths:
            bar = _Bar(path.name, True)
            try:
                if path.is_dir():
                    res = load_parquet_dir(engine, path, path.name, progress=bar,
                                           data_dir=settings.data_dir)
                else:
                    res = ingest_trace_file(engine, path, path.name,
                                            data_dir=settings.data_dir, progress=bar)
            except IngestError as e:
                raise CLIError(str(e), EXIT_BAD_INPUT) from None
            finally:
                bar.close()
            what = "ingested" if res.created else "already stored"
            print(f"gmpscope serve: trace {res.id} {what}: {path.name}", flush=True)
    finally:
        engine.dispose()


def run(args: argparse.Namespace) -> int:
    from gmpscope import wsgi
    from ingest.config import Settings

    wsgi.check_server_args(args.port, args.workers, args.threads)
    settings = Settings.from_env(db_url=args.db or None, data_dir=args.data_dir,
                                 max_upload=args.max_upload)
    wsgi.prepare(settings)
    if args.traces:
        _ingest_first(settings, list(args.traces))
    sys.stdout.flush()

    def factory() -> Any:
        from app.server import create_app

        return create_app(settings)

    wsgi.run_gunicorn(factory, label="serve", host=args.host, port=args.port,
                      workers=args.workers, threads=args.threads, access_log=args.access_log,
                      db_url=settings.db_url, proc_name="gmpscope-serve")
    return EXIT_OK
