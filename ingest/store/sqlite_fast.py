"""Rows bound into SQLite by the C extension ``ingest.store._sqlitebulk``.

The loader's big tables are integer columns in numpy (and a few text ones).
Through Python's sqlite3 module each value becomes a Python object bound with
the GIL held; the extension binds them from the numpy buffers without the
GIL, on the same connection and in the same transaction (docs/ingest.md has
the numbers).

It reaches the connection through SQLite's public API only: :func:`register`
(called where SQLite engines are made, before their first connection) has
SQLite add the SQL function ``gmpscope_bulk_insert(token)`` and the
table-valued function ``gmpscope_rows(batch)`` to every connection opened
afterwards. An insert stages its columns with the GIL (``stage``: buffer
views, texts copied to UTF-8, the statement :func:`select_sql`), runs
``SELECT gmpscope_bulk_insert(token)`` on the caller's connection (the
sqlite3 module releases the GIL while the statement runs; the function
prepares and steps ``INSERT ... SELECT ... FROM gmpscope_rows(?)`` on that
connection, the batch bound as a pointer that only C can bind, and the
virtual table's cursor returns the staged values) and releases the batch.
:func:`column_inserter` returns such an inserter, or None when the
connection has no such function, and then callers bind through Python.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ingest.columns import Gather, Nullable, Seq
from ingest.extensions import optional_extension

#: The extension's table-valued function (columns c0, c1, ...).
ROWS_FUNCTION = "gmpscope_rows"
#: The extension's SQL function; with NULL it answers the extension's
#: ``instance()`` (the probe of :func:`column_inserter`).
FUNCTION = "gmpscope_bulk_insert"

#: insert(table, column names, columns, first row, end row, literal columns).
Inserter = Callable[[str, Sequence[str], Sequence[Any], int, int, dict[str, int]], int]


def _extension() -> Any | None:
    return optional_extension("ingest.store._sqlitebulk")


def register() -> bool:
    """Have SQLite give every connection it opens from now on, in this
    process, the binder's SQL function; False when the extension is not
    built or ``GMPSCOPE_PURE=1``. Idempotent. Connections opened before
    keep binding through Python."""
    ext = _extension()
    if ext is None:
        return False
    ext.register()
    return True


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


def select_sql(table: str, columns: Sequence[str],
               literals: dict[str, int] | None = None) -> str:
    """``INSERT OR FAIL INTO table (columns, literal columns) SELECT c0, ...,
    literals FROM gmpscope_rows(?)``: the binder's one statement a batch, its
    parameter the batch (OR FAIL as in :func:`insert_sql`)."""
    lit = literals or {}
    return (f'INSERT OR FAIL INTO "{table}" ('
            + ",".join(f'"{c}"' for c in [*columns, *lit]) + ") SELECT "
            + ",".join([f"c{j}" for j in range(len(columns))]
                       + [str(int(v)) for v in lit.values()])
            + f" FROM {ROWS_FUNCTION}(?)")


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


def _answers(dbapi_conn: sqlite3.Connection, ext: Any) -> bool:
    """Whether ``dbapi_conn`` has this extension's SQL function: absent on a
    connection opened before :func:`register` or by a SQLite library other
    than the extension's; registered by another copy of the extension (which
    holds none of this one's batches) it answers another instance."""
    try:
        cur = dbapi_conn.execute(f"SELECT {FUNCTION}(NULL)")
    except sqlite3.OperationalError:  # no such function
        return False
    try:
        row = cur.fetchone()
    finally:
        cur.close()
    return row is not None and row[0] == ext.instance()


def column_inserter(dbapi_conn: Any) -> Inserter | None:
    """An inserter of :func:`bindable` columns into ``dbapi_conn``'s open
    transaction, or None when the extension is missing or disabled, the
    connection is not a sqlite3 one, has no transaction open, or lacks the
    extension's SQL function."""
    ext = _extension()
    if (ext is None or not isinstance(dbapi_conn, sqlite3.Connection)
            or not dbapi_conn.in_transaction or not _answers(dbapi_conn, ext)):
        return None
    call = f"SELECT {FUNCTION}(?)"

    def insert(table: str, names: Sequence[str], cols: Sequence[Any], a: int, b: int,
               literals: dict[str, int]) -> int:
        """Insert rows [a, b) of ``cols`` (named ``names``) plus ``literals``;
        errors are the sqlite3 module's, as for its own INSERT."""
        k = len(names)
        if not k or len(cols) != k:
            raise ValueError(f"{table}: {len(cols)} columns for {k} names")
        token = ext.stage(select_sql(table, names, literals), b - a,
                          [_spec(c, a, b) for c in cols])
        try:
            cur = dbapi_conn.execute(call, (token,))
            try:
                row = cur.fetchone()
            finally:
                cur.close()
        finally:
            ext.release(token)
        return int(row[0])

    return insert
