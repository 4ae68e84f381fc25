"""``gmpscope serve``: the explorer UI and the ingest API on one server (gunicorn).

Traces named on the command line are ingested first (already stored content is
found by its hash, so restarting with the same files is quick), then the server
starts and prints its URL. ``--samples DIR`` loads the samples DIR/README.md lists
(samples/ in the repository: what ``make run`` serves) and keeps each one's line of
that table for the library page (ingest/views/samples.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError
from gmpscope.wsgi import add_server_args as wsgi_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the explorer UI (and the ingest API) in the browser",
        description="Run the gmpscope explorer: library, overview, timelines by P/M/G, "
        "state graphs, goroutine, syscall, netpoller and scheduler-latency pages, "
        "exports. Also serves the ingest API under /api.",
    )
    p.add_argument("traces", type=Path, nargs="*", metavar="TRACE",
                   help="raw traces, decoded Parquet directories or OS recordings "
                   "(gmpscope record) to ingest first")
    p.add_argument("--samples", type=Path, metavar="DIR",
                   help="load the samples DIR/README.md lists (the repository's samples/), "
                   "and show each one's line of that table on the library page")
    wsgi_args(p, port=8050, threads=8,
              data_dir_help="raw traces, caches and the default database")
    p.set_defaults(run=run)


def announcement_file(data_dir: Path) -> Path:
    """Where a running ``gmpscope serve`` says where it serves this data directory."""
    return data_dir / "serve.json"


def ingest_paths(settings: Any, paths: list[Path],
                 progress: bool = True) -> Iterator[tuple[Path, int, str]]:
    """Store each of ``paths`` (raw traces, decoded directories, OS recordings)
    in ``settings``' database as it goes: (path, trace id, what happened). Every
    path is checked to exist first; bad input is a CLIError (exit 2)."""
    from gmpscope.commands.ingest import _Bar, ingest_path
    from ingest.load.pipeline import IngestError
    from ingest.load.poller import ingest_recording_dir, is_recording_dir
    from ingest.store.db import make_engine

    for path in paths:
        if not path.exists():
            raise CLIError(f"no such file or directory: {path}", EXIT_BAD_INPUT)
    engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        for path in paths:
            bar = _Bar(path.name, progress)
            try:
                if is_recording_dir(path):
                    # An OS recording (gmpscope record): with the Go trace its
                    # meta.json names, or on its own, as `gmpscope ingest` stores it.
                    rec = ingest_recording_dir(engine, path, data_dir=settings.data_dir)
                    found = (int(rec.trace.id),
                             "with its OS recording" if rec.attached is not None else "")
                else:
                    res = ingest_path(engine, path, path.name, settings.data_dir, bar)
                    found = (int(res.id), "ingested" if res.created else "already stored")
            except IngestError as e:
                raise CLIError(str(e), EXIT_BAD_INPUT) from None
            finally:
                bar.close()
            yield path, *found
    finally:
        engine.dispose()
        # The loads keep what they free while the process is small
        # (ingest.memory): handed back before the server's workers are forked.
        from ingest.memory import give_back_free_memory

        give_back_free_memory()


def sample_paths(settings: Any, samples_dir: Path) -> list[Path]:
    """The samples ``samples_dir``'s README lists, last first (so that the library,
    newest first, lists them in the README's order); their lines are kept in the
    data directory for the library page."""
    from ingest.views.samples import CatalogError, read_catalog, write_catalog

    try:
        catalog = read_catalog(samples_dir)
    except CatalogError as e:
        raise CLIError(f"--samples: {e}", EXIT_BAD_INPUT) from None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    write_catalog(settings.data_dir, catalog)
    return [samples_dir / s.path for s in reversed(catalog)]


def _ingest_first(settings: Any, paths: list[Path]) -> None:
    for path, trace_id, what in ingest_paths(settings, paths):
        print(f"gmpscope serve: trace {trace_id}{' ' + what if what else ''}: {path.name}",
              flush=True)


def run(args: argparse.Namespace) -> int:
    from gmpscope import wsgi

    wsgi.check_server_args(args.port, args.workers, args.threads)
    settings = wsgi.server_settings(args)
    wsgi.check_exposure(args.host, settings, args.insecure)
    wsgi.prepare(settings)
    paths = list(args.traces)
    if args.samples is not None:
        paths = sample_paths(settings, args.samples) + paths
    if paths:
        _ingest_first(settings, paths)
    sys.stdout.flush()

    def factory() -> Any:
        from app.figures.warm import warm_up
        from app.server import create_app

        app = create_app(settings)
        warm_up()  # in each worker as it starts, not in its first page
        return app

    wsgi.run_gunicorn(factory, label="serve", host=args.host, port=args.port,
                      workers=args.workers, threads=args.threads, access_log=args.access_log,
                      db_url=settings.db_url, proc_name="gmpscope-serve",
                      announce=announcement_file(settings.data_dir))
    return EXIT_OK
