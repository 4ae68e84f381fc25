"""``gmpscope view TRACE`` as a user runs it: real subprocesses, a real server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
HTTPNET = REPO / "samples" / "go1.27-httpnet.trace"
MUTEX = REPO / "samples" / "go1.27-mutex.trace"
PAGE = re.compile(r"^(http://127\.0\.0\.1:\d+)/traces/(\d+)/overview$")


def view(data: Path, trace: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GMPSCOPE_DB", "GMPSCOPE_DATA")}
    return subprocess.run([sys.executable, "-m", "gmpscope", "view", str(trace), "--no-browser",
                           "--port", "0", "--data-dir", str(data)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def announced(data: Path) -> dict[str, object]:
    value: dict[str, object] = json.loads((data / "serve.json").read_text())
    return value


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """A data directory; every server a test's `gmpscope view` started is stopped."""
    d = tmp_path / "data"
    started: set[int] = set()
    yield d
    if (d / "serve.json").exists():
        started.add(int(str(announced(d)["pid"])))
    for line in (d / "serve.log").read_text().splitlines() if (d / "serve.log").exists() else ():
        m = re.search(r"gmpscope serve: serving \S+ \(pid (\d+)", line)
        if m:
            started.add(int(m.group(1)))
    for pid in started:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_view_ingests_starts_a_server_and_prints_the_overview(data: Path) -> None:
    r = view(data, HTTPNET)
    assert r.returncode == 0, r.stderr
    m = PAGE.match(r.stdout.strip())
    assert m, r.stdout
    base, trace_id = m.group(1), int(m.group(2))
    assert "started the explorer" in r.stderr
    assert requests.get(r.stdout.strip(), timeout=60).status_code == 200
    assert requests.get(f"{base}/api/traces/{trace_id}", timeout=60).json()["name"] == HTTPNET.name
    assert announced(data)["url"] == base

    # A second trace: the same server, the trace's own page.
    again = view(data, MUTEX)
    assert again.returncode == 0, again.stderr
    m2 = PAGE.match(again.stdout.strip())
    assert m2 and m2.group(1) == base and int(m2.group(2)) != trace_id
    assert "started" not in again.stderr
    assert requests.get(f"{base}/api/traces/{m2.group(2)}",
                        timeout=60).json()["name"] == MUTEX.name

    # The same content again: the stored trace, not a new one.
    same = view(data, HTTPNET)
    assert same.returncode == 0 and same.stdout.strip() == r.stdout.strip()


def test_a_dead_servers_announcement_is_not_trusted(data: Path) -> None:
    data.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (data / "serve.json").write_text(json.dumps(
        {"url": "http://127.0.0.1:9", "pid": dead.pid, "db": f"sqlite:///{data}/gmpscope.db"}))
    r = view(data, MUTEX)
    assert r.returncode == 0, r.stderr
    assert "started the explorer" in r.stderr
    assert requests.get(r.stdout.strip(), timeout=60).status_code == 200


def test_bad_input_is_one_line_and_starts_nothing(data: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.trace"
    garbage.write_bytes(b"not a trace at all")
    for path in (garbage, tmp_path / "missing.trace"):
        r = view(data, path)
        assert r.returncode == 2
        assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith(
            "gmpscope view: ")
    assert not (data / "serve.json").exists() and not (data / "serve.log").exists()
