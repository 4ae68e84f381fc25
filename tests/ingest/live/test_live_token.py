"""The live collector against a server with tokens (reads need one too).

The target is a stand-in for the Go service's ``/debug/pprof/trace`` that serves
real sample traces and records the headers it got: the token must never reach it.
A write token delivers windows and, while the session is paused, reads the
session's state with the token (without it the collector would wait forever); a
read-only token is refused at once (403) and stops the collector.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from collectors.live.collector import Collector, Config
from tests.support.server import SAMPLES, Served

WRITE_TOKEN = "w-live-5ecret"
READ_TOKEN = "r-live-5ecret"
#: A guard against a hang, not a speed limit.
GUARD_S = 180.0
TRACES = [p for p in SAMPLES if p.name in ("go1.27-syscallblock.trace", "go1.27-timers.trace",
                                           "go1.27-mutex.trace")]


class Target:
    """Serves a different sample trace per pull, after the window's seconds; keeps
    each request's Authorization."""

    def __init__(self) -> None:
        self.auth_headers: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802  # http.server's name
                outer.auth_headers.append(self.headers.get("Authorization"))
                # As the real handler, the window lasts what ?seconds= asks.
                query = parse_qs(urlsplit(self.path).query)
                time.sleep(float(query.get("seconds", ["0"])[0]))
                body = TRACES[(len(outer.auth_headers) - 1) % len(TRACES)].read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("live-token") / "data", token=WRITE_TOKEN,
                read_token=READ_TOKEN, subcommand="ingest-server") as srv:
        yield srv


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    yield t
    t.close()


def collect(server: Served, target: Target, session: str, token: str, windows: int,
            logs: list[str]) -> Collector:
    return Collector(Config(target=target.url, ingest=server.url, session=session,
                            window_s=0.2, token=token, max_windows=windows, drain_s=30.0),
                     logs.append)


def wait_for(what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GUARD_S
    while not cond():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def segments(server: Served, session: str) -> int:
    r = server.get(f"/api/live/sessions/{session}")
    return int(r.json()["segments"]) if r.status_code == 200 else 0


def test_write_token_delivers_and_reads_a_paused_session(server: Served, target: Target,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    logs: list[str] = []
    collect(server, target, "tok", WRITE_TOKEN, 1, logs).run()
    assert segments(server, "tok") == 1, logs
    auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    assert server.post("/api/live/sessions/tok/pause", headers=auth).status_code == 200

    # Paused, the collector asks the session's state (a GET, which needs the token)
    # until it is running again; the test resumes once it has started asking.
    asking = threading.Event()
    original = Collector._wait_while_paused

    def wait_while_paused(self: Collector) -> None:
        asking.set()
        original(self)

    monkeypatch.setattr(Collector, "_wait_while_paused", wait_while_paused)
    c = collect(server, target, "tok", WRITE_TOKEN, 8, logs)
    runner = threading.Thread(target=c.run, daemon=True)
    runner.start()
    wait_for("the collector asks whether the session runs", asking.is_set)
    assert server.post("/api/live/sessions/tok/resume", headers=auth).status_code == 200
    runner.join(GUARD_S)
    assert not runner.is_alive() and c.fatal is None, logs
    assert any("resumed: pulling again" in m for m in logs), logs
    assert c.stats.skipped_paused >= 1 and c.stats.sent >= 1
    assert c.stats.skipped_paused + c.stats.sent == c.stats.pulled
    assert segments(server, "tok") == 1 + c.stats.sent
    # Every pull from the target went without the token.
    assert target.auth_headers == [None] * (1 + c.stats.pulled)


def test_read_token_is_refused_and_stops(server: Served, target: Target) -> None:
    logs: list[str] = []
    c = collect(server, target, "readonly", READ_TOKEN, 3, logs)
    c.run()
    assert c.fatal is not None and "refused the token" in c.fatal
    assert "may only read" in c.fatal
    assert segments(server, "readonly") == 0
