"""PostgreSQL: a trace's rows deleted by a trigger, not checked by foreign keys

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

On PostgreSQL, every row COPYed into a trace's tables had its foreign key to
``traces`` checked (a key-share lock of the traces row, per row): 2 M interval
rows took 23.4 s with the check and 6.6 s without it, and a load of the 20 MB
benchmark trace 67.9 s with the checks and 15.6 s without. Those foreign keys
(every ON DELETE CASCADE to traces) are dropped there; a BEFORE DELETE trigger
on ``traces`` deletes a trace's rows from every table, the three big ones by
their id blocks in ``row_ranges``, so that deleting a traces row still removes
everything of the trace (faster than the cascade did: it scanned the big
tables' unindexed trace_id). Only the loaders write these tables, in the
transaction that writes the traces row. SQLite is unchanged (its loads do not
check foreign keys, and its cascade stays).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: Every table with a trace's rows (each had ON DELETE CASCADE to traces).
_TABLES = (
    "intervals",
    "proc_run_index",
    "syscall_outcomes",
    "poller_events",
    "poller_recordings",
    "row_ranges",
    "transition_stacks",
    "transition_counts",
    "state_edges",
    "goroutines",
    "procs",
    "threads",
    "ranges",
    "tasks",
    "regions",
    "logs",
    "metrics",
    "other_events",
    "stacks",
)

# Frozen copy of ingest.store.models.PG_DELETE_ROWS at this revision.
_FUNCTION = """CREATE FUNCTION gmpscope_delete_trace_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT table_name, first_id, last_id FROM row_ranges
             WHERE trace_id = OLD.id LOOP
        IF r.table_name = 'intervals' THEN
            DELETE FROM intervals
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
_TRIGGER = ("CREATE TRIGGER traces_delete_rows BEFORE DELETE ON traces "
            "FOR EACH ROW EXECUTE FUNCTION gmpscope_delete_trace_rows()")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    insp = sa.inspect(bind)
    for table in _TABLES:
        for fk in insp.get_foreign_keys(table):
            name = fk.get("name")
            if fk["referred_table"] == "traces" and name:
                op.drop_constraint(name, table, type_="foreignkey")
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER traces_delete_rows ON traces")
    op.execute("DROP FUNCTION gmpscope_delete_trace_rows()")
    for table in _TABLES:
        op.create_foreign_key(f"{table}_trace_id_fkey", table, "traces", ["trace_id"], ["id"],
                              ondelete="CASCADE")
