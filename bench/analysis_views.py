"""Timings of the analysis views' query functions on an ingested trace.

    python bench/analysis_views.py DATA_DIR TRACE_ID [--runs 5]

DATA_DIR holds gmpscope.db (SQLite) and the frame cache (as `gmpscope ingest
--data-dir DATA_DIR --db sqlite:///DATA_DIR/gmpscope.db TRACE` makes). For each
view's query function it prints, in ms of wall time (CPU time in brackets, the
honest figure on a busy machine):

- build: the first answer with nothing derived kept (the trace's derived
  values, ingest.derive.cache, removed first: what a view cost before they
  were kept, and what the server's background warm-up spends once);
- stored: the first answer of a fresh frame store (a restarted server) with
  them kept on disk;
- warm: the median of --runs answers from the same store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ingest.derive.frames import FrameStore  # noqa: E402
from ingest.store.db import make_engine  # noqa: E402
from ingest.views.goroutine import goroutine_detail  # noqa: E402
from ingest.views.goroutines import goroutine_groups  # noqa: E402
from ingest.views.latency import latency_report  # noqa: E402
from ingest.views.syscalls import netpoll_summary, syscall_summary  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("trace_id", type=int)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    engine = make_engine(f"sqlite:///{a.data_dir / 'gmpscope.db'}")
    store = FrameStore(engine, a.data_dir)
    t = time.perf_counter()
    f = store.get(a.trace_id)
    print(f"frames: {time.perf_counter() - t:.2f} s to open; {len(f.intervals):,} intervals, "
          f"{len(f.syscalls):,} syscalls, {len(f.goroutines.ids):,} goroutines")
    sizes = f.goroutines.off[1:] - f.goroutines.off[:-1]
    busiest = int(f.goroutines.ids[int(sizes.argmax())])
    views: dict[str, Callable[[], Any]] = {
        "goroutine-groups": lambda: goroutine_groups(engine, store.get(a.trace_id)),
        f"goroutines/{busiest} (busiest)": lambda: goroutine_detail(
            engine, store.get(a.trace_id), busiest),
        "syscalls/summary": lambda: syscall_summary(engine, store.get(a.trace_id)),
        "netpoll": lambda: netpoll_summary(engine, store.get(a.trace_id)),
        "latency": lambda: latency_report(store.get(a.trace_id)),
    }
    import shutil

    from ingest.derive.cache import derived_dir

    def timed(fn: Callable[[], Any]) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        fn()
        return 1000 * (time.perf_counter() - w), 1000 * (time.process_time() - c)

    print(f"{'view':32s} {'build':>14s} {'stored':>14s} {'warm':>14s}   ms wall (CPU)")
    for name, fn in views.items():
        root = derived_dir(store.get(a.trace_id))
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        store = FrameStore(engine, a.data_dir)
        build = timed(fn)
        store = FrameStore(engine, a.data_dir)
        stored = timed(fn)
        runs = [timed(fn) for _ in range(a.runs)]
        warm = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"{name:32s} " + " ".join(f"{w:6.0f} ({c:5.0f})" for w, c in (build, stored, warm)))

if __name__ == "__main__":
    main()
