"""Writing a test's own texts into the coded tables behind the views metrics,
regions, logs, goroutines, ranges and tasks (ingest/store/coded_models.py):
the views cannot be written, so a new text gets a code after the trace's own
in ``strings`` and the row that code (rows kept in files moved into the table
first). On a DB-API connection to SQLite opened after the store's extension
was registered (ingest.store.interval_files.register)."""

from __future__ import annotations

import sqlite3

from ingest.store.coded_models import CODED, FILE_TABLES, STRING_SOURCES

CODED_BY_TABLE = {c.table.name: c.table for c in CODED.values()}


def new_codes(db: sqlite3.Connection, tid: int, column: str, values: list[str]) -> list[int]:
    """Add ``values`` to the trace's strings of ``column`` (``"view.column"``,
    texts it does not have yet); their codes."""
    source = STRING_SOURCES[column]
    first = db.execute("SELECT coalesce(max(code), -1) + 1 FROM strings "
                       "WHERE trace_id = ? AND source = ?", (tid, source)).fetchone()[0]
    db.executemany("INSERT INTO strings (trace_id, source, code, value) VALUES (?, ?, ?, ?)",
                   [(tid, source, first + k, v) for k, v in enumerate(values)])
    return [first + k for k in range(len(values))]


def as_rows(db: sqlite3.Connection, tid: int, table: str) -> None:
    """The trace's rows of coded table ``table`` kept in files
    (ingest/store/coded_files.py) moved into the table, where they can be
    changed: the files are no longer listed (a trace stored without them
    looks the same)."""
    if table not in FILE_TABLES or db.execute(
            "SELECT 1 FROM coded_files WHERE trace_id = ? AND table_name = ?",
            (tid, table)).fetchone() is None:
        return
    cols = ", ".join(c.name for c in CODED_BY_TABLE[table].columns)
    db.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM gmpscope_{table} "
               "WHERE trace_id = ?", (tid,))
    db.execute("DELETE FROM coded_files WHERE trace_id = ? AND table_name = ?", (tid, table))


def set_text(db: sqlite3.Connection, tid: int, view: str, column: str, key: str, at: int,
             value: str) -> None:
    """``UPDATE view SET column = value WHERE trace_id = tid AND key = at``."""
    code = new_codes(db, tid, f"{view}.{column}", [value])[0]
    table = CODED[view].table.name
    as_rows(db, tid, table)
    db.execute(f"UPDATE {table} SET {column}_code = ? WHERE trace_id = ? AND {key} = ?",
               (code, tid, at))
