"""poller: OS-side recordings (poller_events, poller_recordings)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Additive: two new tables, nothing else changes. A trace may now also be an OS
recording on its own (traces.source = "poller", family "os"); that needs no
column change.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _trace_id() -> sa.Column[int]:
    return sa.Column("trace_id", sa.Integer(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "poller_events",
        _trace_id(),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=True),
        sa.Column("wall_ns", sa.BigInteger(), nullable=False),
        sa.Column("tid", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=True),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("syscall", sa.String(length=32), nullable=False),
        sa.Column("fd", sa.BigInteger(), nullable=True),
        sa.Column("fd_kind", sa.String(length=16), nullable=True),
        sa.Column("fd_path", sa.Text(), nullable=True),
        sa.Column("new_fd", sa.BigInteger(), nullable=True),
        sa.Column("new_fd_path", sa.Text(), nullable=True),
        sa.Column("epfd", sa.BigInteger(), nullable=True),
        sa.Column("op", sa.String(length=48), nullable=True),
        sa.Column("events", sa.Text(), nullable=True),
        sa.Column("timeout_ns", sa.BigInteger(), nullable=True),
        sa.Column("maxevents", sa.BigInteger(), nullable=True),
        sa.Column("count", sa.BigInteger(), nullable=True),
        sa.Column("to_submit", sa.BigInteger(), nullable=True),
        sa.Column("min_complete", sa.BigInteger(), nullable=True),
        sa.Column("flags", sa.Text(), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("addr", sa.Text(), nullable=True),
        sa.Column("args", sa.Text(), nullable=True),
        sa.Column("partial", sa.Boolean(), nullable=False),
        sa.Column("result", sa.BigInteger(), nullable=True),
        sa.Column("errno", sa.String(length=24), nullable=True),
        sa.Column("duration_ns", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )
    op.create_table(
        "poller_recordings",
        _trace_id(),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("standalone", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=24), nullable=False),
        sa.Column("offset_ns", sa.BigInteger(), nullable=True),
        sa.Column("quality", sa.Float(), nullable=True),
        sa.Column("slack_ns", sa.BigInteger(), nullable=True),
        sa.Column("go_syscalls", sa.BigInteger(), nullable=True),
        sa.Column("matched", sa.BigInteger(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("syscalls", sa.BigInteger(), nullable=False),
        sa.Column("signals", sa.BigInteger(), nullable=False),
        sa.Column("exits", sa.BigInteger(), nullable=False),
        sa.Column("unknown_lines", sa.BigInteger(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=True),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("stopped_by", sa.String(length=16), nullable=True),
        sa.Column("first_wall_ns", sa.BigInteger(), nullable=True),
        sa.Column("last_wall_ns", sa.BigInteger(), nullable=True),
        sa.Column("traced_wall_s", sa.Float(), nullable=True),
        sa.Column("baseline_wall_s", sa.Float(), nullable=True),
        sa.Column("slowdown", sa.Float(), nullable=True),
        sa.Column("strace_cpu_s", sa.Float(), nullable=True),
        sa.Column("strace_version", sa.Text(), nullable=True),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id"),
    )


def downgrade() -> None:
    op.drop_table("poller_recordings")
    op.drop_table("poller_events")
