"""Decoder benchmark: `gmpscope decode` against `go tool trace`, side by side in one run.

    python bench/decode.py [--trace FILE] [--size-mb 20] [--repeat 1]

Without --trace it generates (once, cached under $GMPSCOPE_CACHE/bench/) a trace of
at least --size-mb megabytes by running the httpnet workload from
collectors/workloads with Go 1.27. Both tools are measured as a user runs them, as
whole processes: interpreter start-up, imports and compilation included.

- gmpscope: `python -m gmpscope decode TRACE -o DIR`, wall time until exit and
  peak RSS of the process (from wait4).
- go tool trace: the trace tool binary with -http=127.0.0.1:0, wall time until it
  prints that its viewer is listening (the trace is parsed and ready), and its peak
  RSS (VmHWM) at that moment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.gotoolchains import go_binary  # noqa: E402

ORACLE_GO = "1.27.3"


def cache_dir() -> Path:
    return Path(os.environ.get("GMPSCOPE_CACHE", os.path.expanduser("~/.cache/gmpscope")))


def go_env() -> dict[str, str]:
    c = cache_dir()
    return {**os.environ, "GOCACHE": str(c / "gocache"), "GOPATH": str(c / "gopath"),
            "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "GOPROXY": "off",
            "GOTELEMETRY": "off"}


def make_large_trace(size_mb: float) -> Path:
    """A real trace of the httpnet workload of at least size_mb MB (cached)."""
    return make_workload_trace("httpnet", size_mb, ("-max-requests", "1000000000"))


def make_workload_trace(workload: str, size_mb: float, args: tuple[str, ...] = (),
                        first_s: float = 2.0, accept: float = 1.0,
                        most: float | None = None) -> Path:
    """A real trace of ``collectors/workloads/cmd/<workload>`` (with the CPU
    profiler on and ``args``) of at least ``accept`` x size_mb MB (and, with
    ``most``, at most ``most`` x size_mb MB), cached by name; the run is
    lengthened (shortened) until the trace is that big. A machine writes the
    same workload's trace at rates that differ by half: a bound on both sides
    keeps a benchmark's trace the size its targets are set for."""
    out_dir = cache_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{workload}-go{ORACLE_GO}-{size_mb:g}MB.trace"
    if target.exists():
        return target
    exe = out_dir / workload
    subprocess.run([str(go_binary(ORACLE_GO)), "build", "-o", str(exe), f"./cmd/{workload}"],
                   cwd=ROOT / "collectors" / "workloads", env=go_env(), check=True)
    duration = first_s
    short, long = 0.0, float("inf")  # durations seen too short, too long
    while True:
        tmp = target.with_suffix(".tmp")
        subprocess.run([str(exe), "-trace", str(tmp), "-duration", f"{duration:.1f}s",
                        *args, "-cpuprofile"],
                       env=go_env(), check=True, stdout=subprocess.DEVNULL)
        size = tmp.stat().st_size / 1e6
        print(f"  generated {size:.1f} MB with -duration {duration:.1f}s", file=sys.stderr)
        if size >= accept * size_mb and (most is None or size <= most * size_mb):
            os.replace(tmp, target)
            return target
        if size < accept * size_mb:
            short = duration
            duration *= min(4.0, size_mb / max(size, 0.1) * 1.2)
        else:
            long = duration
            duration *= size_mb / size
        if short < duration < long:
            continue
        duration = (short + long) / 2  # both sides seen: halve the gap


def run_gmpscope(trace: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gmpscope", "decode", str(trace), "-o", tmp, "--json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        # wait4 reaps this child alone and reports its own peak RSS.
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"gmpscope decode failed: {err.decode(errors='replace')}")
        meta = json.loads(out)
    return {"seconds": elapsed, "peak_mb": rusage.ru_maxrss / 1024, "events": meta["events"]}


def run_go_tool_trace(trace: Path) -> dict[str, float]:
    go = go_binary(ORACLE_GO)
    tool = subprocess.run([str(go), "tool", "-n", "trace"], env=go_env(), check=True,
                          capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    proc = subprocess.Popen([tool, "-http=127.0.0.1:0", str(trace)], env=go_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    peak_kb = 0
    try:
        for line in proc.stdout:
            if re.search(r"listening on http", line):
                break
        else:
            raise SystemExit("go tool trace exited before it was ready")
        elapsed = time.perf_counter() - start
        status = Path(f"/proc/{proc.pid}/status").read_text()
        m = re.search(r"VmHWM:\s+(\d+) kB", status)
        peak_kb = int(m.group(1)) if m else 0
    finally:
        proc.kill()
        proc.wait()
    return {"seconds": elapsed, "peak_mb": peak_kb / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", type=Path, help="trace to decode (default: generate one)")
    ap.add_argument("--size-mb", type=float, default=20.0)
    args = ap.parse_args()
    trace = args.trace or make_large_trace(args.size_mb)
    size_mb = trace.stat().st_size / 1e6
    print(f"trace: {trace} ({size_mb:.1f} MB)")
    ours = run_gmpscope(trace)
    go = run_go_tool_trace(trace)
    print(f"{'tool':<28}{'seconds':>10}{'peak MB':>10}{'MB/s':>10}")
    for name, r in (("gmpscope decode", ours), ("go tool trace (ready)", go)):
        print(f"{name:<28}{r['seconds']:>10.2f}{r['peak_mb']:>10.0f}"
              f"{size_mb / r['seconds']:>10.1f}")
    print(f"events: {ours['events']:,}")
    print(f"time ratio go/gmpscope: {go['seconds'] / ours['seconds']:.2f}x; "
          f"memory ratio go/gmpscope: {go['peak_mb'] / max(ours['peak_mb'], 1):.2f}x; "
          f"gmpscope peak memory / trace size: {ours['peak_mb'] / size_mb:.1f}x")


if __name__ == "__main__":
    main()
