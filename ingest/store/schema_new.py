"""A new, empty database made at the newest schema in one step, without Alembic.

Alembic's own recipe for a database built from scratch: create the tables from
the models, then record the newest revision (``alembic stamp head``) so that
later migrations start from there. It saves loading Alembic and replaying
every revision into a database that has nothing to migrate: a ``gmpscope
ingest`` into a new database peaks ~9 MB lower and spends ~5% less CPU
(``bench/ingest_ab.py``; its wall time is the decode's, which the start-up
overlaps), and a server does not keep Alembic in memory for good.
``tests/ingest/store/test_schema_new.py`` checks, on SQLite and PostgreSQL, that
the schema made here is the one the migrations make, table by table: columns,
types, keys, indexes, views and (PostgreSQL) the trigger on ``traces``.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

from ingest.store import coded_files, models, pg_chunks

#: Alembic's version table, as ``alembic stamp`` makes it.
_VERSION_TABLE = (
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
)


def is_empty(conn: Connection) -> bool:
    """Whether the database has no table and no view at all."""
    insp = inspect(conn)
    return not insp.get_table_names() and not insp.get_view_names()


def create_newest(conn: Connection, revision: str) -> None:
    """Make every table and view of the newest schema in ``conn``'s (write)
    transaction, and record ``revision`` as the database's Alembic revision."""
    from ingest.store.interval_files import register

    models.metadata.create_all(conn)
    files = conn.dialect.name == "sqlite" and register()
    shared = models.dialect_views(conn.dialect.name)
    coded = coded_files.views(files)
    views = {**models.file_views(files), **{k: v for k, v in shared.items()
                                           if k not in models.file_views(files)
                                           and k not in coded}}
    if conn.dialect.name == "postgresql":
        views.update(pg_chunks.pg_views())
    views.update(coded)  # last: the coded views read the <table>_all views
    for name, select in views.items():
        conn.execute(text(f"CREATE VIEW {name} AS {select}"))
    if conn.dialect.name == "postgresql":
        for statement in models.PG_DELETE_ROWS:
            conn.exec_driver_sql(statement)
    conn.execute(text(_VERSION_TABLE))
    conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"),
                 {"v": revision})
