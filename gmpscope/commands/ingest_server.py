"""``gmpscope ingest-server``: the ingest HTTP API alone, behind gunicorn (see gmpscope.wsgi)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmpscope.errors import EXIT_OK

if TYPE_CHECKING:
    from ingest.config import Settings

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``2G``, ``500M``, ``64k`` or a plain byte count (binary multiples)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2G, 500M, 1048576)")
    return int(m.group(1)) << (10 * "_kmgt".index(m.group(2).lower() or "_"))


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ingest-server",
        help="serve the ingest HTTP API (uploads, trace list, summaries, state graphs)",
        description="Serve the ingest HTTP API: POST raw traces or decoded Parquet "
        "archives, list, summarise and delete traces, state graphs. Writes need "
        "'Authorization: Bearer $GMPSCOPE_TOKEN' when GMPSCOPE_TOKEN is set.",
    )
    p.add_argument("--db", metavar="URL",
                   help="database URL (sqlite:///FILE or postgresql+psycopg://...; "
                   "default: $GMPSCOPE_DB or SQLite in the data directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8060, help="port (8060; 0 picks a free one)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="where uploads are spooled (default: $GMPSCOPE_DATA)")
    p.add_argument("--max-upload", type=parse_size, metavar="SIZE",
                   help="largest upload accepted, e.g. 2G (default 2 GiB)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    p.add_argument("--threads", type=int, default=4, help="threads per worker (4)")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.set_defaults(run=run)


def _settings(args: argparse.Namespace) -> Settings:
    from ingest.config import Settings

    return Settings.from_env(db_url=args.db or None, data_dir=args.data_dir,
                             max_upload=args.max_upload)


def run(args: argparse.Namespace) -> int:
    from gmpscope import wsgi

    wsgi.check_server_args(args.port, args.workers, args.threads)
    settings = _settings(args)
    wsgi.prepare(settings)

    def factory() -> Any:
        from ingest.server import create_app

        return create_app(settings)

    wsgi.run_gunicorn(factory, label="ingest-server", host=args.host, port=args.port,
                      workers=args.workers, threads=args.threads,
                      access_log=args.access_log, db_url=settings.db_url,
                      proc_name="gmpscope-ingest")
    return EXIT_OK
