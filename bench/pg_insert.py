"""Interval-row COPY speed into PostgreSQL, with and without the foreign-key check.

    python bench/pg_insert.py --db postgresql+psycopg://USER@HOST:PORT/EMPTY_DB [--rows N]

Copies ROWS interval-like rows (as bench/sqlite_insert.py makes them) into the
``intervals`` table of a gmpscope database (migrated here; any trace rows in it
are deleted first), inside ``write_tx(bulk=True)``, twice: as a load does, and
with PostgreSQL's triggers off (``SET LOCAL session_replication_role =
replica``, which needs a superuser: it skips the per-row foreign-key check).
Prints seconds and microseconds a row for each. docs/ingest.md quotes it.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sqlite_insert import COLUMNS  # noqa: E402
from ingest import bulk, models  # noqa: E402
from ingest.columns import Gather, Seq  # noqa: E402
from ingest.db import make_engine, migrate, write_tx  # noqa: E402


def run(url: str, n: int, triggers: bool) -> float:
    """Seconds to COPY the rows."""
    rng = np.random.default_rng(1)
    order = rng.permutation(n).astype(np.int64)
    ts = np.cumsum(rng.integers(1, 1000, n)).astype(np.int64) + 1_900_000_000_000
    rid = rng.integers(0, 166_000, n).astype(np.int64)
    small = rng.integers(0, 40, n).astype(np.int16)
    engine = make_engine(url)
    migrate(engine)
    with write_tx(engine, bulk=True) as conn:
        conn.execute(text("DELETE FROM traces"))
        conn.execute(models.traces.insert().values(
            id=1, sha256="0" * 64, name="bench", source="bench", go_version="1.27",
            family="v2", first_ts=0, last_ts=0, events=0, transitions=0, goroutines=0,
            procs=0, threads=0, stacks=0, event_counts="{}", status="complete",
            bytes_lost=0, generations_lost=0, loss_offset=-1, loss_error="",
            created_at=datetime.now(UTC)))
        if not triggers:
            conn.execute(text("SET LOCAL session_replication_role = replica"))
        start = time.perf_counter()
        bulk.insert_int_arrays(conn, models.intervals, COLUMNS, [
            1, Seq(1), Gather(rid, order), Gather(ts, order), order, ts + 500,
            Gather(small, order), Gather(small, order), Gather(small, order),
            Gather(rid, order), Gather(small, order)], n)
        seconds = time.perf_counter() - start
    engine.dispose()
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--db", required=True, help="a PostgreSQL database gmpscope may use")
    ap.add_argument("--rows", type=int, default=2_000_000)
    args = ap.parse_args()
    for label, triggers in (("as a load copies", True), ("triggers off", False)):
        s = run(args.db, args.rows, triggers)
        print(f"{label:20s} {s:6.2f} s  {s / args.rows * 1e6:6.3f} us a row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
