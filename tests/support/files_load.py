"""Loading a test trace with its rows kept in files (SQLite with the store's
extension: ingest.store.interval_files, ingest.store.coded_files) or as rows,
whatever this process would choose, and reading SQL back as tuples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.load import eventrows
from ingest.load.pipeline import IngestResult, ingest_trace_file
from ingest.store import interval_files


def load(engine: Engine, trace: Path, data: Path, files: bool,
         monkeypatch: pytest.MonkeyPatch, part_rows: int | None = None) -> IngestResult:
    """Ingest ``trace`` with its intervals (and coded rows) in files or as
    rows; ``part_rows``: the events' tables stored in parts of that many."""
    with monkeypatch.context() as m:
        m.setattr(interval_files, "store_in_files", lambda e: files and e.dialect.name == "sqlite")
        if part_rows is not None:
            m.setattr(eventrows, "PART_ROWS", part_rows)
        return ingest_trace_file(engine, trace, data_dir=data)


def fetch(engine: Engine, sql: str, **params: object) -> list[tuple[Any, ...]]:
    """``sql``'s rows as tuples."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]
