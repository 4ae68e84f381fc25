"""intervals: a view over interval_rows and, on SQLite, the interval files

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05

On SQLite a trace's intervals were kept twice: as SQL rows (815 MB of the
200 MB busyservice trace's database) and as the views' column files. Now the
files can be their home (ingest/store/interval_files.py): the table
``intervals`` is renamed ``interval_rows`` (the rows already stored stay
there), ``interval_files`` lists the traces kept in files, and the view
``intervals`` shows both, with the same columns, so users' SQL and the views
built on it (re-created here) are unchanged. On PostgreSQL every interval stays
a row; the view is the rows, and the delete trigger's function names the
renamed table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_COLUMNS = "id, trace_id, rid, start_ts, seq, end_ts, kind, m, p, g, stack_id"

# Frozen copies of the views over intervals at this revision (unchanged since 0005).
_VIEWS = {
    "transitions": (
        "SELECT i.trace_id, i.seq, i.start_ts AS ts, k.resource, i.rid AS id, "
        "k.from_state, k.to_state, k.reason, i.m, i.p, i.g, i.stack_id "
        "FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind"
    ),
    "interval_view": (
        "SELECT i.id, i.trace_id, k.resource, i.rid, k.to_state AS state, k.from_state, "
        "k.reason, i.start_ts, i.end_ts, i.end_ts - i.start_ts AS duration_ns, i.m, i.p, "
        "i.g, i.stack_id, i.seq "
        "FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind"
    ),
    "thread_intervals": (
        "SELECT i.trace_id, i.m, k.to_state AS state, i.rid AS g, i.p, i.start_ts, "
        "i.end_ts, i.seq FROM intervals i JOIN transition_counts k "
        "ON k.trace_id = i.trace_id AND k.kind = i.kind "
        "WHERE k.resource = 'goroutine' AND k.to_state IN ('Running', 'Syscall') "
        "AND i.m <> -1"
    ),
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
    DELETE FROM row_ranges WHERE trace_id = OLD.id;
    DELETE FROM transition_stacks WHERE trace_id = OLD.id;
    DELETE FROM transition_counts WHERE trace_id = OLD.id;
    DELETE FROM state_edges WHERE trace_id = OLD.id;
    DELETE FROM goroutines WHERE trace_id = OLD.id;
    DELETE FROM procs WHERE trace_id = OLD.id;
    DELETE FROM threads WHERE trace_id = OLD.id;
    DELETE FROM ranges WHERE trace_id = OLD.id;
    DELETE FROM tasks WHERE trace_id = OLD.id;
    DELETE FROM regions WHERE trace_id = OLD.id;
    DELETE FROM logs WHERE trace_id = OLD.id;
    DELETE FROM metrics WHERE trace_id = OLD.id;
    DELETE FROM other_events WHERE trace_id = OLD.id;
    DELETE FROM stacks WHERE trace_id = OLD.id;
    RETURN OLD;
END
$$"""


def _files() -> bool:
    """Whether this process reads interval files (SQLite with the extension)."""
    if op.get_bind().dialect.name != "sqlite":
        return False
    from ingest.store.interval_files import register

    return register()


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for name in _VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.execute("ALTER TABLE intervals RENAME TO interval_rows")
    if pg:
        op.execute("ALTER TABLE interval_rows RENAME CONSTRAINT intervals_pkey "
                   "TO interval_rows_pkey")
    op.create_table(
        "interval_files",
        sa.Column("trace_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("directory", sa.Text(), nullable=False),
        *([] if pg else [sa.ForeignKeyConstraint(["trace_id"], ["traces.id"],
                                                 ondelete="CASCADE")]),
        sa.PrimaryKeyConstraint("trace_id"),
    )
    union = f" UNION ALL SELECT {_COLUMNS} FROM gmpscope_intervals" if _files() else ""
    op.execute(f"CREATE VIEW intervals AS SELECT {_COLUMNS} FROM interval_rows{union}")
    for name, select in _VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {select}")
    if pg:
        op.execute(_PG_FUNCTION)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and bind.exec_driver_sql(
            "SELECT 1 FROM interval_files LIMIT 1").scalar() is not None:
        # The intervals kept in files become rows again (the files are left
        # to the orphans' sweep, ingest.store.interval_files.remove_orphans).
        if not _files():
            raise RuntimeError("traces keep their intervals in files, which need "
                               "gmpscope's C extension to be read back as rows")
        op.execute(f"INSERT INTO interval_rows ({_COLUMNS}) "
                   f"SELECT {_COLUMNS} FROM gmpscope_intervals")
    for name in _VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.execute("DROP VIEW intervals")
    op.drop_table("interval_files")
    op.execute("ALTER TABLE interval_rows RENAME TO intervals")
    if bind.dialect.name == "postgresql":
        op.execute("ALTER TABLE intervals RENAME CONSTRAINT interval_rows_pkey "
                   "TO intervals_pkey")
        op.execute(_PG_FUNCTION.replace("interval_rows", "intervals").replace(
            "    DELETE FROM interval_files WHERE trace_id = OLD.id;\n", ""))
    for name, select in _VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {select}")
