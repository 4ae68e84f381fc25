"""One trace's tables as CSV or Parquet, streamed in batches.

``TABLES`` names what can be downloaded (the database tables of docs/schema.md,
one trace's rows, without the ``trace_id`` column; ``intervals`` and
``transitions`` with the transition kind spelled out as in the ``interval_view``
and ``transitions`` views). Rows are read in batches of ``BATCH`` (the big tables
through their per-trace id block, see ``row_ranges``), so a 4M-row table never
sits in memory: CSV is produced chunk by chunk, Parquet written batch by batch.

Time-bounded tables take an optional window ``[t1, t2)`` in trace ns: rows whose
time span overlaps it (an open span, NULL start or end, reaches to the edge of
the trace), or whose timestamp lies in it for point events (logs, metrics).
Rows come in storage order: the big tables by resource and in time order within
each goroutine, proc or thread; the small ones by their primary key.

CSV cells are protected against formula injection: a text cell starting with
``=``, ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'`` so that a
spreadsheet shows it as text instead of evaluating it (a trace's strings are
written by the traced program, so they are untrusted). Numbers are never
changed; Parquet keeps the exact strings.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Connection,
    Engine,
    Float,
    Integer,
    SmallInteger,
    Table,
    and_,
    or_,
    select,
    true,
)

from ingest.store import models, pg_chunks

#: Rows per batch read from the database (and per CSV chunk / Parquet row group).
BATCH = 50_000
#: Leading characters that make a spreadsheet read a cell as a formula.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

Row = tuple[Any, ...]


class UnknownTable(LookupError):
    """No downloadable table of that name."""


@dataclass(frozen=True)
class TableSpec:
    """A downloadable table: where its rows come from and how a window selects them."""

    name: str
    table: Table
    #: "overlap" (start, end columns), "point" (one ts column) or None.
    time: str | None = None
    start: str = "start_ts"
    end: str = "end_ts"
    #: Output columns spelled from intervals + transition_counts (see _KIND_TABLES).
    kind_columns: tuple[str, ...] = ()

    @property
    def ranged(self) -> bool:
        """Whether rows are found through the trace's id block in row_ranges."""
        return self.table in models.RANGED_TABLES

    @property
    def base_columns(self) -> list[str]:
        return [c.name for c in self.table.c if c.name != "trace_id"]

    @property
    def columns(self) -> list[str]:
        return list(self.kind_columns) or self.base_columns


_INTERVAL_BASE = ("id", "rid", "start_ts", "seq", "end_ts", "kind", "m", "p", "g", "stack_id")
_INTERVAL_COLUMNS = ("id", "resource", "rid", "state", "from_state", "reason", "start_ts",
                     "end_ts", "duration_ns", "m", "p", "g", "stack_id", "seq")
_TRANSITION_COLUMNS = ("seq", "ts", "resource", "id", "from_state", "to_state", "reason",
                       "m", "p", "g", "stack_id")

TABLES: dict[str, TableSpec] = {s.name: s for s in (
    TableSpec("traces", models.traces),
    TableSpec("goroutines", models.goroutines, "overlap", "first_ts", "last_ts"),
    TableSpec("procs", models.procs, "overlap", "first_ts", "last_ts"),
    TableSpec("threads", models.threads, "overlap", "first_ts", "last_ts"),
    TableSpec("intervals", models.intervals, "overlap", kind_columns=_INTERVAL_COLUMNS),
    TableSpec("transitions", models.intervals, "point", "start_ts",
              kind_columns=_TRANSITION_COLUMNS),
    TableSpec("proc_runs", models.proc_runs, "overlap"),
    TableSpec("syscalls", models.syscalls, "overlap"),
    TableSpec("ranges", models.ranges, "overlap"),
    TableSpec("tasks", models.tasks, "overlap"),
    TableSpec("regions", models.regions, "overlap"),
    TableSpec("logs", models.logs, "point", "ts"),
    TableSpec("metrics", models.metrics, "point", "ts"),
    TableSpec("stacks", models.stacks),
)}


def table_spec(name: str) -> TableSpec:
    """The spec of table ``name``; raises UnknownTable listing the known names."""
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTable(f"unknown table {name!r}; tables: {', '.join(TABLES)}") from None


# --------------------------------------------------------------------------
# reading


def _window_filter(spec: TableSpec, t1: int | None, t2: int | None,
                   source: Any = None) -> ColumnElement[bool]:
    """The window's condition on the columns of ``source`` (default: the spec's table)."""
    if t1 is None and t2 is None:
        return true()
    if spec.time is None:
        raise ValueError(f"table {spec.name} is not time-bounded: no t1/t2")
    c = (spec.table if source is None else source).c
    conds: list[ColumnElement[bool]] = []
    if spec.time == "point":
        ts = c[spec.start]
        if t1 is not None:
            conds.append(ts >= t1)
        if t2 is not None:
            conds.append(ts < t2)
        return and_(*conds)
    start, end = c[spec.start], c[spec.end]
    # Overlap with [t1, t2) as in ingest.views.intervals: a span that ends at t1 is out,
    # but a zero-length one at t1 is in. NULL start/end: open to the trace's edge.
    if t2 is not None:
        conds.append(or_(start.is_(None), start < t2))
    if t1 is not None:
        conds.append(or_(end.is_(None), end > t1, start >= t1))
    return and_(*conds)


def _order(spec: TableSpec) -> list[Any]:
    pk = [c for c in spec.table.primary_key.columns if c.name != "trace_id"]
    return pk


def _kinds(conn: Connection, trace_id: int) -> dict[int, tuple[str, str, str, str]]:
    tc = models.transition_counts
    return {r.kind: (r.resource, r.from_state, r.to_state, r.reason) for r in conn.execute(
        select(tc.c.kind, tc.c.resource, tc.c.from_state, tc.c.to_state, tc.c.reason)
        .where(tc.c.trace_id == trace_id))}


def _kind_rows(spec: TableSpec, rows: Sequence[Row],
               kinds: dict[int, tuple[str, str, str, str]]) -> list[Row]:
    """Raw intervals rows (base_columns order) to the spelled-out columns."""
    unknown = ("", "", "", "")
    get = kinds.get
    out: list[Row] = []
    # base_columns: id, rid, start_ts, seq, end_ts, kind, m, p, g, stack_id
    if spec.name == "intervals":
        for (i, rid, s, seq, e, k, m, p, g, st) in rows:
            res, frm, to, reason = get(k, unknown)
            out.append((i, res, rid, to, frm, reason, s, e, e - s, m, p, g, st, seq))
        return out
    for (_i, rid, s, seq, _e, k, m, p, g, st) in rows:
        res, frm, to, reason = get(k, unknown)
        out.append((seq, s, res, rid, frm, to, reason, m, p, g, st))
    return out


def _id_block(conn: Connection, spec: TableSpec, trace_id: int) -> tuple[int, int] | None:
    rr = models.row_ranges
    row = conn.execute(select(rr.c.first_id, rr.c.last_id).where(
        rr.c.trace_id == trace_id, rr.c.table_name == spec.table.name)).first()
    return None if row is None else (int(row.first_id), int(row.last_id))


def _trace_exists(conn: Connection, trace_id: int) -> bool:
    t = models.traces
    return conn.execute(select(t.c.id).where(t.c.id == trace_id)).first() is not None


class TraceMissing(LookupError):
    """No trace with that id."""


def check_request(engine: Engine, trace_id: int, name: str, t1: int | None,
                  t2: int | None) -> TableSpec:
    """Validate a download before streaming anything: the spec, or LookupError
    (UnknownTable, TraceMissing) / ValueError (a window on a table without time)."""
    spec = table_spec(name)
    _window_filter(spec, t1, t2)
    with engine.connect() as conn:
        if not _trace_exists(conn, trace_id):
            raise TraceMissing(f"no trace with id {trace_id}")
    return spec


def _ranged_batches(conn: Connection, spec: TableSpec, trace_id: int, block: tuple[int, int],
                    t1: int | None, t2: int | None, batch: int) -> Iterator[list[Row]]:
    """The big tables, id range by id range, straight through the DB-API cursor
    (SQLAlchemy's row objects cost four times the query on millions of rows)."""
    names = spec.base_columns
    if spec.kind_columns and names != list(_INTERVAL_BASE):
        raise AssertionError(f"intervals columns changed: {names}")  # see _kind_rows
    kinds = _kinds(conn, trace_id) if spec.kind_columns else {}
    bools = [i for i, n in enumerate(names) if isinstance(spec.table.c[n].type, Boolean)]
    lo, hi = block
    chunked = conn.dialect.name == "postgresql"
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        for a in range(lo, hi + 1, batch):
            b = min(a + batch - 1, hi)
            # PostgreSQL: the id range through the chunks' key (ingest.store.pg_chunks),
            # the window's columns being the range function's.
            tab = pg_chunks.range_source(spec.table, a, b) if chunked else spec.table
            stmt = (select(*[tab.c[n] for n in names])
                    .where(tab.c.id.between(a, b), tab.c.trace_id == trace_id,
                           _window_filter(spec, t1, t2, tab)).order_by(tab.c.id))
            # Only integers are bound here (ids, trace id, window), so literal binds
            # are safe and let the raw cursor run the statement.
            cur.execute(str(stmt.compile(dialect=conn.dialect,
                                         compile_kwargs={"literal_binds": True})))
            rows: list[Row] = [tuple(r) for r in cur.fetchall()]
            if not rows:
                continue
            if bools:  # SQLite hands booleans over as 0/1
                rows = [tuple(bool(v) if i in bools and v is not None else v
                              for i, v in enumerate(r)) for r in rows]
            yield _kind_rows(spec, rows, kinds) if spec.kind_columns else rows
    finally:
        cur.close()


def iter_batches(engine: Engine, trace_id: int, name: str, t1: int | None = None,
                 t2: int | None = None, batch: int = BATCH) -> Iterator[list[Row]]:
    """The rows of one trace's table ``name`` (in ``TABLES[name].columns`` order),
    in batches; see the module docstring for the window and the order."""
    spec = check_request(engine, trace_id, name, t1, t2)
    window = _window_filter(spec, t1, t2)
    tab = spec.table
    with engine.connect() as conn:
        if spec.ranged:
            block = _id_block(conn, spec, trace_id)
            if block is None:
                return
            yield from _ranged_batches(conn, spec, trace_id, block, t1, t2, batch)
            return
        key = tab.c.id if spec.name == "traces" else tab.c.trace_id
        stmt = (select(*[tab.c[n] for n in spec.base_columns])
                .where(key == trace_id, window).order_by(*_order(spec)))
        result = conn.execution_options(stream_results=True, yield_per=batch).execute(stmt)
        for part in result.partitions(batch):
            yield [tuple(r) for r in part]


# --------------------------------------------------------------------------
# CSV


def csv_cell(value: Any) -> Any:
    """One value as written to CSV (see the module docstring on formula injection)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_PREFIXES) else value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


def _csv_rows(name: str) -> Callable[[list[Row]], Iterable[Row]]:
    """A batch converter that touches only the columns that need it (text, booleans,
    datetimes); integers go to the csv module as they are (None is written empty)."""
    schema = arrow_schema(name)
    spec = table_spec(name)
    plain = {pa.int16(), pa.int64(), pa.float64()}
    fix = [i for i, f in enumerate(schema) if f.type not in plain]
    if spec.name == "traces":  # created_at: a datetime typed as text in the schema
        fix = list(range(len(schema)))
    if not fix:
        return lambda rows: rows

    def convert(rows: list[Row]) -> Iterable[Row]:
        for r in rows:
            cells = list(r)
            for i in fix:
                cells[i] = csv_cell(cells[i])
            yield tuple(cells)

    return convert


def iter_csv(engine: Engine, trace_id: int, name: str, t1: int | None = None,
             t2: int | None = None, batch: int = BATCH) -> Iterator[str]:
    """CSV text of a table in chunks (a header line, then one chunk per batch)."""
    spec = table_spec(name)
    convert = _csv_rows(name)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(spec.columns)
    first = buf.getvalue()
    rows = iter_batches(engine, trace_id, name, t1, t2, batch)  # validates first
    yield first
    for part in rows:
        buf.seek(0)
        buf.truncate()
        w.writerows(convert(part))
        yield buf.getvalue()


def write_csv(engine: Engine, trace_id: int, name: str, out: io.TextIOBase | Any,
              t1: int | None = None, t2: int | None = None) -> int:
    """Write a table as CSV to a text stream; returns the number of rows."""
    n = 0
    spec = table_spec(name)
    convert = _csv_rows(name)
    w = csv.writer(out, lineterminator="\n")
    w.writerow(spec.columns)
    for part in iter_batches(engine, trace_id, name, t1, t2):
        w.writerows(convert(part))
        n += len(part)
    return n


# --------------------------------------------------------------------------
# Parquet


def _arrow_type(sql_type: Any) -> pa.DataType:
    if isinstance(sql_type, Boolean):
        return pa.bool_()
    if isinstance(sql_type, SmallInteger):
        return pa.int16()
    if isinstance(sql_type, BigInteger | Integer):
        return pa.int64()
    if isinstance(sql_type, Float):
        return pa.float64()
    return pa.string()  # text, and datetimes as ISO 8601 text (as in the CSV)


_KIND_STRINGS = frozenset({"resource", "state", "from_state", "to_state", "reason"})


def arrow_schema(name: str) -> pa.Schema:
    """The Parquet schema of table ``name``."""
    spec = table_spec(name)
    if spec.kind_columns:
        return pa.schema([(c, pa.string() if c in _KIND_STRINGS else pa.int64())
                          for c in spec.kind_columns])
    return pa.schema([(c, _arrow_type(spec.table.c[c].type)) for c in spec.base_columns])


def _arrow_value(v: Any) -> Any:
    return v.isoformat() if isinstance(v, dt.datetime | dt.date) else v


def write_parquet(engine: Engine, trace_id: int, name: str, path: Path | BinaryIO,
                  t1: int | None = None, t2: int | None = None,
                  progress: Callable[[int], None] | None = None) -> int:
    """Write a table as Parquet (one row group per batch); returns the number of rows."""
    schema = arrow_schema(name)
    batches = iter_batches(engine, trace_id, name, t1, t2)
    n = 0
    where = str(path) if isinstance(path, Path) else path
    with pq.ParquetWriter(where, schema, compression="zstd") as writer:
        for part in batches:
            cols = list(zip(*part, strict=True))
            arrays = [pa.array([_arrow_value(v) for v in col], type=f.type)
                      for col, f in zip(cols, schema, strict=True)]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
            n += len(part)
            if progress:
                progress(n)
    return n
