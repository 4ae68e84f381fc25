"""The servers refuse to listen beyond the loopback address without a token.

Real subprocesses: ``gmpscope serve``, ``ingest-server`` and ``view`` with a
non-loopback ``--host`` and no token stop before listening with one line and
status 2; with ``--insecure``, or with a token, they serve. A read token alone,
or equal to the write token, is refused the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from gmpscope.errors import EXIT_BAD_INPUT
from gmpscope.wsgi import is_loopback
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GMPSCOPE_")}
    return subprocess.run([sys.executable, "-m", "gmpscope", *args], cwd=REPO,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True),
    ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.5", False),
    ("192.168.1.2", False), ("example.com", False), ("localhost.example.com", False)])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("command", ["serve", "ingest-server"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_refuses_beyond_loopback_without_a_token(tmp_path: Path, command: str,
                                                 host: str) -> None:
    r = run([command, "--host", host, "--port", "0", "--data-dir", str(tmp_path / "d")])
    assert r.returncode == EXIT_BAD_INPUT
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"gmpscope {command}: refusing to listen on {host} without a "
                               "token: set GMPSCOPE_TOKEN")
    assert "--insecure" in r.stderr and r.stdout == ""
    # It stopped before doing anything: not even the data directory was made.
    assert not (tmp_path / "d").exists()


def test_view_refuses_before_ingesting(tmp_path: Path) -> None:
    r = run(["view", str(SAMPLE), "--no-browser", "--host", "0.0.0.0", "--port", "0",
             "--data-dir", str(tmp_path / "d")])
    assert r.returncode == EXIT_BAD_INPUT and r.stderr.count("\n") == 1, r.stderr
    assert "refusing to listen on 0.0.0.0 without a token" in r.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("env,message", [
    ({"GMPSCOPE_READ_TOKEN": "r"}, "GMPSCOPE_READ_TOKEN needs GMPSCOPE_TOKEN"),
    ({"GMPSCOPE_READ_TOKEN": "same", "GMPSCOPE_TOKEN": "same"}, "must differ")])
def test_bad_token_settings_are_one_line(tmp_path: Path, env: dict[str, str],
                                         message: str) -> None:
    r = run(["serve", "--port", "0", "--data-dir", str(tmp_path / "d")], env)
    assert r.returncode == EXIT_BAD_INPUT and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr


def test_insecure_serves_open(tmp_path: Path) -> None:
    with Served(tmp_path / "d", subcommand="ingest-server",
                extra_args=("--host", "0.0.0.0", "--insecure", "--workers", "1")) as srv:
        assert srv.url.startswith("http://0.0.0.0:")
        assert srv.get("/api/traces").json() == {"traces": []}


def test_with_a_token_serves_guarded(tmp_path: Path) -> None:
    with Served(tmp_path / "d", token="tok-123", subcommand="ingest-server",
                extra_args=("--host", "0.0.0.0", "--workers", "1")) as srv:
        assert requests.get(srv.url + "/api/traces", timeout=60).status_code == 401
        assert srv.get("/api/traces").json() == {"traces": []}  # srv.get sends the token
        assert requests.get(srv.url + "/healthz", timeout=60).status_code == 200


def test_view_reusing_a_server_with_a_token(tmp_path: Path) -> None:
    """``gmpscope view`` reuses the running server and, when it needs a token, says the
    browser will ask for it, and whether $GMPSCOPE_READ_TOKEN (or $GMPSCOPE_TOKEN)
    reads the trace there (sent as a Bearer token)."""
    data = tmp_path / "d"
    mutex = REPO / "samples" / "go1.27-mutex.trace"
    with Served(data, [SAMPLE], token="w-view", read_token="r-view") as srv:
        args = ["view", str(mutex), "--no-browser", "--no-progress", "--data-dir", str(data)]
        r = run(args)
        assert r.returncode == 0, r.stderr
        page = r.stdout.strip()
        assert page.startswith(srv.url + "/traces/") and page.endswith("/overview")
        needs = f"gmpscope view: the explorer at {srv.url} needs a token: the browser asks " \
                "for it once"
        assert r.stderr == f"{needs} (that server's GMPSCOPE_READ_TOKEN or GMPSCOPE_TOKEN)\n"
        again = run(args, {"GMPSCOPE_READ_TOKEN": "r-view"})
        assert again.returncode == 0 and again.stdout.strip() == page, again.stderr
        assert again.stderr == f"{needs} ($GMPSCOPE_READ_TOKEN reads it)\n"
        wrong = run(args, {"GMPSCOPE_TOKEN": "not-it"})
        assert wrong.stderr == f"{needs}, and $GMPSCOPE_TOKEN is not one of that server's " \
                               "tokens\n"
        # The page itself sends a browser to the login form first.
        r2 = requests.get(page, allow_redirects=False, timeout=60)
        assert r2.status_code == 302 and r2.headers["Location"].startswith("/login?next=")
    # A server without tokens: nothing said.
    with Served(tmp_path / "open", [SAMPLE]):
        quiet = run(["view", str(mutex), "--no-browser", "--no-progress", "--data-dir",
                     str(tmp_path / "open")])
        assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
