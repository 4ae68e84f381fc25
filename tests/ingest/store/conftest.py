"""Fixtures of the store's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from ingest.store.db import make_engine
from tests.support.ingest_fixtures import make_db_url


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Engine]:
    """A new PostgreSQL database at the newest schema (the test skips without
    GMPSCOPE_TEST_PG_URL: its module's mark)."""
    for url in make_db_url("postgresql", tmp_path):
        eng = make_engine(url)
        yield eng
        eng.dispose()
