"""Timeline canvas benchmark: how fast the canvas timeline follows the wheel, in
headless Chromium (Debian's), on the 25 MB benchmark trace; beside it, the Plotly
timeline it replaced, zooming on the same trace, as the anchor.

    python bench/timeline_canvas.py [--trace FILE] [--data-dir DIR] [--steps N]
                                    [--anchor-rev REV | --no-anchor]

For each mode (P, M, G) the page is opened, left to settle, then:

- ``wheel steps``: ``--steps`` single wheel steps (zoom in at points across the
  plot, then out), one at a time: the time from the wheel event to the first
  frame drawn after it (from the tiles already in the browser: target 50 ms)
  and to the first frame with every tile of the wanted level (the refined one,
  after the finer tiles arrived: target 300 ms). Times are ``performance.now()``
  at the end of the frame's drawing (``window.gmpscopeTimeline`` ``frame``
  events), from just before the event was dispatched.
- ``zooming``: one wheel event per animation frame for 2 seconds (in, then out,
  tiles loading meanwhile); the frame rate of the main thread from the
  ``requestAnimationFrame`` timestamps (target 30 fps) and the longest frame.

The anchor: the page as it was at ``--anchor-rev`` (default c2764bb, the last
commit with the Plotly timeline), from ``git archive`` into a temporary
directory and served on the same data: the time from a Plotly relayout (a zoom to
half the window, three times) until the refined bars are drawn (Dash callback,
server, figure, Plotly's redraw), as bench/timeline.py measured it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decode import make_large_trace  # noqa: E402
from bench.timeline import DEFAULT_DATA, ensure_ingested, fetch  # noqa: E402
from tests.support.browser import wait_for_dash  # noqa: E402
from tests.support.server import Served  # noqa: E402

ANCHOR_REV = "c2764bb"
VIEWPORT = {"width": 1400, "height": 900}

SETTLED_JS = """() => {
    const v = window.gmpscopeTimeline && window.gmpscopeTimeline.current;
    return !!(v && v.meta && v.lastFrame && v.lastFrame.complete && v.inflight.size === 0
              && !v.dirty);
}"""

#: One wheel step at plot fraction x: ms to the first frame after it and to the
#: first complete one.
STEP_JS = """async ([frac, dy]) => {
    const tl = window.gmpscopeTimeline, view = tl.getView();
    const c = document.querySelector('#timeline-canvas'), r = c.getBoundingClientRect();
    const x = r.left + view.plotLeft + frac * view.plotWidth, y = r.top + 60;
    return await new Promise(resolve => {
        let first = null, t0 = 0;
        const off = tl.on('frame', f => {
            if (first === null) first = f.drawnAt - t0;
            if (f.complete) { off(); resolve({first: first, refined: f.drawnAt - t0}); }
        });
        t0 = performance.now();
        c.dispatchEvent(new WheelEvent('wheel', {deltaY: dy, clientX: x, clientY: y,
                                                 bubbles: true, cancelable: true}));
    });
}"""

#: A wheel event every animation frame for ``ms``: the frames' timestamps.
ZOOMING_JS = """async (ms) => {
    const tl = window.gmpscopeTimeline, view = tl.getView();
    const c = document.querySelector('#timeline-canvas'), r = c.getBoundingClientRect();
    const ts = [];
    return await new Promise(resolve => {
        function step(t) {
            ts.push(t);
            const k = t - ts[0];
            if (k >= ms) { resolve(ts); return; }
            const frac = 0.3 + 0.4 * (k / ms);
            c.dispatchEvent(new WheelEvent('wheel', {
                deltaY: k < ms / 2 ? -60 : 60, bubbles: true, cancelable: true,
                clientX: r.left + view.plotLeft + frac * view.plotWidth, clientY: r.top + 60}));
            requestAnimationFrame(step);
        }
        requestAnimationFrame(step);
    });
}"""


def bench_canvas(served: Served, tid: int, steps: int) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox"])
        try:
            for mode in ("p", "m", "g"):
                page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
                start = time.perf_counter()
                page.goto(f"{served.url}/traces/{tid}/timeline?mode={mode}")
                page.wait_for_function(SETTLED_JS, polling=20, timeout=600_000)
                opened = time.perf_counter() - start
                first, refined = [], []
                for i in range(steps):
                    zoom_in = i < steps * 2 // 3
                    frac = 0.2 + 0.6 * ((i * 7) % steps) / max(1, steps - 1)
                    got = page.evaluate(STEP_JS, [frac, -150 if zoom_in else 300])
                    first.append(got["first"])
                    refined.append(got["refined"])
                    page.wait_for_function(SETTLED_JS, polling=20, timeout=600_000)
                page.evaluate("() => window.gmpscopeTimeline.current.whole()")
                page.wait_for_function(SETTLED_JS, polling=20, timeout=600_000)
                ts = page.evaluate(ZOOMING_JS, 2000)
                gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
                cache = page.evaluate("""() => { const v = window.gmpscopeTimeline.current;
                    return [v.cache.map.size, v.cache.bytes]; }""")
                out.append({"mode": mode, "open_s": opened, "first": first, "refined": refined,
                            "fps": (len(ts) - 1) / (ts[-1] - ts[0]) * 1000,
                            "worst_frame_ms": max(gaps), "tiles": cache[0],
                            "tile_mb": cache[1] / 1e6})
                page.close()
        finally:
            browser.close()
    return out


#: Bytes and parse time (mean of 50, timed together: the browser's clock is coarse)
#: of tiles as binary columns and as JSON made into typed columns.
FORMATS_JS = """async (urls) => {
    const out = [];
    for (const u of urls) {
        const bin = await (await fetch(u)).arrayBuffer();
        const text = await (await fetch(u + '&format=json')).text();
        let t = performance.now();
        for (let i = 0; i < 50; i++) window.gmpscopeTimeline.decodeTile(bin);
        const bin_ms = (performance.now() - t) / 50;
        t = performance.now();
        for (let i = 0; i < 50; i++) {
            const j = JSON.parse(text);
            // What drawing needs: typed columns (as the binary tile gives them).
            for (const k in j.columns) j.columns[k] = Float64Array.from(j.columns[k]);
        }
        const json_ms = (performance.now() - t) / 50;
        out.push({url: u, bin: bin.byteLength, json: text.length, bin_ms, json_ms});
    }
    return out;
}"""


def bench_formats(served: Served, tid: int) -> list[dict[str, Any]]:
    """Binary and JSON tiles of each mode (level 0 and a level of 1/64 of the trace)."""
    from playwright.sync_api import sync_playwright

    urls = [f"{served.url}/api/traces/{tid}/timeline/tiles?mode={m}&level={lv}&index="
            f"{(1 << lv) // 2}&lanes=0-64" for m in ("p", "m", "g") for lv in (0, 6)]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
            page.goto(f"{served.url}/traces/{tid}/timeline?mode=p")
            page.wait_for_function(SETTLED_JS, polling=20, timeout=600_000)
            got: list[dict[str, Any]] = page.evaluate(FORMATS_JS, urls)
        finally:
            browser.close()
    return got


def anchor_tree(rev: str, into: Path) -> Path:
    """The repository at ``rev`` (git archive) with this checkout's built extensions."""
    tree = into / f"gmpscope-{rev}"
    tree.mkdir(parents=True)
    arc = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=arc, check=True)
    for so in ROOT.glob("*/**/*.so"):
        rel = so.relative_to(ROOT)
        if rel.parts[0] in ("collectors", "ingest") and (tree / rel).parent.exists():
            shutil.copy2(so, tree / rel)
    return tree


def bench_anchor(trace: Path, data_dir: Path, rev: str) -> list[dict[str, Any]]:
    """The Plotly timeline at ``rev``: relayout until the refined bars are drawn. Its
    own data directory (ingested by that code once): a database of today's code
    may have migrations the old code does not know."""
    from playwright.sync_api import sync_playwright

    out = []
    with tempfile.TemporaryDirectory(prefix="gmpscope-anchor-") as tmp:
        tree = anchor_tree(rev, Path(tmp))
        subprocess.run([sys.executable, "-m", "gmpscope", "ingest", str(trace), "--data-dir",
                        str(data_dir), "--no-progress"], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL)
        with Served(data_dir, [], extra_args=("--workers", "1", "--threads", "4"),
                    cwd=tree) as served, sync_playwright() as p:
            traces = json.loads(fetch(f"{served.url}/api/traces")[1])["traces"]
            tid = next(t["id"] for t in traces if t["name"] == trace.name)
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                        args=["--no-sandbox"])
            try:
                for mode in ("p", "m", "g"):
                    page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
                    page.goto(f"{served.url}/traces/{tid}/timeline?mode={mode}")
                    page.wait_for_selector("#timeline-graph .bars path", state="attached",
                                           timeout=600_000)
                    wait_for_dash(page, "#timeline-graph")
                    zooms = []
                    for _ in range(3):
                        status = page.locator("#timeline-status").inner_text()
                        lo, hi = page.evaluate("""() => document.querySelector(
                            '#timeline-graph .js-plotly-plot').layout.xaxis.range""")
                        q = (hi - lo) / 4
                        start = time.perf_counter()
                        page.evaluate("""([a, b]) => Plotly.relayout(
                            document.querySelector('#timeline-graph .js-plotly-plot'),
                            {'xaxis.range[0]': a, 'xaxis.range[1]': b})""", [lo + q, hi - q])
                        page.wait_for_function(
                            "(old) => document.querySelector('#timeline-status').innerText"
                            " !== old", arg=status, timeout=600_000)
                        page.wait_for_selector("#timeline-graph .bars path", state="attached")
                        zooms.append((time.perf_counter() - start) * 1000)
                        wait_for_dash(page, "#timeline-graph")
                    out.append({"mode": mode, "zoom_ms": zooms})
                    page.close()
            finally:
                browser.close()
    return out


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.1f} / {max(xs):6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", type=Path, help="trace (default: the 25 MB bench trace)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--anchor-rev", default=ANCHOR_REV)
    ap.add_argument("--no-anchor", action="store_true")
    args = ap.parse_args()
    trace = args.trace or make_large_trace(20.0)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB)")
    ensure_ingested(trace, args.data_dir)
    with Served(args.data_dir, [], extra_args=("--workers", "1", "--threads", "4")) as served:
        traces = json.loads(fetch(f"{served.url}/api/traces")[1])["traces"]
        tid = next(t["id"] for t in traces if t["name"] == trace.name)
        canvas = bench_canvas(served, tid, args.steps)
        formats = bench_formats(served, tid)
    print("\nTiles, binary columns vs JSON (64 lanes; parse: mean of 50, JSON made typed)")
    for f in formats:
        q = f["url"].split("?", 1)[1]
        print(f"  {q:<40} binary {f['bin'] / 1024:7.1f} KB {f['bin_ms']:6.3f} ms   "
              f"JSON {f['json'] / 1024:7.1f} KB {f['json_ms']:6.3f} ms")
    for c in canvas:  # before the anchor, which takes a while
        print(c["mode"], "first", [round(x, 1) for x in c["first"]], "refined",
              [round(x, 1) for x in c["refined"]], f"fps {c['fps']:.1f}", flush=True)
    anchor = [] if args.no_anchor else bench_anchor(
        trace, args.data_dir.with_name(f"{args.data_dir.name}-anchor-{args.anchor_rev}"),
        args.anchor_rev)
    print(f"\nCanvas timeline, {args.steps} single wheel steps per mode (median / worst ms "
          "from the wheel event); a wheel event per frame for 2 s")
    print(f"{'mode':<5}{'open s':>7}{'first frame':>18}{'refined frame':>18}{'fps':>7}"
          f"{'worst frame':>13}{'tiles':>7}{'MB':>6}   Plotly relayout-to-paint (anchor)")
    for c in canvas:
        a = next((x for x in anchor if x["mode"] == c["mode"]), None)
        anchor_txt = _ms(a["zoom_ms"]) if a else "-"
        print(f"{c['mode']:<5}{c['open_s']:>7.2f}{_ms(c['first']):>18}{_ms(c['refined']):>18}"
              f"{c['fps']:>7.1f}{c['worst_frame_ms']:>10.1f} ms{c['tiles']:>7}"
              f"{c['tile_mb']:>6.1f}   {anchor_txt}")
    worst_first = max(max(c["first"]) for c in canvas)
    worst_refined = max(max(c["refined"]) for c in canvas)
    print(f"worst first frame {worst_first:.1f} ms (target 50), worst refined "
          f"{worst_refined:.1f} ms (target 300), lowest fps "
          f"{min(c['fps'] for c in canvas):.1f} (target 30)")


if __name__ == "__main__":
    main()
