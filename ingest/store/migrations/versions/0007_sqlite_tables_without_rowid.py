"""SQLite: a trace's keyed tables stored WITHOUT ROWID

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

Tables keyed by (trace_id, seq or id) were rowid tables, so SQLite kept each
row twice: in the table's b-tree by a hidden rowid, and in an automatic index
on the primary key. WITHOUT ROWID they are one b-tree ordered by that key. On
the 200 MB busyservice trace the automatic indexes were 153 MB (metrics 58,
regions 45, logs 18, ...), and every insert wrote both trees. PostgreSQL has
no rowid: nothing changes there. Each table is rebuilt from its own CREATE
statement with WITHOUT ROWID appended, its rows copied in key order.
"""

from __future__ import annotations

import re

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: Frozen: the tables this revision rebuilds.
_TABLES = ("transition_stacks", "goroutines", "ranges", "tasks", "regions", "logs",
           "metrics", "other_events", "stacks", "poller_events")


def _rebuild(table: str, with_rowid: bool) -> None:
    conn = op.get_bind()
    sql = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).scalar_one()
    body = sql.rstrip().removesuffix("WITHOUT ROWID").rstrip()
    head = re.match(rf'CREATE TABLE\s+("?){table}\1\s*\(', body, re.IGNORECASE)
    if head is None:
        raise RuntimeError(f"unexpected definition of {table}: {sql[:80]}")
    new = f"_rebuild_{table}"
    op.execute(f"CREATE TABLE {new} (" + body[head.end():]
               + ("" if with_rowid else " WITHOUT ROWID"))
    op.execute(f"INSERT INTO {new} SELECT * FROM {table}")
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {new} RENAME TO {table}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in _TABLES:
        _rebuild(table, with_rowid=False)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in _TABLES:
        _rebuild(table, with_rowid=True)
