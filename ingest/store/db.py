"""Database engines: SQLite (embedded default) and PostgreSQL, migrated on open.

SQLite is set up for one writer and many readers: WAL journal, a busy timeout,
foreign keys on, and write transactions that take the write lock up front
(``BEGIN IMMEDIATE``, see :func:`write_tx`) so that two writers never both
read, then fail to upgrade their lock with "database is locked". Readers use
plain ``BEGIN`` (deferred) and never block in WAL mode. pysqlite's own
transaction handling is switched off so that SQLAlchemy's ``begin`` is the one
that emits ``BEGIN`` (the recipe of SQLAlchemy's pysqlite documentation).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from ingest.config import DEFAULT_BUSY_TIMEOUT_MS

#: Execution option that makes a SQLite transaction take the write lock at BEGIN.
WRITE_OPTION = "gmpscope_write"
#: SQLite's page cache per connection, and during a trace load (write_tx(bulk=True)).
PAGE_CACHE_KIB = 65536
#: Page size of a new SQLite database.
PAGE_SIZE = 32768
BULK_PAGE_CACHE_KIB = 8192
#: SQLite's default: a commit that leaves this many pages in the write-ahead
#: log copies them into the database file.
WAL_AUTOCHECKPOINT_PAGES = 1000
#: Arbitrary key of the PostgreSQL advisory lock that serialises migrations.
_PG_MIGRATE_LOCK = 0x676D7073


def make_engine(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
                migrate_to_head: bool = True, echo: bool = False) -> Engine:
    """An Engine for ``url``, upgraded to the newest schema unless told not to.

    SQLite URLs get their parent directory created. PostgreSQL URLs must use
    the psycopg (3) driver: ``postgresql+psycopg://user:pw@host/db``.
    """
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        engine = _sqlite_engine(url, busy_timeout_ms, echo)
    elif u.get_backend_name() == "postgresql":
        if u.get_driver_name() not in ("psycopg", ""):
            raise ValueError(f"use a postgresql+psycopg:// URL, not {u.drivername}")
        if u.get_driver_name() == "":
            u = u.set(drivername="postgresql+psycopg")
        engine = create_engine(u, echo=echo, pool_pre_ping=True)
        event.listen(engine, "connect", _pg_on_connect)
    else:
        raise ValueError(f"unsupported database URL {u.render_as_string()!r}: "
                         "use sqlite:///PATH or postgresql+psycopg://...")
    if migrate_to_head:
        migrate(engine)
        if engine.dialect.name == "sqlite":
            _ensure_intervals_view(engine)
    return engine


def first_row(bind: Engine | Connection, stmt: Any) -> Any:
    """The first row of ``stmt`` (None: no row), on the caller's connection
    (inside its transaction) or on a connection of its own."""
    if isinstance(bind, Connection):
        return bind.execute(stmt).first()
    with bind.connect() as conn:
        return conn.execute(stmt).first()


def _ensure_intervals_view(engine: Engine) -> None:
    """Make the views over rows kept in files (``intervals``, ``proc_runs``,
    ``syscalls``: models.file_views; ``metric_rows_all``, ...:
    coded_files.views) read the files exactly
    when this process can (ingest.store.interval_files): a database first
    opened where the extension was not built gets the files' half once it is.
    Raises IntervalFilesError when traces are kept in files and it is not built."""
    from ingest.store import coded_files, interval_files, models

    files = interval_files.register()
    want = {name: f"CREATE VIEW {name} AS {select}"
            for name, select in {**models.file_views(files), **coded_files.views(files)}.items()}
    with engine.connect() as conn:
        have: dict[str, str] = {str(n): str(q) for n, q in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'view'") if n in want}
        in_files = not files and conn.exec_driver_sql(
            "SELECT 1 FROM interval_files LIMIT 1").scalar() is not None
    if in_files:
        raise interval_files.IntervalFilesError(
            f"{engine.url.database}: traces there keep their intervals in files, read through "
            f"gmpscope's C extension {interval_files.EXTENSION}, which is not built here "
            "(pip install -e . with a C compiler and SQLite's headers)")
    stale = [name for name in want if name in have and have[name] != want[name]]
    if not stale:
        return
    with write_tx(engine) as conn:
        for name in stale:
            conn.exec_driver_sql(f"DROP VIEW {name}")
            conn.exec_driver_sql(want[name])


def _pg_on_connect(dbapi_conn: Any, _record: Any) -> None:
    """PostgreSQL text cannot hold NUL, which trace strings may contain (a
    label or log message is arbitrary bytes): store it as U+FFFD there. The
    Parquet files keep the exact bytes."""
    from psycopg.types.string import StrBinaryDumper, StrDumper

    class NulSafeStrDumper(StrDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd"))

    class NulSafeStrBinaryDumper(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd"))

    dbapi_conn.adapters.register_dumper(str, NulSafeStrDumper)
    dbapi_conn.adapters.register_dumper(str, NulSafeStrBinaryDumper)


def _in_memory(url: URL) -> bool:
    """Whether a SQLite URL names an in-memory database (no file, no log)."""
    return url.database in (None, "", ":memory:")


def _sqlite_engine(url: str, busy_timeout_ms: int, echo: bool) -> Engine:
    u = make_url(url)
    memory = _in_memory(u)
    kwargs: dict[str, Any] = {"echo": echo}
    if memory:
        # One shared connection, or every checkout would see a new empty DB.
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        Path(u.database or "").expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": busy_timeout_ms / 1000,
                                  "check_same_thread": False}
    from ingest.store import interval_files
    from ingest.store.sqlite_fast import register  # here, not at import: it loads numpy

    # Before the first connection: each one opened gets the loader's C binder
    # and the interval files' virtual table.
    register()
    interval_files.register()
    engine = create_engine(u, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        try:
            if not memory:
                # A new database only (a no-op once it has content): 32 KB
                # pages store a trace's millions of rows faster than smaller
                # ones (fewer pages to fill, link and write to the log, each
                # log frame being two writes; docs/ingest.md); 64 KB gained
                # nothing more and writes more for a live service's small
                # commits.
                cur.execute(f"PRAGMA page_size={PAGE_SIZE}")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


@contextmanager
def write_tx(engine: Engine, bulk: bool = False) -> Iterator[Connection]:
    """A connection in a write transaction, committed on success, rolled back
    on any exception. On SQLite it holds the write lock from the start.

    ``bulk`` (a trace load, which appends millions of rows): SQLite keeps a
    small page cache meanwhile (appended pages are never read again in the
    transaction, so a big cache only holds them longer: 55 MB less peak
    memory, same speed), does not check foreign keys row by row, and its
    commit does not copy the write-ahead log into the database file (the
    automatic checkpoint: ~1.3 s for a 300 MB load); the loader runs
    :func:`checkpoint_meanwhile` instead, overlapped with its next work.
    """
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        small = bulk and conn.dialect.name == "sqlite"
        try:
            if small:
                # Every row a load inserts references the trace row it
                # inserted first, in this transaction, under the write lock:
                # checking that per row is 10% of the insert time (measured
                # on 2M interval rows). Only settable outside a transaction.
                driver = conn.connection.driver_connection
                driver.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
                driver.execute("PRAGMA wal_autocheckpoint=0")  # type: ignore[union-attr]
            with conn.begin():
                if small:
                    conn.exec_driver_sql(f"PRAGMA cache_size=-{BULK_PAGE_CACHE_KIB}")
                yield conn
        finally:
            if small and not conn.invalidated:
                # The pool hands this connection out again: the usual cache
                # (through the driver: no new transaction, no write lock).
                driver = conn.connection.driver_connection
                driver.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")  # type: ignore[union-attr]
                driver.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]
                driver.execute(  # type: ignore[union-attr]
                    f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")


@contextmanager
def checkpoint_meanwhile(engine: Engine) -> Iterator[None]:
    """Copy SQLite's write-ahead log into the database file on another thread
    while the block runs (after a bulk load, whose commit left it in the log);
    waits for it at the end. A no-op on other databases.

    Passive: readers and writers go on meanwhile. A checkpoint that fails
    loses nothing (the rows are committed in the log, and the next commit's
    automatic checkpoint copies them), so its error is not raised.
    """
    if engine.dialect.name != "sqlite" or _in_memory(engine.url):
        yield
        return

    def run() -> None:
        try:
            with engine.connect() as conn:
                conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                    "PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    thread = threading.Thread(target=run, name="wal-checkpoint", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def migrate(engine: Engine) -> str | None:
    """Upgrade the schema to the newest Alembic revision; return that revision.

    Safe to call from several processes at once: on SQLite the upgrade runs in
    one IMMEDIATE transaction, on PostgreSQL under an advisory lock.
    """
    # Fast path without Alembic (importing it and reading its scripts is most of
    # a CLI command's start-up): the database is already at the newest revision.
    newest = newest_revision()
    if newest is not None:
        current = current_version(engine)
        if current == newest:
            return newest
        if current is None and _create_if_new(engine, newest):
            return newest
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    # Already at head by Alembic's own reading (without a write lock).
    with engine.connect() as conn:
        if MigrationContext.configure(conn).get_current_revision() == head:
            return head
    with write_tx(engine) as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
        if MigrationContext.configure(conn).get_current_revision() != head:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    return head


def _create_if_new(engine: Engine, revision: str) -> bool:
    """Make the newest schema in one step if the database is new (no table,
    no view: ingest.store.schema_new); False when it is not, for Alembic to migrate.
    Under the same lock as a migration, so a second process finds it made."""
    from ingest.store.schema_new import create_newest, is_empty

    with write_tx(engine) as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
        if not is_empty(conn):
            return False
        create_newest(conn, revision)
    return True


#: Where the Alembic revisions are: ``NNNN_<what>.py`` with revision "NNNN",
#: each revising the one before (tests/ingest/store/test_ingest_db.py checks both).
VERSIONS_DIR = Path(__file__).parent / "migrations" / "versions"


def newest_revision() -> str | None:
    """The newest revision, read from the versions directory's file names."""
    names = sorted(p.name for p in VERSIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.py"))
    return names[-1][:4] if names else None


def current_version(engine: Engine) -> str | None:
    """The revision recorded in the database (its alembic_version row); None
    when there is none (a new database) or it cannot be read."""
    try:
        with engine.connect() as conn:
            value = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except Exception:  # noqa: BLE001 - no table yet, or no answer: Alembic decides
        return None
    return None if value is None else str(value)


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
