"""PostgreSQL: the biggest coded event tables kept as chunk rows of arrays.

``metric_rows`` and ``region_rows`` (ingest.store.coded_models) hold millions
of rows of a big trace (3.3 M and 3.1 M of the 200 MB benchmark trace): as heap
rows with a primary-key entry each they took 740 MB of its 1.7 GB database and
11 s of its load's COPY; from revision 0020 the goroutine, task and range rows
and ``transition_stacks`` (202 of the 970 MB left) join them, and from 0021
``log_rows`` (1.46 M rows: 161 MB and a 44 MB key index as rows, 31 MB as
chunks). On PostgreSQL
each is kept, as the intervals are
(ingest.store.pg_chunks, whose rows per chunk, NULL inside an integer array and
lz4 compression it shares), as chunk rows: up to :data:`CHUNK` consecutive rows
of one trace in one row, every column an array (``bigint[]``, ``integer[]``,
``text[]``). A chunk is keyed by its trace and the key of its first row
(``first_seq``, ``first_id``, ``first_goid``...); its rows are the rows as the
loader gave them, in order, cut every CHUNK rows of the trace's table (the same
chunks however the loader cut it into parts). The tables keep their names as
views with their columns (a row per array position), so the coded views,
:class:`~ingest.store.coded_models.CodedQuery` and users' SQL read them as
before, and gmpscope's readers of a few rows by key read them through
:func:`keyed_sql`'s functions (ingest.store.coded_models.rows_by_key).

Inside an integer array, a NULL is its type's lowest value (:data:`NULL_VALUE`
in a ``bigint[]``; the view turns it back);
a column that is NULL on every row of a chunk is a NULL array (a metric's
``value_str`` on Go's new traces). SQLite keeps these tables as rows, or
column files (ingest.store.coded_files).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import BigInteger, Boolean, Connection, Integer, Table, Text

from ingest.columns import Nullable
from ingest.store.coded_models import CODED, PG_CHUNKED, keyed_function, transition_stacks
from ingest.store.pg_chunks import CHUNK, NULL_VALUE, lz4_sql, scalar_rows

Arr = npt.NDArray[Any]

#: The coded views whose tables are chunked, by view name: ``metrics`` and
#: ``regions`` from revision 0017, ``goroutines``, ``tasks`` and ``ranges`` from
#: 0020, ``logs`` from 0021. A reader of some rows by key reads them through the
#: function ``gmpscope_<table>_at(trace, keys)`` (:func:`keyed_sql`), and of a
#: page in key order through :func:`page_sql`: the view would make every row
#: of the trace to find them. (Before revision 0021's views of scalars a query
#: that joined or sorted many rows of a view carried each chunk's decompressed
#: arrays along: the logs page at offset 1,000,000, its 1000 rows joined to the
#: trace's 290 k messages before the page was cut, took 105 s; the page is now
#: cut first, then joined.)
VIEWS = PG_CHUNKED
#: Those of revisions 0017 to 0019.
VIEWS_0017 = ("metrics", "regions")
#: Those of revision 0020.
VIEWS_0020 = (*VIEWS_0017, "goroutines", "tasks", "ranges")
#: Every chunked table, by the name :data:`CHUNKED` gives it: the coded
#: views' and ``transition_stacks`` (from 0020; read by users' SQL only).
ALL = (*VIEWS, "transition_stacks")
#: Every chunked table of revision 0020.
ALL_0020 = (*VIEWS_0020, "transition_stacks")


@dataclass(frozen=True)
class ArrayCol:
    """One column of a chunked table, kept as an array."""

    name: str
    sql: str  # the element's SQL type
    dtype: str  # big-endian numpy type in COPY's binary format ("" for text)
    oid: int  # the element type's oid
    nullable: bool

    @property
    def null(self) -> int:
        """What stands for NULL inside the array: its type's lowest value."""
        return NULL_VALUE if self.sql == "bigint" else -(2**31)


@dataclass(frozen=True)
class CodedChunks:
    """A coded table kept in chunks: the table (now a view of the same name),
    its chunk table, the key column and its arrays."""

    table: Table
    chunks: str
    key: str
    arrays: tuple[ArrayCol, ...]

    @property
    def first(self) -> str:
        """The chunk table's key column: the key of the chunk's first row."""
        return f"first_{self.key}"


def _array_col(c: Any) -> ArrayCol:
    if isinstance(c.type, Boolean):
        return ArrayCol(c.name, "boolean", "?", 16, bool(c.nullable))
    if isinstance(c.type, BigInteger):
        return ArrayCol(c.name, "bigint", ">i8", 20, bool(c.nullable))
    if isinstance(c.type, Integer):
        return ArrayCol(c.name, "integer", ">i4", 23, bool(c.nullable))
    if isinstance(c.type, Text):
        return ArrayCol(c.name, "text", "", 25, bool(c.nullable))
    raise TypeError(f"{c.name}: no array form for {c.type}")


def _chunked(name: str) -> CodedChunks:
    table = CODED[name].table if name in CODED else transition_stacks
    key = next(c.name for c in table.primary_key.columns if c.name != "trace_id")
    arrays = tuple(_array_col(c) for c in table.columns if c.name != "trace_id")
    return CodedChunks(table, table.name.removesuffix("_rows").removesuffix("s") + "_chunks",
                       key, arrays)


#: By coded view name.
CHUNKED: dict[str, CodedChunks] = {v: _chunked(v) for v in ALL}
#: By the name of the table they replace (metric_rows, ...).
BY_TABLE: dict[str, CodedChunks] = {c.table.name: c for c in CHUNKED.values()}


# --------------------------------------------------------------------------
# schema


def _table_sql(c: CodedChunks) -> str:
    arrays = ", ".join(f"{a.name} {a.sql}[]" + ("" if a.sql == "text" else " NOT NULL")
                       for a in c.arrays)
    return (f"CREATE TABLE {c.chunks} (trace_id INTEGER NOT NULL, {c.first} BIGINT NOT NULL, "
            f"{arrays}, CONSTRAINT {c.chunks}_pkey PRIMARY KEY (trace_id, {c.first}))")


def _detoasted(c: CodedChunks, lateral: bool = True) -> str:
    """SQL: the LATERAL subquery ``cd`` of chunk ``c``'s arrays, each detoasted
    once (``a || '{}'``, as ingest.store.pg_chunks does), only those a query
    reads (OFFSET 0 keeps the subquery whole for the planner to prune);
    without ``lateral``, the subquery alone."""
    flat = ", ".join(f"c.{a.name} || '{{}}'::{a.sql}[] AS {a.name}" for a in c.arrays)
    sub = f"(SELECT {flat} OFFSET 0)"
    return f"CROSS JOIN LATERAL {sub} cd" if lateral else sub


def _row(c: CodedChunks, at: str) -> list[str]:
    """SQL: the table's columns (but trace_id) at array position ``at`` of ``cd``."""
    out = []
    for a in c.arrays:
        v = f"cd.{a.name}[{at}]"
        out.append(f"NULLIF({v}, {a.null})" if a.nullable and a.sql != "text" else v)
    return out


def view_sql(c: CodedChunks, scalars: bool = True, pruned: bool = True) -> str:
    """The SELECT of the view in place of the table: a row per array position,
    the table's columns in its order (:func:`_detoasted`, :func:`_row`).

    ``scalars`` (revision 0021): each row's values are taken from the arrays
    inside a subquery the planner keeps whole (OFFSET 0), so what leaves it
    is scalars. Taken in the view's own select list, the subscripts are
    evaluated wherever the planner puts them, often after a join or a sort,
    which then carry every row's chunk arrays along: exporting the 200 MB
    trace's 1.46 M logs, joined to their 290 k messages and sorted, wrote
    33 GB of temporary files and took 114 s, against 8.4 s this way.

    ``pruned`` (revision 0022): the subquery of pg_chunks.scalar_rows, which
    detoasts only the arrays a query reads (0021's detoasted every one) and
    takes the query's conditions in (an OFFSET 0 kept them out)."""
    cols = [f"{v} AS {a.name}" for v, a in zip(_row(c, "o"), c.arrays, strict=True)]
    series = f"generate_series(1, cardinality(c.{c.key})) o"
    if not scalars:
        return (f"SELECT c.trace_id, {', '.join(cols)} FROM {c.chunks} c {_detoasted(c)} "
                f"CROSS JOIN LATERAL {series}")
    names = ", ".join(f"u.{a.name}" for a in c.arrays)
    if pruned:
        return (f"SELECT c.trace_id, {names} FROM {c.chunks} c "
                f"{scalar_rows(cols, _detoasted(c, lateral=False), series)}")
    return (f"SELECT c.trace_id, {names} FROM {c.chunks} c {_detoasted(c)} "
            f"CROSS JOIN LATERAL (SELECT {', '.join(cols)} FROM {series} OFFSET 0) u")


def keyed_sql(c: CodedChunks) -> str:
    """CREATE FUNCTION of ``gmpscope_<table>_at(trace, keys)``: trace
    ``trace``'s rows of ``c``'s table (its columns, as the view) whose key is
    one of ``keys`` (``bigint[]``): each key's chunk found through the
    chunks' key (the last whose first key is at or before it), each such
    chunk's arrays decompressed once (500 goroutines by id: 0.27 s one
    chunk per key, 0.03 s this way), a key's row at its position in the key
    array. Plain SQL and STABLE, so that the planner can inline it."""
    cols = _row(c, "p.o")
    returns = ["trace_id integer", *(f"{a.name} {a.sql}" for a in c.arrays)]
    return (f"CREATE FUNCTION {keyed_function(c.table.name)}(integer, bigint[]) "
            # ROWS 10: a few keys, not the 1000 rows a function is guessed to
            # return; the texts are then joined by their key, not by hashing
            # every string of the trace (500 goroutines' rows: 0.10 -> 0.06 s).
            f"RETURNS TABLE ({', '.join(returns)}) LANGUAGE sql STABLE ROWS 10 AS $$ "
            f"SELECT c.trace_id, {', '.join(cols)} FROM ("
            f"SELECT f.first, array_agg(k.key) AS keys FROM (SELECT DISTINCT unnest($2) AS key) k "
            f"CROSS JOIN LATERAL (SELECT c.{c.first} AS first FROM {c.chunks} c "
            f"WHERE c.trace_id = $1 AND c.{c.first} <= k.key ORDER BY c.{c.first} DESC LIMIT 1) f "
            f"GROUP BY f.first) g JOIN {c.chunks} c ON c.trace_id = $1 AND c.{c.first} = g.first "
            f"{_detoasted(c)} CROSS JOIN LATERAL unnest(g.keys) AS kk(key) "
            f"CROSS JOIN LATERAL (SELECT array_position(cd.{c.key}, kk.key) AS o) p "
            "WHERE p.o IS NOT NULL $$")


def page_sql(view: str, trace_id: int, offset: int, limit: int) -> tuple[str, dict[str, int]]:
    """SQL (and its parameters) of trace ``trace_id``'s rows ``offset`` to
    ``offset + limit - 1`` of ``view``'s table in key order, with the view's
    columns: every chunk but a trace's last holds :data:`CHUNK` rows
    (:func:`write_chunks`, :func:`aggregate_sql`), so the rows are in the
    chunks ``offset // CHUNK`` on, found by the chunks' key, and only those
    are decompressed (the logs page at offset 1,000,000 of 1.46 M: 0.70 s
    sorting the view, a few ms this way)."""
    c = CHUNKED[view]
    offset, limit = max(0, offset), max(0, limit)
    within = offset % CHUNK
    cols = [f"{v} AS {a.name}" for v, a in zip(_row(c, "o"), c.arrays, strict=True)]
    sql = (f"SELECT c.trace_id, {', '.join(cols)} FROM (SELECT * FROM {c.chunks} "
           f"WHERE trace_id = :trace ORDER BY {c.first} OFFSET :skip LIMIT :chunks) c "
           f"{_detoasted(c)} CROSS JOIN LATERAL generate_series(1, cardinality(c.{c.key})) o "
           f"ORDER BY c.{c.first}, o OFFSET :within LIMIT :limit")
    return sql, {"trace": trace_id, "skip": offset // CHUNK, "within": within, "limit": limit,
                 "chunks": (within + limit + CHUNK - 1) // CHUNK}


def _chunked_of(views: tuple[str, ...]) -> list[CodedChunks]:
    return [CHUNKED[v] for v in views]


def create_tables(views: tuple[str, ...] = ALL) -> list[str]:
    """The chunk tables' DDL (of the tables of ``views``)."""
    return [s for c in _chunked_of(views) for s in (
        _table_sql(c), lz4_sql(c.chunks, [a.name for a in c.arrays]))]


def create_row_views(views: tuple[str, ...] = ALL, scalars: bool = True,
                     pruned: bool = True) -> list[str]:
    """The views in place of the tables (:func:`view_sql`), each with a rule
    that makes a DELETE from it do nothing (a trace's chunks go with its
    ``traces`` row, by the delete trigger: models.PG_DELETE_ROWS)."""
    return [s for c in _chunked_of(views) for s in (
        f"CREATE VIEW {c.table.name} AS {view_sql(c, scalars, pruned)}",
        f"CREATE RULE {c.table.name}_delete AS ON DELETE TO {c.table.name} DO INSTEAD NOTHING")]


def replace_row_views(views: tuple[str, ...], scalars: bool,
                      pruned: bool = True) -> list[str]:
    """CREATE OR REPLACE of the views of ``views``' tables (:func:`view_sql`)."""
    return [f"CREATE OR REPLACE VIEW {c.table.name} AS {view_sql(c, scalars, pruned)}"
            for c in _chunked_of(views)]


def create_keyed(views: tuple[str, ...] = ALL) -> list[str]:
    """The keyed functions (:func:`keyed_sql`) of the tables of ``views``."""
    return [keyed_sql(c) for c in _chunked_of(views)]


def drop_keyed(views: tuple[str, ...] = ALL) -> list[str]:
    """DROP of the keyed functions of the tables of ``views``."""
    return [f"DROP FUNCTION {keyed_function(c.table.name)}(integer, bigint[])"
            for c in _chunked_of(views)]


def delete_trace_rows(trace: str, views: tuple[str, ...] = ALL) -> list[str]:
    """SQL: delete trace ``trace``'s chunks of every chunk table (of ``views``)."""
    return [f"DELETE FROM {c.chunks} WHERE trace_id = {trace};" for c in _chunked_of(views)]


def aggregate_sql(c: CodedChunks, source: str) -> str:
    """INSERT of the chunks of every row of ``source`` (a table with the
    columns of ``c``'s), CHUNK rows a chunk in key order."""
    aggs = []
    for a in c.arrays:
        v = f"COALESCE({a.name}, {a.null})" if a.nullable and a.sql != "text" else a.name
        aggs.append(f"array_agg({v} ORDER BY {c.key})")
    names = ", ".join(a.name for a in c.arrays)
    return (f"INSERT INTO {c.chunks} (trace_id, {c.first}, {names}) "
            f"SELECT trace_id, min({c.key}), {', '.join(aggs)} FROM (SELECT *, "
            f"(row_number() OVER (PARTITION BY trace_id ORDER BY {c.key}) - 1) / {CHUNK} "
            f"AS cell FROM {source}) r GROUP BY trace_id, cell")


def count_rows(conn: Connection, table: str, trace_id: int) -> int:
    """Trace ``trace_id``'s rows of chunked table ``table`` (metric_rows, ...),
    from the chunks' key arrays (a count(*) of the view makes every row)."""
    c = BY_TABLE[table]
    return int(conn.exec_driver_sql(
        f"SELECT coalesce(sum(cardinality({c.key})), 0) FROM {c.chunks} "
        f"WHERE trace_id = {int(trace_id)}").scalar_one())


# --------------------------------------------------------------------------
# writing

_NULL_FIELD = struct.pack(">i", -1)


def _int_array(values: Arr, a: ArrayCol) -> bytes:
    """An integer array field (length and array_recv's form) of ``values``."""
    rec = np.empty(len(values), dtype=[("l", ">i4"), ("v", a.dtype)])
    rec["l"] = np.dtype(a.dtype).itemsize
    rec["v"] = values
    body = struct.pack(">iiiii", 1, 0, a.oid, len(values), 1) + rec.tobytes()
    return struct.pack(">i", len(body)) + body


def _text_array(values: list[Any]) -> bytes:
    """A text array field of ``values`` (None: NULL), or a NULL field when all are."""
    if all(v is None for v in values):
        return _NULL_FIELD
    items = [_NULL_FIELD if v is None else struct.pack(">i", len(b := str(v).encode())) + b
             for v in values]
    body = struct.pack(">iiiii", 1, int(any(v is None for v in values)), 25, len(values),
                       1) + b"".join(items)
    return struct.pack(">i", len(body)) + body


def _ints(col: Any, n: int, null: int) -> Arr:
    """A loader's integer column as int64 values, NULL as ``null``."""
    if col is None:
        return np.full(n, null, np.int64)
    if isinstance(col, Nullable):
        return np.where(np.asarray(col.null, bool), null,
                        np.asarray(col.values).astype(np.int64, copy=False))
    arr = np.asarray(col)
    if arr.dtype == object:
        return np.array([null if v is None else int(v) for v in arr.tolist()], np.int64)
    return arr.astype(np.int64, copy=False)


def write_chunks(conn: Connection, view: str, trace_id: int, cols: dict[str, Any], n: int,
                 advance: Callable[[int], None] | None = None) -> int:
    """Store ``n`` rows of the coded table of ``view`` (``cols``: its columns,
    as ingest.store.coded_insert.stored_columns gives them; a column left out
    is NULL) as chunk rows by binary COPY, in the caller's transaction; returns
    ``n``. The trace's rows are cut every CHUNK rows: a part after a short
    last chunk fills it first."""
    c = CHUNKED[view]
    given, taken = n, 0
    if not n:
        return 0
    ints = {a.name: _ints(cols.get(a.name), n, a.null) for a in c.arrays if a.sql != "text"}
    texts: dict[str, list[Any] | None] = {
        a.name: None if cols.get(a.name) is None else list(cols[a.name])
        for a in c.arrays if a.sql == "text"}
    head_rows = _take_partial(conn, c, trace_id, int(ints[c.key][0]))
    if head_rows is not None:
        # The part's first rows join the previous part's last chunk, so that a
        # trace's chunks are the same however the loader cut its rows.
        k = taken = len(head_rows[c.key])
        for a in c.arrays:
            old = head_rows[a.name]
            if a.sql != "text":
                ints[a.name] = np.concatenate([np.asarray(old, np.int64), ints[a.name]])
            elif old is not None or texts[a.name] is not None:
                new = texts[a.name]
                texts[a.name] = ([None] * k if old is None else list(old)) + (
                    [None] * n if new is None else new)
        n += k
    key = ints[c.key]
    head = struct.pack(">hii", 2 + len(c.arrays), 4, int(trace_id))
    names = ", ".join(a.name for a in c.arrays)
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        with cur.copy(f"COPY {c.chunks} (trace_id, {c.first}, {names}) FROM STDIN "
                      "(FORMAT BINARY)") as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            out: list[bytes] = []
            for lo in range(0, n, CHUNK):
                hi = min(n, lo + CHUNK)
                out.append(head + struct.pack(">iq", 8, int(key[lo])))
                for a in c.arrays:
                    if a.sql == "text":
                        t = texts[a.name]
                        out.append(_NULL_FIELD if t is None else _text_array(t[lo:hi]))
                    else:
                        out.append(_int_array(ints[a.name][lo:hi], a))
                if len(out) >= 64 * (2 + len(c.arrays)):
                    cp.write(b"".join(out))
                    out = []
                if advance:
                    advance(hi - lo - (taken if lo == 0 else 0))
            cp.write(b"".join(out) + b"\xff\xff")
    finally:
        cur.close()
    return given


def _take_partial(conn: Connection, c: CodedChunks, trace_id: int, first_key: int
                  ) -> dict[str, Any] | None:
    """The trace's last chunk when it holds fewer than CHUNK rows and comes
    before ``first_key``: deleted, its columns returned (lists; a NULL array
    None) to be written again with the next part's rows."""
    row = conn.exec_driver_sql(
        f"SELECT {c.first}, cardinality({c.key}) FROM {c.chunks} WHERE trace_id = "
        f"{int(trace_id)} ORDER BY {c.first} DESC LIMIT 1").first()
    if row is None or int(row[1]) >= CHUNK or int(row[0]) >= first_key:
        return None
    names = ", ".join(a.name for a in c.arrays)
    got = conn.exec_driver_sql(
        f"DELETE FROM {c.chunks} WHERE trace_id = {int(trace_id)} AND {c.first} = "
        f"{int(row[0])} RETURNING {names}").one()
    return {a.name: got[j] for j, a in enumerate(c.arrays)}
