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
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sqlite_insert import insert_rows  # noqa: E402
from ingest.store.db import make_engine, migrate, write_tx  # noqa: E402


def run(url: str, n: int, triggers: bool) -> float:
    """Seconds to COPY the rows."""
    engine = make_engine(url)
    migrate(engine)
    with write_tx(engine, bulk=True) as conn:
        conn.execute(text("DELETE FROM traces"))
        if not triggers:
            conn.execute(text("SET LOCAL session_replication_role = replica"))
        seconds = insert_rows(conn, n, 1)
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
