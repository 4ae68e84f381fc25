"""proc_run_index kept in files too (SQLite)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05

Each proc run is a goroutine Running interval; its row of proc_run_index
(id, trace_id, interval_id) was stored in SQL (113 MB of the 200 MB
busyservice trace's database) while the frames keep the same thing as
``proc_runs.row.npy`` (the interval's row). On SQLite with gmpscope's C
extension that file is published with the intervals' files and is the home of
those rows: ``proc_run_files`` lists the traces kept so, the virtual table
``gmpscope_proc_run_index`` reads them, and the view ``proc_runs`` reads
proc_run_index UNION ALL that table. Rows already stored stay where they are.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_RUNS = ("SELECT r.id, r.trace_id, i.p, i.start_ts, i.end_ts, i.rid AS g, i.m, i.seq "
         "FROM {index} r JOIN {intervals} i ON i.id = r.interval_id")
# The rows' runs join intervals, the files' the files' intervals (a trace
# keeps both in one place): one UNION ALL of two joins, which SQLite flattens.
_VIEW = _RUNS.format(index="proc_run_index", intervals="intervals")
_VIEW_FILES = (_VIEW + " UNION ALL "
               + _RUNS.format(index="gmpscope_proc_run_index", intervals="gmpscope_intervals"))

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
        "proc_run_files",
        sa.Column("trace_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        *([] if pg else [sa.ForeignKeyConstraint(["trace_id"], ["traces.id"],
                                                 ondelete="CASCADE")]),
        sa.PrimaryKeyConstraint("trace_id"),
    )
    op.execute("DROP VIEW proc_runs")
    op.execute(f"CREATE VIEW proc_runs AS {_VIEW_FILES if _files() else _VIEW}")
    if pg:
        op.execute(_PG_FUNCTION)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and bind.exec_driver_sql(
            "SELECT 1 FROM proc_run_files LIMIT 1").scalar() is not None:
        # The runs kept in files become rows again.
        if not _files():
            raise RuntimeError("proc runs are kept in files, which need gmpscope's C "
                               "extension to be read back as rows")
        op.execute("INSERT INTO proc_run_index (id, trace_id, interval_id) "
                   "SELECT id, trace_id, interval_id FROM gmpscope_proc_run_index")
    op.execute("DROP VIEW proc_runs")
    op.execute(f"CREATE VIEW proc_runs AS {_VIEW}")
    op.drop_table("proc_run_files")
    if bind.dialect.name == "postgresql":
        op.execute(_PG_FUNCTION.replace(
            "    DELETE FROM proc_run_files WHERE trace_id = OLD.id;\n", ""))
