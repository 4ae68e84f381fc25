"""``gmpscope ingest`` and ``gmpscope view`` on a terminal: a progress bar per stage of
the load (the pipeline's progress callback, the one the server's jobs report), on
stderr only when it is a terminal. Real processes, a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "samples" / "go1.27-httpnet-2MB.trace"
#: A hang guard for the child, not a speed limit.
GUARD_S = 300.0


def run_on_terminal(args: list[str], data: Path) -> tuple[int, str, str]:
    """Run ``gmpscope ARGS`` with stderr on a pseudo-terminal: (status, stdout, the
    terminal's output)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GMPSCOPE_DB", "GMPSCOPE_DATA")}
    env["GMPSCOPE_DATA"] = str(data)
    master, slave = pty.openpty()
    # A terminal has a size (a new pseudo-terminal's is 0 x 0: no room for a bar).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "gmpscope", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], GUARD_S)
        assert ready, "no output and no exit"
        try:
            block = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not block:
            break
        out += block
    os.close(master)
    assert proc.stdout is not None
    stdout = proc.stdout.read().decode()
    return proc.wait(GUARD_S), stdout, out.decode(errors="replace")


def test_ingest_shows_each_stage_on_a_terminal(tmp_path: Path) -> None:
    code, stdout, term = run_on_terminal(["ingest", str(TRACE), "--no-warm"], tmp_path / "d")
    assert code == 0, term
    assert re.fullmatch(r"1\tnew\tgo1\.27-httpnet-2MB\.trace\n", stdout)
    frames = term.replace("\r", "\n").splitlines()
    stages = [m.group(1) for f in frames
              if (m := re.match(rf"{re.escape(TRACE.name)}: (\w+):", f.strip()))]
    assert stages and stages[0] == "decode" and "load" in stages
    # The load's bar counts up to its total and ends full.
    loads = [re.search(r"(\d+)%\|.*\| ([\d.]+[kM]?)/([\d.]+[kM]?)", f) for f in frames
             if f"{TRACE.name}: load:" in f]
    percents = [int(m.group(1)) for m in loads if m]
    assert percents and percents == sorted(percents) and percents[-1] == 100


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GMPSCOPE_DB", "GMPSCOPE_DATA")}
    env["GMPSCOPE_DATA"] = str(tmp_path / "d")
    proc = subprocess.run([sys.executable, "-m", "gmpscope", "ingest", str(TRACE), "--no-warm"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_view_shows_the_bar_and_its_url(tmp_path: Path) -> None:
    data = tmp_path / "d"
    code, stdout, term = run_on_terminal(
        ["view", str(TRACE), "--no-browser", "--port", "0", "--data-dir", str(data)], data)
    try:
        assert code == 0, term
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/traces/1/overview\n", stdout)
        assert f"{TRACE.name}: load:" in term and "100%" in term
    finally:
        pid = re.search(r"\(pid (\d+);", term)
        if pid:
            os.kill(int(pid.group(1)), 15)
