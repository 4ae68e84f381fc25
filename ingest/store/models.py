"""The SQL schema of the ingest database (SQLAlchemy Core tables).

Every table but ``traces`` has a ``trace_id`` referencing ``traces.id``:
on SQLite a foreign key with ``ON DELETE CASCADE``; on PostgreSQL no foreign
key (its per-row check slowed loads fourfold) but a trigger on ``traces``
(``PG_DELETE_ROWS``) that deletes a trace's rows with it.

The large tables (``intervals``, ``proc_run_index``, ``syscall_outcomes``)
have no secondary index: maintaining one costs as much as inserting the row.
Each trace's rows get a block of consecutive ids instead (``row_ranges``), the
rows of one goroutine or proc are contiguous and in time order within it, and
``goroutines``/``procs`` record their id ranges; queries bisect those ranges.

A proc run and a syscall are each one goroutine interval, so they are not
stored twice: ``proc_run_index`` and ``syscall_outcomes`` keep the interval's
id (and, for a syscall, what happened to its P), and the views ``proc_runs``
and ``syscalls`` show the full rows, with the same ids.

``intervals`` has one row per decoded state transition (goroutine or proc):
the state entered and how long it lasted. The decoded transitions are exactly
these rows read the other way, so ``transitions`` is a view over it rather than
a second copy of millions of rows. Its ``kind`` names the transition
(resource, from and to state, reason) by a code into the trace's
``transition_counts``; the views ``transitions``, ``interval_view`` and
``thread_intervals`` show the names. docs/schema.md
documents all of it for users writing SQL.

A trace's tables are defined here; the OS-side recordings' tables in
ingest.store.poller_models (a trace's rows too: in TRACE_TABLES and the
delete trigger), the live sessions' in ingest.store.live_models, all in one
MetaData (ingest.store.schema_base). Importing this module imports both, so
``metadata`` here is the whole schema (what create_all and the migrations see).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Float,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    event,
)

from ingest import codes
from ingest.store import (
    live_models,  # noqa: F401 - its tables are part of the schema
    os_sched_models,  # noqa: F401 - issue 26's tables, in the schema too
    pg_chunks,
    pg_coded,
)

# The tables kept coded behind views of their old columns (re-exported: the
# views are what readers select from).
from ingest.store.coded_models import CODED, coded_files, strings
from ingest.store.coded_models import goroutines as goroutines
from ingest.store.coded_models import logs as logs
from ingest.store.coded_models import metrics as metrics
from ingest.store.coded_models import ranges as ranges
from ingest.store.coded_models import regions as regions
from ingest.store.coded_models import tasks as tasks
from ingest.store.coded_models import transition_stacks as transition_stacks
from ingest.store.poller_models import poller_events, poller_recordings
from ingest.store.schema_base import metadata as metadata
from ingest.store.schema_base import trace_key, traces_fk

# The states' and resources' codes (ingest/codes.py), where the models' users look.
STATE_NAMES = codes.STATE_NAMES
STATE_CODE = codes.STATE_CODE
RUNNING = codes.RUNNING
SYSCALL = codes.SYSCALL
RESOURCE_NAMES = codes.RESOURCE_NAMES
RESOURCE_CODE = codes.RESOURCE_CODE
GOROUTINE = codes.GOROUTINE
PROC = codes.PROC


traces = Table(
    "traces",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("sha256", String(64), nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("source", String(16), nullable=False),  # "trace" (raw file) or "parquet"
    Column("size_bytes", BigInteger),
    Column("go_version", String(16), nullable=False),
    Column("family", String(4), nullable=False),
    Column("ticks_per_sec", BigInteger),
    Column("generations", Integer),
    Column("first_ts", BigInteger),
    Column("last_ts", BigInteger),
    Column("wall_start_ns", BigInteger),  # wall clock (ns since epoch) at first_ts, if known
    Column("events", BigInteger, nullable=False),
    Column("transitions", BigInteger, nullable=False),
    Column("goroutines", Integer, nullable=False),
    Column("procs", Integer, nullable=False),
    Column("threads", Integer, nullable=False),
    Column("stacks", Integer, nullable=False),
    Column("event_counts", Text, nullable=False),  # JSON object kind -> count
    Column("status", String(16), nullable=False),  # "complete" or "damaged"
    Column("bytes_lost", BigInteger, nullable=False),
    Column("generations_lost", Integer, nullable=False),
    Column("loss_offset", BigInteger, nullable=False),
    Column("loss_error", Text, nullable=False),
    Column("ingest_seconds", Float),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

def _row_id() -> Column[int]:
    # INTEGER PRIMARY KEY is SQLite's rowid itself (no separate index); the
    # loader assigns consecutive ids, one trace's rows in one block.
    return Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                  autoincrement=False)


def _trace_ref() -> Column[int]:
    # Not indexed on purpose (every index costs as much as the row itself to
    # maintain): a trace's rows are found through row_ranges and the id
    # ranges in goroutines and procs.
    return Column("trace_id", Integer, nullable=False)


# The intervals kept as rows: every trace's on PostgreSQL; on SQLite those
# loaded without the interval files' extension (ingest.store.interval_files).
# Users query the view ``intervals`` (below), which adds the ones kept in files.
interval_rows = Table(
    "interval_rows",
    metadata,
    _row_id(),
    _trace_ref(),
    traces_fk(),
    Column("rid", BigInteger, nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
    # (resource, from_state, to_state, reason) of the transition, as a code
    # into this trace's transition_counts.
    Column("kind", SmallInteger, nullable=False),
    Column("m", BigInteger, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("stack_id", BigInteger, nullable=False),
)

# The traces whose intervals are kept in column files instead (SQLite only):
# ids first_id..last_id, files in ``directory`` (relative to the database
# file's directory unless absolute), read through the virtual table
# gmpscope_intervals. ingest.store.interval_files.
interval_files = Table(
    "interval_files",
    metadata,
    trace_key(),
    traces_fk(),
    Column("first_id", BigInteger, nullable=False),
    Column("last_id", BigInteger, nullable=False),
    Column("directory", Text, nullable=False),
)

def _kept_in_files(name: str) -> Table:
    # A table's traces whose rows are kept in files, with their id block.
    return Table(name, metadata, trace_key(), traces_fk(),
                 Column("first_id", BigInteger, nullable=False),
                 Column("last_id", BigInteger, nullable=False))


# The traces whose proc_run_index rows are kept in files too (SQLite only):
# ids first_id..last_id, each run's interval as its row in the trace's
# intervals (proc_runs.row.npy in the interval_files directory), read through
# the virtual table gmpscope_proc_run_index.
proc_run_files = _kept_in_files("proc_run_files")
# The same for syscall_outcomes' rows: the frames' syscalls files (row and
# what is the syscall's own), read through gmpscope_syscall_outcomes.
syscall_files = _kept_in_files("syscall_files")

# "Which G ran on P3 at t": every goroutine Running interval, by the P it ran
# on, in (p, time) order. The index holds each run's interval; the
# proc_runs view (below) shows the run's columns.
proc_run_index = Table(
    "proc_run_index",
    metadata,
    _row_id(),
    _trace_ref(),
    traces_fk(),
    Column("interval_id", BigInteger, nullable=False),  # the Running interval's intervals.id
)

row_ranges = Table(
    "row_ranges",
    metadata,
    trace_key(),
    traces_fk(),
    Column("table_name", String(32), primary_key=True),
    Column("first_id", BigInteger, nullable=False),
    Column("last_id", BigInteger, nullable=False),
)

transition_counts = Table(
    "transition_counts",
    metadata,
    trace_key(),
    traces_fk(),
    Column("kind", SmallInteger, primary_key=True, autoincrement=False),
    Column("resource", String(16), nullable=False),
    Column("from_state", String(16), nullable=False),
    Column("to_state", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("count", BigInteger, nullable=False),
)

state_edges = Table(
    "state_edges",
    metadata,
    trace_key(),
    traces_fk(),
    Column("resource", String(16), primary_key=True),
    Column("from_state", String(16), primary_key=True),
    Column("to_state", String(16), primary_key=True),
    Column("count", BigInteger, nullable=False),
    Column("dwell_count", BigInteger, nullable=False),
    Column("dwell_mean_ns", Float),
    Column("dwell_p50_ns", BigInteger),
    Column("dwell_p99_ns", BigInteger),
    Column("dwell_max_ns", BigInteger),
)


procs = Table(
    "procs",
    metadata,
    trace_key(),
    traces_fk(),
    Column("pid", BigInteger, primary_key=True, autoincrement=False),
    Column("first_ts", BigInteger, nullable=False),
    Column("last_ts", BigInteger, nullable=False),
    Column("final_state", String(16), nullable=False),
    Column("transitions", BigInteger, nullable=False),
    Column("running_ns", BigInteger, nullable=False),
    Column("idle_ns", BigInteger, nullable=False),
    Column("goroutines_run", BigInteger, nullable=False),
    Column("first_interval", BigInteger, nullable=False),  # intervals.id range
    Column("last_interval", BigInteger, nullable=False),
    Column("first_run", BigInteger),  # proc_runs.id range, NULL when none ran
    Column("last_run", BigInteger),
)

threads = Table(
    "threads",
    metadata,
    trace_key(),
    traces_fk(),
    Column("m", BigInteger, primary_key=True, autoincrement=False),
    Column("first_ts", BigInteger, nullable=False),
    Column("last_ts", BigInteger, nullable=False),
    Column("transitions", BigInteger, nullable=False),
    Column("running_ns", BigInteger, nullable=False),
    Column("syscall_ns", BigInteger, nullable=False),
    Column("syscalls", BigInteger, nullable=False),
)

# One row per goroutine Syscall interval: what happened to its P. The
# syscalls view (below) adds the interval's goroutine, times, M, P and stack.
syscall_outcomes = Table(
    "syscall_outcomes",
    metadata,
    _row_id(),
    _trace_ref(),
    traces_fk(),
    Column("interval_id", BigInteger, nullable=False),  # the Syscall interval's intervals.id
    Column("start_known", Boolean, nullable=False),  # false: already in a syscall when first seen
    Column("outcome", String(16), nullable=False),  # returned | blocked | exited | unfinished
    Column("p_lost", Boolean, nullable=False),  # the P was handed off or stolen meanwhile
    Column("stolen_ts", BigInteger),
    Column("stolen_by_m", BigInteger),
)


other_events = Table(
    "other_events",
    metadata,
    trace_key(),
    traces_fk(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("ts", BigInteger, nullable=False),
    Column("m", BigInteger, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("stack_id", BigInteger, nullable=False),
    Column("name", Text),
    Column("scope", String(16)),
    Column("scope_id", BigInteger),
    Column("attrs", Text),
    Column("sync_n", BigInteger),
    Column("clock_trace_ns", BigInteger),
    Column("clock_mono_ns", BigInteger),
    Column("clock_wall_ns", BigInteger),
    sqlite_with_rowid=False,
)

stacks = Table(
    "stacks",
    metadata,
    trace_key(),
    traces_fk(),
    Column("stack_id", BigInteger, primary_key=True, autoincrement=False),
    Column("depth", Integer, primary_key=True, autoincrement=False),
    Column("function", Text, nullable=False),
    Column("file", Text, nullable=False),
    Column("line", BigInteger, nullable=False),
    Column("pc", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

#: Background ingest jobs (browser uploads), one row per finished job: the
#: history. Live progress is kept next to the upload spool (ingest.api.job_runner), not
#: here: on SQLite the load transaction holds the only write lock for most of
#: an ingest. No foreign key to traces: a job outlives the trace it stored.
jobs = Table(
    "jobs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),  # "done" or "failed"
    Column("stage", String(16), nullable=False),  # the last stage reached
    Column("trace_id", Integer),  # the stored (or already stored) trace
    Column("existing", Boolean, nullable=False),  # the content was stored before
    Column("sha256", String(64)),
    Column("error", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True), nullable=False),
)

# --------------------------------------------------------------------------
# Views over intervals that queries read like tables. Described here for
# SQLAlchemy's select(); made by the migrations (VIEWS), never by metadata.
view_metadata = MetaData()

#: One row per decoded state transition, wherever it is kept (the rows of
#: interval_rows and, on SQLite, the files of interval_files).
intervals = Table(
    "intervals",
    view_metadata,
    *(Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
      for c in interval_rows.columns),
)

proc_runs = Table(
    "proc_runs",
    view_metadata,
    Column("id", BigInteger, primary_key=True),
    Column("trace_id", Integer, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    Column("m", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
)

syscalls = Table(
    "syscalls",
    view_metadata,
    Column("id", BigInteger, primary_key=True),
    Column("trace_id", Integer, nullable=False),
    Column("goid", BigInteger, nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
    Column("duration_ns", BigInteger, nullable=False),
    Column("m", BigInteger, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("start_known", Boolean, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("p_lost", Boolean, nullable=False),
    Column("stolen_ts", BigInteger),
    Column("stolen_by_m", BigInteger),
    Column("stack_id", BigInteger, nullable=False),
)

#: Relations whose rows have consecutive per-trace ids, found through
#: row_ranges (its table_name), and the table that stores those ids.
RANGED: dict[str, Table] = {
    "intervals": interval_rows, "proc_runs": proc_run_index, "syscalls": syscall_outcomes}
#: What users query for them (proc_runs and syscalls are views).
RANGED_TABLES = (intervals, proc_runs, syscalls)
#: row_ranges.table_name of a table that stores ranged ids.
RANGE_NAME = {table.name: name for name, table in RANGED.items()}
#: Tables holding one trace's rows, children first (the order a manual delete
#: uses); the poller tables reference traces only.
TRACE_TABLES: tuple[Table, ...] = (
    poller_events, poller_recordings,
    interval_rows, interval_files, proc_run_index, proc_run_files, syscall_outcomes,
    syscall_files, row_ranges,
    transition_stacks, transition_counts, state_edges,
    *(c.table for c in CODED.values()), coded_files, strings, procs, threads, other_events, stacks,
)


def relation(name: str) -> Table:
    """The table or view called ``name``."""
    table = metadata.tables.get(name)
    if table is not None:
        return table
    coded = CODED.get(name)
    return coded.view if coded is not None else view_metadata.tables[name]


#: The virtual table of the intervals kept in files (ingest/csrc/intervalfiles.c),
#: with the columns of interval_rows.
INTERVAL_FILES_VTAB = "gmpscope_intervals"


def intervals_view(files: bool) -> str:
    """The SELECT of the view ``intervals``: the rows, and with ``files``
    (SQLite with the extension) the intervals kept in files too."""
    cols = ", ".join(c.name for c in interval_rows.columns)
    rows = f"SELECT {cols} FROM interval_rows"
    return f"{rows} UNION ALL SELECT {cols} FROM {INTERVAL_FILES_VTAB}" if files else rows


#: The virtual tables of the proc runs' and syscalls' rows kept in files, with
#: proc_run_index's and syscall_outcomes' columns.
PROC_RUN_FILES_VTAB = "gmpscope_proc_run_index"
SYSCALL_FILES_VTAB = "gmpscope_syscall_outcomes"

_SYSCALL_OUTCOME_COLUMNS = ("id, trace_id, interval_id, start_known, outcome, p_lost, "
                            "stolen_ts, stolen_by_m")


def proc_run_source(files: bool) -> str:
    """proc_run_index's rows, and with ``files`` those kept in files too."""
    return ("(SELECT id, trace_id, interval_id FROM proc_run_index UNION ALL "
            f"SELECT id, trace_id, interval_id FROM {PROC_RUN_FILES_VTAB})"
            if files else "proc_run_index")


def syscall_source(files: bool) -> str:
    """syscall_outcomes' rows, and with ``files`` those kept in files too."""
    c = _SYSCALL_OUTCOME_COLUMNS
    return (f"(SELECT {c} FROM syscall_outcomes UNION ALL SELECT {c} FROM {SYSCALL_FILES_VTAB})"
            if files else "syscall_outcomes")


_RUNS_SELECT = ("SELECT r.id, r.trace_id, i.p, i.start_ts, i.end_ts, i.rid AS g, i.m, i.seq "
                "FROM {index} r JOIN {intervals} i ON i.id = r.interval_id")
_SYSCALLS_SELECT = ("SELECT s.id, s.trace_id, i.rid AS goid, i.start_ts, i.seq, i.end_ts, "
                    "i.end_ts - i.start_ts AS duration_ns, i.m, i.p, s.start_known, s.outcome, "
                    "s.p_lost, s.stolen_ts, s.stolen_by_m, i.stack_id "
                    "FROM {index} s JOIN {intervals} i ON i.id = s.interval_id")


def _rows_and_files(select: str, index: str, vtab: str, files: bool) -> str:
    # A trace keeps its runs and syscalls where it keeps its intervals, so the
    # files' half joins the files' intervals: a plain UNION ALL of two joins,
    # which SQLite flattens into the caller's query (a join of two UNION ALL
    # subqueries is materialised instead: a range of 1,000 proc runs by id took
    # 1.7 s that way on the 25 MB benchmark trace, 4 ms this way).
    rows = select.format(index=index, intervals="intervals")
    if not files:
        return rows
    return f"{rows} UNION ALL {select.format(index=vtab, intervals=INTERVAL_FILES_VTAB)}"


def proc_runs_view(files: bool) -> str:
    """The SELECT of the view ``proc_runs``."""
    return _rows_and_files(_RUNS_SELECT, "proc_run_index", PROC_RUN_FILES_VTAB, files)


def syscalls_view(files: bool) -> str:
    """The SELECT of the view ``syscalls``."""
    return _rows_and_files(_SYSCALLS_SELECT, "syscall_outcomes", SYSCALL_FILES_VTAB, files)


def file_views(files: bool) -> dict[str, str]:
    """The views whose SELECT depends on whether the process reads files
    (SQLite with the extension, ingest.store.interval_files), in the order
    they are made."""
    return {"intervals": intervals_view(files), "proc_runs": proc_runs_view(files),
            "syscalls": syscalls_view(files)}


#: Views created by the migrations (name -> SELECT), for users writing SQL;
#: ``intervals`` (intervals_view) is made before them. ``proc_runs`` and
#: ``syscalls`` as without files (file_views gives the other form).
VIEWS = {
    "transitions": (
        "SELECT i.trace_id, i.seq, i.start_ts AS ts, k.resource, i.rid AS id, "
        "k.from_state, k.to_state, k.reason, i.m, i.p, i.g, i.stack_id "
        "FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind"
    ),
    "interval_view": (
        "SELECT i.id, i.trace_id, k.resource, i.rid, k.to_state AS state, k.from_state, "
        "k.reason, i.start_ts, i.end_ts, i.end_ts - i.start_ts AS duration_ns, i.m, i.p, "
        "i.g, i.stack_id, i.seq "
        "FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind"
    ),
    "thread_intervals": (
        "SELECT i.trace_id, i.m, k.to_state AS state, i.rid AS g, i.p, i.start_ts, "
        "i.end_ts, i.seq FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind "
        "WHERE k.resource = 'goroutine' AND k.to_state IN ('Running', 'Syscall') "
        "AND i.m <> -1"
    ),
    "proc_runs": proc_runs_view(False),
    "syscalls": syscalls_view(False),
}
#: And the views over the coded tables (ingest.store.coded_models).
VIEWS.update({name: coded.select_sql() for name, coded in CODED.items()})


def dialect_views(dialect: str) -> dict[str, str]:
    """VIEWS as made on ``dialect``: on PostgreSQL ``proc_runs`` and ``syscalls``
    zip the chunk arrays (ingest.store.pg_chunks.pg_views) instead of joining
    ``intervals`` by id, which the server could only do row by row."""
    if dialect != "postgresql":
        return dict(VIEWS)
    return {**VIEWS, **pg_chunks.pg_views()}


def pg_delete_rows(coded_chunks: tuple[str, ...] = pg_coded.ALL,
                   listed: bool = True) -> tuple[str, str]:
    """The delete function and trigger of PG_DELETE_ROWS (``coded_chunks``:
    the coded views whose tables are chunks (ingest.store.pg_coded): two from
    0017, five from 0020, six from 0021; ``listed``: with the table coded_files, from
    0018)."""
    # The rows of the three ranged tables live in chunks there
    # (ingest.store.pg_chunks), deleted by their trace's index.
    big = {*RANGE_NAME, *(pg_coded.CHUNKED[v].table.name for v in coded_chunks)}
    chunks = "\n".join(f"    {s}" for s in [*pg_chunks.delete_trace_rows("OLD.id"),
                                             *pg_coded.delete_trace_rows("OLD.id", coded_chunks)])
    if not listed:
        big.add(coded_files.name)
    rest = "\n".join(f"    DELETE FROM {t.name} WHERE trace_id = OLD.id;"
                      for t in TRACE_TABLES if t.name not in big)
    function = f"""CREATE FUNCTION gmpscope_delete_trace_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
{chunks}
{rest}
    RETURN OLD;
END
$$"""
    trigger = ("CREATE TRIGGER traces_delete_rows BEFORE DELETE ON traces "
               "FOR EACH ROW EXECUTE FUNCTION gmpscope_delete_trace_rows()")
    return function, trigger


#: On PostgreSQL, what stands in for ON DELETE CASCADE (a trace's rows have no
#: foreign key there, see _traces_fk): deleting a traces row first deletes
#: the trace's rows of every table, the big three's chunks by their trace_id
#: index, the others by their primary key's leading trace_id. Statements, in
#: order; revisions 0015, 0017, 0020 and 0021 make the same.
PG_DELETE_ROWS = pg_delete_rows()


def pg_chunk_schema() -> list[str]:
    """PostgreSQL: what turns the tables ``interval_rows``, ``proc_run_index``,
    ``syscall_outcomes`` (ingest.store.pg_chunks) and the tables of
    ``pg_coded.ALL`` just made from the models into views over chunk tables,
    with their functions: statements, in order. Revisions 0015, 0017, 0020 and
    0021 make the same from the former tables."""
    drops = [f"DROP TABLE {t}" for t in [*(c.view for c in pg_chunks.CHUNKED.values()),
                                         *pg_coded.BY_TABLE]]
    return [*pg_chunks.create_tables(), *pg_coded.create_tables(), *drops,
            *pg_chunks.create_row_views(), *pg_coded.create_row_views(), *pg_coded.create_keyed(),
            *pg_chunks.create_functions()]


def _after_create(target: MetaData, connection: Connection, **_kw: Any) -> None:
    # create_all (ingest.store.schema_new) makes every model table; on
    # PostgreSQL the biggest are chunk tables behind views instead.
    if connection.dialect.name == "postgresql":
        for statement in pg_chunk_schema():
            connection.exec_driver_sql(statement)


event.listen(metadata, "after_create", _after_create)
