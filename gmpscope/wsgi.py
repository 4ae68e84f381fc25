"""Running a Flask app factory under gunicorn, shared by ``ingest-server`` and ``serve``.

Gunicorn is the WSGI server (the same one the compose file uses): a master
process that owns the listening socket and restarts workers, and ``workers``
worker processes with ``threads`` threads each. Several processes keep a long
ingest (decoding and loading are CPU-bound) from stalling other requests;
threads keep slow uploads from tying up a whole process. The database is
migrated once in the master before the workers start, so that they never race
to migrate it. SIGTERM stops gracefully (requests in flight finish), SIGINT
(Ctrl-C) quickly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmpscope.errors import EXIT_BAD_INPUT, CLIError

if TYPE_CHECKING:
    from flask import Flask

    from ingest.config import Settings


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``2G``, ``500M``, ``64k`` or a plain byte count (binary multiples)."""
    import argparse

    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2G, 500M, 1048576)")
    return int(m.group(1)) << (10 * "_kmgt".index(m.group(2).lower() or "_"))


def add_server_args(p: Any, *, port: int, threads: int, data_dir_help: str) -> None:
    """The options every gunicorn-served command takes (ingest-server, serve)."""
    p.add_argument("--db", metavar="URL",
                   help="database URL (sqlite:///FILE or postgresql+psycopg://...; "
                   "default: $GMPSCOPE_DB or SQLite in the data directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=port,
                   help=f"port ({port}; 0 picks a free one)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help=f"{data_dir_help} (default: $GMPSCOPE_DATA)")
    p.add_argument("--max-upload", type=parse_size, metavar="SIZE",
                   help="largest upload accepted, e.g. 2G (default 2 GiB)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    p.add_argument("--threads", type=int, default=threads,
                   help=f"threads per worker ({threads})")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.add_argument("--insecure", action="store_true",
                   help="listen beyond the loopback address without a token (anyone who "
                   "reaches the port reads and deletes every trace)")


def server_settings(args: Any, env: Mapping[str, str] | None = None) -> Settings:
    """The settings of a server command: the environment (``env``, default
    ``os.environ``), then its options. A bad setting (GMPSCOPE_READ_TOKEN alone, a
    negative limit) is one line, status 2."""
    from ingest.config import Settings

    try:
        return Settings.from_env(env, db_url=args.db or None, data_dir=args.data_dir,
                                 max_upload=getattr(args, "max_upload", None))
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None


LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``.
    Any other name counts as reachable from elsewhere: what it resolves to can change."""
    import ipaddress

    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, settings: Settings, insecure: bool) -> None:
    """Refuse to listen beyond the loopback address without a token: a trace holds
    stacks, file paths and log strings, and the API deletes traces."""
    if is_loopback(host) or settings.token or insecure:
        return
    raise CLIError(f"refusing to listen on {host} without a token: set GMPSCOPE_TOKEN "
                   "(and GMPSCOPE_READ_TOKEN for readers), listen on 127.0.0.1, or pass "
                   "--insecure to serve every trace to anyone who reaches the port",
                   EXIT_BAD_INPUT)


def prepare(settings: Settings) -> None:
    """Create the data directory, clear what a killed server left (spools, staging
    directories, raw traces of loads that never committed) and views' caches of an
    older layout, migrate the database once."""
    from sqlalchemy.exc import SQLAlchemyError

    from ingest.derive.cache import remove_other_versions
    from ingest.load.raw_copy import remove_orphan_raw_files
    from ingest.store import interval_files
    from ingest.store.db import make_engine

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_uploads(settings.tmp_dir)
    remove_stale_uploads(settings.data_dir / "frames",
                         patterns=(".staging-*", "*/derived-v*/.*.tmp"))
    remove_stale_uploads(settings.data_dir / "intervals", patterns=(".staging-*",))
    remove_other_versions(settings.data_dir / "frames")
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
        try:
            remove_orphan_raw_files(engine, settings.data_dir)
            interval_files.remove_orphans(engine, settings.data_dir)
        finally:
            engine.dispose()
    except ValueError as e:  # an unsupported URL
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    except SQLAlchemyError as e:
        raise CLIError(f"cannot open the database {redact(settings.db_url)}: "
                       f"{getattr(e, 'orig', None) or e}") from None


def check_server_args(port: int, workers: int, threads: int) -> None:
    if workers < 1 or threads < 1:
        raise CLIError("--workers and --threads must be at least 1", EXIT_BAD_INPUT)
    if not 0 <= port <= 65535:
        raise CLIError(f"bad port {port}", EXIT_BAD_INPUT)


def run_gunicorn(factory: Callable[[], Flask], *, label: str, host: str, port: int,
                 workers: int, threads: int, access_log: bool, db_url: str,
                 proc_name: str, announce: Path | None = None) -> None:
    """Serve ``factory()`` (called once per worker) until stopped. ``announce``: a
    file that says, while the server runs, where it serves and which database
    (:func:`read_announcement`; ``gmpscope view`` finds a running server by it)."""
    from gunicorn.app.base import BaseApplication

    def when_ready(server: Any) -> None:
        for listener in server.LISTENERS:
            bound = listener.sock.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            print(f"gmpscope {label}: serving http://{shown}:{bound} "
                  f"(pid {os.getpid()}, {workers} workers x {threads} threads, "
                  f"db {redact(db_url)})", flush=True)
            if announce is not None:
                _announce(announce, host, bound, db_url)

    def on_exit(server: Any) -> None:
        if announce is not None and _announced_by_us(announce):
            announce.unlink(missing_ok=True)

    options = {
        "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        # gthread workers heartbeat from their main loop, so a long ingest in a
        # worker thread is not mistaken for a hung worker; CPU-bound decoding
        # still competes with that loop for the GIL on a huge trace, so leave
        # it plenty of room.
        "timeout": 600,
        "graceful_timeout": 30,
        "keepalive": 5,
        "accesslog": "-" if access_log else None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": proc_name,
        "control_socket_disable": True,
        "when_ready": when_ready,
        "on_exit": on_exit,
    }

    class _Server(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return factory()

    _Server().run()


def _announce(path: Path, host: str, port: int, db_url: str) -> None:
    # A browser on this machine reaches a server listening on every address
    # through the loopback address.
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"url": f"http://{shown}:{port}", "pid": os.getpid(),
                               "db": redact(db_url)}))
    os.replace(tmp, path)


def _announced_by_us(path: Path) -> bool:
    found = read_announcement(path)
    return found is not None and found.get("pid") == os.getpid()


def read_announcement(path: Path) -> dict[str, Any] | None:
    """What a running server wrote to ``path`` (url, pid, redacted db URL), or
    None when there is no such file or it is unreadable."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


STALE_PATTERNS = (".upload-*", ".extract-*", "ingest-*")


def remove_stale_uploads(tmp_dir: Path, min_age_s: float = 3600.0,
                         patterns: tuple[str, ...] = STALE_PATTERNS) -> None:
    """Delete upload spools, extractions and ingest work directories a killed
    server left behind.

    Only ours (``patterns``; frame staging directories are cleaned the same way),
    and only old ones, in
    case another server shares the data directory and is writing its own right now.
    """
    if not tmp_dir.is_dir():
        return
    cutoff = time.time() - min_age_s
    for p in [q for pattern in patterns for q in tmp_dir.glob(pattern)]:
        try:
            if p.lstat().st_mtime >= cutoff:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        except OSError:
            continue


def redact(url: str) -> str:
    """The URL without its password, for printing."""
    return re.sub(r"://([^:/@]+):[^@/]*@", r"://\1:***@", url)
