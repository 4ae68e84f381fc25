"""``gmpscope pprof`` as a user runs it: a subprocess on real traces (a Go
1.21 trace, the old format, and a Go 1.27 one), its file read by ``go tool
pprof -raw`` and compared with ``go tool trace -pprof=TYPE``'s; windows;
bad input as one line and exit status 2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gopprof import go_trace_pprof, pprof_raw
from tests.support.server import REPO
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow


def gmpscope(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gmpscope", *args, "--data-dir", str(data_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pprof-cli")


@pytest.mark.parametrize("version", ["1.21.13", "1.27.3"])
@pytest.mark.parametrize("kind", ["net", "sync", "syscall", "sched"])
def test_file_equals_go_tool_trace(data_dir: Path, tmp_path: Path, version: str,
                                   kind: str) -> None:
    trace = workload_trace(version, "httpnet")
    out = tmp_path / f"{kind}.pb.gz"
    r = gmpscope(data_dir, "pprof", str(trace), "--type", kind, "-o", str(out))
    assert r.returncode == 0, r.stderr
    ours, go = pprof_raw(out.read_bytes()), pprof_raw(go_trace_pprof(trace, kind))
    assert go.stacks and ours.stacks == go.stacks
    # The line on stderr says what was written.
    line = r.stderr.strip().splitlines()[-1]
    n, contentions, delay = map(int, re.search(
        r"(\d+) stacks, (\d+) contentions, (\d+) delay ns", line).groups())  # type: ignore[union-attr]
    assert (n, [contentions, delay]) == (go.samples, go.totals())


def test_by_id_window_and_stdout(data_dir: Path, tmp_path: Path) -> None:
    trace = workload_trace("1.27.3", "mutex")
    first = gmpscope(data_dir, "pprof", str(trace), "-t", "sync", "-o", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    tid = re.search(r"trace (\d+)", first.stderr.splitlines()[-1]).group(1)  # type: ignore[union-attr]
    whole = pprof_raw((tmp_path / "a").read_bytes())
    # A window wider than the trace is the whole trace; to standard output.
    r = subprocess.run([sys.executable, "-m", "gmpscope", "pprof", tid, "-t", "sync",
                        "--window", "0,9223372036854775807", "-o", "-",
                        "--data-dir", str(data_dir)], cwd=REPO, capture_output=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert pprof_raw(r.stdout).stacks == whole.stacks
    # The first 20 ms (an offset from the trace's start): less delay, the same kind of stacks.
    part = tmp_path / "b"
    r2 = gmpscope(data_dir, "pprof", tid, "-t", "sync", "--window", "0s,20ms", "-o", str(part))
    assert r2.returncode == 0, r2.stderr
    early = pprof_raw(part.read_bytes())
    assert 0 < early.totals()[1] < whole.totals()[1]
    assert set(early.stacks) <= set(whole.stacks)


@pytest.mark.parametrize("args, message", [
    (["999999", "-t", "sync"], "no trace with id 999999"),
    (["/no/such.trace", "-t", "sync"], "no stored trace id or file"),
    (["1", "-t", "sync", "--window", "5"], "--window takes T1,T2"),
    (["1", "-t", "sync", "--window", "2ms,1ms"], "T2 must be after T1"),
    (["1", "-t", "sync", "--window", "a,b"], "is not a time"),
])
def test_bad_input_one_line(data_dir: Path, tmp_path: Path, args: list[str],
                            message: str) -> None:
    gmpscope(data_dir, "pprof", str(workload_trace("1.27.3", "mutex")), "-t", "net",
             "-o", str(tmp_path / "x"))  # trace 1 exists
    r = gmpscope(data_dir, "pprof", *args, "-o", str(tmp_path / "out"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gmpscope pprof: ") and message in lines[0]
    assert not (tmp_path / "out").exists()


def test_unknown_type_is_a_usage_error(data_dir: Path, tmp_path: Path) -> None:
    r = gmpscope(data_dir, "pprof", "1", "-t", "heap", "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "invalid choice: 'heap'" in r.stderr
