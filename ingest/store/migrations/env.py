"""Alembic environment: always run programmatically by ingest.store.db.migrate with
a connection already in a transaction (no alembic.ini, no URL here)."""

from __future__ import annotations

from alembic import context

from ingest.store.models import metadata

_conn = context.config.attributes.get("connection")
if _conn is None:  # pragma: no cover - only reachable from the alembic CLI
    raise RuntimeError("run migrations through ingest.store.db.migrate(engine)")
context.configure(
    connection=_conn, target_metadata=metadata, render_as_batch=True, compare_type=True
)
with context.begin_transaction():
    context.run_migrations()
