"""``gmpscope sql "SELECT ..." [--format table|csv|json] [--limit N]``: one read-only
query over the database, as the SQL page and ``GET /api/sql`` run it (docs/sql.md).

``--example NAME [--trace ID]`` runs one of the page's example queries instead.
A refused statement, bad SQL or a query past the time limit exits with status 2
and one line; a result cut at the row cap says so on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, EXIT_OK, CLIError

FORMATS = ("table", "csv", "json")
#: Widest cell of the table format (longer values end with "…").
MAX_CELL = 80


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sql",
        help="one read-only SQL query over the stored traces (as the SQL page)",
        description="Run one read-only statement (SELECT, WITH, VALUES) over the database "
        "and print its rows. Writes, ATTACH and state-changing PRAGMAs are refused; the "
        "query stops after $GMPSCOPE_SQL_TIMEOUT_MS (10 s) and answers at most "
        "$GMPSCOPE_SQL_MAX_ROWS rows (10,000). Tables: docs/schema.md; docs/sql.md.",
    )
    p.add_argument("sql", nargs="?", metavar="SQL", help="the statement")
    p.add_argument("--example", metavar="NAME",
                   help="run an example query instead: longest-syscalls, channel-blocked, "
                   "time-per-state-per-p")
    p.add_argument("--trace", type=int, metavar="ID",
                   help="the example's trace (default: the newest)")
    p.add_argument("--format", "-f", choices=FORMATS, default="table", help="output format")
    p.add_argument("--limit", type=int, metavar="N", help="at most N rows (up to the cap)")
    p.add_argument("--db", metavar="URL", help="database URL (default: $GMPSCOPE_DB, else "
                   "sqlite:///$GMPSCOPE_DATA/gmpscope.db)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="the data directory (default: $GMPSCOPE_DATA)")
    p.set_defaults(run=run)


def _cell(v: Any) -> str:
    s = "NULL" if v is None else str(v)
    return s if len(s) <= MAX_CELL else s[:MAX_CELL - 1] + "…"


def render_table(columns: list[str], rows: list[list[Any]]) -> str:
    """Rows as aligned text columns under their names."""
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows)
               for i in range(len(columns))]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    return "\n".join(out) + "\n"


def _statement(args: argparse.Namespace, engine: Any) -> str:
    from ingest.views.sql_examples import example_by_name, newest_trace_id

    if args.example is None:
        if not args.sql:
            raise CLIError("give the SQL statement, or --example NAME", EXIT_BAD_INPUT)
        return str(args.sql)
    if args.sql:
        raise CLIError("give either SQL or --example, not both", EXIT_BAD_INPUT)
    trace_id = args.trace if args.trace is not None else newest_trace_id(engine)
    if trace_id is None:
        raise CLIError("no trace is stored yet: the examples query one", EXIT_BAD_INPUT)
    try:
        return example_by_name(engine.dialect.name, trace_id, args.example).sql
    except KeyError:
        raise CLIError(f"no example named {args.example!r}", EXIT_BAD_INPUT) from None


def run(args: argparse.Namespace) -> int:
    from ingest.config import Settings
    from ingest.store.db import make_engine
    from ingest.views.sql import SQLError, run_query

    settings = Settings.from_env(db_url=args.db, data_dir=args.data_dir)
    limit = settings.sql_max_rows if args.limit is None else args.limit
    if not 1 <= limit <= settings.sql_max_rows:
        raise CLIError(f"--limit must be between 1 and {settings.sql_max_rows}",
                       EXIT_BAD_INPUT)
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    try:
        sql = _statement(args, engine)
        result = run_query(engine, sql, limit=limit, timeout_ms=settings.sql_timeout_ms)
    except SQLError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    finally:
        engine.dispose()
    if args.format == "json":
        sys.stdout.write(json.dumps(result.as_dict(), indent=1) + "\n")
    elif args.format == "csv":
        sys.stdout.write(result.csv_text())
    else:
        sys.stdout.write(render_table(result.columns, result.rows))
    if result.truncated:
        print(f"gmpscope sql: cut at {result.limit:,} rows (--limit; the cap is "
              f"$GMPSCOPE_SQL_MAX_ROWS)", file=sys.stderr)
    return EXIT_OK
