"""The ingest service: decoded traces into SQLite or PostgreSQL (issue 3)."""
