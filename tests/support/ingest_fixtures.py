"""Database fixtures for the ingest tests, parametrised over backends.

Import the fixtures into a test module (``from ingest_fixtures import
db_url, engine  # noqa: F401``). SQLite always runs. PostgreSQL runs when
``GMPSCOPE_TEST_PG_URL`` names a server database whose user may create
databases (``postgresql+psycopg://user@host:port/postgres``): each test then
gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "tests" / "data" / "traces").glob("*.trace"))


def backends() -> list[str]:
    """The backends to test: sqlite, plus postgresql when configured."""
    out = ["sqlite"]
    if os.environ.get("GMPSCOPE_TEST_PG_URL"):
        out.append("postgresql")
    return out


def _pg_database(server_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database on the server; its URL; dropped afterwards."""
    name = f"gmpscope_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def make_db_url(backend: str, directory: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'ingest.store.db'}"
    else:
        yield from _pg_database(os.environ["GMPSCOPE_TEST_PG_URL"])


@pytest.fixture(params=backends())
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database (not migrated yet)."""
    yield from make_db_url(request.param, tmp_path)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on an empty database, migrated to head."""
    from ingest.store.db import make_engine

    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module", params=backends())
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Engine, Path, dict[str, object]]]:
    """(engine, data_dir, {trace file name: IngestResult}): every committed
    trace ingested once, shared by a module's read-only tests."""
    from ingest.load.pipeline import ingest_trace_file
    from ingest.store.db import make_engine

    base = tmp_path_factory.mktemp("loaded")
    for url in make_db_url(request.param, base):
        eng = make_engine(url)
        results: dict[str, object] = {
            t.name: ingest_trace_file(eng, t, data_dir=base / "data") for t in TRACES}
        yield eng, base / "data", results
        eng.dispose()


@pytest.fixture(scope="module")
def decoded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{trace file name: its decoded Parquet directory}."""
    from collectors.gotrace.todir import decode_file_to_dir

    base = tmp_path_factory.mktemp("decoded")
    return {t.name: _decode(decode_file_to_dir, t, base / t.stem) for t in TRACES}


def _decode(fn: object, trace: Path, out: Path) -> Path:
    fn(trace, out)  # type: ignore[operator]
    return out
