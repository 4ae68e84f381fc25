"""``gmpscope.cli.exit_now``: the CLI's end skips the interpreter's teardown
but keeps what that teardown is for (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_script(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "end.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})


def test_atexit_threads_and_buffered_output_survive(tmp_path: Path) -> None:
    mark = tmp_path / "atexit.txt"
    late = tmp_path / "thread.txt"
    r = run_script(f"""
        import atexit, sys, threading, time
        from pathlib import Path
        from gmpscope.cli import exit_now

        atexit.register(lambda: Path({str(mark)!r}).write_text("ran"))
        def slow():
            time.sleep(0.3)
            Path({str(late)!r}).write_text("done")
        threading.Thread(target=slow).start()
        sys.stdout.write("x" * 100000)  # more than one buffer, not flushed yet
        sys.stderr.write("last words")
        exit_now(3)
        """, tmp_path)
    assert r.returncode == 3
    assert r.stdout == "x" * 100000 and r.stderr == "last words"
    assert mark.read_text() == "ran"
    assert late.read_text() == "done"


def test_python_m_gmpscope_keeps_exit_codes_and_messages(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "gmpscope", "ingest", str(tmp_path / "nope"),
                        "--db", f"sqlite:///{tmp_path}/g.db"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no such file or directory" in r.stderr
    v = subprocess.run([sys.executable, "-m", "gmpscope", "--version"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert v.returncode == 0 and v.stdout.startswith("gmpscope ")
