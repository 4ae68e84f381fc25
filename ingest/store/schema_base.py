"""What every table of the ingest database is made on: the one MetaData they
all register in, and the trace key and foreign key that per-trace tables
start with. The tables themselves: ingest.store.models (a trace's tables, and
the whole schema), ingest.store.poller_models (OS-side recordings),
ingest.store.live_models (live sessions).
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKeyConstraint, Integer, MetaData

metadata = MetaData()


def trace_key() -> Column[int]:
    # trace_id leading the table's primary key; its foreign key is traces_fk().
    return Column("trace_id", Integer, primary_key=True)


def traces_fk() -> ForeignKeyConstraint:
    # A trace's rows reference traces by a foreign key on SQLite only. On
    # PostgreSQL its per-row check (a key-share lock of the traces row)
    # tripled the load's COPY (2 M interval rows: 23.4 -> 6.6 s without it);
    # there the trigger of PG_DELETE_ROWS removes a deleted trace's rows, as
    # the cascade does on SQLite (whose loads do not check foreign keys).
    return ForeignKeyConstraint(["trace_id"], ["traces.id"],
                                ondelete="CASCADE").ddl_if(dialect="sqlite")
