"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-02

Created with alembic's autogenerate from ingest/store/models.py, plus the SQL
views users query.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copy (a later revision changes views with its own statements).
_VIEWS = {
    "transitions": (
        "SELECT i.trace_id, i.seq, i.start_ts AS ts, k.resource, i.rid AS id, "
        "k.from_state, k.to_state, k.reason, i.m, i.p, i.g, i.stack_id FROM "
        "intervals i JOIN transition_counts k ON k.trace_id = i.trace_id AND "
        "k.kind = i.kind"
    ),
    "interval_view": (
        "SELECT i.id, i.trace_id, k.resource, i.rid, k.to_state AS state, "
        "k.from_state, k.reason, i.start_ts, i.end_ts, i.end_ts - i.start_ts AS "
        "duration_ns, i.m, i.p, i.g, i.stack_id, i.seq FROM intervals i JOIN "
        "transition_counts k ON k.trace_id = i.trace_id AND k.kind = i.kind"
    ),
    "thread_intervals": (
        "SELECT i.trace_id, i.m, k.to_state AS state, i.rid AS g, i.p, "
        "i.start_ts, i.end_ts, i.seq FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind WHERE k.resource = "
        "'goroutine' AND k.to_state IN ('Running', 'Syscall') AND i.m <> -1"
    ),
}


def upgrade() -> None:
    op.create_table(
        "traces",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("go_version", sa.String(length=16), nullable=False),
        sa.Column("family", sa.String(length=4), nullable=False),
        sa.Column("ticks_per_sec", sa.BigInteger(), nullable=True),
        sa.Column("generations", sa.Integer(), nullable=True),
        sa.Column("first_ts", sa.BigInteger(), nullable=True),
        sa.Column("last_ts", sa.BigInteger(), nullable=True),
        sa.Column("wall_start_ns", sa.BigInteger(), nullable=True),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("transitions", sa.BigInteger(), nullable=False),
        sa.Column("goroutines", sa.Integer(), nullable=False),
        sa.Column("procs", sa.Integer(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("stacks", sa.Integer(), nullable=False),
        sa.Column("event_counts", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("bytes_lost", sa.BigInteger(), nullable=False),
        sa.Column("generations_lost", sa.Integer(), nullable=False),
        sa.Column("loss_offset", sa.BigInteger(), nullable=False),
        sa.Column("loss_error", sa.Text(), nullable=False),
        sa.Column("ingest_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sha256"),
    )
    op.create_table(
        "goroutines",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("goid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("start_function", sa.Text(), nullable=True),
        sa.Column("start_stack_id", sa.BigInteger(), nullable=True),
        sa.Column("created_ts", sa.BigInteger(), nullable=True),
        sa.Column("ended_ts", sa.BigInteger(), nullable=True),
        sa.Column("parent_goid", sa.BigInteger(), nullable=True),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("final_state", sa.String(length=16), nullable=False),
        sa.Column("transitions", sa.BigInteger(), nullable=False),
        sa.Column("running_ns", sa.BigInteger(), nullable=False),
        sa.Column("runnable_ns", sa.BigInteger(), nullable=False),
        sa.Column("waiting_ns", sa.BigInteger(), nullable=False),
        sa.Column("syscall_ns", sa.BigInteger(), nullable=False),
        sa.Column("first_interval", sa.BigInteger(), nullable=False),
        sa.Column("last_interval", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "goid"),
    )
    op.create_table(
        "intervals",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("rid", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("end_ts", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.SmallInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "logs",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )
    op.create_table(
        "metrics",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=True),
        sa.Column("value_str", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )
    op.create_table(
        "other_events",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(length=16), nullable=True),
        sa.Column("scope_id", sa.BigInteger(), nullable=True),
        sa.Column("attrs", sa.Text(), nullable=True),
        sa.Column("sync_n", sa.BigInteger(), nullable=True),
        sa.Column("clock_trace_ns", sa.BigInteger(), nullable=True),
        sa.Column("clock_mono_ns", sa.BigInteger(), nullable=True),
        sa.Column("clock_wall_ns", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )
    op.create_table(
        "proc_runs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=False),
        sa.Column("end_ts", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "procs",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("pid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("final_state", sa.String(length=16), nullable=False),
        sa.Column("transitions", sa.BigInteger(), nullable=False),
        sa.Column("running_ns", sa.BigInteger(), nullable=False),
        sa.Column("idle_ns", sa.BigInteger(), nullable=False),
        sa.Column("goroutines_run", sa.BigInteger(), nullable=False),
        sa.Column("first_interval", sa.BigInteger(), nullable=False),
        sa.Column("last_interval", sa.BigInteger(), nullable=False),
        sa.Column("first_run", sa.BigInteger(), nullable=True),
        sa.Column("last_run", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "pid"),
    )
    op.create_table(
        "ranges",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=True),
        sa.Column("end_ts", sa.BigInteger(), nullable=True),
        sa.Column("active_at_start", sa.Boolean(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.Column("end_attrs", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "id"),
    )
    op.create_table(
        "regions",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=True),
        sa.Column("end_ts", sa.BigInteger(), nullable=True),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "id"),
    )
    op.create_table(
        "row_ranges",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("table_name", sa.String(length=32), nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "table_name"),
    )
    op.create_table(
        "stacks",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("stack_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("depth", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("function", sa.Text(), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("line", sa.BigInteger(), nullable=False),
        sa.Column("pc", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "stack_id", "depth"),
    )
    op.create_table(
        "state_edges",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=16), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=False),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("dwell_count", sa.BigInteger(), nullable=False),
        sa.Column("dwell_mean_ns", sa.Float(), nullable=True),
        sa.Column("dwell_p50_ns", sa.BigInteger(), nullable=True),
        sa.Column("dwell_p99_ns", sa.BigInteger(), nullable=True),
        sa.Column("dwell_max_ns", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "resource", "from_state", "to_state"),
    )
    op.create_table(
        "syscalls",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("goid", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("end_ts", sa.BigInteger(), nullable=False),
        sa.Column("duration_ns", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("start_known", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("p_lost", sa.Boolean(), nullable=False),
        sa.Column("stolen_ts", sa.BigInteger(), nullable=True),
        sa.Column("stolen_by_m", sa.BigInteger(), nullable=True),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "tasks",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("start_ts", sa.BigInteger(), nullable=True),
        sa.Column("end_ts", sa.BigInteger(), nullable=True),
        sa.Column("start_g", sa.BigInteger(), nullable=True),
        sa.Column("end_g", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "task_id"),
    )
    op.create_table(
        "threads",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("m", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("transitions", sa.BigInteger(), nullable=False),
        sa.Column("running_ns", sa.BigInteger(), nullable=False),
        sa.Column("syscall_ns", sa.BigInteger(), nullable=False),
        sa.Column("syscalls", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "m"),
    )
    op.create_table(
        "transition_counts",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("resource", sa.String(length=16), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=False),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "kind"),
    )
    op.create_table(
        "transition_stacks",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("stack_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "seq"),
    )
    for name, select in _VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def downgrade() -> None:
    for name in _VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_table("transition_stacks")
    op.drop_table("transition_counts")
    op.drop_table("threads")
    op.drop_table("tasks")
    op.drop_table("syscalls")
    op.drop_table("state_edges")
    op.drop_table("stacks")
    op.drop_table("row_ranges")
    op.drop_table("regions")
    op.drop_table("ranges")
    op.drop_table("procs")
    op.drop_table("proc_runs")
    op.drop_table("other_events")
    op.drop_table("metrics")
    op.drop_table("logs")
    op.drop_table("intervals")
    op.drop_table("goroutines")
    op.drop_table("traces")
