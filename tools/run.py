"""``make run``: the explorer with the samples loaded and, beside it, a live demo.

``python -m tools.run [--host H] [--port P] [--samples DIR] [--live-demo 0|1] [TRACE ...]``
(from the repository root; ``make run`` passes ``HOST``, ``PORT``, ``SAMPLES``,
``LIVE_DEMO`` and ``TRACES``) starts ``gmpscope serve --samples DIR`` and, unless
``--live-demo 0``, a real running Go service watched live:

- ``demoservice`` (collectors/workloads/cmd/demoservice), a small HTTP service with
  ``net/http/pprof``;
- ``loadgen``, sending it about 100 requests per second;
- ``gmpscope live``, pulling 1 s trace windows from it into the session ``demo`` of
  the explorer, so ``/live/demo`` moves within seconds.

The two Go programs are built once with the cached Go 1.27 toolchain
(tools/gotoolchains.py installs it on first use; tests/support/workload_traces.py
builds and caches the workloads, for the tests too). While the demo runs, its note
(``DATA/demo.json``, ingest/live/demo.py) tells the library page what runs and how
to stop it. Every process started here runs in its own session and is told to stop
when this one dies (``PR_SET_PDEATHSIG``); SIGINT (Ctrl-C), SIGTERM or SIGHUP stop
the collector first (it sends what it holds), then the service and its load, then
the explorer, and wait for each: nothing is left running. A second signal kills
what is left at once.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
GO_VERSION = "1.27.3"
SESSION = "demo"
#: How the demo is stopped, as the library page and the terminal say it.
STOP_TEXT = ("Ctrl-C in the terminal running `make run` stops it with the explorer; "
             "`make run LIVE_DEMO=0` starts the explorer without it.")
#: Guards against a process that never comes up or never stops (hangs, not targets).
START_GUARD_S = 600.0
STOP_GRACE_S = {"gmpscope live": 20.0, "loadgen": 5.0, "demoservice": 5.0,
                "gmpscope serve": 45.0}
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the runner dies, however it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the signal handlers still stop them
        pass


@dataclass
class Child:
    """One process started here, in its own session (its pid is its process group)."""

    name: str
    what: str
    proc: subprocess.Popen[bytes]

    def stop(self, grace_s: float, sig: int = signal.SIGTERM) -> None:
        """``sig`` to its process group, SIGKILL after ``grace_s``; waits for it."""
        if self.proc.poll() is None:
            _killpg(self.proc.pid, sig)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                _killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Whatever it started in its group (gunicorn's workers) goes with it.
        _killpg(self.proc.pid, signal.SIGKILL)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def start(name: str, what: str, cmd: Sequence[str], out: IO[bytes] | int | None,
          env: dict[str, str] | None = None) -> Child:
    """``cmd`` in its own session, stopped when this process dies."""
    proc = subprocess.Popen(list(cmd), cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=out if out is not None else None,
                            start_new_session=True, preexec_fn=_die_with_parent)
    return Child(name, what, proc)


def say(msg: str) -> None:
    print(f"make run: {msg}", flush=True)


def demo_binaries() -> Path:
    """demoservice and loadgen built with the cached Go 1.27 (installed if missing)."""
    from tests.support.workload_traces import build_workloads
    from tools import gotoolchains

    gotoolchains.go_binary(GO_VERSION)
    return build_workloads(GO_VERSION)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def wait_for_server(serve: Child, announce: Path, stop: threading.Event) -> str | None:
    """The URL ``gmpscope serve`` announces once ready, or None if it exits first."""
    deadline = time.monotonic() + START_GUARD_S
    while time.monotonic() < deadline and not stop.is_set():
        if serve.proc.poll() is not None:
            return None
        try:
            found: Any = json.loads(announce.read_text())
        except (OSError, ValueError):
            found = None
        if isinstance(found, dict) and found.get("pid") == serve.proc.pid \
                and _healthy(str(found.get("url"))):
            return str(found["url"])
        stop.wait(0.2)
    return None


@dataclass
class Runner:
    """The explorer and the demo, and stopping them in order."""

    data_dir: Path
    children: list[Child] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)
    signals: int = 0
    log: IO[bytes] | None = None

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 1:
            say(f"{signal.Signals(signum).name}: stopping the live demo and the explorer")
            self.stop_event.set()
        else:  # a second Ctrl-C: no more waiting
            for child in self.children:
                _killpg(child.proc.pid, signal.SIGKILL)

    def start_demo(self, bindir: Path, serve_url: str) -> None:
        from ingest.live.demo import write_note

        log_path = self.data_dir / "demo.log"
        log = self.log = open(log_path, "ab")  # noqa: SIM115 - closed by stop_all
        mark = log_path.stat().st_size
        # Its scratch files (its /io requests') under the data directory; it removes
        # them when it is stopped.
        scratch = self.data_dir / "tmp" / "demo"
        scratch.mkdir(parents=True, exist_ok=True)
        service = start("demoservice", "the demo Go service (HTTP with net/http/pprof; "
                        "a leaked connection every 2 s)",
                        [str(bindir / "demoservice"), "-addr", "127.0.0.1:0", "-leak-every",
                         "2s"], log, env={**os.environ, "TMPDIR": str(scratch)})
        self.children.append(service)
        found = wait_for_line_after(log_path, mark, r"demoservice: listening on (http://\S+)",
                                    service, self.stop_event)
        if found is None:
            say(f"no live demo: demoservice did not start (see {log_path})")
            return
        self.children.append(start("loadgen", f"about 100 requests/s to {found}",
                                   [str(bindir / "loadgen"), "-target", found, "-rps", "100",
                                    "-c", "4"], log))
        self.children.append(start(
            "gmpscope live", f"1 s trace windows from {found}/debug/pprof/trace into "
            f"session {SESSION}",
            [sys.executable, "-m", "gmpscope", "live", "--target", found, "--ingest",
             serve_url, "--session", SESSION, "--window", "1s", "--quiet"], log))
        write_note(self.data_dir, {
            "session": SESSION, "target": found, "started_by": "make run",
            "owner_pid": os.getpid(), "stop": STOP_TEXT, "log": str(log_path),
            "processes": [{"name": c.name, "pid": c.proc.pid, "what": c.what}
                          for c in self.children if c.name != "gmpscope serve"]})
        for c in self.children:
            if c.name != "gmpscope serve":
                say(f"live demo: {c.name} (pid {c.proc.pid}): {c.what}")
        say(f"open {serve_url}/live/{SESSION} (moves within seconds). {STOP_TEXT}")

    def stop_all(self) -> None:
        from ingest.live.demo import remove_note

        for child in reversed(self.children):  # the collector first, the explorer last
            child.stop(STOP_GRACE_S.get(child.name, 10.0))
        remove_note(self.data_dir, os.getpid())
        if self.log is not None:
            self.log.close()


def wait_for_line_after(log: Path, offset: int, pattern: str, proc: Child,
                        stop: threading.Event) -> str | None:
    """The first match of ``pattern`` in ``log`` after ``offset`` (earlier runs' lines
    stay in the file), or None if ``proc`` exits first."""
    deadline = time.monotonic() + START_GUARD_S
    while time.monotonic() < deadline and not stop.is_set():
        with open(log, "rb") as f:
            f.seek(offset)
            m = re.search(pattern, f.read().decode(errors="replace"))
        if m:
            return m.group(1)
        if proc.proc.poll() is not None:
            return None
        stop.wait(0.1)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.run",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8050)
    parser.add_argument("--samples", type=Path, default=REPO / "samples")
    parser.add_argument("--live-demo", choices=("0", "1"), default="1")
    parser.add_argument("traces", nargs="*", type=Path)
    args = parser.parse_args(argv)

    from ingest.config import default_data_dir

    data_dir = default_data_dir(os.environ)
    data_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(data_dir)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, runner.on_signal)
    try:
        serve = start("gmpscope serve", "the explorer",
                      [sys.executable, "-m", "gmpscope", "serve", "--host", args.host,
                       "--port", str(args.port), "--samples", str(args.samples.resolve()),
                       *[str(p.resolve()) for p in args.traces]], None)
        runner.children.append(serve)
        bindir = None
        if args.live_demo == "1":
            try:  # while the explorer loads the samples
                bindir = demo_binaries()
            except Exception as e:  # noqa: BLE001 - the explorer runs without the demo
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                say(f"no live demo: could not build it with Go {GO_VERSION}: {why}")
        url = wait_for_server(serve, data_dir / "serve.json", runner.stop_event)
        if url is not None and bindir is not None and not runner.stop_event.is_set():
            runner.start_demo(bindir, url)
        elif url is not None and args.live_demo == "0":
            say("no live demo (LIVE_DEMO=0). Ctrl-C stops the explorer.")
        while not runner.stop_event.is_set() and serve.proc.poll() is None:
            runner.stop_event.wait(0.5)
        if not runner.stop_event.is_set():
            say(f"the explorer stopped (status {serve.proc.returncode}); stopping the rest")
    finally:
        runner.stop_all()
    code = serve.proc.returncode
    if runner.signals:
        return 0
    return code if code else 0


if __name__ == "__main__":
    sys.exit(main())
