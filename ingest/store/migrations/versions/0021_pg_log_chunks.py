"""PostgreSQL: log rows kept as chunk rows of arrays; chunk views of scalars

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06

PostgreSQL only (SQLite is unchanged). As 0017 and 0020 did for the other
coded tables, the rows of ``log_rows`` move into ``log_chunks``
(ingest/store/pg_coded.py): one row per run of up to 1024 of a trace's rows in
key order, the columns as arrays, behind a view of the table's name and
columns, with the function ``gmpscope_log_rows_at(trace, keys)``. The logs
page now cuts its page before it joins the texts (ingest/views/annotations.py),
which a view over chunks needs (docs/schema.md). The views over every coded
table's chunks now take a row's values from the arrays inside a subquery, so
that joins and sorts above them carry scalars, not each chunk's arrays
(pg_coded.view_sql). The delete trigger deletes a trace's chunks. Downgrade
moves the rows back and restores 0020's views.
"""

from __future__ import annotations

from alembic import op

from ingest.store import coded_files, models, pg_coded

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_NEW = ("logs",)
_CHUNKED = pg_coded.CHUNKED["logs"]
_ALL = (*pg_coded.VIEWS_0020, "logs", "transition_stacks")

#: The table as 0020 has it.
_ROWS_0020 = ("trace_id INTEGER NOT NULL, seq BIGINT NOT NULL, ts BIGINT NOT NULL, "
              "g BIGINT NOT NULL, task_id BIGINT, category_code INTEGER NOT NULL, "
              "message_code INTEGER NOT NULL, stack_id BIGINT NOT NULL, "
              "PRIMARY KEY (trace_id, seq)")


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
    op.execute(pg_coded.aggregate_sql(_CHUNKED, _CHUNKED.table.name))
    _views(create=False)
    op.execute(f"DROP TABLE {_CHUNKED.table.name}")
    for statement in [*pg_coded.create_row_views(_NEW, pruned=False),
                      *pg_coded.replace_row_views(pg_coded.ALL_0020, scalars=True,
                                                  pruned=False)]:
        op.execute(statement)
    _views(create=True)
    for statement in pg_coded.create_keyed(_NEW):
        op.execute(statement)
    _trigger(_ALL)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in pg_coded.drop_keyed(_NEW):
        op.execute(statement)
    _views(create=False)
    name = _CHUNKED.table.name
    op.execute(f"ALTER VIEW {name} RENAME TO {name}_chunked")
    op.execute(f"CREATE TABLE {name} ({_ROWS_0020})")
    op.execute(f"INSERT INTO {name} SELECT * FROM {name}_chunked")
    op.execute(f"DROP VIEW {name}_chunked")
    op.execute(f"DROP TABLE {_CHUNKED.chunks}")
    for statement in pg_coded.replace_row_views(pg_coded.ALL_0020, scalars=False):
        op.execute(statement)
    _views(create=True)
    _trigger(pg_coded.ALL_0020)
