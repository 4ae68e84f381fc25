"""Timings of the analysis views' query functions on an ingested trace.

    python bench/analysis_views.py DATA_DIR TRACE_ID [--runs 5]

DATA_DIR holds gmpscope.db (SQLite) and the frame cache (as `gmpscope ingest
--data-dir DATA_DIR --db sqlite:///DATA_DIR/gmpscope.db TRACE` makes). Opens the
frames once (built on first use), then runs each view's query function --runs
times and prints the median and best wall time and CPU time of this process, in
ms (CPU time is the honest figure on a busy machine).
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

from ingest.db import make_engine  # noqa: E402
from ingest.frames import FrameStore  # noqa: E402
from ingest.goroutine_detail import goroutine_detail  # noqa: E402
from ingest.goroutine_stats import goroutine_groups  # noqa: E402
from ingest.sched_latency import latency_report  # noqa: E402
from ingest.syscall_stats import netpoll_summary, syscall_summary  # noqa: E402


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
    for name, fn in views.items():
        wall, cpu = [], []
        for _ in range(a.runs):
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
        print(f"{name:32s} wall median {1000 * statistics.median(wall):6.0f} ms "
              f"(best {1000 * min(wall):5.0f})   CPU median {1000 * statistics.median(cpu):6.0f}"
              f" ms (best {1000 * min(cpu):5.0f})")


if __name__ == "__main__":
    main()
