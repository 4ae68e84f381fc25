"""poller: epoll waits' ready descriptors, io_uring requests (eBPF recordings)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05

Additive: poller_events gains ``ready_fds`` (the descriptors an epoll wait
returned ready, NULL for older recordings and other rows), and the new table
poller_uring holds an eBPF recording's io_uring requests (uring.parquet). Its
foreign key cascades on both dialects: a few rows per trace, so PostgreSQL's
per-row check costs nothing worth a trigger.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("poller_events", sa.Column("ready_fds", sa.Text(), nullable=True))
    op.create_table(
        "poller_uring",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("tid", sa.BigInteger(), nullable=False),
        sa.Column("submit_wall_ns", sa.BigInteger(), nullable=False),
        sa.Column("complete_wall_ns", sa.BigInteger(), nullable=True),
        sa.Column("ts", sa.BigInteger(), nullable=True),
        sa.Column("latency_ns", sa.BigInteger(), nullable=True),
        sa.Column("ring", sa.BigInteger(), nullable=True),
        sa.Column("user_data", sa.BigInteger(), nullable=True),
        sa.Column("opcode", sa.String(length=24), nullable=False),
        sa.Column("result", sa.BigInteger(), nullable=True),
        sa.Column("cflags", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("poller_uring")
    with op.batch_alter_table("poller_events") as batch:
        batch.drop_column("ready_fds")
