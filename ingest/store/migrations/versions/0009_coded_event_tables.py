"""metrics, regions, logs, goroutines, ranges, tasks: coded tables behind views

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05

On the 200 MB busyservice trace these six tables took 585 MB of SQLite, most
of it strings repeated on every row (a metric's name 3.7 M times) and
timestamps stored whole where a difference takes a third. Each becomes a view
with its columns (users' SQL unchanged) over ``<name>_rows``, which stores a
text column as ``<column>_code`` into the trace's ``strings`` and some times
as ``<column>_delta`` to another column (ingest/store/coded_models.py). Every
row is copied over, and back on downgrade.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_B, _I, _T, _S, _BOOL = sa.BigInteger, sa.Integer, sa.Text, sa.String, sa.Boolean

#: Frozen: each table's columns at 0008 (after trace_id; name, type, nullable,
#: primary key), what becomes of them (strings.source of a coded column, the
#: base of a delta column) and the table that stores them.
_TABLES: dict[str, tuple[str, list[tuple[str, Any, bool, bool]],
                         dict[str, int], dict[str, str]]] = {
    "metrics": ("metric_rows", [
        ("seq", _B(), False, True), ("ts", _B(), False, False), ("name", _T(), False, False),
        ("value", _B(), True, False), ("value_str", _T(), True, False)],
        {"name": 1}, {}),
    "logs": ("log_rows", [
        ("seq", _B(), False, True), ("ts", _B(), False, False), ("g", _B(), False, False),
        ("task_id", _B(), True, False), ("category", _T(), False, False),
        ("message", _T(), False, False), ("stack_id", _B(), False, False)],
        {"category": 3, "message": 4}, {}),
    "ranges": ("range_rows", [
        ("id", _I(), False, True), ("name", _T(), False, False),
        ("kind", _S(16), False, False), ("scope", _S(16), False, False),
        ("scope_id", _B(), False, False), ("start_ts", _B(), True, False),
        ("end_ts", _B(), True, False), ("active_at_start", _BOOL(), False, False),
        ("m", _B(), False, False), ("p", _B(), False, False), ("g", _B(), False, False),
        ("stack_id", _B(), False, False), ("end_attrs", _T(), True, False)],
        {"name": 7, "kind": 8, "scope": 9, "end_attrs": 10}, {"end_ts": "start_ts"}),
    "tasks": ("task_rows", [
        ("task_id", _B(), False, True), ("parent_id", _B(), True, False),
        ("name", _T(), True, False), ("start_ts", _B(), True, False),
        ("end_ts", _B(), True, False), ("start_g", _B(), True, False),
        ("end_g", _B(), True, False)],
        {"name": 11}, {"end_ts": "start_ts", "end_g": "start_g"}),
    "regions": ("region_rows", [
        ("id", _I(), False, True), ("task_id", _B(), True, False),
        ("name", _T(), False, False), ("g", _B(), False, False),
        ("start_ts", _B(), True, False), ("end_ts", _B(), True, False),
        ("stack_id", _B(), False, False)],
        {"name": 2}, {"end_ts": "start_ts"}),
    "goroutines": ("goroutine_rows", [
        ("goid", _B(), False, True), ("start_function", _T(), True, False),
        ("start_stack_id", _B(), True, False), ("created_ts", _B(), True, False),
        ("ended_ts", _B(), True, False), ("parent_goid", _B(), True, False),
        ("first_ts", _B(), False, False), ("last_ts", _B(), False, False),
        ("final_state", _S(16), False, False), ("transitions", _B(), False, False),
        ("running_ns", _B(), False, False), ("runnable_ns", _B(), False, False),
        ("waiting_ns", _B(), False, False), ("syscall_ns", _B(), False, False),
        ("first_interval", _B(), False, False), ("last_interval", _B(), False, False)],
        {"start_function": 5, "final_state": 6},
        {"created_ts": "first_ts", "last_ts": "first_ts", "ended_ts": "last_ts",
         "last_interval": "first_interval"}),
}

#: Frozen copies of the views (ingest.store.coded_models.Coded.select_sql).
_VIEWS = {
    "metrics": "SELECT t.trace_id, t.seq, t.ts, s_name.value AS name, t.value, t.value_str FROM metric_rows t LEFT JOIN strings s_name ON s_name.trace_id = t.trace_id AND s_name.source = 1 AND s_name.code = t.name_code",  # noqa: E501
    "logs": "SELECT t.trace_id, t.seq, t.ts, t.g, t.task_id, s_category.value AS category, s_message.value AS message, t.stack_id FROM log_rows t LEFT JOIN strings s_category ON s_category.trace_id = t.trace_id AND s_category.source = 3 AND s_category.code = t.category_code LEFT JOIN strings s_message ON s_message.trace_id = t.trace_id AND s_message.source = 4 AND s_message.code = t.message_code",  # noqa: E501
    "ranges": "SELECT t.trace_id, t.id, s_name.value AS name, s_kind.value AS kind, s_scope.value AS scope, t.scope_id, t.start_ts, coalesce(t.start_ts, 0) + t.end_ts_delta AS end_ts, t.active_at_start, t.m, t.p, t.g, t.stack_id, s_end_attrs.value AS end_attrs FROM range_rows t LEFT JOIN strings s_name ON s_name.trace_id = t.trace_id AND s_name.source = 7 AND s_name.code = t.name_code LEFT JOIN strings s_kind ON s_kind.trace_id = t.trace_id AND s_kind.source = 8 AND s_kind.code = t.kind_code LEFT JOIN strings s_scope ON s_scope.trace_id = t.trace_id AND s_scope.source = 9 AND s_scope.code = t.scope_code LEFT JOIN strings s_end_attrs ON s_end_attrs.trace_id = t.trace_id AND s_end_attrs.source = 10 AND s_end_attrs.code = t.end_attrs_code",  # noqa: E501
    "tasks": "SELECT t.trace_id, t.task_id, t.parent_id, s_name.value AS name, t.start_ts, coalesce(t.start_ts, 0) + t.end_ts_delta AS end_ts, t.start_g, coalesce(t.start_g, 0) + t.end_g_delta AS end_g FROM task_rows t LEFT JOIN strings s_name ON s_name.trace_id = t.trace_id AND s_name.source = 11 AND s_name.code = t.name_code",  # noqa: E501
    "regions": "SELECT t.trace_id, t.id, t.task_id, s_name.value AS name, t.g, t.start_ts, coalesce(t.start_ts, 0) + t.end_ts_delta AS end_ts, t.stack_id FROM region_rows t LEFT JOIN strings s_name ON s_name.trace_id = t.trace_id AND s_name.source = 2 AND s_name.code = t.name_code",  # noqa: E501
    "goroutines": "SELECT t.trace_id, t.goid, s_start_function.value AS start_function, t.start_stack_id, t.first_ts + t.created_ts_delta AS created_ts, t.first_ts + t.last_ts_delta + t.ended_ts_delta AS ended_ts, t.parent_goid, t.first_ts, t.first_ts + t.last_ts_delta AS last_ts, s_final_state.value AS final_state, t.transitions, t.running_ns, t.runnable_ns, t.waiting_ns, t.syscall_ns, t.first_interval, t.first_interval + t.last_interval_delta AS last_interval FROM goroutine_rows t LEFT JOIN strings s_start_function ON s_start_function.trace_id = t.trace_id AND s_start_function.source = 5 AND s_start_function.code = t.start_function_code LEFT JOIN strings s_final_state ON s_final_state.trace_id = t.trace_id AND s_final_state.source = 6 AND s_final_state.code = t.final_state_code",  # noqa: E501
}

#: The tables in ingest.store.models.TRACE_TABLES's order after poller_events,
#: poller_recordings, the ranged tables and row_ranges (0008's, then this one's).
_PLAIN_0008 = ("interval_files", "row_ranges", "transition_stacks", "transition_counts",
               "state_edges", "goroutines", "procs", "threads", "ranges", "tasks", "regions",
               "logs", "metrics", "other_events", "stacks")
_PLAIN_0009 = ("interval_files", "row_ranges", "transition_stacks", "transition_counts",
               "state_edges", "metric_rows", "log_rows", "range_rows", "task_rows",
               "region_rows", "goroutine_rows", "strings", "procs", "threads",
               "other_events", "stacks")


def _pg_function(plain: tuple[str, ...]) -> str:
    """Frozen: ingest.store.models.PG_DELETE_ROWS's function, with ``plain``
    the tables deleted by trace_id."""
    rest = "".join(f"    DELETE FROM {t} WHERE trace_id = OLD.id;\n" for t in plain)
    return f"""CREATE OR REPLACE FUNCTION gmpscope_delete_trace_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT table_name, first_id, last_id FROM row_ranges
             WHERE trace_id = OLD.id LOOP
        IF r.table_name = 'intervals' THEN
            DELETE FROM interval_rows
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'proc_runs' THEN
            DELETE FROM proc_run_index
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'syscalls' THEN
            DELETE FROM syscall_outcomes
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        END IF;
    END LOOP;
    DELETE FROM poller_events WHERE trace_id = OLD.id;
    DELETE FROM poller_recordings WHERE trace_id = OLD.id;
{rest}    RETURN OLD;
END
$$"""


def _create(name: str, columns: list[sa.Column[Any]], pg: bool) -> None:
    pk = [c.name for c in columns if c.primary_key]
    for c in columns:
        c.primary_key = False
    op.create_table(
        name,
        sa.Column("trace_id", sa.Integer(), autoincrement=False, nullable=False),
        *columns,
        *([] if pg else [sa.ForeignKeyConstraint(["trace_id"], ["traces.id"],
                                                 ondelete="CASCADE")]),
        sa.PrimaryKeyConstraint("trace_id", *pk),
        sqlite_with_rowid=False,
    )


def _old_columns(view: str) -> list[sa.Column[Any]]:
    return [sa.Column(n, t, nullable=nullable and not pk, primary_key=pk,
                      autoincrement=False) for n, t, nullable, pk in _TABLES[view][1]]


def _coded_columns(view: str) -> list[sa.Column[Any]]:
    _, cols, sources, deltas = _TABLES[view]
    out: list[sa.Column[Any]] = []
    for n, t, nullable, pk in cols:
        if n in sources:
            out.append(sa.Column(f"{n}_code", sa.Integer(), nullable=nullable))
        elif n in deltas:
            out.append(sa.Column(f"{n}_delta", sa.BigInteger(), nullable=nullable))
        else:
            out.append(sa.Column(n, t, nullable=nullable and not pk, primary_key=pk,
                                 autoincrement=False))
    return out


def _fill(view: str, pg: bool) -> None:
    """The coded table and the strings of ``view`` from the table ``view``."""
    table, cols, sources, deltas = _TABLES[view]
    nullable = {n: null for n, _, null, _ in cols}
    order = ' COLLATE "C"' if pg else ""
    for col, source in sources.items():
        op.execute(
            f"INSERT INTO strings (trace_id, source, code, value) "
            f"SELECT trace_id, {source}, row_number() OVER (PARTITION BY trace_id "
            f"ORDER BY count(*) DESC, {col}{order}) - 1, {col} FROM {view} "
            f"WHERE {col} IS NOT NULL GROUP BY trace_id, {col}")
    names, exprs = ["trace_id"], ["o.trace_id"]
    joins = ""
    for n, _, _, _ in cols:
        if n in sources:
            names.append(f"{n}_code")
            exprs.append(f"s_{n}.code")
            joins += (f" LEFT JOIN strings s_{n} ON s_{n}.trace_id = o.trace_id "
                      f"AND s_{n}.source = {sources[n]} AND s_{n}.value = o.{n}")
        elif n in deltas:
            base = f"o.{deltas[n]}"
            names.append(f"{n}_delta")
            exprs.append(f"o.{n} - " + (f"coalesce({base}, 0)" if nullable[deltas[n]]
                                        else base))
        else:
            names.append(n)
            exprs.append(f"o.{n}")
    op.execute(f"INSERT INTO {table} ({', '.join(names)}) "
               f"SELECT {', '.join(exprs)} FROM {view} o{joins}")


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    _create("strings", [sa.Column("source", sa.SmallInteger(), primary_key=True),
                        sa.Column("code", sa.Integer(), primary_key=True),
                        sa.Column("value", sa.Text(), nullable=False)], pg)
    if not pg:
        # Found by value while the rows are coded (PostgreSQL hashes instead,
        # and its b-tree entries cannot hold a long string).
        op.execute("CREATE INDEX _strings_by_value ON strings (trace_id, source, value)")
    for view, (table, *_) in _TABLES.items():
        _create(table, _coded_columns(view), pg)
        _fill(view, pg)
        op.drop_table(view)
    if not pg:
        op.execute("DROP INDEX _strings_by_value")
    for view, select in _VIEWS.items():
        op.execute(f"CREATE VIEW {view} AS {select}")
    if pg:
        op.execute(_pg_function(_PLAIN_0009))


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for view, (table, cols, *_) in _TABLES.items():
        op.execute(f"DROP VIEW {view}")
        _create(view, _old_columns(view), pg)
        names = ", ".join(n for n, *_ in cols)
        op.execute(f"INSERT INTO {view} (trace_id, {names}) "
                   f"SELECT trace_id, {names} FROM ({_VIEWS[view]}) v")
        op.drop_table(table)
    op.drop_table("strings")
    if pg:
        op.execute(_pg_function(_PLAIN_0008))
