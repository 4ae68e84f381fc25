"""Live latency benchmark: from an event in a Go service to pixels on the live page.

    python bench/live.py [--window 1s] [--bursts 8] [--goroutines 3000]

Starts the demo service (collectors/workloads/cmd/demoservice) under a light load
(loadgen), ``gmpscope ingest-server`` and ``gmpscope serve`` on one database (as
docker-compose.yml deploys them), a ``gmpscope live`` collector sending to the
ingest server with the given window, and real Chromium (Playwright, /usr/bin/chromium) on
``/live/<session>``. Then, ``--bursts`` times at a random phase of the window:

1. t0: ask the service for ``/burst?n=N&ms=400`` (N goroutines that block on a
   channel: the event; the request returns once they are all parked);
2. t1: the page shows it: the chart's "waiting peak" series has a point >= N for
   the window holding the event (checked in the browser on every animation frame
   on the plotted data, Date.now() at that frame).

Latency = t1 - t0 (same machine clock). Prints each, the median and the worst,
and the breakdown of the latest window (trace pulled, ingest time).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.demo import (  # noqa: E402
    Demo,
    LoadGen,
    demo_binaries,
    start_collector,
)
from tests.support.server import Served  # noqa: E402

SESSION = "bench"
#: The chart shows the burst: the "waiting peak" series has a point of the window
#: that holds the event (its bin starts at most 1.6 s before the event) at >= n.
SHOWN_JS = """(arg) => {
    const gd = document.querySelector('#live-series .js-plotly-plot');
    if (!gd || !gd.data) { return false; }
    for (const tr of gd.data) {
        if (tr.name !== 'waiting peak') { continue; }
        for (let i = 0; i < tr.x.length; i++) {
            if (tr.x[i] >= arg.since && tr.y[i] !== null && tr.y[i] >= arg.n) {
                return Date.now();
            }
        }
    }
    return false;
}"""


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def breakdown(url: str, t0: float, t1: float) -> str:
    """Where the time went: event -> window end -> stored -> on screen."""
    segs = get_json(f"{url}/api/live/sessions/{SESSION}/segments?limit=30")
    for s in segs["segments"]:  # type: ignore[index]
        if s["wall_start_ns"] / 1e9 <= t0 <= s["wall_end_ns"] / 1e9:
            end = s["wall_end_ns"] / 1e9
            stored = datetime.fromisoformat(s["created_at"]).replace(tzinfo=UTC).timestamp()
            return (f" (window ends +{end - t0:.2f} s, stored +{stored - end:.2f} s "
                    f"[ingest {s['ingest_ms'] / 1000:.2f} s], shown +{t1 - stored:.2f} s)")
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", default="1s")
    ap.add_argument("--bursts", type=int, default=8)
    ap.add_argument("--goroutines", type=int, default=3000)
    ap.add_argument("--rps", type=int, default=50, help="background load on the service")
    args = ap.parse_args()

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    bindir = demo_binaries()
    work = Path(tempfile.mkdtemp(prefix="gmpscope-bench-live-"))
    demo = Demo(bindir)
    load = LoadGen(bindir, demo.url, rps=args.rps)
    # As docker-compose.yml deploys it: the collector sends to the ingest service,
    # the browser reads the UI server; both share one database.
    srv = Served(work / "data", extra_args=("--workers", "2", "--threads", "8"))
    ingest = Served(work / "data", subcommand="ingest-server", extra_args=("--workers", "2"))
    col = start_collector(demo.url, ingest.url, SESSION, work / "collector.log",
                          window=args.window, extra=("--quiet",))
    latencies: list[float] = []
    missed = 0
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                        args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{srv.url}/live/{SESSION}", timeout=120_000)
            page.wait_for_selector("#live-series .js-plotly-plot", timeout=120_000)
            for i in range(args.bursts):
                time.sleep(1.0 + random.random())  # a random phase within the window
                t0 = time.time()
                with urllib.request.urlopen(
                        f"{demo.url}/burst?n={args.goroutines}&ms=400", timeout=30) as r:
                    r.read()
                try:
                    shown = page.wait_for_function(
                        SHOWN_JS, arg={"n": args.goroutines, "since": t0 * 1000 - 1600},
                        polling="raf", timeout=60_000)
                except PlaywrightTimeout:
                    missed += 1
                    print(f"burst {i + 1}: not shown within 60 s (window dropped?)", flush=True)
                    continue
                t1 = shown.json_value() / 1000
                lat = t1 - t0
                latencies.append(lat)
                print(f"burst {i + 1}: {lat:.2f} s from event to screen"
                      f"{breakdown(srv.url, t0, t1)}", flush=True)
            page.screenshot(path=str(work / "live.png"), full_page=True)
            browser.close()
        segs = get_json(f"{srv.url}/api/live/sessions/{SESSION}/segments?limit=20")
        ingest_ms = [s["ingest_ms"] for s in segs["segments"]]  # type: ignore[index]
    finally:
        col.terminate()
        try:
            col.wait(60)
        except subprocess.TimeoutExpired:
            col.kill()
        for proc in (ingest, srv, load, demo):
            proc.stop()
    if not latencies:
        print(f"no burst was shown ({missed} missed)")
        return 1
    load1 = Path("/proc/loadavg").read_text().split()[0]
    print(f"window {args.window}, {args.goroutines} goroutines per burst, "
          f"{len(latencies)} bursts shown, {missed} missed, load average {load1}: "
          f"median {statistics.median(latencies):.2f} s, "
          f"worst {max(latencies):.2f} s, best {min(latencies):.2f} s "
          f"(target < 3 s); server-side ingest per window: median "
          f"{statistics.median(ingest_ms):.0f} ms, worst {max(ingest_ms):.0f} ms")
    print(f"screenshot: {work / 'live.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
