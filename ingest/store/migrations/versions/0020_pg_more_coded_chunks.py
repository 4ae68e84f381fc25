"""PostgreSQL: goroutine, task and range rows kept as chunk rows of arrays

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06

PostgreSQL only (SQLite is unchanged). As 0017 did for ``metric_rows`` and
``region_rows``, the rows of ``goroutine_rows``, ``task_rows``, ``range_rows``
and ``transition_stacks`` move into ``goroutine_chunks``, ``task_chunks``,
``range_chunks`` and ``transition_stack_chunks`` (ingest/store/pg_coded.py):
one row per run of up to 1024 of a trace's rows in key order, the columns as
arrays, behind views of the tables' names and columns. Each chunked table gets a function
``gmpscope_<table>_at(trace, keys)`` that reads rows by key through the
chunks' key. The delete trigger deletes a trace's chunks. Downgrade moves the
rows back and drops the functions.
"""

from __future__ import annotations

from alembic import op

from ingest.store import coded_files, models, pg_coded

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: The coded views chunked here.
_NEW = ("goroutines", "tasks", "ranges", "transition_stacks")
_CHUNKED = [pg_coded.CHUNKED[v] for v in _NEW]

#: The tables as 0019 has them.
_ROWS_0019 = {
    "goroutine_rows": (
        "trace_id INTEGER NOT NULL, goid BIGINT NOT NULL, start_function_code INTEGER, "
        "start_stack_id BIGINT, created_ts_delta BIGINT, ended_ts_delta BIGINT, "
        "parent_goid BIGINT, first_ts BIGINT NOT NULL, last_ts_delta BIGINT NOT NULL, "
        "final_state_code INTEGER NOT NULL, transitions BIGINT NOT NULL, "
        "running_ns BIGINT NOT NULL, runnable_ns BIGINT NOT NULL, waiting_ns BIGINT NOT NULL, "
        "syscall_ns BIGINT NOT NULL, first_interval BIGINT NOT NULL, "
        "last_interval_delta BIGINT NOT NULL, PRIMARY KEY (trace_id, goid)"),
    "task_rows": (
        "trace_id INTEGER NOT NULL, task_id BIGINT NOT NULL, parent_id BIGINT, "
        "name_code INTEGER, start_ts BIGINT, end_ts_delta BIGINT, start_g BIGINT, "
        "end_g_delta BIGINT, PRIMARY KEY (trace_id, task_id)"),
    "range_rows": (
        "trace_id INTEGER NOT NULL, id INTEGER NOT NULL, name_code INTEGER NOT NULL, "
        "kind_code INTEGER NOT NULL, scope_code INTEGER NOT NULL, scope_id BIGINT NOT NULL, "
        "start_ts BIGINT, end_ts_delta BIGINT, active_at_start BOOLEAN NOT NULL, "
        "m BIGINT NOT NULL, p BIGINT NOT NULL, g BIGINT NOT NULL, stack_id BIGINT NOT NULL, "
        "end_attrs_code INTEGER, PRIMARY KEY (trace_id, id)"),
    "transition_stacks": (
        "trace_id INTEGER NOT NULL, seq BIGINT NOT NULL, stack_id BIGINT NOT NULL, "
        "PRIMARY KEY (trace_id, seq)"),
}


def _views(create: bool) -> None:
    """The ``<table>_all`` views and the coded views over them (0018's)."""
    views = coded_files.views(False)
    for name in (views if create else reversed(list(views))):
        op.execute(f"CREATE VIEW {name} AS {views[name]}" if create else f"DROP VIEW {name}")


def _trigger(chunked: tuple[str, ...]) -> None:
    function, trigger = models.pg_delete_rows(chunked, listed=True)
    op.execute("DROP TRIGGER traces_delete_rows ON traces")
    op.execute("DROP FUNCTION gmpscope_delete_trace_rows()")
    op.execute(function)
    op.execute(trigger)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in pg_coded.create_tables(_NEW):
        op.execute(statement)
    for c in _CHUNKED:
        op.execute(pg_coded.aggregate_sql(c, c.table.name))
    _views(create=False)
    for c in _CHUNKED:
        op.execute(f"DROP TABLE {c.table.name}")
    for statement in pg_coded.create_row_views(_NEW, scalars=False):
        op.execute(statement)
    _views(create=True)
    for statement in pg_coded.create_keyed(pg_coded.ALL_0020):
        op.execute(statement)
    _trigger(pg_coded.ALL_0020)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in pg_coded.drop_keyed(pg_coded.ALL_0020):
        op.execute(statement)
    _views(create=False)
    for c in _CHUNKED:
        name = c.table.name
        op.execute(f"ALTER VIEW {name} RENAME TO {name}_chunked")
        op.execute(f"CREATE TABLE {name} ({_ROWS_0019[name]})")
        op.execute(f"INSERT INTO {name} SELECT * FROM {name}_chunked")
        op.execute(f"DROP VIEW {name}_chunked")
        op.execute(f"DROP TABLE {c.chunks}")
    _views(create=True)
    _trigger(pg_coded.VIEWS_0017)
