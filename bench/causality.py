"""Causality benchmark: the flows, search, area and critical-path views
(docs/causality.md) on the 25 MB httpnet benchmark trace, in process.

    python bench/causality.py [--trace FILE] [--data-dir DIR] [--repeat N]

The trace (bench/decode.py's make_large_trace(20), cached) is ingested into
DIR once (reused when already there); each view then runs ``--repeat`` times
on the stored trace and its time is printed per run (the first run of the
wake-up index builds it).
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

from sqlalchemy import text  # noqa: E402

from bench.decode import make_large_trace  # noqa: E402
from ingest.derive.frames import FrameStore  # noqa: E402
from ingest.load.pipeline import ingest_trace_file  # noqa: E402
from ingest.store.db import make_engine  # noqa: E402
from ingest.views.area import area, parse_lanes  # noqa: E402
from ingest.views.critical_path import critical_path  # noqa: E402
from ingest.views.flows import flows, select_row  # noqa: E402
from ingest.views.search import search  # noqa: E402
from ingest.views.wakes import wakes  # noqa: E402

DEFAULT_DATA = Path("/tmp/gmpscope-bench-causality")


def timed(name: str, fn: Callable[[], Any], repeat: int, note: Callable[[Any], str]) -> None:
    ms = []
    out: Any = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        ms.append((time.perf_counter() - t) * 1000)
    print(f"| {name} | {', '.join(f'{x:.0f}' for x in ms)} | {note(out)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    trace = a.trace or make_large_trace(20)
    a.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(f"sqlite:///{a.data_dir / 'gmpscope.db'}")
    tid = ingest_trace_file(engine, trace, data_dir=a.data_dir).id
    f = FrameStore(engine, a.data_dir).get(tid)
    with engine.connect() as c:
        busiest = c.execute(text("SELECT goid FROM goroutines WHERE trace_id = :t ORDER BY "
                                 "transitions DESC LIMIT 1"), {"t": tid}).scalar_one()
        serve = c.execute(text("SELECT goid FROM goroutines WHERE trace_id = :t AND "
                               "start_function = 'net/http.(*conn).serve' ORDER BY "
                               "transitions DESC LIMIT 1"), {"t": tid}).scalar_one()
    print(f"{trace.name}: {len(f.intervals):,} intervals, {len(f.goroutines.ids):,} goroutines")
    print("| view | ms per run | answer |\n| --- | --- | --- |")
    timed("wake-up index (built, then kept)", lambda: wakes(f), a.repeat,
          lambda w: f"{len(w.row):,} wake-ups")
    mid = (f.first_ts + f.last_ts) // 2
    tenth = (f.last_ts - f.first_ts) // 10
    row = select_row(f, goid=busiest, t=mid)
    timed("flows of a span", lambda: flows(engine, f, row), a.repeat,
          lambda d: f"woke {d['woke_total']}")
    timed("search 'net/http', whole trace", lambda: search(engine, f, "net/http"), a.repeat,
          lambda d: f"{d['total']:,} spans")
    timed(f"search goroutine {busiest}", lambda: search(engine, f, str(busiest)), a.repeat,
          lambda d: f"{d['total']:,} spans")
    timed("area P0+P1, a tenth of the trace",
          lambda: area(engine, f, mid, mid + tenth, parse_lanes(["p0", "p1"])), a.repeat,
          lambda d: f"{d['rows']:,} rows")
    timed("area group net/http.(*conn).serve, whole trace",
          lambda: area(engine, f, f.first_ts, f.last_ts,
                       parse_lanes(["group:net/http.(*conn).serve"])), a.repeat,
          lambda d: f"{d['rows']:,} rows")
    timed(f"critical path of G{serve} (conn.serve), its lifetime",
          lambda: critical_path(engine, f, serve), a.repeat,
          lambda d: f"{len(d['links']):,} links{' (cut)' if d['cut'] else ''}")


if __name__ == "__main__":
    main()
