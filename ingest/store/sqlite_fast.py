"""Rows bound into SQLite by the C extension ``ingest.store._sqlitebulk``.

The loader's big tables are integer columns in numpy (and a few text ones).
Through Python's sqlite3 module each value becomes a Python object bound with
the GIL held; the extension binds them from the numpy buffers without the
GIL, on the same connection and in the same transaction (docs/ingest.md has
the numbers).
:func:`column_inserter` says whether that is possible for a connection and
returns the inserter, or None, and then callers bind through Python as before.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ingest.columns import Gather, Nullable, Seq
from ingest.extensions import optional_extension

log = logging.getLogger("gmpscope.ingest.sqlite_fast")

#: Rows per multi-row statement (bench/sqlite_insert.py's rows, best of two:
#: 64 rows 0.428 us a row, 256 0.417, 1024 0.422; from C, one row a
#: statement was about 30% slower than 64).
ROWS_PER_STATEMENT = 256
#: Set to 1 to bind through Python even where the extension could (tests
#: compare both paths; also a switch if the extension ever misbehaves).
PURE_ENV = "GMPSCOPE_PURE_SQLITE"
#: Set to 0 to insert through statements even where gmpscope's appender
#: (ingest/csrc/sqlite_append.c, in gmpscope's own SQLite library) could
#: append the rows (tests compare both).
APPEND_ENV = "GMPSCOPE_SQLITE_APPEND"

#: insert(table, column names, columns, first row, end row, literal columns).
Inserter = Callable[[str, Sequence[str], Sequence[Any], int, int, dict[str, int]], int]


def _extension() -> Any | None:
    return optional_extension("ingest.store._sqlitebulk")


def _main_file(dbapi_conn: sqlite3.Connection) -> str:
    for _seq, name, path in dbapi_conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path or "")
    return ""


def insert_sql(table: str, columns: Sequence[str], nrows: int,
               literals: dict[str, int] | None = None) -> str:
    """``INSERT OR FAIL INTO table (columns, literal columns) VALUES (?..., literals), ...``.

    OR FAIL, not the default ABORT: an ABORT statement that writes many rows
    first copies every page it will change to a statement journal, so that
    it can undo itself alone. For a load that was 88 k pages (1.4 GB) written
    to a temporary file, for nothing: a failed row fails the load's whole
    transaction, which is rolled back. A caller that keeps its transaction
    after an error must not use these statements.
    """
    lit = literals or {}
    one = "(" + ",".join(["?"] * len(columns) + [str(int(v)) for v in lit.values()]) + ")"
    return (f'INSERT OR FAIL INTO "{table}" ('
            + ",".join(f'"{c}"' for c in [*columns, *lit]) + ") VALUES "
            + ",".join([one] * nrows))


def _item_types(values: Any) -> set[type]:
    return {type(v) for v in values}


def bindable(col: Any) -> bool:
    """Whether the extension binds ``col``: integers (numpy arrays, Gather,
    Nullable, Seq, lists of int and None) or texts (lists or object arrays of
    str and None)."""
    if isinstance(col, Seq):
        return True
    values = col.values if isinstance(col, (Gather, Nullable)) else col
    if isinstance(values, np.ndarray) and values.dtype.kind in "iub":
        # uint64 above 2**63 does not fit SQLite's integers: Python's binding
        # raises for it, as it should.
        return not (values.dtype.kind == "u" and values.dtype.itemsize == 8)
    if isinstance(col, Nullable) or not isinstance(values, (list, np.ndarray)):
        return False
    if isinstance(values, np.ndarray) and values.dtype != object:
        return False
    types = _item_types(values)
    if isinstance(col, Gather):
        return types <= {str, type(None)}
    return types <= {str, type(None)} or (types <= {int, type(None)} and _fits_int64(values))


def _fits_int64(values: Any) -> bool:
    ints = [v for v in values if v is not None]
    return not ints or (-2**63 <= min(ints) and max(ints) < 2**63)


def _int_list(part: list[Any]) -> tuple[Any, ...]:
    """A list of int and None as (values, None, null mask, 0)."""
    null = np.fromiter((v is None for v in part), dtype=np.bool_, count=len(part))
    values = np.fromiter((0 if v is None else v for v in part), dtype=np.int64, count=len(part))
    return values, None, null, 0


def _spec(col: Any, a: int, b: int) -> tuple[Any, ...]:
    """The extension's (values, index, null, seq start[, texts]) for rows
    [a, b) of ``col``."""
    if isinstance(col, Seq):
        return None, None, None, col.start + a
    if isinstance(col, Gather):
        index = np.ascontiguousarray(col.index[a:b])
        if col.values.dtype == object:  # (a few distinct texts in practice)
            return None, index, None, 0, col.values.tolist()
        return np.ascontiguousarray(col.values), index, None, 0
    if isinstance(col, Nullable):
        return (np.ascontiguousarray(col.values[a:b]), None,
                np.ascontiguousarray(col.null[a:b], dtype=np.bool_), 0)
    part = col[a:b]
    if isinstance(part, np.ndarray) and part.dtype != object:
        return np.ascontiguousarray(part), None, None, 0
    items = part.tolist() if isinstance(part, np.ndarray) else part
    if any(isinstance(v, str) for v in items):
        return None, None, None, 0, items
    if all(v is None for v in items):  # a chunk of NULLs, in a text or an int column
        return None, None, None, 0, items
    return _int_list(items)


def column_inserter(dbapi_conn: Any) -> Inserter | None:
    """An inserter of :func:`bindable` columns into ``dbapi_conn``'s open
    transaction, or None when the extension is missing, disabled or cannot
    vouch for the connection (another SQLite library, no transaction open,
    not a sqlite3 connection)."""
    ext = _extension()
    if ext is None or not isinstance(dbapi_conn, sqlite3.Connection):
        return None
    import _sqlite3

    module_file = getattr(_sqlite3, "__file__", None)  # None: built into the interpreter
    if module_file is None or not ext.handle_ok(dbapi_conn, module_file,
                                                _main_file(dbapi_conn)):
        return None

    # Tables the appender refused (why): statements for them from then on.
    refused: dict[str, str] = {}
    append = (os.environ.get(APPEND_ENV, "1") != "0"
              and bool(getattr(ext, "has_appender", lambda: False)()))

    def insert(table: str, names: Sequence[str], cols: Sequence[Any], a: int, b: int,
               literals: dict[str, int]) -> int:
        """Insert rows [a, b) of ``cols`` (named ``names``) plus ``literals``;
        rows that leave out the table's rowid go through the appender where
        it can take the table."""
        k = len(names)
        if not k or len(cols) != k:
            raise ValueError(f"{table}: {len(cols)} columns for {k} names")
        specs = [_spec(c, a, b) for c in cols]
        first = a
        if append and table not in refused:
            done = ext.append_columns(dbapi_conn, table, list(names), list(literals),
                                      [int(v) for v in literals.values()], b - a, specs)
            if isinstance(done, str):
                refused[table] = done
                log.debug("%s: inserted through statements (%s)", table, done)
            elif int(done) == b - a:
                return b - a
            else:
                # A row whose index entry would not follow the last: it and
                # the rest through statements (they seek), as will later calls.
                refused[table] = "keys not in ascending order"
                log.debug("%s: statements from row %d on (keys not in ascending order)",
                          table, a + int(done))
                a += int(done)
                specs = [_spec(c, a, b) for c in cols]
        per = max(1, min(ROWS_PER_STATEMENT, 32766 // k))
        return int(ext.insert_columns(
            dbapi_conn, insert_sql(table, names, per, literals), per,
            insert_sql(table, names, 1, literals), b - a, specs)) + (a - first)

    return insert
