"""``gmpscope view TRACE``: one command from a trace file to its overview in the
browser, as ``go tool trace TRACE`` is.

The trace is ingested into the default database (or ``--db``), then the URL of its
overview is printed and opened. A ``gmpscope serve`` already running on the same
data directory and database is reused (it says where it serves in
``DATA/serve.json``); otherwise one is started in the background, on its own,
and keeps running after this command returns (stop it with the pid printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_OK, CLIError

#: A guard against a server that never comes up (a hang, not a speed target).
START_GUARD_S = 120.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "view",
        help="ingest a trace and open its overview in the browser (as go tool trace does)",
        description="Ingest TRACE into the default database, start the explorer (or "
        "reuse one already serving this data directory), print the URL of the trace's "
        "overview and open it in the browser.",
    )
    p.add_argument("trace", type=Path, metavar="TRACE",
                   help="a raw trace, a decoded Parquet directory or an OS recording")
    p.add_argument("--no-browser", action="store_true",
                   help="only print the URL (do not open a browser)")
    p.add_argument("--db", metavar="URL",
                   help="database URL (default: $GMPSCOPE_DB or SQLite in the data directory)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="raw traces, caches and the default database (default: $GMPSCOPE_DATA)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address a new server listens on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8050,
                   help="port of a new server (8050; 0 picks a free one; taken: a free one)")
    p.add_argument("--insecure", action="store_true",
                   help="let a new server listen beyond the loopback address without a token")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(run=run)


def reader_token(env: Any = None) -> tuple[str, str] | None:
    """The token this command reads with and its variable: $GMPSCOPE_READ_TOKEN, else
    $GMPSCOPE_TOKEN."""
    e = os.environ if env is None else env
    for name in ("GMPSCOPE_READ_TOKEN", "GMPSCOPE_TOKEN"):
        if e.get(name):
            return e[name], name
    return None


def token_note(url: str, trace_id: int) -> str | None:
    """What to tell the user when the server at ``url`` needs a token (the browser
    logs in once); None when it answers without one."""
    if can_read(url, trace_id, None):
        return None
    first = f"the explorer at {url} needs a token: the browser asks for it once"
    mine = reader_token()
    if mine is None:
        return f"{first} (that server's GMPSCOPE_READ_TOKEN or GMPSCOPE_TOKEN)"
    token, name = mine
    if can_read(url, trace_id, token):
        return f"{first} (${name} reads it)"
    return f"{first}, and ${name} is not one of that server's tokens"


def can_read(url: str, trace_id: int, token: str | None) -> bool:
    """Whether the server at ``url`` lets this command read trace ``trace_id``: False
    only when it refuses the token (401 without the one it needs, or with another;
    403); any other trouble is the page's to show."""
    req = urllib.request.Request(f"{url}/api/traces/{trace_id}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as e:
        return e.code not in (401, 403)
    except OSError:
        return True


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive, not ours to judge
        return True
    return True


def running_server(data_dir: Path, db_url: str) -> str | None:
    """The URL of a ``gmpscope serve`` serving ``data_dir`` with ``db_url``, if one
    runs and answers."""
    from gmpscope.commands.serve import announcement_file
    from gmpscope.wsgi import read_announcement, redact

    found = read_announcement(announcement_file(data_dir))
    if found is None or found.get("db") != redact(db_url):
        return None
    url, pid = found.get("url"), found.get("pid")
    if not isinstance(url, str) or not isinstance(pid, int) or not _alive(pid):
        return None
    return url if _healthy(url) else None


def _port_free(host: str, port: int) -> bool:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def start_server(settings: Any, db_arg: str | None, host: str, port: int,
                 insecure: bool = False) -> tuple[str, int]:
    """Start ``gmpscope serve`` for this data directory, detached from this
    command (its own session; output in ``DATA/serve.log``); its URL and pid."""
    from gmpscope.commands.serve import announcement_file
    from gmpscope.wsgi import read_announcement

    if port and not _port_free(host, port):
        port = 0
    announce = announcement_file(settings.data_dir)
    announce.unlink(missing_ok=True)  # a dead server's; a live one was checked first
    cmd = [sys.executable, "-m", "gmpscope", "serve", "--host", host, "--port", str(port),
           "--data-dir", str(settings.data_dir)]
    if insecure:
        cmd.append("--insecure")
    if db_arg:
        cmd += ["--db", db_arg]
    log_path = settings.data_dir / "serve.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    deadline = time.monotonic() + START_GUARD_S
    while time.monotonic() < deadline:
        found = read_announcement(announce)
        if found is not None and found.get("pid") == proc.pid and _healthy(str(found["url"])):
            return str(found["url"]), proc.pid
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
    if proc.poll() is None:
        proc.kill()
    raise CLIError(f"the explorer did not start ({log_path}: {tail[0]})")


def run(args: argparse.Namespace) -> int:
    import webbrowser

    from gmpscope import wsgi

    wsgi.check_server_args(args.port, 1, 1)
    # GMPSCOPE_READ_TOKEN alone is a reader's setting here (what token_note sends), not
    # this command's server's: a server it starts checks its own environment.
    own_env = {k: v for k, v in os.environ.items() if k != "GMPSCOPE_READ_TOKEN"}
    settings = wsgi.server_settings(args, own_env)
    wsgi.check_exposure(args.host, settings, args.insecure)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    from gmpscope.commands.serve import ingest_paths

    ((_, trace_id, _),) = ingest_paths(settings, [args.trace], not args.no_progress)
    url = running_server(settings.data_dir, settings.db_url)
    if url is None:
        url, pid = start_server(settings, args.db, args.host, args.port, args.insecure)
        print(f"gmpscope view: started the explorer at {url} (pid {pid}; stop it with "
              f"`kill {pid}`)", file=sys.stderr)
    page = f"{url}/traces/{trace_id}/overview"
    note = token_note(url, trace_id)
    if note is not None:
        print(f"gmpscope view: {note}", file=sys.stderr)
    print(page, flush=True)
    if not args.no_browser:
        webbrowser.open(page)
    return EXIT_OK
