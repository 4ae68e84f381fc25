"""Database life cycle: migrations, atomic loads, bad input, delete, the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text

from ingest.load.delete import delete_trace
from ingest.load.pipeline import (
    BadParquetError,
    BadTraceError,
    IngestError,
    ingest_trace_file,
    load_parquet_dir,
)
from ingest.store import models, pg_chunks, pg_coded
from ingest.store.db import PAGE_SIZE, current_revision, make_engine, migrate
from tests.support.ingest_fixtures import ROOT, TRACES, db_url, engine

# Fixtures come from ingest_fixtures; pytest finds them as module attributes.
FIXTURES = (db_url, engine)


def _snapshot(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, sorted: the database's content."""
    out = {}
    with engine.connect() as conn:
        for name in sorted(inspect(conn).get_table_names()):
            rows = conn.execute(text(f'SELECT * FROM "{name}"')).all()
            out[name] = sorted((tuple(r) for r in rows), key=repr)
    return out


def _head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(ROOT / "ingest" / "store" / "migrations"))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def test_migrations_upgrade_empty_db_to_head(db_url: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest.store import db

    # Through the migrations themselves, not the new database's one step
    # (tests/ingest/store/test_schema_new.py compares the two).
    monkeypatch.setattr(db, "_create_if_new", lambda engine, revision: False)
    eng = make_engine(db_url, migrate_to_head=False)
    try:
        assert current_revision(eng) is None
        assert migrate(eng) == _head()
        assert current_revision(eng) == _head()
        names = set(inspect(eng).get_table_names())
        views = set(inspect(eng).get_view_names())
        if eng.dialect.name == "postgresql":
            # The big three's rows are chunks there, behind views of their names,
            # and the biggest coded tables' too.
            chunked = {c.view for c in pg_chunks.CHUNKED.values()} | set(pg_coded.BY_TABLE)
            assert chunked <= views and not chunked & names
            assert {c.chunks for c in [*pg_chunks.CHUNKED.values(),
                                       *pg_coded.CHUNKED.values()]} <= names
            names |= chunked
        assert set(models.metadata.tables) <= names
        assert {"transitions", "interval_view", "thread_intervals"} <= set(
            inspect(eng).get_view_names())
        with eng.connect() as conn:  # the views are valid SQL on an empty database
            for view in ("transitions", "interval_view", "thread_intervals"):
                assert conn.execute(text(f"SELECT count(*) FROM {view}")).scalar() == 0
        # Opening again (a second process, the next version) is a no-op.
        assert migrate(eng) == _head()
    finally:
        eng.dispose()


def test_versions_directory_names_the_newest_revision() -> None:
    """migrate's fast path reads the newest revision from the file names: each
    file NNNN_*.py holds revision NNNN, revising the file before it."""
    import re

    from ingest.store.db import VERSIONS_DIR, newest_revision

    files = sorted(VERSIONS_DIR.glob("*.py"))
    assert files and newest_revision() == _head()
    previous = None
    for f in files:
        assert re.fullmatch(r"\d{4}_\w+\.py", f.name), f.name
        text_ = f.read_text()
        assert f'revision = "{f.name[:4]}"' in text_, f.name
        assert (f"down_revision = {previous!r}" if previous is None else
                f'down_revision = "{previous}"') in text_, f.name
        previous = f.name[:4]


def test_a_database_at_head_opens_without_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    code = ("import sys; from ingest.store.db import make_engine; make_engine({url!r}).dispose(); "
            "print('alembic' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code.format(url=url)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    # The new database is made in one step (ingest.store.schema_new, no Alembic
    # either); the next process finds it at head.
    assert [r.stdout.strip() for r in runs] == ["False", "False"]


def _migrate_to(engine: Engine, how: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(ROOT / "ingest" / "store" / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, how)(cfg, revision)


def test_migration_0005_keeps_runs_and_syscalls(engine: Engine, tmp_path: Path) -> None:
    """0005 turned proc_runs and syscalls into views over intervals: a database
    holding them as tables (0004, made here by the downgrade) upgrades with
    every row as it was, and back."""
    from tests.support.consistency import trace_problems

    mixed = ROOT / "tests" / "data" / "traces" / "go1.23-workers.trace"
    res = ingest_trace_file(engine, mixed, data_dir=tmp_path / "data")

    def rows() -> dict[str, list[tuple[object, ...]]]:
        with engine.connect() as conn:
            return {v: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {v} ORDER BY id"))]
                    for v in ("proc_runs", "syscalls")}

    views = rows()
    assert len(views["proc_runs"]) > 1000 and len(views["syscalls"]) > 1000
    _migrate_to(engine, "downgrade", "0004")
    assert {"proc_runs", "syscalls"} <= set(inspect(engine).get_table_names())
    assert rows() == views
    assert migrate(engine) == _head()
    assert {"proc_runs", "syscalls"} <= set(inspect(engine).get_view_names())
    assert rows() == views
    assert trace_problems(engine, res.id, tmp_path / "data") == []


def _trace_fks(engine: Engine) -> dict[str, list[str]]:
    insp = inspect(engine)
    # The tables of a trace's rows at the database's revision (before 0008
    # the intervals' table was called intervals).
    names = ({t.name for t in models.TRACE_TABLES} | {"intervals"}) & set(insp.get_table_names())
    return {name: sorted(f["referred_table"] for f in insp.get_foreign_keys(name))
            for name in sorted(names)}


def test_migration_0006_trace_rows_without_fk_on_postgresql(engine: Engine,
                                                           tmp_path: Path) -> None:
    """0006 drops, on PostgreSQL only, the foreign keys of a trace's tables
    (their per-row check tripled the COPY) for a trigger on traces that deletes
    their rows: a database with a trace made at 0005 upgrades, and deleting the
    traces row still removes every row of the trace. SQLite keeps its cascade."""
    from tests.support.consistency import database_problems

    small = ROOT / "tests" / "data" / "traces" / "go1.23-workers.trace"
    ingest_trace_file(engine, small, data_dir=tmp_path / "data")
    pg = engine.dialect.name == "postgresql"
    assert _trace_fks(engine) == {t: [] if pg else ["traces"] for t in _trace_fks(engine)}
    _migrate_to(engine, "downgrade", "0005")
    assert all(fks == ["traces"] for fks in _trace_fks(engine).values())
    assert migrate(engine) == _head()
    assert _trace_fks(engine) == {t: [] if pg else ["traces"] for t in _trace_fks(engine)}
    other = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    with engine.begin() as conn:  # a user's own delete, not delete_trace
        conn.execute(models.traces.delete().where(models.traces.c.id != other.id))
    assert database_problems(engine) == []
    with engine.connect() as conn:
        for table in (t.name for t in models.TRACE_TABLES):
            left = conn.execute(text(f"SELECT DISTINCT trace_id FROM {table}")).scalars().all()
            assert left in ([other.id], []), table
        assert conn.execute(text("SELECT count(*) FROM intervals")).scalar() == \
            conn.execute(text("SELECT transitions FROM traces")).scalar()


def _table_rows(engine: Engine, names: tuple[str, ...]) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        return {t: sorted(tuple(r) for r in conn.execute(text(f"SELECT * FROM {t}")))
                for t in names}


def _without_rowid(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {name for name, sql in conn.execute(text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
            if sql.rstrip().upper().endswith("WITHOUT ROWID")}


def test_migration_0007_keyed_tables_without_rowid(engine: Engine, tmp_path: Path) -> None:
    """0007 rebuilds, on SQLite, the tables keyed by (trace_id, seq or id)
    WITHOUT ROWID (no second copy of each row in an automatic index): a
    database with a trace made at 0006 upgrades with every row kept, and
    takes the next trace."""
    keyed = ("transition_stacks", "goroutines", "ranges", "tasks", "regions", "logs",
             "metrics", "other_events", "stacks", "poller_events")
    from ingest.store.coded_models import CODED

    # At head six of them are views over coded tables (0009), also WITHOUT
    # ROWID, and 0013's OS scheduling spans are made so.
    at_head = ({*keyed, "strings", *(c.table.name for c in CODED.values())} - set(CODED)
               | {"os_sched_intervals"})
    small = ROOT / "tests" / "data" / "traces" / "go1.23-workers.trace"
    ingest_trace_file(engine, small, data_dir=tmp_path / "data")
    sqlite = engine.dialect.name == "sqlite"
    if sqlite:
        assert _without_rowid(engine) == at_head
    _migrate_to(engine, "downgrade", "0006")
    before = _table_rows(engine, keyed)
    assert before["regions"] and before["metrics"] and before["goroutines"]
    if sqlite:
        assert _without_rowid(engine) == set()
    assert migrate(engine) == _head()
    if sqlite:
        assert _without_rowid(engine) == at_head
    assert _table_rows(engine, keyed) == before
    ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    from tests.support.consistency import database_problems

    assert database_problems(engine) == []


def test_sqlite_pragmas(tmp_path: Path) -> None:
    eng = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with eng.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
        assert conn.exec_driver_sql("PRAGMA page_size").scalar() == PAGE_SIZE
    eng.dispose()


@pytest.mark.parametrize("content", [
    b"",
    b"hello, this is not a trace at all\n",
    b"go 1.22 trace\x00\x00\x00" + b"\xff" * 200,
    b"go 1.5 trace\x00\x00\x00\x00" + b"\x00" * 64,
])
def test_bad_file_leaves_db_unchanged(engine: Engine, tmp_path: Path, content: bytes) -> None:
    ok = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    before = _snapshot(engine)
    bad = tmp_path / "bad.trace"
    bad.write_bytes(content)
    with pytest.raises(BadTraceError) as e:
        ingest_trace_file(engine, bad, data_dir=tmp_path / "data")
    assert "\n" not in str(e.value) and "bad.trace" in str(e.value)
    assert _snapshot(engine) == before
    kept = sorted(p.name for p in (tmp_path / "data" / "traces").iterdir())
    assert kept == [f"{ok.sha256}.trace.zst"]
    assert not any((tmp_path / "data" / "tmp").iterdir())


def test_bad_parquet_dir(engine: Engine, tmp_path: Path) -> None:
    before = _snapshot(engine)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadParquetError, match="missing"):
        load_parquet_dir(engine, tmp_path / "empty")
    from collectors.gotrace.todir import decode_file_to_dir

    d = tmp_path / "dec"
    decode_file_to_dir(TRACES[0], d)
    (d / "transitions.parquet").write_bytes(b"PAR1 nope")
    with pytest.raises(IngestError):
        load_parquet_dir(engine, d)
    assert _snapshot(engine) == before


@pytest.mark.parametrize("where", ["insert_columns", "_publish_intervals"])
def test_failure_mid_load_rolls_back(engine: Engine, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """An error after thousands of rows were inserted, or after the
    intervals' files were published, leaves no trace behind."""
    import ingest.load.pipeline as load
    import ingest.load.tables as load_tables

    if where == "_publish_intervals" and engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL keeps no interval files (its intervals are chunk rows)")
    first = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    before = _snapshot(engine)
    owner = load_tables if where == "insert_columns" else load
    real = getattr(owner, where)

    def boom(*args: object, **kw: object) -> int:
        real(*args, **kw)
        raise RuntimeError("killed")

    monkeypatch.setattr(owner, where, boom)
    with pytest.raises(RuntimeError, match="killed"):
        ingest_trace_file(engine, TRACES[-1], data_dir=tmp_path / "data")
    assert _snapshot(engine) == before
    assert not (tmp_path / "data" / "traces" /
                f"{load.file_sha256(TRACES[-1])}.trace.zst").exists()
    homes = tmp_path / "data" / "intervals"
    if engine.dialect.name == "sqlite":
        assert [p.name for p in homes.iterdir()] == [f"{first.id}-{first.sha256[:16]}"]
    else:
        assert not homes.exists()


def test_delete_removes_everything(engine: Engine, tmp_path: Path) -> None:
    a = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    only_a = _snapshot(engine)
    b = ingest_trace_file(engine, TRACES[-1], data_dir=tmp_path / "data")
    assert delete_trace(engine, b.id, data_dir=tmp_path / "data")
    assert _snapshot(engine) == only_a
    assert not (tmp_path / "data" / "traces" / f"{b.sha256}.trace.zst").exists()
    assert not delete_trace(engine, b.id)
    assert delete_trace(engine, a.id)
    with engine.connect() as conn:
        for table in (*models.TRACE_TABLES, models.traces):
            assert conn.execute(text(f"SELECT count(*) FROM {table.name}")).scalar() == 0
    # And the same content can come back.
    again = ingest_trace_file(engine, TRACES[-1], data_dir=tmp_path / "data")
    assert again.created


def test_cascade_deletes_children(engine: Engine, tmp_path: Path) -> None:
    """Deleting the traces row alone removes its rows (ON DELETE CASCADE)."""
    a = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    with engine.begin() as conn:
        conn.execute(models.traces.delete().where(models.traces.c.id == a.id))
    with engine.connect() as conn:
        for table in models.TRACE_TABLES:
            assert conn.execute(text(f"SELECT count(*) FROM {table.name}")).scalar() == 0


def _cli(*args: str | Path, env_data: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "GMPSCOPE_DATA": str(env_data)}
    return subprocess.run([sys.executable, "-m", "gmpscope", "ingest", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


def test_cli_ingest(tmp_path: Path) -> None:
    from collectors.gotrace.todir import decode_file_to_dir

    d = tmp_path / "decoded"
    decode_file_to_dir(TRACES[1], d)
    r = _cli(TRACES[0], d, TRACES[0], env_data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    lines = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert [ln[1] for ln in lines] == ["new", "new", "existing"]
    assert lines[0][0] == lines[2][0] != lines[1][0]
    assert (tmp_path / "data" / "gmpscope.db").exists()


def test_cli_json_reports_the_load_phases(tmp_path: Path) -> None:
    import json

    r = _cli(TRACES[0], "--json", env_data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    timings = json.loads(r.stdout)["timings"]
    # The CLI decodes ahead while it opens the database: only the wait is
    # on the load's path; this old-format trace then goes through Parquet.
    # The tables made from events come first, the sort of the transitions after.
    # The raw copy is compressed meanwhile, and waited for before the commit.
    assert list(timings)[:4] == ["decode wait", "decode", "read", "derive"]
    assert {"order", "insert intervals", "insert goroutines", "raw copy wait", "commit",
            "frames", "lanes", "load"} <= set(timings)
    assert all(v >= 0 for v in timings.values())
    # The inserts and the derivations overlap, each is inside the load.
    assert max(v for k, v in timings.items()
               if k not in ("decode", "decode wait", "load")) <= timings["load"]
    again = _cli(TRACES[0], "--json", env_data=tmp_path / "data")
    assert json.loads(again.stdout)["timings"] == {}, "found stored: no load"


def test_cli_bad_input_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"not a trace, really not\n")
    r = _cli(bad, env_data=tmp_path / "data")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "not a readable Go trace" in r.stderr
    r = _cli(tmp_path / "missing.trace", env_data=tmp_path / "data")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
