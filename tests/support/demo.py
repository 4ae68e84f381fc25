"""The demo service (collectors/workloads/cmd/demoservice) and the live collector as
real processes, for the live tests and bench/live.py.

``demo_binaries()`` builds the workloads with Go 1.27 (cached, see
workload_traces.build_workloads); ``Demo`` runs demoservice on a port and
parses the URL it prints; ``start_collector`` runs ``gmpscope live``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from .workload_traces import REPO, build_workloads

GO_VERSION = "1.27.3"
#: A guard against a process that never comes up: a hang, not a speed limit.
START_GUARD_S = 120.0


def demo_binaries() -> Path:
    """The directory holding demoservice and loadgen built with Go 1.27."""
    out = build_workloads(GO_VERSION)
    for name in ("demoservice", "loadgen"):
        if not (out / name).is_file():
            raise RuntimeError(f"no {name} binary in {out}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Demo:
    """A running demoservice; ``url`` is its base URL."""

    def __init__(self, bindir: Path, port: int = 0, leak_every: str = "2s") -> None:
        self.proc = subprocess.Popen(
            [str(bindir / "demoservice"), "-addr", f"127.0.0.1:{port}", "-leak-every",
             leak_every], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        found: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(rb"listening on (http://\S+)", line)
                if m:
                    found.append(m.group(1).decode())
                    return

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(START_GUARD_S)
        if not found:
            self.stop()
            raise RuntimeError("demoservice did not start")
        self.url = found[0]
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        self.proc.wait(60)


class LoadGen:
    """loadgen against a demo service until stopped."""

    def __init__(self, bindir: Path, target: str, rps: int = 100, clients: int = 4) -> None:
        self.proc = subprocess.Popen(
            [str(bindir / "loadgen"), "-target", target, "-rps", str(rps), "-c", str(clients)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)


def start_collector(target: str, ingest: str, session: str, log: Path, *,
                    window: str = "1s", count: int | None = None,
                    extra: tuple[str, ...] = (), env: dict[str, str] | None = None
                    ) -> subprocess.Popen[bytes]:
    """``gmpscope live`` as a subprocess, its output (stdout and stderr) in ``log``."""
    cmd = [sys.executable, "-m", "gmpscope", "live", "--target", target, "--ingest", ingest,
           "--session", session, "--window", window, *extra]
    if count is not None:
        cmd += ["--count", str(count)]
    full_env = dict(os.environ)
    full_env.pop("GMPSCOPE_TOKEN", None)
    full_env.update(env or {})
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=out, stderr=out,
                                start_new_session=True)
