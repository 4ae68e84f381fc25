"""Writing a test's own texts into the coded tables behind the views metrics,
regions, logs, goroutines, ranges and tasks (ingest/store/coded_models.py):
the views cannot be written, so a new text gets a code after the trace's own
in ``strings`` and the row that code. On a DB-API connection to SQLite."""

from __future__ import annotations

import sqlite3

from ingest.store.coded_models import CODED, STRING_SOURCES


def new_codes(db: sqlite3.Connection, tid: int, column: str, values: list[str]) -> list[int]:
    """Add ``values`` to the trace's strings of ``column`` (``"view.column"``,
    texts it does not have yet); their codes."""
    source = STRING_SOURCES[column]
    first = db.execute("SELECT coalesce(max(code), -1) + 1 FROM strings "
                       "WHERE trace_id = ? AND source = ?", (tid, source)).fetchone()[0]
    db.executemany("INSERT INTO strings (trace_id, source, code, value) VALUES (?, ?, ?, ?)",
                   [(tid, source, first + k, v) for k, v in enumerate(values)])
    return [first + k for k in range(len(values))]


def set_text(db: sqlite3.Connection, tid: int, view: str, column: str, key: str, at: int,
             value: str) -> None:
    """``UPDATE view SET column = value WHERE trace_id = tid AND key = at``."""
    code = new_codes(db, tid, f"{view}.{column}", [value])[0]
    table = CODED[view].table.name
    db.execute(f"UPDATE {table} SET {column}_code = ? WHERE trace_id = ? AND {key} = ?",
               (code, tid, at))
