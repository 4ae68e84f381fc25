"""proc_runs and syscalls become views over intervals

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Every proc run is a goroutine Running interval and every syscall a goroutine
Syscall interval: their goroutine, times, M, P, seq and stack were stored
twice. Now ``proc_run_index`` keeps, in (p, time) order, the id of each run's
interval, and ``syscall_outcomes`` the interval id plus what only a syscall
has (how it ended for its P); the views ``proc_runs`` and ``syscalls`` show
the same columns as the old tables, with the same ids (row_ranges is
unchanged). Existing rows are carried over through their seq.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Frozen copies (a later revision changes them with its own statements).
_VIEWS = {
    "proc_runs": (
        "SELECT r.id, r.trace_id, i.p, i.start_ts, i.end_ts, i.rid AS g, i.m, i.seq "
        "FROM proc_run_index r JOIN intervals i ON i.id = r.interval_id"
    ),
    "syscalls": (
        "SELECT s.id, s.trace_id, i.rid AS goid, i.start_ts, i.seq, i.end_ts, "
        "i.end_ts - i.start_ts AS duration_ns, i.m, i.p, s.start_known, s.outcome, "
        "s.p_lost, s.stolen_ts, s.stolen_by_m, i.stack_id "
        "FROM syscall_outcomes s JOIN intervals i ON i.id = s.interval_id"
    ),
}


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                     autoincrement=False, nullable=False)


def _trace_id() -> sa.Column[int]:
    return sa.Column("trace_id", sa.Integer(), nullable=False)


def _fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "proc_run_index", _id(), _trace_id(),
        sa.Column("interval_id", sa.BigInteger(), nullable=False),
        _fk(), sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "syscall_outcomes", _id(), _trace_id(),
        sa.Column("interval_id", sa.BigInteger(), nullable=False),
        sa.Column("start_known", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("p_lost", sa.Boolean(), nullable=False),
        sa.Column("stolen_ts", sa.BigInteger(), nullable=True),
        sa.Column("stolen_by_m", sa.BigInteger(), nullable=True),
        _fk(), sa.PrimaryKeyConstraint("id"),
    )
    # A run's or syscall's interval is the trace's interval with its seq.
    op.execute("CREATE INDEX tmp_intervals_trace_seq ON intervals (trace_id, seq)")
    op.execute(
        "INSERT INTO proc_run_index (id, trace_id, interval_id) "
        "SELECT r.id, r.trace_id, i.id FROM proc_runs r "
        "JOIN intervals i ON i.trace_id = r.trace_id AND i.seq = r.seq")
    op.execute(
        "INSERT INTO syscall_outcomes (id, trace_id, interval_id, start_known, outcome, "
        "p_lost, stolen_ts, stolen_by_m) "
        "SELECT s.id, s.trace_id, i.id, s.start_known, s.outcome, s.p_lost, s.stolen_ts, "
        "s.stolen_by_m FROM syscalls s "
        "JOIN intervals i ON i.trace_id = s.trace_id AND i.seq = s.seq")
    op.execute("DROP INDEX tmp_intervals_trace_seq")
    op.drop_table("proc_runs")
    op.drop_table("syscalls")
    for name, select in _VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def downgrade() -> None:
    op.create_table(
        "proc_runs_old", _id(), _trace_id(),
        sa.Column("p", sa.BigInteger(), nullable=False),
        sa.Column("start_ts", sa.BigInteger(), nullable=False),
        sa.Column("end_ts", sa.BigInteger(), nullable=False),
        sa.Column("g", sa.BigInteger(), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        _fk(), sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "syscalls_old", _id(), _trace_id(),
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
        _fk(), sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO proc_runs_old SELECT id, trace_id, p, start_ts, end_ts, g, m, seq "
               "FROM proc_runs")
    op.execute("INSERT INTO syscalls_old SELECT id, trace_id, goid, start_ts, seq, end_ts, "
               "duration_ns, m, p, start_known, outcome, p_lost, stolen_ts, stolen_by_m, "
               "stack_id FROM syscalls")
    for name in _VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.drop_table("proc_run_index")
    op.drop_table("syscall_outcomes")
    op.rename_table("proc_runs_old", "proc_runs")
    op.rename_table("syscalls_old", "syscalls")
