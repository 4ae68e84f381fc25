"""SQLite: the coded tables' rows kept in column files (coded_files)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06

Additive; no row moves. The table ``coded_files`` lists the parts of a trace's
``metric_rows``, ``log_rows``, ``region_rows``, ``goroutine_rows``, ``task_rows``
and ``range_rows`` that SQLite keeps in column files
(ingest/store/coded_files.py; PostgreSQL never lists any). The views
``<table>_all`` show each table's rows, and the files' where the process reads
them (SQLite with the extension; a process that does not remakes them:
ingest.store.db); the six coded views read them. On PostgreSQL the delete
trigger deletes a trace's ``coded_files`` rows too. Downgrade moves the rows
kept in files into their tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ingest.store import coded_files, models, pg_coded
from ingest.store.coded_models import CODED, FILE_TABLES

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_VIEW_OF = {"metric_rows": "metrics", "log_rows": "logs", "region_rows": "regions",
            "goroutine_rows": "goroutines", "task_rows": "tasks", "range_rows": "ranges"}
_VIEWS = tuple(_VIEW_OF.values())


def _trigger(listed: bool) -> None:
    function, trigger = models.pg_delete_rows(pg_coded.VIEWS_0017, listed=listed)
    op.execute("DROP TRIGGER traces_delete_rows ON traces")
    op.execute("DROP FUNCTION gmpscope_delete_trace_rows()")
    op.execute(function)
    op.execute(trigger)


def _files() -> bool:
    """Whether this process reads files (SQLite with the extension)."""
    if op.get_bind().dialect.name != "sqlite":
        return False
    from ingest.store.interval_files import register

    return register()


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "coded_files",
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.Column("table_name", sa.String(length=32), nullable=False),
        sa.Column("part", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("first_key", sa.BigInteger(), nullable=False),
        sa.Column("last_key", sa.BigInteger(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("directory", sa.Text(), nullable=False),
        *([sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE")]
          if sqlite else []),
        sa.PrimaryKeyConstraint("trace_id", "table_name", "part"),
    )
    for view in _VIEWS:
        op.execute(f"DROP VIEW {view}")
    for name, select in coded_files.views(_files()).items():
        op.execute(f"CREATE VIEW {name} AS {select}")
    if not sqlite:
        _trigger(listed=True)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite and op.get_bind().exec_driver_sql(
            "SELECT 1 FROM coded_files LIMIT 1").scalar() is not None:
        # The rows kept in files move into their tables (read through the
        # store's extension, which a database with such rows is opened with).
        for table in FILE_TABLES:
            cols = ", ".join(c.name for c in CODED[_VIEW_OF[table]].table.columns)
            op.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM "
                       f"{coded_files.vtab(table)}")
    for name in reversed(list(coded_files.views(False))):
        op.execute(f"DROP VIEW {name}")
    for view in _VIEWS:
        op.execute(f"CREATE VIEW {view} AS {CODED[view].select_sql()}")
    if not sqlite:
        _trigger(listed=False)
    op.drop_table("coded_files")
