"""Timeline benchmark: gmpscope's level-of-detail timeline against `go tool trace`'s
trace viewer, side by side in one run, on the same trace.

    python bench/timeline.py [--trace FILE] [--data-dir DIR] [--no-go]

gmpscope: the trace is ingested into DIR (once; reused when already there), then a
real `gmpscope serve` answers ``GET /api/traces/<id>/timeline`` for the whole trace
and zoomed windows in each mode (P, M, G). For each view: the first answer (cold:
the lane index and per-mode sorts are built then), the median of the next
``--repeat`` answers (warm), the server's own time for the query (``stats.ms``),
the bytes sent and the shapes drawn. The page itself (a canvas drawn from tiles) is
timed in Chromium by bench/timeline_canvas.py.

go tool trace: the wall time until its viewer is ready (it parses and splits the
whole trace first), then the time and size of its first timeline slice
(``/jsontrace?view=proc&start=0&end=...``), the JSON its viewer loads for one
of the slices it cuts the trace into.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decode import ORACLE_GO, go_binary, go_env, make_large_trace  # noqa: E402
from tests.support.server import Served  # noqa: E402

DEFAULT_DATA = Path("/tmp/gmpscope-bench-timeline")


def fetch(url: str, timeout: float = 900.0) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - local server
        body = r.read()
    return time.perf_counter() - start, body


def views(first: int, last: int) -> list[tuple[str, int, int]]:
    """(name, t1, t2): the whole trace, then windows of 1/10, 1/1000 and 10 µs."""
    span = last - first
    mid = first + span // 2
    return [("whole trace", first, last),
            ("1/10 of it", mid, mid + span // 10),
            ("1/1000 of it", mid, mid + span // 1000),
            ("10 µs", mid, mid + 10_000)]


def bench_api(served: Served, tid: int, repeat: int) -> list[dict[str, Any]]:
    meta = json.loads(fetch(f"{served.url}/api/traces/{tid}")[1])
    trace = meta.get("trace", meta)
    out = []
    for mode in ("p", "m", "g"):
        for name, t1, t2 in views(int(trace["first_ts"]), int(trace["last_ts"])):
            url = f"{served.url}/api/traces/{tid}/timeline?mode={mode}&t1={t1}&t2={t2}&px=1200"
            cold, body = fetch(url)
            warm = []
            server = []
            for _ in range(repeat):
                t, body = fetch(url)
                warm.append(t)
                server.append(json.loads(body)["stats"]["ms"])
            d = json.loads(body)
            out.append({"mode": mode, "view": name, "cold_ms": cold * 1000,
                        "warm_ms": statistics.median(warm) * 1000,
                        "server_ms": statistics.median(server), "bytes": len(body),
                        "shapes": d["stats"]["shapes"], "rows": d["stats"]["rows"]})
    return out


def bench_go(trace: Path) -> dict[str, Any]:
    go = go_binary(ORACLE_GO)
    tool = subprocess.run([str(go), "tool", "-n", "trace"], env=go_env(), check=True,
                          capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    proc = subprocess.Popen([tool, "-http=127.0.0.1:0", str(trace)], env=go_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        url = ""
        for line in proc.stdout:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            raise SystemExit("go tool trace exited before it was ready")
        ready = time.perf_counter() - start
        index = fetch(url + "/")[1].decode()
        slices = re.findall(r'href="/trace\?view=proc&amp;start=(\d+)&amp;end=(\d+)"', index)
        a, b = slices[0]
        t, body = fetch(f"{url}/jsontrace?view=proc&start={a}&end={b}")
        return {"ready_s": ready, "slices": len(slices), "slice_s": t, "slice_bytes": len(body)}
    finally:
        proc.kill()
        proc.wait()


def ensure_ingested(trace: Path, data_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "gmpscope", "ingest", str(trace), "--data-dir",
                    str(data_dir), "--no-progress"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", type=Path, help="trace (default: the 20 MB bench trace)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-go", action="store_true", help="skip go tool trace")
    args = ap.parse_args()
    trace = args.trace or make_large_trace(20.0)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB)")
    ensure_ingested(trace, args.data_dir)
    with Served(args.data_dir, [], extra_args=("--workers", "1", "--threads", "4")) as served:
        traces = json.loads(fetch(f"{served.url}/api/traces")[1])["traces"]
        tid = next(t["id"] for t in traces if t["name"] == trace.name)
        api = bench_api(served, tid, args.repeat)
    print("\ngmpscope timeline API (px=1200; ms are wall times of the HTTP request, "
          "'server' is the query alone)")
    print(f"{'mode':<5}{'view':<14}{'cold ms':>9}{'warm ms':>9}{'server':>8}{'KB':>8}"
          f"{'shapes':>8}{'rows':>11}")
    for r in api:
        print(f"{r['mode']:<5}{r['view']:<14}{r['cold_ms']:>9.0f}{r['warm_ms']:>9.0f}"
              f"{r['server_ms']:>8.0f}{r['bytes'] / 1024:>8.0f}{r['shapes']:>8,}"
              f"{r['rows']:>11,}")
    worst_ms = max(r["warm_ms"] for r in api)
    worst_kb = max(r["bytes"] for r in api) / 1024
    print(f"worst warm answer: {worst_ms:.0f} ms, biggest answer: {worst_kb:.0f} KB")
    if not args.no_go:
        go = bench_go(trace)
        print(f"\ngo tool trace: viewer ready after {go['ready_s']:.1f} s; the trace is cut "
              f"into {go['slices']} slices per view; first slice JSON: "
              f"{go['slice_s']:.1f} s, {go['slice_bytes'] / 1e6:.0f} MB")
        full = next(r for r in api if r["mode"] == "p" and r["view"] == "whole trace")
        print(f"ratio (go first slice / gmpscope whole trace by P, warm): "
              f"time {go['slice_s'] * 1000 / full['warm_ms']:.0f}x, "
              f"bytes {go['slice_bytes'] / full['bytes']:.0f}x")


if __name__ == "__main__":
    main()
