"""The event and goroutine tables kept coded, behind views with their columns.

A 200 MB trace stores 3.7 M metric samples, 3 M regions, 1.2 M logs and
642 k goroutines; as plain rows they repeated their strings (a metric's name,
35 bytes, 3.7 M times) and their timestamps in full. Each of ``metrics``,
``regions``, ``logs``, ``goroutines``, ``ranges`` and ``tasks`` is now a view,
with the columns it had as a table (docs/schema.md), over:

- a table ``<name>_rows`` (``metric_rows``, ``region_rows``, ...) with the same
  columns but for two kinds, which it stores otherwise:
  - a **coded** text column ``c`` as ``c_code``, the code of its value in this
    trace's ``strings`` for that column (``strings.source``, :data:`STRING_SOURCES`);
    codes are given in order of first appearance among the rows (the same
    whether the table is stored whole or in parts): SQLite stores the
    integers 0 and 1 in no byte at all, below 128 in one;
  - a **delta** column ``c`` as ``c_delta``, its difference to another column
    of the row (``end_ts`` to ``start_ts``: a region's few microseconds take 2
    bytes where a time takes 6); ``c = coalesce(base, 0) + c_delta``, so NULL
    stays NULL and a NULL base (a region begun before the trace) keeps ``c``
    whole;
- ``strings(trace_id, source, code, value)``: each trace's distinct values of
  each coded column, once.

The views join ``strings`` by LEFT JOIN on its whole primary key, which SQLite
leaves out of a query that reads none of the view's text columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Integer,
    MetaData,
    Select,
    SmallInteger,
    String,
    Table,
    Text,
    and_,
    column,
    func,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY

from ingest.store.schema_base import metadata, trace_key, traces_fk

#: The views' columns: what users query (docs/schema.md), for select().
views = MetaData()

metrics = Table(
    "metrics",
    views,
    trace_key(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("ts", BigInteger, nullable=False),
    Column("name", Text, nullable=False),
    Column("value", BigInteger),
    Column("value_str", Text),
)

regions = Table(
    "regions",
    views,
    trace_key(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("task_id", BigInteger),
    Column("name", Text, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("start_ts", BigInteger),
    Column("end_ts", BigInteger),
    Column("stack_id", BigInteger, nullable=False),
)

logs = Table(
    "logs",
    views,
    trace_key(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("ts", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("task_id", BigInteger),
    Column("category", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("stack_id", BigInteger, nullable=False),
)

goroutines = Table(
    "goroutines",
    views,
    trace_key(),
    Column("goid", BigInteger, primary_key=True, autoincrement=False),
    Column("start_function", Text),
    Column("start_stack_id", BigInteger),
    Column("created_ts", BigInteger),
    Column("ended_ts", BigInteger),
    Column("parent_goid", BigInteger),
    Column("first_ts", BigInteger, nullable=False),
    Column("last_ts", BigInteger, nullable=False),
    Column("final_state", String(16), nullable=False),
    Column("transitions", BigInteger, nullable=False),
    Column("running_ns", BigInteger, nullable=False),
    Column("runnable_ns", BigInteger, nullable=False),
    Column("waiting_ns", BigInteger, nullable=False),
    Column("syscall_ns", BigInteger, nullable=False),
    Column("first_interval", BigInteger, nullable=False),  # intervals.id range
    Column("last_interval", BigInteger, nullable=False),
)

ranges = Table(
    "ranges",
    views,
    trace_key(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),
    Column("kind", String(16), nullable=False),  # gc | stw | sweep | assist | other
    Column("scope", String(16), nullable=False),
    Column("scope_id", BigInteger, nullable=False),
    Column("start_ts", BigInteger),  # NULL: began before the trace window
    Column("end_ts", BigInteger),  # NULL: still open at the end
    Column("active_at_start", Boolean, nullable=False),
    Column("m", BigInteger, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("stack_id", BigInteger, nullable=False),
    Column("end_attrs", Text),
)

tasks = Table(
    "tasks",
    views,
    trace_key(),
    Column("task_id", BigInteger, primary_key=True, autoincrement=False),
    Column("parent_id", BigInteger),
    Column("name", Text),
    Column("start_ts", BigInteger),
    Column("end_ts", BigInteger),
    Column("start_g", BigInteger),
    Column("end_g", BigInteger),
)

#: Each transition's second stack (as transition_stacks.parquet). Not coded,
#: but kept here beside the coded tables, as PostgreSQL keeps it in chunks as
#: it does them (ingest.store.pg_coded).
transition_stacks = Table(
    "transition_stacks",
    metadata,
    trace_key(),
    traces_fk(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("stack_id", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

#: strings.source: the view column whose values the strings are. Fixed
#: numbers (stored): append, never renumber.
STRING_SOURCES: dict[str, int] = {
    "metrics.name": 1, "regions.name": 2, "logs.category": 3, "logs.message": 4,
    "goroutines.start_function": 5, "goroutines.final_state": 6, "ranges.name": 7,
    "ranges.kind": 8, "ranges.scope": 9, "ranges.end_attrs": 10, "tasks.name": 11,
}

#: Delta columns: view -> {column: the column it is stored relative to}.
DELTAS: dict[str, dict[str, str]] = {
    "regions": {"end_ts": "start_ts"},
    "ranges": {"end_ts": "start_ts"},
    "tasks": {"end_ts": "start_ts", "end_g": "start_g"},
    # A goroutine is mostly created when first seen and ends at its last
    # transition (deltas 0), and lives for microseconds.
    "goroutines": {"created_ts": "first_ts", "last_ts": "first_ts", "ended_ts": "last_ts",
                   "last_interval": "first_interval"},
}

strings = Table(
    "strings",
    metadata,
    trace_key(),
    traces_fk(),
    Column("source", SmallInteger, primary_key=True, autoincrement=False),
    Column("code", Integer, primary_key=True, autoincrement=False),
    Column("value", Text, nullable=False),
    sqlite_with_rowid=False,
)


@dataclass(frozen=True)
class Coded:
    """One view and the table that stores its rows."""

    view: Table
    table: Table
    #: view column -> strings.source, for its coded columns
    sources: dict[str, int]
    #: view column -> its base column, for its delta columns
    deltas: dict[str, str]
    #: What the view and gmpscope's readers read the table's rows from: the
    #: table, or for the tables also kept in files (FILE_TABLES) the view
    #: ``<table>_all`` of the rows and the files (ingest.store.coded_files).
    rows: Table

    @property
    def key(self) -> str:
        """The key column of a trace's rows (the table's and the view's)."""
        return next(c.name for c in self.table.primary_key.columns if c.name != "trace_id")

    def stored(self, column: str) -> str:
        """The table's column that stores the view's ``column``."""
        if column in self.sources:
            return f"{column}_code"
        if column in self.deltas:
            return f"{column}_delta"
        return column

    def expr(self, column: str, alias: str = "t") -> str:
        """The SQL of the view's ``column`` over the table (as ``alias``)."""
        if column in self.sources:
            return f"s_{column}.value"
        if column in self.deltas:
            base = self.deltas[column]
            b = self.expr(base, alias)
            if self.view.c[base].nullable:
                b = f"coalesce({b}, 0)"
            return f"{b} + {alias}.{column}_delta"
        return f"{alias}.{column}"

    def select_sql(self, source: str | None = None) -> str:
        """The view's SELECT, over ``source`` (by default the table)."""
        exprs = [(self.expr(c.name), c.name) for c in self.view.columns]
        cols = ", ".join(e if e == f"t.{name}" else f"{e} AS {name}" for e, name in exprs)
        joins = "".join(
            f" LEFT JOIN strings s_{c} ON s_{c}.trace_id = t.trace_id "
            f"AND s_{c}.source = {src} AND s_{c}.code = t.{c}_code"
            for c, src in self.sources.items())
        return f"SELECT {cols} FROM {source or self.table.name} t{joins}"


def _coded(view: Table, table_name: str) -> Coded:
    sources = {k.split(".", 1)[1]: v for k, v in STRING_SOURCES.items()
               if k.split(".", 1)[0] == view.name}
    deltas = DELTAS.get(view.name, {})
    cols: list[Column[Any]] = [trace_key()]
    for c in view.columns:
        if c.name == "trace_id":
            continue
        if c.name in sources:
            cols.append(Column(f"{c.name}_code", Integer, nullable=c.nullable))
        elif c.name in deltas:
            cols.append(Column(f"{c.name}_delta", BigInteger, nullable=c.nullable))
        elif c.primary_key:
            cols.append(Column(c.name, c.type, primary_key=True, autoincrement=False))
        else:
            cols.append(Column(c.name, c.type, nullable=c.nullable))
    table = Table(table_name, metadata, *cols, traces_fk(), sqlite_with_rowid=False)
    rows = table
    if table_name in FILE_TABLES:
        rows = Table(f"{table_name}_all", views,
                     *(Column(c.name, c.type, nullable=c.nullable) for c in cols))
    return Coded(view, table, sources, deltas, rows)


#: The coded tables whose rows SQLite may keep in column files
#: (ingest.store.coded_files), by table, with their key column.
FILE_TABLES: dict[str, str] = {"metric_rows": "seq", "log_rows": "seq", "region_rows": "id",
                               "goroutine_rows": "goid", "task_rows": "task_id",
                               "range_rows": "id"}

#: Where those rows are kept in files: one row per part of a trace's rows
#: (first_key..last_key of the table's key column, ``rows`` of them), its
#: files ``<table_name>.<part>.<column>.npy`` in ``directory`` (as
#: interval_files.directory: the trace's interval directory).
coded_files = Table(
    "coded_files",
    metadata,
    trace_key(),
    traces_fk(),
    Column("table_name", String(32), primary_key=True),
    Column("part", Integer, primary_key=True, autoincrement=False),
    Column("first_key", BigInteger, nullable=False),
    Column("last_key", BigInteger, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("directory", Text, nullable=False),
)


#: The coded views by name, in the order a load stores them.
CODED: dict[str, Coded] = {c.view.name: c for c in (
    _coded(metrics, "metric_rows"), _coded(logs, "log_rows"), _coded(ranges, "range_rows"),
    _coded(tasks, "task_rows"), _coded(regions, "region_rows"),
    _coded(goroutines, "goroutine_rows"))}

#: The coded views whose tables PostgreSQL keeps as chunk rows
#: (ingest.store.pg_coded), with a function ``gmpscope_<table>_at(trace, keys)``
#: (:func:`keyed_function`) that reads some rows by key.
PG_CHUNKED = ("metrics", "regions", "goroutines", "tasks", "ranges", "logs")


def keyed_function(table_name: str) -> str:
    """The name of the PostgreSQL function that reads a chunked table's rows by key."""
    return f"gmpscope_{table_name}_at"


def keyed_rows(view: str, trace_id: int, keys: Sequence[int], dialect: str) -> Any:
    """A FROM item with the columns of ``CODED[view].rows`` holding trace
    ``trace_id``'s rows whose key is one of ``keys``: on PostgreSQL, where the
    table is chunks, through its keyed function (a view over chunks would
    make every row of the trace to find them); elsewhere the rows filtered by
    their key."""
    coded = CODED[view]
    wanted = sorted({int(k) for k in keys})
    if dialect == "postgresql" and view in PG_CHUNKED:
        fn = getattr(func, keyed_function(coded.table.name))(
            trace_id, literal(wanted, ARRAY(BigInteger)))
        return fn.table_valued(*(column(c.name, c.type) for c in coded.rows.columns)).alias("t")
    rows = coded.rows
    return select(rows).where(rows.c.trace_id == trace_id,
                              rows.c[coded.key].in_(wanted)).subquery("t")


def rows_by_key(conn: Connection, view: str, trace_id: int, keys: Sequence[int],
                columns: Sequence[str] | None = None) -> list[Any]:
    """Columns ``columns`` (labelled by name; by default every view column but
    ``trace_id``) of trace ``trace_id``'s rows of coded view ``view`` whose
    key is one of ``keys``, in key order: through :func:`keyed_rows`, fast
    on either database."""
    coded = CODED[view]
    cols = list(columns or [c.name for c in coded.view.columns if c.name != "trace_id"])
    q = CodedQuery(view, trace_id, keyed_rows(view, trace_id, keys, conn.dialect.name))
    return list(conn.execute(q.select(cols).order_by(q.col(coded.key))))


#: What gmpscope reads the coded tables' rows from (Coded.rows: the rows and,
#: on SQLite, the files; never the tables themselves, which may hold none).
metric_rows_all = CODED["metrics"].rows
log_rows_all = CODED["logs"].rows
region_rows_all = CODED["regions"].rows
goroutine_rows_all = CODED["goroutines"].rows
task_rows_all = CODED["tasks"].rows
range_rows_all = CODED["ranges"].rows


def read_strings(conn: Connection, trace_id: int, column: str) -> list[str]:
    """The trace's strings of ``column`` (``"view.column"``), in code order:
    a reader of a coded table maps its codes with them."""
    s = strings
    rows = conn.execute(select(s.c.code, s.c.value).where(
        s.c.trace_id == trace_id, s.c.source == STRING_SOURCES[column]).order_by(s.c.code))
    out: list[str] = []
    for code, value in rows:
        if code != len(out):
            raise RuntimeError(f"{column}: strings of trace {trace_id} miss code {len(out)}")
        out.append(value)
    return out


class CodedQuery:
    """Queries of one trace's rows of a coded view, straight from its table
    (faster than through the view, which joins every row to its strings):
    :meth:`col` is a view column's expression (a text column joins
    ``strings`` only when asked for), :meth:`codes` filters a text column by
    the codes of the strings that match, looked up once, and :meth:`select`
    makes the SELECT."""

    def __init__(self, view: str, trace_id: int, source: Any = None) -> None:
        """``source``: the rows' FROM item (default: all of ``Coded.rows``),
        such as :func:`keyed_rows`'."""
        self.coded = CODED[view]
        self.trace_id = trace_id
        self.t = self.coded.rows.alias("t") if source is None else source
        self._from: Any = self.t
        self._exprs: dict[str, Any] = {}

    def col(self, c: str) -> Any:
        """The view's column ``c``."""
        if c in self._exprs:
            return self._exprs[c]
        coded, t = self.coded, self.t
        if c in coded.sources:
            s = strings.alias(f"s_{c}")
            self._from = self._from.outerjoin(s, and_(
                s.c.trace_id == t.c.trace_id, s.c.source == coded.sources[c],
                s.c.code == t.c[f"{c}_code"]))
            e: Any = s.c.value
        elif c in coded.deltas:
            base = coded.deltas[c]
            b = self.col(base)
            e = (func.coalesce(b, 0) if coded.view.c[base].nullable else b) + t.c[f"{c}_delta"]
        else:
            e = t.c[c]
        self._exprs[c] = e
        return e

    def codes(self, c: str, match: Any) -> Any:
        """Rows whose text column ``c`` is one of ``match`` (a list of values,
        or a condition on ``strings.c.value``)."""
        s = strings
        cond = s.c.value.in_(list(match)) if isinstance(match, (list, tuple)) else match
        return self.t.c[f"{c}_code"].in_(select(s.c.code).where(
            s.c.trace_id == self.trace_id, s.c.source == self.coded.sources[c], cond))

    def select(self, columns: Sequence[str]) -> Select[Any]:
        """SELECT ``columns`` (labelled by name) of the trace's rows."""
        cols = [self.col(c).label(c) for c in columns]
        return select(*cols).select_from(self._from).where(self.t.c.trace_id == self.trace_id)
