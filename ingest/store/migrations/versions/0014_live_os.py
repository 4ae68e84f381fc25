"""live_os: per-second OS-side aggregates of live sessions (gmpscope live --os)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05

Additive: one new table (ingest/store/live_models.py live_os_seconds).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_os_seconds",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("segment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("bin", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("t_ns", sa.BigInteger(), nullable=False),
        sa.Column("duration_ns", sa.BigInteger(), nullable=False),
        sa.Column("running_ns", sa.BigInteger(), nullable=False),
        sa.Column("offcpu_waiting_ns", sa.BigInteger(), nullable=False),
        sa.Column("offcpu_asleep_ns", sa.BigInteger(), nullable=False),
        sa.Column("threads_oncpu_ns", sa.BigInteger(), nullable=False),
        sa.Column("threads_waiting_ns", sa.BigInteger(), nullable=False),
        sa.Column("epoll_waits", sa.BigInteger(), nullable=False),
        sa.Column("epoll_ready", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["live_sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "segment_id", "bin"),
    )
    op.create_index("ix_live_os_seconds_t_ns", "live_os_seconds", ["t_ns"])


def downgrade() -> None:
    op.drop_index("ix_live_os_seconds_t_ns", table_name="live_os_seconds")
    op.drop_table("live_os_seconds")
