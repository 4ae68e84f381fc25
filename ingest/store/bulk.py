"""Fast bulk inserts inside the caller's transaction.

SQLite: integer and text columns go to the C binder (ingest/store/sqlite_fast.py)
when the connection has its SQL function (those of engines made by
ingest.store.db have it); otherwise multi-row ``INSERT ... VALUES
(...),(...)`` statements through the DBAPI cursor, about three times faster
than ``executemany`` because the statement runs once per few thousand rows.
PostgreSQL: ``COPY ... FROM STDIN`` through psycopg, binary for
all-integer tables without NULLs, else text with NULL as NULL. Anything else:
SQLAlchemy's ``executemany``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import BigInteger, ColumnElement, Connection, Integer, SmallInteger, Table

from ingest.columns import Gather, Nullable, Seq
from ingest.store.sqlite_fast import bindable, column_inserter, insert_sql

Arr = npt.NDArray[Any]
#: Called with the number of rows just written.
Advance = Callable[[int], None]

#: Rows per multi-row statement are capped by SQLite's bound-parameter limit
#: (32766 since SQLite 3.32, 999 before).
_SQLITE_MAX_VARS = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
_CHUNK = 65536
#: Stands for NULL in a Nullable column until the insert's fix-up UPDATE.
NULL_SENTINEL = -(2**63)


def insert_rows(conn: Connection, table: Table, columns: Sequence[str],
                rows: Iterable[Sequence[Any]], advance: Advance | None = None) -> int:
    """Insert ``rows`` (tuples in ``columns`` order); return how many."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return _sqlite_rows(conn, table, columns, rows, advance)
    if dialect == "postgresql":
        return _pg_copy_rows(conn, table, columns, rows, advance)
    n = 0
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(dict(zip(columns, row, strict=True)))
        if len(batch) >= _CHUNK:
            conn.execute(table.insert(), batch)
            n += len(batch)
            if advance:
                advance(len(batch))
            batch = []
    if batch:
        conn.execute(table.insert(), batch)
        n += len(batch)
        if advance:
            advance(len(batch))
    return n


#: A column for :func:`insert_arrays`: a numpy array, a Gather, a Nullable,
#: a list of Python values, or a constant (the same int for every row).
Col = Arr | Gather | Nullable | Seq | list[Any] | int


def _chunk(col: Col, a: int, b: int) -> Arr | list[Any] | int:
    if isinstance(col, Gather):
        return col.values[col.index[a:b]]
    if isinstance(col, Nullable):
        # A sentinel now, NULL after the insert (see insert_arrays): binding
        # None goes through sqlite3's adapter lookup, several times slower.
        # (int64 first: NumPy 2 would wrap the sentinel into a narrower type.)
        return np.where(col.null[a:b], NULL_SENTINEL,
                        np.asarray(col.values[a:b]).astype(np.int64, copy=False))
    if isinstance(col, int):
        return col
    if isinstance(col, Seq):
        return np.arange(col.start + a, col.start + b, dtype=np.int64)
    part = col[a:b]
    if isinstance(part, np.ndarray) and part.dtype.kind == "b":
        return part.astype(np.int8)  # Python bools also take the slow adapter path
    return part


def _flat_chunks(cols: Sequence[Col], k: int, n: int) -> Iterator[tuple[int, list[Any]]]:
    """(rows, row-major flat list of values) per chunk of the columns."""
    for a in range(0, n, _CHUNK):
        b = min(n, a + _CHUNK)
        yield b - a, _flat([_chunk(c, a, b) for c in cols], None, b - a)


def insert_arrays(conn: Connection, table: Table, columns: Sequence[str],
                  cols: Sequence[Col], n: int, advance: Advance | None = None) -> int:
    """Insert ``n`` rows given column-wise (see :data:`Col`), in chunks."""
    if conn.dialect.name == "sqlite":
        return _sqlite_arrays(conn, table, columns, cols, n, advance)
    if conn.dialect.name == "postgresql":
        if _pg_binary_ok(table, columns, cols):
            return _pg_copy_binary(conn, table, columns, cols, n, advance)
        return _pg_copy_columns(conn, table, columns, cols, n, advance)
    k = len(columns)
    for rows, flat in _flat_chunks(cols, k, n):
        insert_rows(conn, table, columns,
                    [tuple(flat[i:i + k]) for i in range(0, len(flat), k)])
        del flat
        if advance:
            advance(rows)
    _nulls(conn, table, columns, cols, n)
    return n


def _sqlite_arrays(conn: Connection, table: Table, columns: Sequence[str],
                   cols: Sequence[Col], n: int, advance: Advance | None) -> int:
    """SQLite: constants go into the statement as literals (a bound value costs
    as much as a stored one) and, when the rows carry their ids, rows with
    NULLs are inserted apart with those columns left out, instead of a
    sentinel rewritten by an UPDATE afterwards (which rewrites the rows)."""
    literals = {name: int(c) for name, c in zip(columns, cols, strict=True)
                if isinstance(c, int)}
    names = [name for name, c in zip(columns, cols, strict=True) if not isinstance(c, int)]
    var: list[Col] = [c for c in cols if not isinstance(c, int)]
    fast = column_inserter(_dbapi(conn)) if names and all(map(bindable, var)) else None
    if fast is not None:
        names, var, rowid = _assigned_rowids(conn, table, names, var)
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            fast(table.name, names, var, a, b, literals)
            if advance:
                advance(b - a)
        if rowid is not None:
            top = conn.exec_driver_sql(f'SELECT max("{rowid[0]}") FROM "{table.name}"').scalar()
            if top != rowid[1] + n - 1:
                raise RuntimeError(f"{table.name}: rows got ids up to {top}, not "
                                   f"{rowid[1]}..{rowid[1] + n - 1}")
        return n
    if not any(isinstance(c, Seq) for c in var):
        # Implicit rowids: keep the rows in order (sentinel, then UPDATE).
        for rows, flat in _flat_chunks(var, len(var), n):
            _sqlite_flat(conn, table, names, flat, literals)
            if advance:
                advance(rows)
        _nulls(conn, table, columns, cols, n)
        return n
    for stmt_names, flat, rows in _statements(names, var, n):
        _sqlite_flat(conn, table, stmt_names, flat, literals)
        del flat
        if advance and rows:
            advance(rows)
    return n


def _assigned_rowids(conn: Connection, table: Table, names: list[str], var: list[Col]
                     ) -> tuple[list[str], list[Col], tuple[str, int] | None]:
    """Leave out a Seq id column that SQLite would assign the same values to:
    the table's rowid (an INTEGER PRIMARY KEY) and the ids start right after
    its largest. An assigned rowid is an append; a given one is a b-tree
    search per row (a third of the insert time, measured on 4.9M interval
    rows). Returns the columns left and (id column, first id) when left out."""
    seqs = [j for j, c in enumerate(var) if isinstance(c, Seq)]
    if len(seqs) != 1:
        return names, var, None
    j = seqs[0]
    name, start = names[j], var[j].start  # type: ignore[union-attr]
    info = conn.exec_driver_sql(f'PRAGMA table_info("{table.name}")').all()
    pk = [r for r in info if r[5]]  # (cid, name, type, notnull, default, pk)
    if len(pk) != 1 or pk[0][1] != name or str(pk[0][2]).upper() != "INTEGER":
        return names, var, None
    top = conn.exec_driver_sql(f'SELECT max("{name}") FROM "{table.name}"').scalar()
    if int(top or 0) + 1 != start:
        return names, var, None
    return names[:j] + names[j + 1:], var[:j] + var[j + 1:], (name, start)


def _statements(names: list[str], var: Sequence[Col], n: int
                ) -> Iterator[tuple[list[str], list[Any], int]]:
    """(columns, flat values, rows done) per statement group, chunk by chunk;
    rows whose Nullable columns are NULL come apart, without those columns."""
    for a in range(0, n, _CHUNK):
        b = min(n, a + _CHUNK)
        parts = [c.values[a:b] if isinstance(c, Nullable) else _chunk(c, a, b) for c in var]
        nulls = [(j, c.null[a:b]) for j, c in enumerate(var)
                 if isinstance(c, Nullable) and bool(c.null[a:b].any())]
        if not nulls:
            yield names, _flat(parts, None, b - a), b - a
            continue
        code = np.zeros(b - a, dtype=np.int64)
        for bit, (_, m) in enumerate(nulls):
            code |= m.astype(np.int64) << bit
        patterns = np.unique(code).tolist()
        for i, pattern in enumerate(patterns):
            sel = np.flatnonzero(code == pattern)
            skip = {j for bit, (j, _) in enumerate(nulls) if pattern >> bit & 1}
            keep = [j for j in range(len(var)) if j not in skip]
            yield ([names[j] for j in keep], _flat([parts[j] for j in keep], sel, len(sel)),
                   b - a if i == len(patterns) - 1 else 0)


def _flat(parts: Sequence[Arr | list[Any] | int], rows: Arr | None, m: int) -> list[Any]:
    """Row-major flat list of a chunk's ``m`` rows (those at ``rows`` when
    given): numpy arrays, lists, or constants repeated on every row. Built by
    strided slice assignment, never as row tuples."""
    k = len(parts)
    if all(isinstance(p, int) or (isinstance(p, np.ndarray) and p.dtype.kind in "iub")
           for p in parts):
        block = np.empty((m, k), dtype=np.int64)
        for j, part in enumerate(parts):
            block[:, j] = part if rows is None or isinstance(part, int) else part[rows]
        return block.ravel().tolist()
    flat: list[Any] = [None] * (m * k)
    for j, part in enumerate(parts):
        if isinstance(part, int):
            flat[j::k] = [part] * m
        elif isinstance(part, np.ndarray):
            flat[j::k] = (part if rows is None else part[rows]).tolist()
        else:
            flat[j::k] = part if rows is None else [part[i] for i in rows.tolist()]
    return flat


def _nulls(conn: Connection, table: Table, columns: Sequence[str], cols: Sequence[Col],
           n: int) -> None:
    """Turn the NULL sentinels of Nullable columns into NULL, on the rows just
    inserted (found by their id range, else by their constant columns)."""
    todo = [name for name, c in zip(columns, cols, strict=True)
            if isinstance(c, Nullable) and bool(c.null.any())]
    if not todo:
        return
    scope: list[ColumnElement[bool]] = []
    for name, c in zip(columns, cols, strict=True):
        if isinstance(c, Seq):
            scope = [table.c[name].between(c.start, c.start + n - 1)]
            break
        if isinstance(c, int) and not isinstance(c, bool):
            scope.append(table.c[name] == c)
    for name in todo:
        conn.execute(table.update().where(*scope, table.c[name] == NULL_SENTINEL)
                     .values({name: None}))


def column_length(col: Col) -> int | None:
    """Rows in a column (None for constants and Seq, which fit any length)."""
    if isinstance(col, (int, Seq)):
        return None
    if isinstance(col, Nullable):
        return len(col.values)
    if isinstance(col, Gather):
        return len(col.index)
    return len(col)


def insert_columns(conn: Connection, table: Table, cols: dict[str, Col],
                   const: dict[str, int] | None = None,
                   advance: Advance | None = None) -> int:
    """Insert equal-length columns plus constant columns (the trace_id)."""
    lengths = {column_length(c) for c in cols.values()} - {None}
    if len(lengths) > 1:
        raise ValueError(f"{table.name}: columns of different lengths {lengths}")
    n = lengths.pop() if lengths else 0
    if not n:
        return 0
    const = const or {}
    names = list(const) + list(cols)
    return insert_arrays(conn, table, names, [*const.values(), *cols.values()], n, advance)


def insert_int_arrays(conn: Connection, table: Table, columns: Sequence[str],
                      cols: Sequence[Col], n: int, advance: Advance | None = None) -> int:
    """Integer columns (no NULL): :func:`insert_arrays`, which takes the binary
    COPY on PostgreSQL and the C binder on SQLite for them."""
    return insert_arrays(conn, table, columns, cols, n, advance)


def _dbapi(conn: Connection) -> Any:
    return conn.connection.driver_connection


def _sqlite_flat(conn: Connection, table: Table, columns: Sequence[str],
                 flat: list[Any], literals: dict[str, int] | None = None) -> None:
    """Insert a flat row-major list of values with multi-row statements
    (``literals``: the same value in every row, written into the SQL)."""
    k = len(columns)
    if not k:
        raise ValueError(f"{table.name}: no columns to bind")
    per = max(1, min(2000, _SQLITE_MAX_VARS // k))
    step = per * k
    cur = _dbapi(conn).cursor()
    try:
        full = (len(flat) // step) * step
        if full:
            sql = insert_sql(table.name, columns, per, literals)
            for i in range(0, full, step):
                cur.execute(sql, flat[i:i + step])
        rest = len(flat) - full
        if rest:
            cur.execute(insert_sql(table.name, columns, rest // k, literals), flat[full:])
    finally:
        cur.close()


def _sqlite_rows(conn: Connection, table: Table, columns: Sequence[str],
                 rows: Iterable[Sequence[Any]], advance: Advance | None) -> int:
    n = 0
    flat: list[Any] = []
    k = len(columns)
    for row in rows:
        flat.extend(row)
        if len(flat) >= _CHUNK * k:
            _sqlite_flat(conn, table, columns, flat)
            n += len(flat) // k
            if advance:
                advance(len(flat) // k)
            flat = []
    if flat:
        _sqlite_flat(conn, table, columns, flat)
        n += len(flat) // k
        if advance:
            advance(len(flat) // k)
    return n


def _copy_sql(table: Table, columns: Sequence[str], binary: bool) -> str:
    cols = ",".join(f'"{c}"' for c in columns)
    fmt = " (FORMAT BINARY)" if binary else ""
    return f'COPY "{table.name}" ({cols}) FROM STDIN{fmt}'


def _pg_copy_rows(conn: Connection, table: Table, columns: Sequence[str],
                  rows: Iterable[Sequence[Any]], advance: Advance | None) -> int:
    n = 0
    cur = _dbapi(conn).cursor()
    try:
        with cur.copy(_copy_sql(table, columns, False)) as cp:
            for row in rows:
                cp.write_row(row)
                n += 1
                if advance and n % _CHUNK == 0:
                    advance(_CHUNK)
    finally:
        cur.close()
    if advance:
        advance(n % _CHUNK)
    return n


def _pg_binary_ok(table: Table, columns: Sequence[str], cols: Sequence[Col]) -> bool:
    """Whether binary COPY takes these columns: integer columns of the table,
    given as numpy integers (or ids, constants), without NULLs."""
    for name, col in zip(columns, cols, strict=True):
        if not isinstance(table.c[name].type, tuple(_PG_BINARY)):
            return False
        if isinstance(col, (int, Seq)):
            continue
        if isinstance(col, Nullable) and bool(col.null.any()):
            return False
        values = col.values if isinstance(col, (Gather, Nullable)) else col
        if not (isinstance(values, np.ndarray) and values.dtype.kind in "iu"):
            return False
    return True


def _pg_copy_columns(conn: Connection, table: Table, columns: Sequence[str],
                     cols: Sequence[Col], n: int, advance: Advance | None) -> int:
    """``COPY ... (FORMAT csv)`` of column-wise rows, each chunk written as CSV by
    Arrow's C++ writer: NULL is an unquoted empty field, an empty string a quoted
    one, as PostgreSQL's CSV format reads them. (Through psycopg's ``write_row``
    every value was formatted by Python: on the 200 MB trace the text COPYs of
    regions, metrics, logs and goroutines took 13 s.)"""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.csv as pacsv  # type: ignore[import-untyped]

    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    names = [str(i) for i in range(len(columns))]
    cur = _dbapi(conn).cursor()
    try:
        with cur.copy(_copy_sql(table, columns, False).replace(
                "FROM STDIN", "FROM STDIN (FORMAT csv)")) as cp:
            for a in range(0, n, _CHUNK):
                b = min(n, a + _CHUNK)
                arrays = [_arrow_part(col, a, b) for col in cols]
                sink = pa.BufferOutputStream()
                pacsv.write_csv(pa.table(arrays, names=names), sink, options)
                cp.write(memoryview(sink.getvalue()))
                del arrays, sink
                if advance:
                    advance(b - a)
    finally:
        cur.close()
    return n


def _arrow_part(col: Col, a: int, b: int) -> Any:
    """Rows ``[a, b)`` of ``col`` as an Arrow array (NULLs masked)."""
    import pyarrow as pa

    if isinstance(col, Nullable):
        return pa.array(col.values[a:b], mask=np.asarray(col.null[a:b], dtype=bool))
    chunk = _chunk(col, a, b)
    if isinstance(chunk, int):
        return pa.array(np.full(b - a, chunk, dtype=np.int64))
    if isinstance(chunk, np.ndarray) and chunk.dtype != object:
        return pa.array(chunk)
    arr = pa.array(chunk.tolist() if isinstance(chunk, np.ndarray) else list(chunk))
    if pa.types.is_string(arr.type):
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        # PostgreSQL text cannot hold NUL: U+FFFD, as the connection's str
        # dumper does for every other statement (ingest.store.db).
        arr = pc.replace_substring(arr, "\x00", "\ufffd")
    return arr


# Most derived first: BigInteger and SmallInteger are subclasses of Integer.
_PG_BINARY = {BigInteger: ">i8", SmallInteger: ">i2", Integer: ">i4"}


def _pg_copy_binary(conn: Connection, table: Table, columns: Sequence[str],
                    cols: Sequence[Col], n: int, advance: Advance | None) -> int:
    """COPY integer columns in PostgreSQL's binary format, built with numpy."""
    fields: list[tuple[str, str]] = [("nf", ">i2")]
    for c in columns:
        typ = type(table.c[c].type)
        code = next(v for k, v in _PG_BINARY.items() if issubclass(typ, k))
        fields += [(f"l_{c}", ">i4"), (f"v_{c}", code)]
    dt = np.dtype(fields)
    cur = _dbapi(conn).cursor()
    try:
        with cur.copy(_copy_sql(table, columns, True)) as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            for a in range(0, n, _CHUNK):
                b = min(n, a + _CHUNK)
                rec = np.empty(b - a, dtype=dt)
                rec["nf"] = len(columns)
                for c, col in zip(columns, cols, strict=True):
                    rec[f"l_{c}"] = dt[f"v_{c}"].itemsize
                    rec[f"v_{c}"] = _chunk(col, a, b)
                cp.write(rec.tobytes())
                if advance:
                    advance(b - a)
            cp.write(b"\xff\xff")
    finally:
        cur.close()
    return n
