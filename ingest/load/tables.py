"""How each derived table is stored: :func:`store_table` inserts one table (or
the next part of one) in the loader's transaction, on the insert worker's
thread; the tables themselves come from :mod:`ingest.load.derived`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select

from ingest.columns import Computed, Gather, Nullable, Seq
from ingest.derive.interval_order import Columns
from ingest.store import models, pg_chunk_io, pg_chunks, pg_coded
from ingest.store.bulk import column_length, insert_columns, insert_int_arrays
from ingest.store.coded_files import CodedFiles
from ingest.store.coded_insert import store_coded
from ingest.store.coded_models import CODED

#: Interval rows per insert statement run: what the computed columns of one
#: part take (8 bytes a row each).
INTERVAL_PART = 1 << 20


def interval_parts(cols: Columns, n: int,
                   part: int = INTERVAL_PART) -> Iterator[tuple[int, Columns]]:
    """``cols`` (an ``id`` Seq among them) as consecutive parts of ``part``
    rows: (rows, columns) each, made only when reached."""
    for a in range(0, n, part):
        b = min(n, a + part)
        yield b - a, {name: _rows(col, a, b) for name, col in cols.items()}


def _rows(col: Any, a: int, b: int) -> Any:
    if isinstance(col, Seq):
        return Seq(col.start + a)
    if isinstance(col, Gather):
        return Gather(col.values, col.index[a:b])
    if isinstance(col, Computed):
        return col.chunk(a, b)
    return col[a:b]


def store_range(conn: Connection, trace_id: int, table_name: str, first: int,
                n: int) -> None:
    """A ranged table's id block (row_ranges), once its rows are all stored."""
    conn.execute(models.row_ranges.insert().values(
        trace_id=trace_id, table_name=table_name, first_id=first, last_id=first + n - 1))


def store_table(conn: Connection, trace_id: int, table_name: str, cols: Columns,
                n: int, interval_base: int, advance: Callable[[int], None],
                rows: bool = True, files: CodedFiles | None = None) -> None:
    """Insert one derived table, or the next part of one; without ``rows``
    nothing (the intervals and proc runs kept in files:
    ingest.store.interval_files); with ``files`` the coded tables that may be
    kept in files are (ingest.store.coded_files)."""
    if not rows:
        advance(n)
        return
    if conn.dialect.name == "postgresql" and table_name in pg_chunks.CHUNKED:
        pg_chunk_io.store_table(conn, trace_id, table_name, cols, n, interval_base, advance)
        return
    if table_name == "intervals":
        for rows_in, part in interval_parts(cols, n):
            insert_int_arrays(conn, models.interval_rows, ["trace_id", *part],
                              [trace_id, *part.values()], rows_in, advance)
            del part
        return
    if table_name in _INTERVAL_VIEWS:
        # Stored as the interval each row is, plus what only this table has.
        table, keep = _INTERVAL_VIEWS[table_name]
        cols = {"id": cols["id"],
                "interval_id": np.asarray(cols["interval_row"], np.int64) + interval_base,
                **{c: cols[c] for c in keep}}
        insert_columns(conn, table, cols, {"trace_id": trace_id}, advance)
        return
    if table_name in CODED:  # kept coded, behind a view of these columns
        store_coded(conn, trace_id, table_name, cols, advance, files)
        return
    if conn.dialect.name == "postgresql" and table_name in pg_coded.CHUNKED:
        pg_coded.write_chunks(conn, table_name, trace_id, cols, n, advance)
        return
    insert_columns(conn, models.metadata.tables[table_name], cols, {"trace_id": trace_id},
                   advance)


#: Derived tables stored as views over intervals: the table that holds their
#: rows and the columns it keeps besides the interval's id.
_INTERVAL_VIEWS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "proc_runs": (models.proc_run_index, ()),
    "syscalls": (models.syscall_outcomes,
                 ("start_known", "outcome", "p_lost", "stolen_ts", "stolen_by_m")),
}


def next_id(conn: Connection, table: Any) -> int:
    """The first free row id of a ranged table (ids run in per-trace blocks)."""
    if conn.dialect.name == "postgresql":
        return pg_chunk_io.last_id(conn, models.RANGE_NAME[table.name]) + 1
    top = int(conn.execute(select(func.max(table.c.id))).scalar() or 0)
    # And the ids of the rows kept in files.
    files = {models.interval_rows.name: models.interval_files,
             models.proc_run_index.name: models.proc_run_files,
             models.syscall_outcomes.name: models.syscall_files}.get(table.name)
    if files is not None:
        top = max(top, int(conn.execute(select(func.max(files.c.last_id))).scalar() or 0))
    return top + 1


def columns_nbytes(cols: Columns) -> int:
    """About the memory a table's columns hold (a list counts its pointers:
    its texts are few and shared)."""
    total = 0
    for col in cols.values():
        if isinstance(col, np.ndarray):
            total += col.nbytes
        elif isinstance(col, Nullable):
            total += col.values.nbytes + col.null.nbytes
        elif isinstance(col, Computed):
            total += col.n * 8
        elif isinstance(col, Gather):
            total += col.values.nbytes + col.index.nbytes
        elif isinstance(col, list | tuple):
            total += len(col) * 8
        else:
            total += int(getattr(col, "nbytes", 0))
    return total


def nrows(cols: Columns) -> int:
    for col in cols.values():
        n = column_length(col)
        if n is not None:
            return n
    return 0
