"""``gmpscope decode`` through a real subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "tests" / "data" / "traces").glob("*.trace"))


def gmpscope(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gmpscope", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_not_a_trace_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"hello, this is not a trace at all\n")
    r = gmpscope("decode", bad, "-o", tmp_path / "out")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not a Go execution trace" in r.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_version_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "old.trace"
    bad.write_bytes(b"go 1.5 trace\x00\x00\x00\x00" + b"\x00" * 64)
    r = gmpscope("decode", bad, "-o", tmp_path / "out")
    assert r.returncode == 2
    assert "1.5" in r.stderr and r.stderr.count("\n") == 1


def test_missing_file_exits_2(tmp_path: Path) -> None:
    r = gmpscope("decode", tmp_path / "nope.trace", "-o", tmp_path / "out")
    assert r.returncode == 2 and "no such trace file" in r.stderr


def test_failed_decode_keeps_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "transitions.parquet").write_bytes(b"previous")
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"go 1.22 trace\x00\x00\x00" + b"\xff" * 40)
    r = gmpscope("decode", bad, "-o", out)
    assert r.returncode == 2, r.stderr
    assert (out / "transitions.parquet").read_bytes() == b"previous"


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_decode_writes_the_documented_files(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = gmpscope("decode", trace, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)
    assert meta == json.loads((out / "meta.json").read_text())
    t = pq.read_table(out / "transitions.parquet")
    assert t.column_names == ["ts", "resource", "id", "from_state", "to_state", "reason",
                              "m", "p", "g", "stack_id"]
    assert t.num_rows == meta["transitions"] == meta["event_counts"]["StateTransition"]
    e = pq.read_table(out / "events.parquet")
    assert e.num_rows + t.num_rows == meta["events"]
    for name in ("transitions", "events", "stacks", "transition_stacks"):
        md = pq.read_schema(out / f"{name}.parquet").metadata
        assert md[b"schema_version"] == meta["schema_version"].encode()
    assert meta["source"]["size"] == trace.stat().st_size
    # Every stack id referenced exists in stacks.parquet.
    s = pq.read_table(out / "stacks.parquet")
    known = set(s.column("stack_id").to_pylist()) | {0}
    assert set(t.column("stack_id").to_pylist()) <= known
    assert set(e.column("stack_id").to_pylist()) <= known


def test_gmpscope_processes_use_arrows_system_allocator() -> None:
    # mimalloc keeps what a load frees (50 MB more peak on the benchmark trace);
    # the CLI picks the system allocator unless told otherwise.
    code = ("from gmpscope import cli; cli.configure_process(); import pyarrow as pa; "
            "print(pa.default_memory_pool().backend_name)")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "system"
    env["ARROW_DEFAULT_MEMORY_POOL"] = "mimalloc"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "mimalloc", "an explicit choice wins"


def test_gmpscope_processes_start_no_blas_threads() -> None:
    # numpy's OpenBLAS would start a spinning thread per core at import; a
    # gmpscope process keeps it to its caller (threads counted in /proc).
    code = ("import os; from gmpscope import cli; cli.configure_process(); import numpy; "
            "print(len(os.listdir('/proc/self/task')))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "1"
    bare = subprocess.run([sys.executable, "-c", code.replace("cli.configure_process(); ", "")],
                          cwd=ROOT, env={**env, "OPENBLAS_NUM_THREADS": "2"},
                          capture_output=True, text=True, check=True)
    assert bare.stdout.strip() == "2", "the count sees OpenBLAS's threads"
