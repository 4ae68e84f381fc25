"""The ingest API service tests' fixtures: a database of each kind, and a server over it."""

from tests.support.ingest_service import db_kind, own_db, shared  # noqa: F401 - fixtures
