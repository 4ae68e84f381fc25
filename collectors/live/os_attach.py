"""Attach each stored window's OS side to its trace (``gmpscope live --os``).

Runs on a thread of its own, fed by the collector's sender once a window is
stored (HTTP 201), so sending the next windows never waits on it: cuts
the window's span out of the running :class:`~collectors.live.os_side.OsSession`
(the trace's own wall-clock span from its clock snapshot, as the server
reports it; else the collector's request times), sends the recording
directory as a ``.tar.gz`` to ``POST /api/traces/<id>/poller`` (the same API as
``gmpscope ingest rec/ --attach ID``), then asks the server for the window's
per-second OS numbers (``POST /api/live/sessions/<name>/segments/<id>/os``).
A failure is logged (once per kind in a row) and the next window tries again:
the Go side of the session never waits on the OS side.
"""

from __future__ import annotations

import io
import queue
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.live.buffer import Window
from collectors.live.os_side import OsSession
from collectors.live.os_target import OsSideError

Request = Callable[..., tuple[int, bytes]]


def archive(directory: Path) -> bytes:
    """The recording directory as a gzipped tar, its files at the top."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=3) as tar:
        for p in sorted(directory.iterdir()):
            if p.is_file():
                tar.add(p, arcname=p.name)
    return buf.getvalue()


@dataclass
class OsStats:
    """Counters, readable while running."""

    attached: int = 0
    failed: int = 0
    skipped: int = 0  # windows while no OS session ran (the target had exited)
    restarts: int = 0
    rows: int = 0
    sched_events: int = 0
    tracer_cpu_s: float = 0.0
    parser_cpu_s: float = 0.0


class OsAttacher:
    """Cuts, sends and summarises the OS side of each stored window."""

    def __init__(self, session: OsSession,
                 restart: Callable[[], OsSession] | None = None) -> None:
        self.session = session
        self.restart = restart  # a new session on the target's new process, if it can be found
        self.stats = OsStats()
        self._last_error = ""
        self._ended_logged = False
        self._queue: queue.Queue[tuple[Window, dict[str, Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self, request: Request, base: str, session_url: str,
              log: Callable[[str], None]) -> None:
        """Start the thread that attaches the windows :meth:`submit` gives it, in order."""
        def work() -> None:
            while (item := self._queue.get()) is not None:
                self.attach(item[0], item[1], request, base, session_url, log)

        self._thread = threading.Thread(target=work, name="live-os-attach", daemon=True)
        self._thread.start()

    def submit(self, w: Window, info: dict[str, Any]) -> None:
        """Attach the OS side of stored window ``w`` (``info``: the server's answer) soon."""
        self._queue.put((w, info))

    def close(self, timeout_s: float) -> int:
        """Finish the windows submitted (for at most ``timeout_s``); how many were left."""
        if self._thread is None:
            return 0
        self._queue.put(None)
        deadline = time.monotonic() + timeout_s
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return max(0, self._queue.qsize() - 1) if self._thread.is_alive() else 0  # the sentinel

    def _restarted(self, log: Callable[[str], None]) -> bool:
        """A new OS session on the target's new process (it restarted), if one can start."""
        if self.restart is None:
            return False
        try:
            fresh = self.restart()
        except OsSideError as e:
            if str(e) != self._last_error:
                self._last_error = str(e)
                log(f"OS side: cannot record the target again: {e}")
            return False
        self.session.stop()
        self.session = fresh
        self.stats.restarts += 1
        self._ended_logged = False
        log(f"OS side: recording pid {fresh.pid} again (the target restarted)")
        return True

    def attach(self, w: Window, info: dict[str, Any], request: Request, base: str,
               session_url: str, log: Callable[[str], None]) -> None:
        """The OS side of window ``w``, stored as ``info`` says (trace_id, segment, span)."""
        trace_id, segment = info.get("trace_id"), info.get("segment")
        if not isinstance(trace_id, int) or not isinstance(segment, int):
            return
        if self.session.ended.is_set() and not self._restarted(log):
            # Nothing was recorded: attaching an empty recording would show zeros.
            self.stats.skipped += 1
            if not self._ended_logged:
                self._ended_logged = True
                log("OS side: bpftrace has stopped (the target exited?): windows have no "
                    "OS side until it can be recorded again")
            return
        s0, e0 = info.get("wall_start_ns"), info.get("wall_end_ns")
        start = s0 if isinstance(s0, int) else w.start_ns
        end = e0 if isinstance(e0, int) else w.end_ns
        if end <= self.session.started_ns:  # over before the probes were attached
            self.stats.skipped += 1
            return
        label = {"seq": w.seq, "trace_id": trace_id, "segment": segment,
                 "span_from": info.get("wall_from", "request time")}
        try:
            with tempfile.TemporaryDirectory(prefix="gmpscope-live-os-") as tmp:
                rec = Path(tmp) / f"os-{w.seq}"
                sl = self.session.cut(start, end, rec, label)
                body = archive(rec)
            status, answer = request(f"{base}/api/traces/{trace_id}/poller", data=body,
                                     method="POST", timeout=120)
            if status not in (200, 201):
                raise OSError(f"attaching to trace {trace_id}: HTTP {status}: "
                              f"{answer[:200].decode('utf-8', 'replace')}")
            status, answer = request(f"{session_url}/segments/{segment}/os", method="POST",
                                     json_body={}, timeout=120)
            if status != 200:
                raise OSError(f"OS seconds of segment {segment}: HTTP {status}: "
                              f"{answer[:200].decode('utf-8', 'replace')}")
        except OSError as e:
            self.stats.failed += 1
            if str(e).split(":")[0] != self._last_error:
                self._last_error = str(e).split(":")[0]
                log(f"OS side of window #{w.seq} not attached: {e}")
            return
        self._last_error = ""
        s = self.stats
        s.attached += 1
        s.rows += sl.rows
        s.sched_events += sl.sched_events
        s.tracer_cpu_s += sl.tracer_cpu_s
        s.parser_cpu_s += sl.parser_cpu_s
        log(f"window #{w.seq} OS side -> trace {trace_id} ({sl.rows} calls, "
            f"{sl.epoll_waits} epoll waits, {sl.sched_events} scheduler events, bpftrace "
            f"{sl.tracer_cpu_s:.2f} s CPU, parsing {sl.parser_cpu_s:.2f} s)")
