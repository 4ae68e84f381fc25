"""live: sessions, their segments (windows) and per-second aggregates

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

Additive: three new tables, nothing else changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_sessions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("window_s", sa.Float(), nullable=True),
        sa.Column("segments", sa.BigInteger(), nullable=False),
        sa.Column("dropped", sa.BigInteger(), nullable=False),
        sa.Column("target_failures", sa.BigInteger(), nullable=False),
        sa.Column("last_status", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "live_segments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("trace_id", sa.Integer(), nullable=True),
        sa.Column("wall_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("wall_end_ns", sa.BigInteger(), nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=True),
        sa.Column("last_ts", sa.BigInteger(), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("ingest_ms", sa.Float(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("findings", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["live_sessions.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_live_segments_session_id", "live_segments", ["session_id"])
    op.create_table(
        "live_seconds",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("segment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("bin", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("t_ns", sa.BigInteger(), nullable=False),
        sa.Column("duration_ns", sa.BigInteger(), nullable=False),
        sa.Column("g_running", sa.Float(), nullable=False),
        sa.Column("g_runnable", sa.Float(), nullable=False),
        sa.Column("g_waiting", sa.Float(), nullable=False),
        sa.Column("g_syscall", sa.Float(), nullable=False),
        sa.Column("g_peak", sa.BigInteger(), nullable=False),
        sa.Column("g_waiting_peak", sa.BigInteger(), nullable=False),
        sa.Column("g_created", sa.BigInteger(), nullable=False),
        sa.Column("sched_n", sa.BigInteger(), nullable=False),
        sa.Column("sched_p50_ns", sa.BigInteger(), nullable=True),
        sa.Column("sched_p99_ns", sa.BigInteger(), nullable=True),
        sa.Column("sched_max_ns", sa.BigInteger(), nullable=True),
        sa.Column("netpoll_waits", sa.BigInteger(), nullable=False),
        sa.Column("netpoll_p99_ns", sa.BigInteger(), nullable=True),
        sa.Column("syscalls", sa.BigInteger(), nullable=False),
        sa.Column("p_handoffs", sa.BigInteger(), nullable=False),
        sa.Column("gc_ns", sa.BigInteger(), nullable=False),
        sa.Column("stw_ns", sa.BigInteger(), nullable=False),
        sa.Column("heap_bytes", sa.BigInteger(), nullable=True),
        sa.Column("threads", sa.BigInteger(), nullable=False),
        sa.Column("procs_running", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["live_sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "segment_id", "bin"),
    )
    op.create_index("ix_live_seconds_t_ns", "live_seconds", ["t_ns"])


def downgrade() -> None:
    op.drop_index("ix_live_seconds_t_ns", table_name="live_seconds")
    op.drop_table("live_seconds")
    op.drop_index("ix_live_segments_session_id", table_name="live_segments")
    op.drop_table("live_segments")
    op.drop_table("live_sessions")
