"""Interval-row insert speed into SQLite: the C binder against Python's sqlite3.

    python bench/sqlite_insert.py [--rows 2000000] [--repeat 3]

Inserts ROWS interval-like rows (11 columns, as ``intervals``: the trace id as a
literal, ids, and nine integer columns gathered through a permutation, as the
loader gathers the transitions into interval order) into a fresh SQLite
database made by gmpscope (its page size, WAL, the load's 8 MB cache), inside
one ``write_tx(bulk=True)``, three ways, each in a fresh database:

- python: ``GMPSCOPE_PURE=1``, multi-row statements bound through sqlite3;
- binder, ids given: the C binder (``SELECT gmpscope_bulk_insert(token)`` on
  the load's connection, whose ``INSERT ... SELECT ... FROM
  gmpscope_rows(?)`` reads the staged columns), ids that SQLite would not
  assign itself;
- binder: the C binder, ids SQLite assigns (left out of the statement), as a
  load inserts intervals.

It runs as gmpscope commands do (``configure_process``) and prints the SQLite
version in use; the best of REPEAT runs, in microseconds and rows a second,
and the best CPU seconds of the inserting thread.
docs/ingest.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import Connection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# As gmpscope commands start (before anything imports sqlite3).
from gmpscope.cli import configure_process  # noqa: E402

configure_process()

from ingest.columns import Gather, Seq  # noqa: E402
from ingest.extensions import PURE_ENV  # noqa: E402
from ingest.store import bulk, models, sqlite_fast  # noqa: E402
from ingest.store.db import make_engine, migrate, write_tx  # noqa: E402

COLUMNS = ["trace_id", "id", "rid", "start_ts", "seq", "end_ts", "kind", "m", "p", "g",
           "stack_id"]


def insert_rows(conn: Connection, n: int, first_id: int) -> tuple[float, float]:
    """Store a bench trace row and ``n`` interval-like rows (ids from
    ``first_id``) in ``conn``'s transaction; seconds the rows took, wall and
    this thread's CPU (the binder runs on it, without the GIL: on a busy
    machine its CPU seconds are the steadier figure)."""
    rng = np.random.default_rng(1)
    order = rng.permutation(n).astype(np.int32)  # as the loader's interval order
    ts = np.cumsum(rng.integers(1, 1000, n)).astype(np.int64) + 1_900_000_000_000
    rid = rng.integers(0, 166_000, n).astype(np.int64)
    small = rng.integers(0, 40, n).astype(np.int16)
    conn.execute(models.traces.insert().values(
        id=1, sha256="0" * 64, name="bench", source="bench", go_version="1.27",
        family="v2", first_ts=0, last_ts=0, events=0, transitions=0, goroutines=0,
        procs=0, threads=0, stacks=0, event_counts="{}", status="complete",
        bytes_lost=0, generations_lost=0, loss_offset=-1, loss_error="",
        created_at=datetime.now(UTC)))
    start, cpu = time.perf_counter(), time.thread_time()
    bulk.insert_int_arrays(conn, models.interval_rows, COLUMNS, [
        1, Seq(first_id), Gather(rid, order), Gather(ts, order), order, ts + 500,
        Gather(small, order), Gather(small, order), Gather(small, order),
        Gather(rid, order), Gather(small, order)], n)
    return time.perf_counter() - start, time.thread_time() - cpu


def run(directory: Path, label: str, n: int, first_id: int, pure: bool) -> tuple[float, float]:
    """Seconds (wall, CPU) to insert the rows into a fresh database; ids
    start at ``first_id``."""
    if pure:
        os.environ[PURE_ENV] = "1"
    else:
        os.environ.pop(PURE_ENV, None)
    path = directory / (label.replace(" ", "_").replace(",", "") + ".db")
    for old in directory.glob(path.name + "*"):
        old.unlink()
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    with write_tx(engine, bulk=True) as conn:
        bound = sqlite_fast.column_inserter(conn.connection.driver_connection) is not None
        if bound == pure:
            raise RuntimeError(f"{label}: the C binder {'is' if bound else 'is not'} in use")
        seconds = insert_rows(conn, n, first_id)
    engine.dispose()
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import sqlite3

    n = args.rows
    print(f"SQLite {sqlite3.sqlite_version}, {n:,} rows, best of {args.repeat}")
    ways = (("python", 1, True), ("binder, ids given", 1000, False), ("binder", 1, False))
    best = {label: float("inf") for label, _, _ in ways}
    best_cpu = dict(best)
    with tempfile.TemporaryDirectory(prefix="gmpscope-bench-sqlite-") as tmp:
        for _ in range(args.repeat):  # interleaved: a busy machine slows all alike
            for label, first_id, pure in ways:
                wall, cpu = run(Path(tmp), label, n, first_id, pure)
                best[label] = min(best[label], wall)
                best_cpu[label] = min(best_cpu[label], cpu)
    for label, s in best.items():
        print(f"{label:20s} {s:6.2f} s  {s / n * 1e6:6.3f} us a row  {n / s:12,.0f} rows/s"
              f"  (CPU {best_cpu[label]:5.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
