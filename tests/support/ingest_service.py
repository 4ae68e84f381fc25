"""The ingest API's service tests' common ground: a fresh database per test or
module (an SQLite file, or a database of its own in the private PostgreSQL
cluster of ``tools/postgres.py``), ``gmpscope ingest-server`` over it, and
the upload requests a client sends."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from tests.support.server import Served
from tools import postgres

REPO = Path(__file__).resolve().parents[2]
#: The committed real traces the uploads send.
TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace"))
TRACE = REPO / "tests" / "data" / "traces" / "go1.22-workers.trace"
SMALL = REPO / "tests" / "data" / "traces" / "go1.19-mixed.trace"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

# --------------------------------------------------------------------------
# databases


class Database:
    """A fresh, empty database for a test (module), and direct SQL access to it."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind = kind
        self._pg_name = ""
        if kind == "sqlite":
            self.url = f"sqlite:///{tmp / 'gmpscope.db'}"
        else:
            self._pg_name = f"gmpscope_t_{uuid.uuid4().hex[:12]}"
            self.url = postgres.create_database(self._pg_name)
        self._engine: sa.Engine | None = None

    @property
    def engine(self) -> sa.Engine:
        if self._engine is None:
            self._engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        if self._pg_name:
            postgres.drop_database(self._pg_name)

    def tables(self) -> list[str]:
        return sorted(t for t in sa.inspect(self.engine).get_table_names()
                      if t != "alembic_version")

    def row_counts(self) -> dict[str, int]:
        """Rows in every table: the whole database's state, cheaply compared."""
        with self.engine.connect() as c:
            return {t: c.execute(sa.text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one()
                    for t in self.tables()}

    def trace_shas(self) -> list[str]:
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(sa.text("SELECT sha256 FROM traces"))]

    def orphans(self) -> dict[str, int]:
        """Rows that belong to no committed trace, per table (should be none)."""
        insp = sa.inspect(self.engine)
        out: dict[str, int] = {}
        with self.engine.connect() as c:
            for t in self.tables():
                cols = {col["name"] for col in insp.get_columns(t)}
                if t == "traces" or "trace_id" not in cols:
                    continue
                n = c.execute(sa.text(
                    f'SELECT COUNT(*) FROM "{t}" WHERE trace_id NOT IN (SELECT id FROM traces)'
                )).scalar_one()
                if n:
                    out[t] = n
        return out


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind == "postgresql":
        try:
            postgres.start()
        except postgres.PostgresError as e:  # pragma: no cover - setup problem
            pytest.fail(f"PostgreSQL for tests: {e} (run `make test-setup`)")
    return kind


def new_db(kind: str, tmp: Path) -> Database:
    return Database(kind, tmp)


# --------------------------------------------------------------------------
# servers


class IngestServer(Served):
    """``gmpscope ingest-server`` over ``db`` and ``data_dir`` (a :class:`Served`
    that knows its database)."""

    def __init__(self, db: Database, data_dir: Path, *args: str,
                 token: str | None = None) -> None:
        self.db = db
        super().__init__(data_dir, db_url=db.url, token=token, extra_args=args,
                         subcommand="ingest-server")


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_raw(server: Served, path: Path | bytes, name: str = "t",
             token: str | None = None, chunked: bool = False) -> requests.Response:
    data = path.read_bytes() if isinstance(path, Path) else path
    body: Any = data
    if chunked:
        body = (data[i:i + 65536] for i in range(0, len(data), 65536))
    return requests.post(server.api("/api/traces"), params={"name": name}, data=body,
                         headers={"Content-Type": "application/octet-stream",
                                  **auth(token or server.token)})


def post_multipart(server: Served, path: Path, token: str | None = None,
                   route: str = "/api/traces", **fields: str) -> requests.Response:
    with open(path, "rb") as f:
        return requests.post(server.api(route), files={"file": (path.name, f)},
                             data=fields, headers=auth(token or server.token))


@pytest.fixture(scope="module")
def shared(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IngestServer]:
    """One server per database kind for the tests that do not need their own."""
    tmp = tmp_path_factory.mktemp(f"ingest-{db_kind}")
    db = new_db(db_kind, tmp)
    server = IngestServer(db, tmp / "data")
    yield server
    assert server.stop() == 0
    db.close()


@pytest.fixture
def own_db(db_kind: str, tmp_path: Path) -> Iterator[Database]:
    db = new_db(db_kind, tmp_path)
    yield db
    db.close()




def post_archive(server: Served, data: bytes, multipart: bool = False,
                 name: str = "pq") -> requests.Response:
    if multipart:
        return requests.post(server.api("/api/traces/parquet"), params={"name": name},
                             files={"file": ("d.zip", data)}, headers=auth(server.token))
    return requests.post(server.api("/api/traces/parquet"), params={"name": name}, data=data,
                         headers={"Content-Type": "application/octet-stream",
                                  **auth(server.token)})
