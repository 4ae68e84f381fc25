"""syscall_outcomes kept in files too (SQLite)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

As 0010 did for proc_run_index: a syscall's row of syscall_outcomes (id,
trace_id, interval_id and what happened to its P) is what the frames keep as
``syscalls.*.npy`` (its interval's row and its own columns, the outcome as a
code). On SQLite with gmpscope's C extension those files are its home:
``syscall_files`` lists the traces kept so, the virtual table
``gmpscope_syscall_outcomes`` reads them (NULL where the frames hold -1, the
outcome's text from its code), and the view ``syscalls`` reads
syscall_outcomes UNION ALL that table. Rows already stored stay where they are.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_COLUMNS = "id, trace_id, interval_id, start_known, outcome, p_lost, stolen_ts, stolen_by_m"
# Frozen: the view without files, and with them.
_SELECT = ("SELECT s.id, s.trace_id, i.rid AS goid, i.start_ts, i.seq, i.end_ts, "
           "i.end_ts - i.start_ts AS duration_ns, i.m, i.p, s.start_known, s.outcome, "
           "s.p_lost, s.stolen_ts, s.stolen_by_m, i.stack_id "
           "FROM {source} s JOIN {intervals} i ON i.id = s.interval_id")
# As 0010: the rows' syscalls join intervals, the files' the files' intervals.
_VIEW = _SELECT.format(source="syscall_outcomes", intervals="intervals")
_VIEW_FILES = (_VIEW + " UNION ALL " + _SELECT.format(source="gmpscope_syscall_outcomes",
                                                     intervals="gmpscope_intervals"))

# Frozen copy of ingest.store.models.PG_DELETE_ROWS's function at this revision.
_PG_FUNCTION = """CREATE OR REPLACE FUNCTION gmpscope_delete_trace_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT table_name, first_id, last_id FROM row_ranges
             WHERE trace_id = OLD.id LOOP
        IF r.table_name = 'intervals' THEN
            DELETE FROM interval_rows
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'proc_runs' THEN
            DELETE FROM proc_run_index
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'syscalls' THEN
            DELETE FROM syscall_outcomes
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        END IF;
    END LOOP;
    DELETE FROM poller_events WHERE trace_id = OLD.id;
    DELETE FROM poller_recordings WHERE trace_id = OLD.id;
    DELETE FROM interval_files WHERE trace_id = OLD.id;
    DELETE FROM proc_run_files WHERE trace_id = OLD.id;
    DELETE FROM syscall_files WHERE trace_id = OLD.id;
    DELETE FROM row_ranges WHERE trace_id = OLD.id;
    DELETE FROM transition_stacks WHERE trace_id = OLD.id;
    DELETE FROM transition_counts WHERE trace_id = OLD.id;
    DELETE FROM state_edges WHERE trace_id = OLD.id;
    DELETE FROM metric_rows WHERE trace_id = OLD.id;
    DELETE FROM log_rows WHERE trace_id = OLD.id;
    DELETE FROM range_rows WHERE trace_id = OLD.id;
    DELETE FROM task_rows WHERE trace_id = OLD.id;
    DELETE FROM region_rows WHERE trace_id = OLD.id;
    DELETE FROM goroutine_rows WHERE trace_id = OLD.id;
    DELETE FROM strings WHERE trace_id = OLD.id;
    DELETE FROM procs WHERE trace_id = OLD.id;
    DELETE FROM threads WHERE trace_id = OLD.id;
    DELETE FROM other_events WHERE trace_id = OLD.id;
    DELETE FROM stacks WHERE trace_id = OLD.id;
    RETURN OLD;
END
$$"""


def _files() -> bool:
    """Whether this process reads files (SQLite with the extension)."""
    if op.get_bind().dialect.name != "sqlite":
        return False
    from ingest.store.interval_files import register

    return register()


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "syscall_files",
        sa.Column("trace_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        *([] if pg else [sa.ForeignKeyConstraint(["trace_id"], ["traces.id"],
                                                 ondelete="CASCADE")]),
        sa.PrimaryKeyConstraint("trace_id"),
    )
    op.execute("DROP VIEW syscalls")
    op.execute(f"CREATE VIEW syscalls AS {_VIEW_FILES if _files() else _VIEW}")
    if pg:
        op.execute(_PG_FUNCTION)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and bind.exec_driver_sql(
            "SELECT 1 FROM syscall_files LIMIT 1").scalar() is not None:
        # The syscalls kept in files become rows again.
        if not _files():
            raise RuntimeError("syscalls are kept in files, which need gmpscope's C "
                               "extension to be read back as rows")
        op.execute(f"INSERT INTO syscall_outcomes ({_COLUMNS}) "
                   f"SELECT {_COLUMNS} FROM gmpscope_syscall_outcomes")
    op.execute("DROP VIEW syscalls")
    op.execute(f"CREATE VIEW syscalls AS {_VIEW}")
    op.drop_table("syscall_files")
    if bind.dialect.name == "postgresql":
        op.execute(_PG_FUNCTION.replace(
            "    DELETE FROM syscall_files WHERE trace_id = OLD.id;\n", ""))
