"""The SQL page's data: one read-only query over the served database (docs/sql.md).

:func:`run_query` runs a user's statement on a connection of the store's own
engine (so it carries every connect-time setup the store gives its
connections), behind guards that keep anything stored from changing:

- SQLite: ``PRAGMA query_only``, an authorizer that allows reading only
  (no write, ATTACH/DETACH, CREATE/DROP, transaction control, state-changing
  PRAGMA or file-touching function such as ``load_extension``), a progress
  handler that stops the query at the time limit, one statement only;
- PostgreSQL: a ``READ ONLY`` transaction with ``statement_timeout``, the
  statement run as a cursor (``DECLARE ... CURSOR FOR``: one ``SELECT`` or
  ``VALUES``, sent with the extended protocol so a second statement cannot
  follow), and the functions that reach the server's files or other sessions
  refused by name.

The connection is discarded afterwards (never handed back to the pool), so no
setting, lock or handler of the query outlives it. A refusal raises
:class:`SQLRefused`, a query the database rejects :class:`SQLError`, one that
ran out of time :class:`SQLTimeout`; each carries one line for the user.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.pool import StaticPool

from ingest.views.sql_guard import (
    PG_DENIED,
    SQLError,
    SQLiteGuard,
    SQLRefused,
    SQLTimeout,
    first_keyword,
    timed_out,
)

__all__ = ["SQLError", "SQLRefused", "SQLResult", "SQLTimeout", "run_query"]

#: Longest statement accepted (characters).
MAX_SQL_CHARS = 100_000
#: Statements the page runs, by their first keyword; the guards below are what
#: enforce reading only, this gives a refusal its clear message.
READ_KEYWORDS = {"select", "with", "values"}
SQLITE_ONLY_KEYWORDS = {"explain", "pragma"}
#: Longest text or blob value SQLite may build in a query (a runaway
#: ``zeroblob`` or ``printf`` would otherwise take the worker's memory).
SQLITE_MAX_VALUE_BYTES = 64 << 20


@dataclass(frozen=True)
class SQLResult:
    """A query's answer: column names, rows (JSON-ready values), whether the
    row cap cut it, and what it cost."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    limit: int
    elapsed_ms: float
    database: str

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer of ``GET /api/sql``."""
        return {"columns": self.columns, "rows": self.rows, "truncated": self.truncated,
                "row_count": len(self.rows), "limit": self.limit,
                "elapsed_ms": round(self.elapsed_ms, 3), "database": self.database}

    def csv_text(self) -> str:
        """The rows as CSV with a header line (NULL an empty field)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if v is None else v for v in row])
        return out.getvalue()


def run_query(engine: Engine, sql: str, *, limit: int, timeout_ms: int) -> SQLResult:
    """Run ``sql`` read-only on ``engine``'s database: at most ``limit`` rows,
    stopped after ``timeout_ms``. Raises :class:`SQLError` (and subclasses)."""
    text = _checked_text(sql)
    dialect = engine.dialect.name
    word = first_keyword(text)
    allowed = READ_KEYWORDS | (SQLITE_ONLY_KEYWORDS if dialect == "sqlite" else set())
    if word not in allowed:
        shown = word.upper() if word else "this statement"
        raise SQLRefused(f"{shown} is not allowed: the SQL page only reads "
                         f"({', '.join(k.upper() for k in sorted(allowed))})")
    started = time.monotonic()
    if dialect == "sqlite":
        columns, rows = _run_sqlite(engine, text, limit, timeout_ms)
    elif dialect == "postgresql":
        columns, rows = _run_postgresql(engine, text, limit, timeout_ms)
    else:  # make_engine makes no other
        raise SQLError(f"the SQL page does not support {dialect}")
    truncated = len(rows) > limit
    return SQLResult(columns=columns, rows=[[_jsonable(v) for v in r] for r in rows[:limit]],
                     truncated=truncated, limit=limit,
                     elapsed_ms=(time.monotonic() - started) * 1000, database=dialect)


def _checked_text(sql: str) -> str:
    text = sql.strip()
    if not text.rstrip(";").strip():
        raise SQLError("no SQL given: pass one statement, e.g. sql=SELECT * FROM traces")
    if len(text) > MAX_SQL_CHARS:
        raise SQLError(f"the statement is {len(text):,} characters long; "
                       f"at most {MAX_SQL_CHARS:,} are accepted")
    if "\x00" in text:
        raise SQLError("the statement contains a NUL character")
    return text


@contextmanager
def _discarded_connection(engine: Engine) -> Iterator[Any]:
    """The driver connection of one of ``engine``'s connections, closed after
    use instead of going back to the pool (whatever the query set on it,
    guards included, goes with it). An in-memory SQLite database lives in its
    one connection: that one is kept, and the query's guards are undone."""
    conn = engine.connect()
    try:
        yield conn.connection.driver_connection
    finally:
        if not isinstance(engine.pool, StaticPool):
            conn.invalidate()
        conn.close()


def _run_sqlite(engine: Engine, sql: str, limit: int,
                timeout_ms: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    import sqlite3

    with _discarded_connection(engine) as db:
        guard = SQLiteGuard(deadline=time.monotonic() + timeout_ms / 1000)
        db.execute("PRAGMA query_only=1")
        length = db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
        attached = db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        cur = db.cursor()
        try:
            # A deferred read transaction: one snapshot for the whole query
            # (a load committing meanwhile is not half seen).
            db.execute("BEGIN")
            db.set_authorizer(guard.authorize)
            db.set_progress_handler(guard.progress, guard.PROGRESS_STEPS)
            try:
                cur.execute(sql)
                rows = cur.fetchmany(limit + 1)
                columns = [d[0] for d in cur.description or ()]
            finally:
                db.set_authorizer(None)
                db.set_progress_handler(None, 0)
                db.execute("ROLLBACK")
        except sqlite3.Warning as e:  # Python 3.11's "one statement at a time"
            raise SQLError(_one_statement(str(e))) from None
        except sqlite3.ProgrammingError as e:
            raise SQLError(_one_statement(str(e))) from None
        except sqlite3.Error as e:
            raise guard.explain(e, timeout_ms) from None
        finally:
            cur.close()
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length)
            db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, attached)
            db.execute("PRAGMA query_only=0")
    return columns, rows


def _one_statement(message: str) -> str:
    if "one statement" in message:
        return "one statement at a time: remove what follows the first ';'"
    return message


#: SQLSTATEs PostgreSQL answers for what the page refuses (a write in the read
#: only transaction, a privilege, a data-modifying WITH in a cursor).
_PG_REFUSED = {"25006", "42501", "0A000"}
_PG_CANCELED = "57014"


def _run_postgresql(engine: Engine, sql: str, limit: int,
                    timeout_ms: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    import psycopg

    _refuse_pg_functions(sql)
    with _discarded_connection(engine) as db:
        try:
            db.rollback()  # a new transaction (the pool's ping may have begun one)
            with db.cursor() as setup:
                setup.execute("SET TRANSACTION READ ONLY")
                setup.execute(f"SET LOCAL statement_timeout = {int(timeout_ms)}")
                setup.execute(f"SET LOCAL lock_timeout = {int(timeout_ms)}")
                setup.execute("SHOW transaction_read_only")
                row = setup.fetchone()
            if row is None or row[0] != "on":  # never expected: refuse rather than write
                raise SQLRefused("the database did not start a read-only transaction")
            # A named (server-side) cursor: DECLARE ... CURSOR FOR takes one
            # SELECT or VALUES only, and only the rows fetched leave the server.
            with db.cursor(name=f"gmpscope_sql_{uuid.uuid4().hex[:8]}") as cur:
                cur.execute(sql.rstrip().rstrip(";"))
                columns = [d.name for d in cur.description or ()]
                rows = cur.fetchmany(limit + 1)
            db.rollback()
        except psycopg.Error as e:
            raise _pg_error(e, timeout_ms) from None
    return columns, rows


def _refuse_pg_functions(sql: str) -> None:
    low = sql.lower()
    if re.search(r"\bu&['\"]", low):
        raise SQLRefused("U&'...' escapes are not accepted by the SQL page")
    found = PG_DENIED.search(low)
    if found:
        raise SQLRefused(f"{found.group(0)}() is not allowed: it reaches the server's "
                         "files or other sessions")


def _pg_error(e: Any, timeout_ms: int) -> SQLError:
    state = getattr(e, "sqlstate", None) or ""
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if state == _PG_CANCELED:
        return timed_out(timeout_ms)
    if "multiple commands" in message:
        return SQLError(_one_statement("one statement"))
    if state in _PG_REFUSED:
        return SQLRefused(f"refused: {message} (the SQL page only reads)")
    return SQLError(message)


def _jsonable(v: Any) -> Any:
    """A database value as JSON: exact integers, NaN/inf as null, bytes as hex,
    times as ISO 8601, anything else as its text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        if not v.is_finite():
            return None
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    return str(v)
