"""The CLI's exit codes and one-line errors (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_gmpscope_keeps_exit_codes_and_messages(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "gmpscope", "ingest", str(tmp_path / "nope"),
                        "--db", f"sqlite:///{tmp_path}/g.db"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no such file or directory" in r.stderr
    v = subprocess.run([sys.executable, "-m", "gmpscope", "--version"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert v.returncode == 0 and v.stdout.startswith("gmpscope ")
