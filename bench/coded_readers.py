"""The readers of the event tables timed on a stored trace (CPU seconds, best of N).

    python bench/coded_readers.py DATA_DIR [--trace-id 1] [--repeat 2]

DATA_DIR is a gmpscope data directory (``gmpscope.db`` in it) holding a trace,
such as one made by ``GMPSCOPE_DATA=DIR gmpscope ingest TRACE``. Each reader is
a public function that reads ``metrics``, ``regions``, ``logs``, ``goroutines``,
``ranges`` or ``tasks`` in full (or filtered), as a view does when its cache is
missing: the trace summary, the overview's counters, the annotation indexes,
the logs page filtered, Perfetto's metrics. The same functions exist before and
after schema revision 0009 (the tables kept coded), so the script measures
either revision when run from its tree (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEAP = "/memory/classes/heap/objects:bytes"


def readers(engine: Any, tid: int) -> dict[str, Callable[[], object]]:
    """Name -> a call of one reader on trace ``tid``."""
    from ingest.derive import annotation_index as ix
    from ingest.derive.overview_counters import counters_from_db
    from ingest.store.traces import trace_summary
    from ingest.views import annotations, perfetto_data

    return {
        "trace summary": lambda: trace_summary(engine, tid),
        "overview counters from SQL": lambda: counters_from_db(engine, tid),
        "task index from SQL": lambda: ix.read_task_index(engine, tid),
        "region index from SQL": lambda: ix.read_region_index(engine, tid),
        "log index from SQL": lambda: ix.read_log_index(engine, tid),
        "logs filtered by text": lambda: annotations.logs(engine, tid, text="served"),
        "logs of a category": lambda: annotations.logs(engine, tid, category="request"),
        "perfetto metric names": lambda: perfetto_data.metric_names(engine, tid),
        "perfetto heap samples": lambda: sum(
            len(ts) for ts, _ in perfetto_data.metric_chunks(engine, tid, HEAP)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("data", type=Path, help="a gmpscope data directory")
    ap.add_argument("--trace-id", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each reader (best kept)")
    args = ap.parse_args()
    from ingest.store.db import make_engine

    engine = make_engine(f"sqlite:///{args.data / 'gmpscope.db'}")
    try:
        for name, call in readers(engine, args.trace_id).items():
            best = float("inf")
            for _ in range(args.repeat):
                start = time.process_time()
                call()
                best = min(best, time.process_time() - start)
            print(f"{name:28} {best:6.2f} s CPU", flush=True)
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
