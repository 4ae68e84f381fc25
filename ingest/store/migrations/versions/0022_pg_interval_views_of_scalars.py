"""PostgreSQL: interval chunk views of scalars; chunk views detoast only what is read

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06

PostgreSQL only (SQLite is unchanged), as 0021 did for the coded tables' views:
``interval_rows``, ``proc_run_index``, ``syscall_outcomes``, ``thread_intervals``
and the range function ``gmpscope_intervals`` take a row's values from the
chunk's arrays inside a subquery kept apart, so that a join, a sort or a window
above them carries scalars, not each row's chunk arrays
(ingest/store/pg_chunks.py, ``scalar_rows``). The coded tables' views take the
same subquery in place of 0021's: it detoasts only the arrays a query reads
(0021's detoasted every one) and takes the query's conditions in (0021's
OFFSET 0 kept them out). The same columns: made again in place, their
dependents untouched. Downgrade restores 0021's.
"""

from __future__ import annotations

from alembic import op

from ingest.store import pg_chunks, pg_coded

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

#: The coded tables kept as chunks at this revision (0021's; pg_coded.ALL may grow).
_CODED = (*pg_coded.VIEWS_0020, "logs", "transition_stacks")


def _views(scalars: bool) -> None:
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"CREATE OR REPLACE VIEW {c.view} AS {pg_chunks.view_sql(c, scalars=scalars)}")
    sql = pg_chunks.pg_views(scalars=scalars)["thread_intervals"]
    op.execute(f"CREATE OR REPLACE VIEW thread_intervals AS {sql}")
    op.execute(pg_chunks.function_sql("intervals", replace=True, scalars=scalars))
    for statement in pg_coded.replace_row_views(_CODED, scalars=True, pruned=scalars):
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _views(scalars=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _views(scalars=False)
