"""The live collector: one thread pulls windows, another sends them.

The puller asks the target for ``/debug/pprof/trace?seconds=W`` again as soon as
the previous window arrives (back-to-back windows; the gap between two is one
HTTP round trip). A refused or failed pull backs off (0.5 s doubling to
``max_backoff``), logs it once per outage and reports it to the server; when
the target answers again the next window carries a note with the gap.

The sender posts the oldest buffered window to
``POST /api/live/sessions/<name>/segments``. While the ingest service is
unreachable or failing (5xx) it retries with backoff and the puller keeps
filling the bounded buffer (:class:`WindowBuffer`), which drops its oldest
windows when full and counts them. A 409 means the session is paused on the
server: the window is discarded and the puller stops pulling (no tracing
overhead on the target) and polls the session until it runs again.

With an OS session (``gmpscope live --os``, :mod:`collectors.live.os_side`),
each stored window's OS side is cut from the session's events by the trace's
own wall-clock span, attached to its trace (``POST /api/traces/<id>/poller``)
and summarised per second (``POST .../segments/<id>/os``).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collectors.live.buffer import Window, WindowBuffer
from collectors.live.os_attach import OsAttacher

TRACE_MAGIC = b"go 1."


@dataclass(frozen=True)
class Config:
    """What to collect from where, and where to send it."""

    target: str  # base URL of the Go service (its net/http/pprof handlers)
    ingest: str  # base URL of gmpscope (ingest-server or serve)
    session: str
    window_s: float = 1.0
    token: str | None = None
    buffer: int = 60  # windows held while the ingest service is away
    max_windows: int | None = None  # stop after this many pulled (None: run until stopped)
    max_backoff_s: float = 10.0
    http_timeout_s: float = 30.0
    drain_s: float = 10.0  # once stopped, how long to keep sending what is buffered


@dataclass
class Stats:
    """Counters, readable while running."""

    pulled: int = 0
    sent: int = 0
    dropped: int = 0
    rejected: int = 0  # windows the server refused (not a trace, too big)
    skipped_paused: int = 0
    target_failures: int = 0
    ingest_failures: int = 0
    outages: list[tuple[int, int, int]] = field(default_factory=list)  # (from_ns, to_ns, tries)


class FatalError(Exception):
    """The collector cannot go on (e.g. the server refuses the token)."""


def session_name_for(target: str) -> str:
    """A default session name from the target's host and port (``127.0.0.1-6060``)."""
    netloc = urllib.parse.urlsplit(target).netloc or target
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in netloc)
    return name.lstrip("._-")[:128] or "live"


class Collector:
    """Pulls windows from ``cfg.target`` and sends them to ``cfg.ingest``."""

    def __init__(self, cfg: Config, log: Callable[[str], None] = print,
                 os_side: OsAttacher | None = None) -> None:
        self.cfg = cfg
        self.log = log
        self.stats = Stats()
        self.buffer = WindowBuffer(cfg.buffer)
        self.stop_event = threading.Event()
        self.paused = threading.Event()
        self.fatal: str | None = None
        self._pulling_done = threading.Event()
        base = cfg.ingest.rstrip("/")
        quoted = urllib.parse.quote(cfg.session, safe="")
        self._ingest_base = base
        self._session_url = f"{base}/api/live/sessions/{quoted}"
        self.os_side = os_side

    # ------------------------------------------------------------------ HTTP

    def _request(self, url: str, *, data: bytes | None = None, method: str = "GET",
                 timeout: float, json_body: Any = None) -> tuple[int, bytes]:
        headers = {}
        if json_body is not None:
            data = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = "application/octet-stream"
        # The token goes to the ingest server only (never to the traced service),
        # on reads too: a server with a token guards them.
        if self.cfg.token and url.startswith(self._ingest_base + "/api/"):
            headers["Authorization"] = f"Bearer {self.cfg.token}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()
        except http.client.HTTPException as e:
            # The peer died mid-answer (IncompleteRead, RemoteDisconnected...): for
            # the caller, a failed request like a refused connection.
            raise OSError(f"{type(e).__name__}: {e}") from None

    def _report(self, message: str) -> None:
        """Best effort: tell the server (shown on the live page)."""
        body = {"message": message, "target": self.cfg.target, "dropped": self.buffer.dropped,
                "target_failures": self.stats.target_failures}
        try:
            self._request(self._session_url + "/status", method="POST", json_body=body,
                          timeout=5)
        except (OSError, ValueError):
            pass

    # ---------------------------------------------------------------- pulling

    def _pull_once(self) -> bytes:
        url = (self.cfg.target.rstrip("/") + "/debug/pprof/trace?seconds="
               + format(self.cfg.window_s, "g"))
        status, body = self._request(url, timeout=self.cfg.window_s + self.cfg.http_timeout_s)
        if status != 200:
            text = body[:200].decode("utf-8", "replace").strip()
            raise OSError(f"HTTP {status}: {text}")
        if not body.startswith(TRACE_MAGIC):
            raise OSError(f"not an execution trace ({len(body)} bytes)")
        return body

    def _wait_while_paused(self) -> None:
        try:
            status, body = self._request(self._session_url, timeout=5)
            if status == 200 and json.loads(body).get("state") == "running":
                self.paused.clear()
                self.log(f"session {self.cfg.session} resumed: pulling again")
                return
        except (OSError, ValueError):
            pass
        self.stop_event.wait(max(1.0, self.cfg.window_s))

    def pull_loop(self) -> None:
        """Pull windows until stopped (or ``max_windows``)."""
        seq = 0
        backoff = 0.5
        down_since: int | None = None
        tries = 0
        try:
            while not self.stop_event.is_set():
                if self.cfg.max_windows is not None and seq >= self.cfg.max_windows:
                    break
                if self.paused.is_set():
                    self._wait_while_paused()
                    continue
                start = time.time_ns()
                try:
                    data = self._pull_once()
                except (OSError, ValueError) as e:
                    self.stats.target_failures += 1
                    tries += 1
                    if down_since is None:
                        down_since = start
                        msg = (f"target {self.cfg.target} failed: {e}; retrying with backoff "
                               f"(up to {self.cfg.max_backoff_s:g} s)")
                        self.log(msg)
                        self._report(msg)
                    self.stop_event.wait(backoff)
                    backoff = min(backoff * 2, self.cfg.max_backoff_s)
                    continue
                end = time.time_ns()
                note = ""
                if down_since is not None:
                    gap_s = (start - down_since) / 1e9
                    note = f"target back after {tries} failed pulls, gap {gap_s:.1f} s"
                    self.stats.outages.append((down_since, start, tries))
                    self.log(note)
                    self._report(note)
                    down_since, tries, backoff = None, 0, 0.5
                seq += 1
                self.stats.pulled += 1
                evicted = self.buffer.put(Window(seq, data, start, end, note))
                if evicted is not None:
                    self.stats.dropped = self.buffer.dropped
                    self.log(f"buffer full ({self.cfg.buffer} windows): dropped window "
                             f"#{evicted.seq} ({self.buffer.dropped} dropped so far)")
        finally:
            self._pulling_done.set()

    # ---------------------------------------------------------------- sending

    def _post(self, w: Window) -> tuple[int, bytes]:
        q = urllib.parse.urlencode({
            "seq": w.seq, "start_ns": w.start_ns, "end_ns": w.end_ns,
            "target": self.cfg.target, "window": format(self.cfg.window_s, "g"),
            "dropped": self.buffer.dropped, "target_failures": self.stats.target_failures,
            "note": w.note})
        return self._request(f"{self._session_url}/segments?{q}", data=w.data, method="POST",
                             timeout=self.cfg.http_timeout_s + 60)

    def send_loop(self) -> None:
        """Send buffered windows until pulling is over and the buffer is empty."""
        backoff = 0.5
        failing = False
        drain_until: float | None = None
        while True:
            if self.stop_event.is_set():
                drain_until = drain_until or time.monotonic() + self.cfg.drain_s
                if time.monotonic() > drain_until:
                    if len(self.buffer):
                        self.log(f"stopped: {len(self.buffer)} buffered windows not sent")
                    return
            w = self.buffer.peek(0.2)
            if w is None:
                if self._pulling_done.is_set() or self.fatal:
                    return
                continue
            try:
                status, body = self._post(w)
            except OSError as e:
                status, body = 0, str(e).encode()
            if status == 201:
                self.buffer.done(w)
                self.stats.sent += 1
                if failing:
                    self.log(f"ingest service back: {len(self.buffer)} windows buffered, "
                             f"{self.buffer.dropped} dropped")
                    failing, backoff = False, 0.5
                info = _json(body)
                self.log(f"window #{w.seq} -> trace {info.get('trace_id')} "
                         f"({len(w.data)} bytes, {info.get('seconds')} s, "
                         f"ingest {info.get('ingest_ms')} ms)")
                if self.os_side is not None:
                    self.os_side.submit(w, info)
            elif status == 409:
                self.buffer.done(w)
                self.stats.skipped_paused += 1
                if not self.paused.is_set():
                    self.paused.set()
                    self.log(f"session {self.cfg.session} is paused on the server: "
                             "not pulling until it is resumed")
            elif status in (401, 403):  # no token, a wrong one, or a read-only one
                self.fatal = f"the server refused the token: {_json(body).get('error')}"
                self.log(self.fatal)
                self.stop_event.set()
                return
            elif 400 <= status < 500:
                self.buffer.done(w)
                self.stats.rejected += 1
                self.log(f"window #{w.seq} refused (HTTP {status}): {_json(body).get('error')}")
            else:
                self.stats.ingest_failures += 1
                if not failing:
                    failing = True
                    why = f"HTTP {status}" if status else body.decode("utf-8", "replace")
                    self.log(f"ingest service {self.cfg.ingest} failed ({why}): buffering "
                             f"up to {self.cfg.buffer} windows, retrying")
                if self.stop_event.wait(backoff) and self._pulling_done.is_set():
                    return
                backoff = min(backoff * 2, self.cfg.max_backoff_s)
            self.stats.dropped = self.buffer.dropped

    def run(self) -> Stats:
        """Pull and send until stopped (``stop_event``) or ``max_windows`` are sent."""
        sender = threading.Thread(target=self.send_loop, name="live-sender", daemon=True)
        if self.os_side is not None:
            self.os_side.start(self._request, self._ingest_base, self._session_url, self.log)
        sender.start()
        try:
            self.pull_loop()
        finally:
            self._pulling_done.set()
            sender.join()
            if self.os_side is not None:
                left = self.os_side.close(self.cfg.drain_s + 30)
                if left:
                    self.log(f"stopped: the OS side of {left} windows not attached")
        return self.stats


def _json(body: bytes) -> dict[str, Any]:
    try:
        out = json.loads(body)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}
