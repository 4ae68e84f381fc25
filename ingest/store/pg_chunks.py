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
themselves (ingest.store.pg_chunk_io, which also writes them). Two interval
arrays are kept relative (:data:`RELATIVE`, revision 0019). docs/schema.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import column, func

Arr = npt.NDArray[Any]

#: Ids per chunk (at most). 1024 int8 values are 8 KB, about 1-2 KB once
#: compressed: most arrays stay inline in their row.
CHUNK = 1024
#: A NULL of ``stolen_ts``/``stolen_by_m`` inside an array (the views turn it
#: back into NULL).
NULL_VALUE = -(2**63)
#: ``syscall_outcomes.outcome`` by its code in the chunks.
OUTCOMES = ("returned", "blocked", "exited", "unfinished", "other")
#: The interval chunks' arrays kept relative to another value (revision
#: 0019): ``end_ts`` less the next position's ``start_ts`` in the chunk (none
#: after the last), 0 for every interval but a resource's last, as each
#: interval ends where its resource's next begins; ``seq`` less the id. lz4
#: keeps the first 0.3 MB of 98 (the 200 MB trace's), the second 45 of 83.
RELATIVE = ("end_ts", "seq")


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
    return f"CROSS JOIN LATERAL {_detoast(c, alias, names)} {name or alias + 'd'}"


def _detoast(c: Chunked, alias: str, names: Sequence[str]) -> str:
    """SQL: the subquery of :func:`_flat`, without its alias."""
    types = {a.name: a.sql for a in c.arrays}
    cols = ", ".join(f"{alias}.{x} || '{{}}'::{types[x]}[] AS {x}" for x in names)
    return f"(SELECT {cols} OFFSET 0)"


def _count_array(c: Chunked) -> str:
    """The array whose length is the chunk's: the smallest to decompress."""
    return min(c.arrays, key=lambda a: np.dtype(a.dtype).itemsize).name


def _value(c: Chunked, name: str, arr: str, at: str, first: str = "c.first_id",
           relative: bool = True) -> str:
    """SQL: the view's value of array column ``name`` (``arr``, an array
    expression; its table's other arrays beside it, ``start_ts[...]``) at
    position ``at`` of the chunk whose ``first_id`` is ``first``;
    ``relative``: the interval chunks keep :data:`RELATIVE` (revision 0019)."""
    v = f"{arr}[{at}]"
    if relative and c.chunks == "interval_chunks" and name in RELATIVE:
        if name == "seq":
            return f"({v} + {first} + {at} - 1)"
        starts = arr[:-len(name)] + "start_ts"
        return f"({v} + coalesce({starts}[{at} + 1], 0))"
    if name == "outcome":
        names = ", ".join(f"'{o}'" for o in OUTCOMES)
        return f"(ARRAY[{names}]::varchar(16)[])[{v} + 1]"
    if name.startswith("stolen_"):
        return f"NULLIF({v}, {NULL_VALUE})"
    return v


def with_starts(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` and ``start_ts`` when ``end_ts`` is among them (the interval
    chunks' ``end_ts`` reads the next position's)."""
    out = tuple(names)
    return (*out, "start_ts") if "end_ts" in out and "start_ts" not in out else out


def _rows_sql(c: Chunked, chunks: str = "", positions: str = "", relative: bool = True,
              scalars: bool = True) -> str:
    """The SELECT of the rows of chunk table ``c`` (view columns), a row per
    element: generate_series over the positions (estimated 1000 rows a chunk,
    where unnest guesses 10; no tuplestore of unnest WITH ORDINALITY, which
    made a count(*) of the 200 MB trace's intervals take 14 s, now 1.7 s).
    ``chunks`` filters the chunks, ``positions`` their positions (``o``).

    ``scalars`` (revision 0022): the values are taken from the arrays inside
    a subquery kept apart (:func:`scalar_rows`), so that a join, a sort or a
    window above carries scalars, not each row's chunk arrays (a join of the
    200 MB trace's intervals to their goroutines failed after 118 s, its
    temporary files having filled the disk; 19 s this way)."""
    vals = [f"{_value(c, x, f'cd.{x}', 'o', relative=relative)} AS {x}" for x in c.names]
    series = f"generate_series(1, cardinality(c.{_count_array(c)})) o"
    if not scalars:
        where = " AND ".join(w for w in (chunks, positions) if w)
        return (f"SELECT c.first_id + o - 1 AS id, c.trace_id, {', '.join(vals)} "
                f"FROM {c.chunks} c {_flat(c, 'c', c.names)} CROSS JOIN LATERAL {series}"
                + (f" WHERE {where}" if where else ""))
    names = ", ".join(f"u.{x}" for x in c.names)
    u = scalar_rows(["c.first_id + o - 1 AS id", *vals], _detoast(c, "c", c.names), series,
                    positions)
    return (f"SELECT u.id, c.trace_id, {names} FROM {c.chunks} c {u}"
            + (f" WHERE {chunks}" if chunks else ""))


def scalar_rows(values: Sequence[str], detoasted: str, series: str, where: str = "") -> str:
    """SQL: the LATERAL subquery ``u`` of a chunk's rows as scalars: ``values``
    (of ``cd``'s arrays at position ``o``) at each position of ``series``
    that passes ``where``.

    A volatile column (``random()``, never read) keeps the subquery from being
    merged into the query above (PostgreSQL merges no subquery whose select
    list holds a volatile function), so that its values are taken here and
    scalars leave it; unlike an OFFSET 0, it lets the query's own conditions
    on the other columns into the subquery, where they are tested before the
    other values are taken (the 200 MB trace's ``thread_intervals`` of one M:
    5.7 s behind an OFFSET 0, 2.9 s this way). The arrays are detoasted
    (``detoasted``, a subquery named ``cd``) inside it too: the planner drops
    a subquery's unused columns by what its parent reads, and one level up
    ``cd`` kept every array that ``u``'s select list names."""
    return (f"CROSS JOIN LATERAL (SELECT random() AS fence, {', '.join(values)} "
            f"FROM {detoasted} cd CROSS JOIN LATERAL {series}"
            + (f" WHERE {where}" if where else "") + ") u")


def view_sql(c: Chunked, relative: bool = True, scalars: bool = True) -> str:
    """The SELECT of the view over a chunk table (every trace's rows);
    ``relative``: as revision 0019 keeps the interval chunks (:data:`RELATIVE`);
    ``scalars`` as :func:`_rows_sql`."""
    return _rows_sql(c, relative=relative, scalars=scalars)


def _range_rows(c: Chunked, relative: bool = True, scalars: bool = True) -> str:
    """The chunk table's rows with ids $1..$2 (only the chunks that hold them)."""
    return _rows_sql(c, f"c.first_id BETWEEN {cell_start('$1')} AND $2",
                     "c.first_id + o - 1 BETWEEN $1 AND $2", relative, scalars)


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


def _zipped(name: str, where: str = "", relative: bool = True) -> str:
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
    inner = [f"{_value(ivc, src, f'd.{src}', k, 'd.first_id', relative)} AS {out}"
             for src, out in picks]
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


def _thread_intervals(relative: bool = True, scalars: bool = True) -> str:
    """The SELECT of ``thread_intervals`` from the interval chunks: each
    trace's goroutine Running and Syscall kinds looked up once a chunk (as
    arrays; the view's join of ``transition_counts`` by kind made the server
    unnest every interval once per kind), the rows filtered by ``kind`` and
    ``m`` as they are made; ``scalars`` as :func:`_rows_sql`."""
    c = CHUNKED["intervals"]
    state = ("CASE WHEN cd.kind[o] = ANY(ks.running) THEN 'Running' "
             "ELSE 'Syscall' END::varchar(16)")
    end, seq = (_value(c, x, f"cd.{x}", "o", relative=relative) for x in ("end_ts", "seq"))
    cols = (f"cd.m[o] AS m, {state} AS state, cd.rid[o] AS g, cd.p[o] AS p, "
            f"cd.start_ts[o] AS start_ts, {end} AS end_ts, {seq} AS seq")
    kinds = (
        f"FROM {c.chunks} c "
        "CROSS JOIN LATERAL (SELECT array_agg(k.kind) FILTER (WHERE k.to_state = 'Running') "
        "AS running, array_agg(k.kind) AS kinds FROM transition_counts k "
        "WHERE k.trace_id = c.trace_id AND k.resource = 'goroutine' "
        "AND k.to_state IN ('Running', 'Syscall')) ks ")
    arrays = ("kind", "m", "rid", "p", "start_ts", "end_ts", "seq")
    series = f"generate_series(1, cardinality(c.{_count_array(c)})) o"
    where = "cd.kind[o] = ANY(ks.kinds) AND cd.m[o] <> -1"
    if not scalars:
        return (f"SELECT c.trace_id, {cols} {kinds}{_flat(c, 'c', arrays)} "
                f"CROSS JOIN LATERAL {series} WHERE {where}")
    u = scalar_rows([cols], _detoast(c, "c", arrays), series, where)
    return f"SELECT c.trace_id, u.m, u.state, u.g, u.p, u.start_ts, u.end_ts, u.seq {kinds}{u}"


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
    end = _value(c, "end_ts", "f.end_ts", "o")
    for on, col, cond in ((not m, "m", "f.m[o] <> -1"), (t1, "end_ts", f"{end} > :t1"),
                          (t2, "start_ts", "f.start_ts[o] < :t2"), (g, "rid", "f.rid[o] = :g")):
        if on:
            need.append(col)
            conds.append(cond)
    need = list(with_starts(need))
    pos = ("unnest(array_positions(c.m, CAST(:m AS bigint)))" if m
           else f"generate_series(1, cardinality(c.{_count_array(c)}))")
    out = ", ".join(["c.first_id + o - 1 AS id",
                     *(f"{_value(c, x, f'od.{x}', 'o')} AS {x}" for x in cols)])
    return (
        f"SELECT {out} FROM {c.chunks} c "
        "CROSS JOIN LATERAL (SELECT array_agg(k.kind) AS kinds FROM transition_counts k "
        f"WHERE k.trace_id = c.trace_id AND k.resource = 'goroutine' AND k.to_state {states}) ks "
        f"CROSS JOIN LATERAL (SELECT array_agg(o) AS pos FROM (SELECT "
        + ", ".join(f"c.{x} || '{{}}'::{'smallint' if x == 'kind' else 'bigint'}[] AS {x}"
                    for x in need)
        + f" OFFSET 0) f, {pos} o WHERE {' AND '.join(conds)}) hit "
        f"{_flat(c, 'c', with_starts(cols), 'od')} "
        "CROSS JOIN LATERAL unnest(hit.pos) o "
        "WHERE c.trace_id = :t AND hit.pos IS NOT NULL")


def pg_views(relative: bool = True, scalars: bool = True) -> dict[str, str]:
    """PostgreSQL's own SELECTs of the views ``proc_runs`` and ``syscalls``
    (the chunks zipped, :func:`_zipped`) and ``thread_intervals``
    (:func:`_thread_intervals`), made instead of the shared ones
    (ingest.store.models.VIEWS), which join ``intervals``; ``relative``: as
    revision 0019 keeps the interval chunks (:data:`RELATIVE`); ``scalars``:
    as revision 0022 makes ``thread_intervals`` (:func:`_rows_sql`; the
    zipped views take their values inside a subquery already)."""
    return {**{name: _zipped(name, relative=relative) for name in ("proc_runs", "syscalls")},
            "thread_intervals": _thread_intervals(relative, scalars)}


def _function_body(name: str, relative: bool = True, scalars: bool = True) -> str:
    """The body of the range function of ``name``."""
    if name == "intervals":
        return _range_rows(CHUNKED[name], relative, scalars)
    return _zipped(name, "z.id BETWEEN $1 AND $2", relative)


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


def function_sql(name: str, body: str | None = None, relative: bool = True,
                 replace: bool = False, scalars: bool = True) -> str:
    """CREATE FUNCTION of ``gmpscope_<name>(lo, hi)``: the rows of the view
    ``name`` with ids lo..hi (``body``: its SELECT, this revision's by
    default; ``relative`` and ``scalars`` as :func:`pg_views`). Plain SQL and STABLE, so that
    the planner inlines it into the caller's query (its bounds then reach the
    chunks' key)."""
    returns = ", ".join(f"{c} {t}" for c, t in RETURNS[name])
    return (f"CREATE {'OR REPLACE ' if replace else ''}FUNCTION "
            f"{CHUNKED[name].function}(bigint, bigint) "
            f"RETURNS TABLE ({returns}) LANGUAGE sql STABLE AS "
            f"$$ {_function_body(name, relative, scalars) if body is None else body} $$")


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


def create_row_views(scalars: bool = True) -> list[str]:
    """The views in place of the former row tables (interval_rows, proc_run_index,
    syscall_outcomes), in that order. A DELETE of their rows does nothing
    (ingest.load.delete deletes from every trace table): a trace's chunks go
    with its ``traces`` row, by the delete trigger (models.PG_DELETE_ROWS)."""
    return [s for c in CHUNKED.values() for s in (
        f"CREATE VIEW {c.view} AS {view_sql(c, scalars=scalars)}", delete_rule(c))]


def delete_rule(c: Chunked) -> str:
    """The rule that makes a DELETE from ``c``'s view do nothing."""
    return f"CREATE RULE {c.view}_delete AS ON DELETE TO {c.view} DO INSTEAD NOTHING"


def create_functions(scalars: bool = True) -> list[str]:
    """The range functions."""
    return [function_sql(name, scalars=scalars) for name in CHUNKED]


def delete_trace_rows(trace: str) -> list[str]:
    """SQL: delete trace ``trace``'s chunks of every chunk table."""
    return [f"DELETE FROM {c.chunks} WHERE trace_id = {trace};" for c in CHUNKED.values()]


def range_source(view: Any, lo: int, hi: int) -> Any:
    """A FROM item with the columns of ``view`` (the Table of ``intervals``,
    ``proc_runs`` or ``syscalls``) holding its rows with ids lo..hi: the range
    function, aliased as the view (PostgreSQL)."""
    cols = [column(c.name, c.type) for c in view.columns]
    fn = getattr(func, CHUNKED[view.name].function)(int(lo), int(hi))
    return fn.table_valued(*cols).alias(view.name)
