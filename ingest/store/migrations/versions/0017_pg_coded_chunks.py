"""PostgreSQL: metric and region rows kept as chunk rows of arrays

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06

PostgreSQL only (SQLite is unchanged). The rows of ``metric_rows`` and
``region_rows`` move into ``metric_chunks`` and ``region_chunks``: one row per
run of up to 1024 of a trace's rows in key order, the columns as arrays
(ingest/store/pg_coded.py). The two tables become views of the same names and
columns, so ``metrics`` and ``regions`` show the same rows as before. The
delete trigger deletes a trace's chunks. Downgrade moves the rows back.
"""

from __future__ import annotations

from alembic import op

from ingest.store import models, pg_coded
from ingest.store.coded_models import CODED

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

#: The tables as 0016 has them.
_ROWS_0016 = {
    "metric_rows": ("trace_id INTEGER NOT NULL, seq BIGINT NOT NULL, ts BIGINT NOT NULL, "
                    "name_code INTEGER NOT NULL, value BIGINT, value_str TEXT, "
                    "PRIMARY KEY (trace_id, seq)"),
    "region_rows": ("trace_id INTEGER NOT NULL, id INTEGER NOT NULL, task_id BIGINT, "
                    "name_code INTEGER NOT NULL, g BIGINT NOT NULL, start_ts BIGINT, "
                    "end_ts_delta BIGINT, stack_id BIGINT NOT NULL, "
                    "PRIMARY KEY (trace_id, id)"),
}


#: The coded views chunked here (more are from 0020).
_VIEWS = pg_coded.VIEWS_0017
_CHUNKED = [pg_coded.CHUNKED[v] for v in _VIEWS]


def _coded_views(create: bool) -> None:
    for view in _VIEWS:
        op.execute(f"CREATE VIEW {view} AS {CODED[view].select_sql()}" if create
                   else f"DROP VIEW {view}")


def _trigger(coded_chunks: bool) -> None:
    function, trigger = models.pg_delete_rows(_VIEWS if coded_chunks else (), listed=False)
    op.execute("DROP TRIGGER traces_delete_rows ON traces")
    op.execute("DROP FUNCTION gmpscope_delete_trace_rows()")
    op.execute(function)
    op.execute(trigger)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in pg_coded.create_tables(_VIEWS):
        op.execute(statement)
    for c in _CHUNKED:
        op.execute(pg_coded.aggregate_sql(c, c.table.name))
    _coded_views(create=False)
    for c in _CHUNKED:
        op.execute(f"DROP TABLE {c.table.name}")
    for statement in pg_coded.create_row_views(_VIEWS, scalars=False):
        op.execute(statement)
    _coded_views(create=True)
    _trigger(coded_chunks=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _coded_views(create=False)
    for c in _CHUNKED:
        name = c.table.name
        op.execute(f"ALTER VIEW {name} RENAME TO {name}_chunked")
        op.execute(f"CREATE TABLE {name} ({_ROWS_0016[name]})")
        op.execute(f"INSERT INTO {name} SELECT * FROM {name}_chunked")
        op.execute(f"DROP VIEW {name}_chunked")
        op.execute(f"DROP TABLE {c.chunks}")
    _coded_views(create=True)
    _trigger(coded_chunks=False)
