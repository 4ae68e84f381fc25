"""os_sched: the kernel's scheduling of a trace's threads (sched.parquet)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05

Additive: two new tables (ingest/store/os_sched_models.py). Their foreign keys
cascade on both dialects, as poller_uring's do.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "os_sched_intervals",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("tid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("start_ts", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("end_ts", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=True),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=True),
        sa.Column("cpu", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "tid", "start_ts"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_os_sched_intervals_window", "os_sched_intervals",
                    ["trace_id", "end_ts"])
    op.create_table(
        "os_sched_recordings",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=24), nullable=False),
        sa.Column("offset_ns", sa.BigInteger(), nullable=True),
        sa.Column("partial", sa.Boolean(), nullable=False),
        sa.Column("stopped_by", sa.Text(), nullable=True),
        sa.Column("lost_events", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("intervals", sa.BigInteger(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=True),
        sa.Column("last_ts", sa.BigInteger(), nullable=True),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id"),
    )


def downgrade() -> None:
    op.drop_table("os_sched_recordings")
    op.drop_index("ix_os_sched_intervals_window", table_name="os_sched_intervals")
    op.drop_table("os_sched_intervals")
