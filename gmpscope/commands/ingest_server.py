"""``gmpscope ingest-server``: the ingest HTTP API alone, behind gunicorn (see gmpscope.wsgi)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gmpscope.errors import EXIT_OK
from gmpscope.wsgi import add_server_args

if TYPE_CHECKING:
    from ingest.config import Settings

def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ingest-server",
        help="serve the ingest HTTP API (uploads, trace list, summaries, state graphs)",
        description="Serve the ingest HTTP API: POST raw traces or decoded Parquet "
        "archives, list, summarise and delete traces, state graphs. With GMPSCOPE_TOKEN "
        "set every request needs 'Authorization: Bearer <token>' (GMPSCOPE_READ_TOKEN: "
        "reads only); without one it listens only on the loopback address unless "
        "--insecure.",
    )
    add_server_args(p, port=8060, threads=4, data_dir_help="where uploads are spooled")
    p.set_defaults(run=run)


def _settings(args: argparse.Namespace) -> Settings:
    from gmpscope import wsgi

    return wsgi.server_settings(args)


def run(args: argparse.Namespace) -> int:
    from gmpscope import wsgi

    wsgi.check_server_args(args.port, args.workers, args.threads)
    settings = _settings(args)
    wsgi.check_exposure(args.host, settings, args.insecure)
    wsgi.prepare(settings)

    def factory() -> Any:
        from ingest.api.server import create_app

        return create_app(settings)

    wsgi.run_gunicorn(factory, label="ingest-server", host=args.host, port=args.port,
                      workers=args.workers, threads=args.threads,
                      access_log=args.access_log, db_url=settings.db_url,
                      proc_name="gmpscope-ingest")
    return EXIT_OK
