"""``gmpscope ingest-server``: the ingest HTTP API behind gunicorn.

Gunicorn is the WSGI server (the same one the compose file will use): a master
process that owns the listening socket and restarts workers, and ``--workers``
worker processes with ``--threads`` threads each. Several processes keep a long
ingest (decoding is CPU-bound Python) from stalling other requests; threads keep
slow uploads from tying up a whole process. The database is migrated once in the
master before the workers start, so that they never race to migrate it.

SIGTERM stops gracefully (requests in flight finish), SIGINT (Ctrl-C) quickly.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError

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
    from gunicorn.app.base import BaseApplication
    from sqlalchemy.exc import SQLAlchemyError

    from ingest.db import make_engine
    from ingest.server import create_app

    if args.workers < 1 or args.threads < 1:
        raise CLIError("--workers and --threads must be at least 1", EXIT_BAD_INPUT)
    if not 0 <= args.port <= 65535:
        raise CLIError(f"bad port {args.port}", EXIT_BAD_INPUT)
    settings = _settings(args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_uploads(settings.tmp_dir)
    # Migrate once here; the workers then find the schema at head.
    try:
        make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms).dispose()
    except ValueError as e:  # an unsupported URL
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    except SQLAlchemyError as e:
        raise CLIError(f"cannot open the database {_redact(settings.db_url)}: "
                       f"{getattr(e, 'orig', None) or e}") from None

    host = args.host

    def when_ready(server: Any) -> None:
        for listener in server.LISTENERS:
            port = listener.sock.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            print(f"gmpscope ingest-server: serving http://{shown}:{port} "
                  f"(pid {os.getpid()}, {args.workers} workers x {args.threads} threads, "
                  f"db {_redact(settings.db_url)})", flush=True)

    options = {
        "bind": f"[{host}]:{args.port}" if ":" in host else f"{host}:{args.port}",
        "workers": args.workers,
        "worker_class": "gthread",
        "threads": args.threads,
        # gthread workers heartbeat from their main loop, so a long ingest in a
        # request thread is not mistaken for a hung worker; CPU-bound decoding
        # and loading still compete with that loop for the GIL on a huge trace,
        # so leave it plenty of room.
        "timeout": 600,
        "graceful_timeout": 30,
        "keepalive": 5,
        "accesslog": "-" if args.access_log else None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "gmpscope-ingest",
        "control_socket_disable": True,
        "when_ready": when_ready,
    }

    class _Server(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return create_app(settings)

    _Server().run()
    return EXIT_OK


def _remove_stale_uploads(tmp_dir: Path, min_age_s: float = 3600.0) -> None:
    """Delete upload spools and extractions a killed server left behind.

    Only ours (``.upload-*``, ``.extract-*``), and only old ones, in case another
    server shares the data directory and is writing its own right now.
    """
    if not tmp_dir.is_dir():
        return
    cutoff = time.time() - min_age_s
    for p in list(tmp_dir.glob(".upload-*")) + list(tmp_dir.glob(".extract-*")):
        try:
            if p.lstat().st_mtime >= cutoff:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        except OSError:
            continue


def _redact(url: str) -> str:
    """The URL without its password, for printing."""
    return re.sub(r"://([^:/@]+):[^@/]*@", r"://\1:***@", url)
