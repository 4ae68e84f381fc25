"""PostgreSQL: the intervals, proc runs and syscalls kept as chunk rows of arrays.

On PostgreSQL each of a trace's millions of intervals cost a heap row and a key
entry: the server's per-row work bounded the load (19.4 M interval rows of the
200 MB busyservice trace took 27 s by binary COPY). Here one row holds up to
:data:`CHUNK` consecutive ids, its columns arrays (``int8[]``...), compressed
with lz4 where the server has it: the per-row cost is paid once per chunk.

Chunks lie on a fixed grid of ids: a chunk never crosses a multiple of
:data:`CHUNK` (ids ``k*CHUNK + 1 .. (k+1)*CHUNK``) nor a trace's id block, so
which chunks hold ids ``lo..hi`` is a range of the key ``first_id``
(:func:`cell_start` of ``lo`` to ``hi``), and the rows a trace stores do not
depend on how the loader cut them into parts (:func:`write_chunks` merges a
part's first chunk into the previous part's last).

The relations readers know keep their names and columns: on PostgreSQL
``interval_rows``, ``proc_run_index`` and ``syscall_outcomes`` are views that
make a row per chunk position (``intervals`` reads them as on SQLite), and
``proc_runs``, ``syscalls`` and ``thread_intervals`` have views of their own
that zip the chunks' arrays (:func:`pg_views`). A view cannot find its rows
by id through the chunks' key, so the readers of an id range call the
functions ``gmpscope_intervals(lo, hi)``, ``gmpscope_proc_runs(lo, hi)`` and
``gmpscope_syscalls(lo, hi)`` (the rows of the views with ids ``lo..hi``;
plain SQL functions, which the planner inlines), or read the arrays
themselves (:func:`read_block`). docs/schema.md.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, column, func

from ingest.columns import Computed, Gather, Nullable, Seq

Arr = npt.NDArray[Any]

#: Ids per chunk (at most). 1024 int8 values are 8 KB, about 1-2 KB once
#: compressed: most arrays stay inline in their row.
CHUNK = 1024
#: A NULL of ``stolen_ts``/``stolen_by_m`` inside an array (the views turn it
#: back into NULL).
NULL_VALUE = -(2**63)
#: ``syscall_outcomes.outcome`` by its code in the chunks.
OUTCOMES = ("returned", "blocked", "exited", "unfinished", "other")


@dataclass(frozen=True)
class ArrayColumn:
    """One array column of a chunk table."""

    name: str
    sql: str  # the element's SQL type
    dtype: str  # big-endian numpy type of an element in COPY's binary format
    oid: int  # the element type's oid


def _i8(name: str) -> ArrayColumn:
    return ArrayColumn(name, "bigint", ">i8", 20)


@dataclass(frozen=True)
class Chunked:
    """A ranged relation kept in chunks: its chunk table, the view named like
    the rows' former table, and the function that reads an id range."""

    chunks: str
    view: str
    function: str
    arrays: tuple[ArrayColumn, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arrays)


#: By row_ranges' name of the relation.
CHUNKED: dict[str, Chunked] = {
    "intervals": Chunked("interval_chunks", "interval_rows", "gmpscope_intervals", (
        _i8("rid"), _i8("start_ts"), _i8("seq"), _i8("end_ts"),
        ArrayColumn("kind", "smallint", ">i2", 21), _i8("m"), _i8("p"), _i8("g"),
        _i8("stack_id"))),
    "proc_runs": Chunked("proc_run_chunks", "proc_run_index", "gmpscope_proc_runs",
                         (_i8("interval_id"),)),
    "syscalls": Chunked("syscall_chunks", "syscall_outcomes", "gmpscope_syscalls", (
        _i8("interval_id"), ArrayColumn("start_known", "boolean", "?", 16),
        ArrayColumn("outcome", "smallint", ">i2", 21),
        ArrayColumn("p_lost", "boolean", "?", 16), _i8("stolen_ts"), _i8("stolen_by_m"))),
}
#: The chunk table of each view that replaced a table.
BY_VIEW = {c.view: c for c in CHUNKED.values()}


def cell_start(first: str) -> str:
    """SQL: the first id of the grid cell of id ``first`` (an SQL expression)."""
    return f"((({first}) - 1) / {CHUNK}) * {CHUNK} + 1"


def _flat(c: Chunked, alias: str, names: Sequence[str], name: str = "") -> str:
    """SQL: a LATERAL subquery ``name`` (``<alias>d``) holding the arrays ``names`` of chunk
    ``alias`` decompressed once. A stored array is compressed (or TOASTed out
    of line): a subscript of the stored value decompresses the whole array
    each time, but ``a || '{}'`` returns it detoasted (array_cat hands back its
    first argument when the second is empty), so each element is then read in
    place. OFFSET 0 keeps the subquery whole, so that the planner drops the
    arrays a query does not use (``count(*)`` decompresses one array)."""
    types = {a.name: a.sql for a in c.arrays}
    cols = ", ".join(f"{alias}.{x} || '{{}}'::{types[x]}[] AS {x}" for x in names)
    return f"CROSS JOIN LATERAL (SELECT {cols} OFFSET 0) {name or alias + 'd'}"


def _count_array(c: Chunked) -> str:
    """The array whose length is the chunk's: the smallest to decompress."""
    return min(c.arrays, key=lambda a: np.dtype(a.dtype).itemsize).name


def _value(c: Chunked, name: str, arr: str, at: str) -> str:
    """SQL: the view's value of array column ``name`` (``arr``, an array
    expression) at position ``at``."""
    v = f"{arr}[{at}]"
    if name == "outcome":
        names = ", ".join(f"'{o}'" for o in OUTCOMES)
        return f"(ARRAY[{names}]::varchar(16)[])[{v} + 1]"
    if name.startswith("stolen_"):
        return f"NULLIF({v}, {NULL_VALUE})"
    return v


def _rows_sql(c: Chunked, where: str = "") -> str:
    """The SELECT of the rows of chunk table ``c`` (view columns), a row per
    element: generate_series over the positions (estimated 1000 rows a chunk,
    where unnest guesses 10; no tuplestore of unnest WITH ORDINALITY, which
    made a count(*) of the 200 MB trace's intervals take 14 s, now 1.7 s)."""
    cols = ", ".join(f"{_value(c, x, f'cd.{x}', 'o')} AS {x}" for x in c.names)
    return (f"SELECT c.first_id + o - 1 AS id, c.trace_id, {cols} FROM {c.chunks} c "
            f"{_flat(c, 'c', c.names)} "
            f"CROSS JOIN LATERAL generate_series(1, cardinality(c.{_count_array(c)})) o"
            + (f" WHERE {where}" if where else ""))


def view_sql(c: Chunked) -> str:
    """The SELECT of the view over a chunk table (every trace's rows)."""
    return _rows_sql(c)


def _range_rows(c: Chunked) -> str:
    """The chunk table's rows with ids $1..$2 (only the chunks that hold them)."""
    return _rows_sql(c, f"c.first_id BETWEEN {cell_start('$1')} AND $2 "
                        "AND c.first_id + o - 1 BETWEEN $1 AND $2")


RUN_COLUMNS = (("p", "p"), ("start_ts", "start_ts"), ("end_ts", "end_ts"), ("rid", "g"),
                ("m", "m"), ("seq", "seq"))
SYSCALL_COLUMNS = (("rid", "goid"), ("start_ts", "start_ts"), ("seq", "seq"),
                    ("end_ts", "end_ts"), ("m", "m"), ("p", "p"), ("stack_id", "stack_id"))


_I8 = "bigint"
#: The columns each range function returns: those of the views intervals,
#: proc_runs and syscalls.
RETURNS: dict[str, tuple[tuple[str, str], ...]] = {
    "intervals": (("id", _I8), ("trace_id", "integer"), ("rid", _I8), ("start_ts", _I8),
                  ("seq", _I8), ("end_ts", _I8), ("kind", "smallint"), ("m", _I8),
                  ("p", _I8), ("g", _I8), ("stack_id", _I8)),
    "proc_runs": (("id", _I8), ("trace_id", "integer"), ("p", _I8), ("start_ts", _I8),
                  ("end_ts", _I8), ("g", _I8), ("m", _I8), ("seq", _I8)),
    "syscalls": (("id", _I8), ("trace_id", "integer"), ("goid", _I8), ("start_ts", _I8),
                 ("seq", _I8), ("end_ts", _I8), ("duration_ns", _I8), ("m", _I8), ("p", _I8),
                 ("start_known", "boolean"), ("outcome", "varchar"), ("p_lost", "boolean"),
                 ("stolen_ts", _I8), ("stolen_by_m", _I8), ("stack_id", _I8)),
}


def _zipped(name: str, where: str = "") -> str:
    """The SELECT of the rows of ``proc_runs`` or ``syscalls`` (``name``)
    from their chunks zipped with the interval chunks they point into.

    Chunk by chunk: the grid cells its interval ids fall in (a few: a chunk
    holds a P's consecutive runs, a stretch of syscalls), each cell's interval
    chunk found by the key and decompressed once, its elements joined to the
    chunk's by cell (a hash join of ~1000 rows). Joining the views by id
    instead read every interval, or a chunk per row (minutes for a
    whole-trace query of the 200 MB trace's syscalls)."""
    c = CHUNKED[name]
    ivc = CHUNKED["intervals"]
    picks = RUN_COLUMNS if name == "proc_runs" else SYSCALL_COLUMNS
    own = [x for x in c.names if x != "interval_id"]
    k = "(sd.interval_id[o] - d.first_id + 1)"
    inner = [f"d.{src}[{k}] AS {out}" for src, out in picks]
    inner += [f"{_value(c, x, f'sd.{x}', 'o')} AS {x}" for x in own]
    cell = f"(sd.interval_id[o] - 1) / {CHUNK}"
    zipped = (
        f"SELECT s.first_id + o - 1 AS id, {', '.join(inner)} "
        f"FROM (SELECT cl.cell, ic.* FROM (SELECT DISTINCT {cell} AS cell "
        "FROM generate_series(1, cardinality(sd.interval_id)) o) cl "
        "CROSS JOIN LATERAL (SELECT ic.first_id, "
        + ", ".join(f"ic.{src} || '{{}}'::bigint[] AS {src}" for src, _ in picks)
        + f" FROM {ivc.chunks} ic WHERE ic.first_id BETWEEN cl.cell * {CHUNK} + 1 "
        # "+ 0": the trace checked on the key's row, never through the trace
        # index (without statistics, just after a load, the planner ANDed
        # the trace's whole index in for each cell: 186 s for count(*) of
        # the 200 MB trace's proc_runs, 5 s this way).
        f"AND cl.cell * {CHUNK} + {CHUNK} AND ic.trace_id + 0 = s.trace_id "
        "ORDER BY ic.first_id LIMIT 1) ic OFFSET 0) d "
        "JOIN generate_series(1, cardinality(sd.interval_id)) o "
        f"ON {cell} = d.cell AND sd.interval_id[o] >= d.first_id "
        f"AND sd.interval_id[o] < d.first_id + cardinality(d.{picks[0][0]})")
    if name == "proc_runs":
        out = "z.id, s.trace_id, z.p, z.start_ts, z.end_ts, z.g, z.m, z.seq"
    else:
        out = ("z.id, s.trace_id, z.goid, z.start_ts, z.seq, z.end_ts, "
               "z.end_ts - z.start_ts AS duration_ns, z.m, z.p, z.start_known, z.outcome, "
               "z.p_lost, z.stolen_ts, z.stolen_by_m, z.stack_id")
    # The id range filters the zipped rows outside: inside, it made the
    # planner guess 5 positions a chunk and loop over the cells for each.
    chunk_where = (f" WHERE s.first_id BETWEEN {cell_start('$1')} AND $2 AND {where}"
                   if where else "")
    return (f"SELECT {out} FROM {c.chunks} s {_flat(c, 's', c.names)} "
            f"CROSS JOIN LATERAL ({zipped} OFFSET 0) z{chunk_where}")


def _thread_intervals() -> str:
    """The SELECT of ``thread_intervals`` from the interval chunks: each
    trace's goroutine Running and Syscall kinds looked up once a chunk (as
    arrays; the view's join of ``transition_counts`` by kind made the server
    unnest every interval once per kind), the rows filtered by ``kind`` and
    ``m`` as they are made."""
    c = CHUNKED["intervals"]
    state = ("CASE WHEN cd.kind[o] = ANY(ks.running) THEN 'Running' "
             "ELSE 'Syscall' END::varchar(16)")
    return (
        f"SELECT c.trace_id, cd.m[o] AS m, {state} AS state, cd.rid[o] AS g, cd.p[o] AS p, "
        f"cd.start_ts[o] AS start_ts, cd.end_ts[o] AS end_ts, cd.seq[o] AS seq "
        f"FROM {c.chunks} c "
        "CROSS JOIN LATERAL (SELECT array_agg(k.kind) FILTER (WHERE k.to_state = 'Running') "
        "AS running, array_agg(k.kind) AS kinds FROM transition_counts k "
        "WHERE k.trace_id = c.trace_id AND k.resource = 'goroutine' "
        "AND k.to_state IN ('Running', 'Syscall')) ks "
        f"{_flat(c, 'c', ('kind', 'm', 'rid', 'p', 'start_ts', 'end_ts', 'seq'))} "
        f"CROSS JOIN LATERAL generate_series(1, cardinality(c.{_count_array(c)})) o "
        "WHERE cd.kind[o] = ANY(ks.kinds) AND cd.m[o] <> -1")


def thread_rows_sql(cols: Sequence[str], *, m: bool, t1: bool, t2: bool, g: bool,
                    running: bool) -> str:
    """SQL: ``id`` and columns ``cols`` (of ``intervals``) of trace ``:t``'s goroutine
    Running (``running``) or Running and Syscall intervals on an M (the
    ``thread_intervals`` rows), filtered by ``m = :m``, ``end_ts > :t1``,
    ``start_ts < :t2``, ``rid = :g`` as asked; in no order.

    In two passes over each chunk: the positions that pass the filters, from
    the filters' arrays only (``array_positions`` for an M), then the asked
    columns at those positions, decompressed only in chunks with a row (the
    view decompresses every column of every chunk)."""
    c = CHUNKED["intervals"]
    states = "= 'Running'" if running else "IN ('Running', 'Syscall')"
    conds = ["f.kind[o] = ANY(ks.kinds)"]
    need = ["kind"]
    for on, col, cond in ((not m, "m", "f.m[o] <> -1"), (t1, "end_ts", "f.end_ts[o] > :t1"),
                          (t2, "start_ts", "f.start_ts[o] < :t2"), (g, "rid", "f.rid[o] = :g")):
        if on:
            need.append(col)
            conds.append(cond)
    pos = ("unnest(array_positions(c.m, CAST(:m AS bigint)))" if m
           else f"generate_series(1, cardinality(c.{_count_array(c)}))")
    out = ", ".join(["c.first_id + o - 1 AS id", *(f"od.{x}[o] AS {x}" for x in cols)])
    return (
        f"SELECT {out} FROM {c.chunks} c "
        "CROSS JOIN LATERAL (SELECT array_agg(k.kind) AS kinds FROM transition_counts k "
        f"WHERE k.trace_id = c.trace_id AND k.resource = 'goroutine' AND k.to_state {states}) ks "
        f"CROSS JOIN LATERAL (SELECT array_agg(o) AS pos FROM (SELECT "
        + ", ".join(f"c.{x} || '{{}}'::{'smallint' if x == 'kind' else 'bigint'}[] AS {x}"
                    for x in need)
        + f" OFFSET 0) f, {pos} o WHERE {' AND '.join(conds)}) hit "
        f"{_flat(c, 'c', cols, 'od')} "
        "CROSS JOIN LATERAL unnest(hit.pos) o "
        "WHERE c.trace_id = :t AND hit.pos IS NOT NULL")


def pg_views() -> dict[str, str]:
    """PostgreSQL's own SELECTs of the views ``proc_runs`` and ``syscalls``
    (the chunks zipped, :func:`_zipped`) and ``thread_intervals``
    (:func:`_thread_intervals`), made instead of the shared ones
    (ingest.store.models.VIEWS), which join ``intervals``."""
    return {**{name: _zipped(name) for name in ("proc_runs", "syscalls")},
            "thread_intervals": _thread_intervals()}


def _function_body(name: str) -> str:
    """The body of the range function of ``name``."""
    if name == "intervals":
        return _range_rows(CHUNKED[name])
    return _zipped(name, "z.id BETWEEN $1 AND $2")


def _at(table: str, column: str, at: str) -> str:
    """SQL: the value of ``column`` of the row with id ``at`` of a chunk table,
    by subscript (only that column's array is read)."""
    return (f"(SELECT c.{column}[({at}) - c.first_id + 1] FROM {table} c "
            f"WHERE c.first_id BETWEEN {cell_start(at)} AND ({at}) "
            "ORDER BY c.first_id DESC LIMIT 1)")


def start_ts_at(name: str, at: str) -> str:
    """SQL: ``start_ts`` of the row with id ``at`` (an SQL expression) of
    ``intervals`` or ``proc_runs``: one array element (two for a proc run, its
    interval's id first), not a chunk unnested."""
    if name == "proc_runs":
        at = _at("proc_run_chunks", "interval_id", at)
    return _at("interval_chunks", "start_ts", at)


def function_sql(name: str, body: str | None = None) -> str:
    """CREATE FUNCTION of ``gmpscope_<name>(lo, hi)``: the rows of the view
    ``name`` with ids lo..hi (``body``: its SELECT, this revision's by
    default). Plain SQL and STABLE, so that the planner inlines it into the
    caller's query (its bounds then reach the chunks' key)."""
    returns = ", ".join(f"{c} {t}" for c, t in RETURNS[name])
    return (f"CREATE FUNCTION {CHUNKED[name].function}(bigint, bigint) "
            f"RETURNS TABLE ({returns}) LANGUAGE sql STABLE AS "
            f"$$ {_function_body(name) if body is None else body} $$")


def _table_sql(c: Chunked) -> str:
    arrays = ", ".join(f"{a.name} {a.sql}[] NOT NULL" for a in c.arrays)
    return (f"CREATE TABLE {c.chunks} (first_id BIGINT NOT NULL, trace_id INTEGER NOT NULL, "
            f"{arrays}, CONSTRAINT {c.chunks}_pkey PRIMARY KEY (first_id))")


def lz4_sql(table: str, columns: Sequence[str]) -> str:
    """SQL: ``columns`` of chunk table ``table`` compressed with lz4 where the
    server has it."""
    # lz4 (PostgreSQL 14 and later, when built with it) compresses and reads
    # several times faster than the default pglz: the 200 MB trace's
    # intervals took 23 s to store with pglz, 7 s with lz4. Elsewhere the
    # default stays.
    sets = ", ".join(f"ALTER COLUMN {x} SET COMPRESSION lz4" for x in columns)
    return (f"DO $$ BEGIN EXECUTE 'ALTER TABLE {table} {sets}'; "
            "EXCEPTION WHEN OTHERS THEN NULL; END $$")


def create_tables() -> list[str]:
    """The chunk tables' DDL. Indexed by trace too: a trace's chunks are
    deleted by it (a few thousand index entries a trace, not millions)."""
    return [s for c in CHUNKED.values() for s in (
        _table_sql(c), lz4_sql(c.chunks, c.names),
        f"CREATE INDEX ix_{c.chunks}_trace_id ON {c.chunks} (trace_id)")]


def create_row_views() -> list[str]:
    """The views in place of the former row tables (interval_rows, proc_run_index,
    syscall_outcomes), in that order. A DELETE of their rows does nothing
    (ingest.load.delete deletes from every trace table): a trace's chunks go
    with its ``traces`` row, by the delete trigger (models.PG_DELETE_ROWS)."""
    return [s for c in CHUNKED.values() for s in (
        f"CREATE VIEW {c.view} AS {view_sql(c)}", delete_rule(c))]


def delete_rule(c: Chunked) -> str:
    """The rule that makes a DELETE from ``c``'s view do nothing."""
    return f"CREATE RULE {c.view}_delete AS ON DELETE TO {c.view} DO INSTEAD NOTHING"


def create_functions() -> list[str]:
    """The range functions."""
    return [function_sql(name) for name in CHUNKED]


def delete_trace_rows(trace: str) -> list[str]:
    """SQL: delete trace ``trace``'s chunks of every chunk table."""
    return [f"DELETE FROM {c.chunks} WHERE trace_id = {trace};" for c in CHUNKED.values()]


# --------------------------------------------------------------------------
# writing


def _values(col: Any, dtype: str, n: int) -> Arr:
    arr = np.asarray(col)
    if len(arr) != n:
        raise ValueError(f"a column of {len(arr)} rows, not {n}")
    return arr


def _records(arrays: Sequence[ArrayColumn], cols: dict[str, Arr], a: int, k: int,
             size: int, first: int, trace_id: int) -> bytes:
    """``k`` chunk rows of ``size`` values each, the first at row ``a`` of
    ``cols`` with id ``first``, in COPY's binary format."""
    fields: list[tuple[Any, ...]] = [("nf", ">i2"), ("l_id", ">i4"), ("id", ">i8"),
                                     ("l_trace", ">i4"), ("trace", ">i4")]
    for j, ac in enumerate(arrays):
        fields += [(f"l{j}", ">i4"), (f"h{j}", ">i4", (5,)),
                   (f"v{j}", [("l", ">i4"), ("v", ac.dtype)], (size,))]
    rec = np.empty(k, dtype=np.dtype(fields))
    rec["nf"] = 2 + len(arrays)
    rec["l_id"] = 8
    rec["id"] = first + np.arange(k, dtype=np.int64) * size
    rec["l_trace"] = 4
    rec["trace"] = trace_id
    for j, ac in enumerate(arrays):
        item = np.dtype(ac.dtype).itemsize
        rec[f"l{j}"] = 20 + size * (4 + item)
        rec[f"h{j}"] = (1, 0, ac.oid, size, 1)
        v = rec[f"v{j}"]
        v["l"] = item
        v["v"] = cols[ac.name][a:a + k * size].reshape(k, size)
    return rec.tobytes()


def _from_send(data: bytes, ac: ArrayColumn) -> Arr:
    """An array's values from its binary form (array_send)."""
    n = struct.unpack_from(">i", data, 12)[0] if len(data) > 12 else 0
    rec = np.frombuffer(data, dtype=[("l", ">i4"), ("v", ac.dtype)], count=n, offset=20)
    return rec["v"]


def _take_head(conn: Connection, c: Chunked, trace_id: int, first: int
               ) -> tuple[int, dict[str, Arr]] | None:
    """The previous part's last chunk when ``first`` continues its grid cell:
    deleted, its (first id, values) returned to be written again with the
    part's first rows."""
    if (first - 1) % CHUNK == 0:
        return None
    sends = ", ".join(f"array_send({a.name})" for a in c.arrays)
    row = conn.exec_driver_sql(
        f"DELETE FROM {c.chunks} WHERE first_id BETWEEN {(first - 1) // CHUNK * CHUNK + 1} "
        f"AND {first - 1} AND trace_id = {int(trace_id)} RETURNING first_id, {sends}").first()
    if row is None:
        return None
    values = {a.name: _from_send(bytes(row[j + 1]), a) for j, a in enumerate(c.arrays)}
    if int(row[0]) + len(values[c.arrays[0].name]) != first:
        raise ValueError(f"{c.chunks}: the chunk at {row[0]} does not end before {first}")
    return int(row[0]), values


def write_chunks(conn: Connection, name: str, trace_id: int, first: int,
                 cols: dict[str, Arr], n: int, advance: Callable[[int], None] | None = None
                 ) -> int:
    """Store ``n`` rows of ``name`` with ids ``first``.. (``cols``: one array
    per array column, NULLs as :data:`NULL_VALUE`) as chunk rows by binary
    COPY, in the caller's transaction; returns ``n``."""
    c = CHUNKED[name]
    if not n:
        return 0
    values = {a.name: _values(cols[a.name], a.dtype, n) for a in c.arrays}
    head = _take_head(conn, c, trace_id, first)
    if head is not None:
        first, old = head
        values = {k: np.concatenate([old[k].astype(v.dtype, copy=False), v])
                  for k, v in values.items()}
    total = len(values[c.arrays[0].name])
    # Row counts of the chunks: up to the grid's next multiple, then whole
    # cells, then the rest.
    lead = min(total, (-(first - 1)) % CHUNK)
    whole = (total - lead) // CHUNK
    tail = total - lead - whole * CHUNK
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cols_sql = ", ".join(("first_id", "trace_id", *c.names))
    try:
        with cur.copy(f"COPY {c.chunks} ({cols_sql}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            if lead:
                cp.write(_records(c.arrays, values, 0, 1, lead, first, trace_id))
            step = 64  # chunk rows per message
            for a in range(0, whole, step):
                k = min(step, whole - a)
                cp.write(_records(c.arrays, values, lead + a * CHUNK, k, CHUNK,
                                  first + lead + a * CHUNK, trace_id))
                if advance:
                    advance(k * CHUNK)
            if tail:
                at = lead + whole * CHUNK
                cp.write(_records(c.arrays, values, at, 1, tail, first + at, trace_id))
            cp.write(b"\xff\xff")
    finally:
        cur.close()
    if advance:
        advance(n - whole * CHUNK)
    return n


#: Rows per COPY of a loader's table: what one part's columns take (8 bytes a
#: row each).
PART = 1 << 20


def store_table(conn: Connection, trace_id: int, name: str, cols: dict[str, Any], n: int,
                interval_base: int, advance: Callable[[int], None] | None = None) -> None:
    """Store the loader's next ``n`` rows of ``name`` (intervals, proc_runs or
    syscalls: the derived columns, an ``id`` Seq among them; a proc run's and
    a syscall's ``interval_row`` its row in the trace's intervals, whose ids
    start at ``interval_base``) as chunk rows, a part at a time."""
    first = cols["id"]
    if not isinstance(first, Seq):
        raise TypeError(f"{name}: rows without consecutive ids")
    cols = dict(cols)
    if name != "intervals":
        row = cols["interval_row"]

        def interval_id(a: int, b: int) -> Arr:
            return np.asarray(row[a:b], np.int64) + interval_base

        cols["interval_id"] = Computed(interval_id, n)
    if name == "syscalls":
        outcome = cols["outcome"]
        if not (isinstance(outcome, Gather) and tuple(outcome.values.tolist()) == OUTCOMES):
            raise ValueError("the syscalls' outcomes are not pg_chunks.OUTCOMES")
        cols["outcome"] = outcome.index
    for a in range(0, n, PART):
        b = min(n, a + PART)
        part = {x: _part(cols[x], a, b) for x in CHUNKED[name].names}
        write_chunks(conn, name, trace_id, first.start + a, part, b - a, advance)
        del part


def _part(col: Any, a: int, b: int) -> Arr:
    """Rows a..b-1 of a loader's column as an array (NULL as NULL_VALUE)."""
    if isinstance(col, Computed):
        return col.chunk(a, b)
    if isinstance(col, Gather):
        return col.values[col.index[a:b]]
    if isinstance(col, Nullable):
        return np.where(col.null[a:b], NULL_VALUE,
                        np.asarray(col.values[a:b]).astype(np.int64, copy=False))
    return np.asarray(col[a:b])


def last_id(conn: Connection, name: str) -> int:
    """The largest id stored in ``name``'s chunks (0: none)."""
    c = CHUNKED[name]
    row = conn.exec_driver_sql(
        f"SELECT first_id + cardinality({c.arrays[0].name}) - 1 FROM {c.chunks} "
        "ORDER BY first_id DESC LIMIT 1").first()
    return 0 if row is None else int(row[0])


# --------------------------------------------------------------------------
# reading


def read_block(conn: Connection, name: str, cols: Sequence[str], lo: int, hi: int
               ) -> dict[str, Arr]:
    """Columns ``cols`` (array columns of ``name``'s chunks) of ids lo..hi, in
    id order, read as the arrays' binary form: each chunk's values at once."""
    c = CHUNKED[name]
    by_name = {a.name: a for a in c.arrays}
    sends = ", ".join(f"array_send({x})" for x in cols)
    parts: dict[str, list[Arr]] = {x: [] for x in cols}
    firsts: list[int] = []
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(f"SELECT first_id, {sends} FROM {c.chunks} "
                    f"WHERE first_id BETWEEN {(int(lo) - 1) // CHUNK * CHUNK + 1} AND {int(hi)} "
                    "ORDER BY first_id", binary=True)  # bytea as bytes, not hex text
        for row in cur:
            firsts.append(int(row[0]))
            for j, x in enumerate(cols):
                parts[x].append(_from_send(bytes(row[j + 1]), by_name[x]))
    finally:
        cur.close()
    if not firsts:
        return {x: np.zeros(0, np.dtype(by_name[x].dtype).newbyteorder("=")) for x in cols}
    sizes = np.array([len(p) for p in parts[cols[0]]], np.int64)
    keep: Arr | None = None
    if firsts[0] < lo or firsts[-1] + int(sizes[-1]) - 1 > hi:  # chunks cut by the range
        ids = np.repeat(np.array(firsts, np.int64), sizes) + (
            np.arange(int(sizes.sum()), dtype=np.int64)
            - np.repeat(np.cumsum(sizes) - sizes, sizes))
        keep = (ids >= lo) & (ids <= hi)
    out: dict[str, Arr] = {}
    for x in cols:
        joined = np.concatenate(parts[x])
        joined = joined.astype(joined.dtype.newbyteorder("="))
        out[x] = joined if keep is None else joined[keep]
    return out


def range_source(view: Any, lo: int, hi: int) -> Any:
    """A FROM item with the columns of ``view`` (the Table of ``intervals``,
    ``proc_runs`` or ``syscalls``) holding its rows with ids lo..hi: the range
    function, aliased as the view (PostgreSQL)."""
    cols = [column(c.name, c.type) for c in view.columns]
    fn = getattr(func, CHUNKED[view.name].function)(int(lo), int(hi))
    return fn.table_valued(*cols).alias(view.name)
