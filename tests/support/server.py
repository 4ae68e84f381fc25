"""gmpscope's servers as real processes for service and browser tests.

``Served`` starts ``python -m gmpscope serve`` (or ``ingest-server``) in its own
process group on a free port with a fresh data directory (SQLite there unless ``db_url`` is given),
ingesting the given traces first, and waits for the URL it prints.
``samples_server`` (a fixture in tests/conftest.py) serves the repository's
sample traces once per test session.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.trace"))
#: A guard against a server that never comes up: a hang, not a speed limit.
START_GUARD_S = 300.0


class ServerFailed(RuntimeError):
    pass


class Served:
    """A running gmpscope server; ``url`` is its base URL (no trailing slash).

    ``subcommand`` is ``serve`` (the explorer) or ``ingest-server`` (the ingest
    API alone); ``cwd`` and ``env`` run it elsewhere than the checkout (an
    installed wheel). :meth:`kill9` ends it as a crash would and :meth:`start`
    brings it up again on the same database and data directory. The one way
    tests and benchmarks start a server.

    ``token`` and ``read_token`` are the server's GMPSCOPE_TOKEN and
    GMPSCOPE_READ_TOKEN; :meth:`get` sends the read one (else the write one) unless
    the caller gives its own ``Authorization``, :meth:`post` sends only what it is given.
    """

    def __init__(self, data_dir: Path, traces: list[Path] | None = None, *,
                 db_url: str | None = None, token: str | None = None,
                 read_token: str | None = None,
                 extra_args: tuple[str, ...] = ("--workers", "1", "--threads", "8"),
                 subcommand: str = "serve", cwd: Path = REPO,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.token = token
        self.read_token = read_token
        self.subcommand = subcommand
        self.log = data_dir / f"{subcommand}.log"
        self.url = ""
        self.ingested: list[int] = []
        self._cwd = cwd
        self._env = dict(os.environ if env is None else env)
        for var in ("GMPSCOPE_TOKEN", "GMPSCOPE_READ_TOKEN", "GMPSCOPE_DB"):
            self._env.pop(var, None)
        if token is not None:
            self._env["GMPSCOPE_TOKEN"] = token
        if read_token is not None:
            self._env["GMPSCOPE_READ_TOKEN"] = read_token
        self._cmd = [sys.executable, "-m", "gmpscope", subcommand, "--port", "0",
                     "--data-dir", str(data_dir), *extra_args]
        if db_url:
            self._cmd += ["--db", db_url]
        self._traces = [str(p) for p in traces or ()]
        self.start()

    def start(self) -> None:
        """Start the server (the traces are ingested on the first start only)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self._cmd + self._traces
        self._traces = []
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=self._cwd, env=self._env,
                                         stdout=subprocess.PIPE, stderr=log,
                                         start_new_session=True)
        found: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(rb"trace (\d+) (?:ingested|already stored)", line)
                if m:
                    self.ingested.append(int(m.group(1)))
                m = re.search(rb"serving (http://\S+)", line)
                if m:
                    found.append(m.group(1).decode())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_GUARD_S)
        if not found:
            self.kill9()
            raise ServerFailed(f"gmpscope {self.subcommand} did not start: "
                               f"{self.log.read_text()[-3000:]}")
        self.url = found[0]

    def api(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        return self.url + path

    def reader_headers(self) -> dict[str, str]:
        """What a reader sends: the read token (else the write token) when the server has one."""
        tok = self.read_token or self.token
        return {"Authorization": f"Bearer {tok}"} if tok else {}

    def get(self, path: str, **kw: object) -> requests.Response:
        headers = dict(kw.pop("headers", None) or {})  # type: ignore[call-overload]
        if "Authorization" not in headers:
            headers.update(self.reader_headers())
        return requests.get(self.url + path, timeout=120, headers=headers,
                            **kw)  # type: ignore[arg-type]

    def post(self, path: str, **kw: object) -> requests.Response:
        return requests.post(self.url + path, timeout=120, **kw)  # type: ignore[arg-type]

    def stop(self) -> int:
        """SIGTERM to the server (its workers shut down with it) and wait;
        returns its exit status. What is left of its process group then goes."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:  # a hang
                self.kill9()
        self._kill_group()
        return self.proc.wait()

    def kill9(self) -> None:
        """SIGKILL the server and every worker at once, as a crash would."""
        self._kill_group()
        self.proc.wait()

    def _kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
