"""gmpscope's appender (ingest/csrc/sqlite_append.c, compiled into gmpscope's
own SQLite library): rows appended through SQLite's b-tree layer make the
very database file that INSERT OR FAIL statements make, whole real traces
load to the same tables, and every table it must not take is refused (the
loader then inserts through statements).

It only exists in gmpscope's own library, which a gmpscope process loads
before importing sqlite3; pytest imported sqlite3 long before, so every case
runs in a subprocess (tests/support/append_probe.py, ``gmpscope ingest``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from ingest.store import sqlite_fast, sqlite_lib
from tests.support.consistency import assert_same_database, dump_tables

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"

pytestmark = pytest.mark.skipif(
    sqlite_fast._extension() is None or not sqlite_lib.LIBRARY.is_file(),
    reason="needs ingest.store._sqlitebulk and gmpscope's SQLite library (make setup)")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (sqlite_lib.SYSTEM_ENV, sqlite_fast.PURE_ENV, sqlite_fast.APPEND_ENV)}
    return {**env, **extra}


def _probe(case: str, work: Path) -> Any:
    out = subprocess.run([sys.executable, "-m", "tests.support.append_probe", case, str(work)],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_appended_rows_make_the_same_file_as_insert_statements(tmp_path: Path) -> None:
    got = _probe("same_file", tmp_path)
    assert got["appender"], "gmpscope's SQLite library has the appender"
    # Integers at every serial type's edges, NULLs, texts, a gather, a
    # literal, two calls in one transaction, tables with a unique key (their
    # entries appended, and handed to statements from a row out of order):
    # byte for byte the same file.
    assert got["appended"] == got["inserted"]


def test_a_null_in_a_not_null_column_fails_as_insert_or_fail_does(tmp_path: Path) -> None:
    got = _probe("not_null", tmp_path)
    assert got["appended"] == got["inserted"] == {
        "error": "NOT NULL constraint failed: t.a", "kept": 6}


def test_a_duplicate_key_fails_as_insert_or_fail_does(tmp_path: Path) -> None:
    got = _probe("duplicate_key", tmp_path)
    assert got["appended"] == got["inserted"] == {
        "error": "UNIQUE constraint failed: k.trace_id, k.seq", "kept": 4}


def test_tables_it_must_not_take_are_refused(tmp_path: Path) -> None:
    got = _probe("refusals", tmp_path)
    assert got.pop("plain") == 3
    assert got.pop("child, foreign keys off") == 3
    assert got.pop("indexed") == 3  # an ascending index on integers it keeps
    expected = {
        "text_index": "an index on a column not of integers",
        "expr_index": "a partial, expression or wide index",
        "partial_index": "a partial, expression or wide index",
        "desc_index": "an index the appender cannot keep",
        "nocase_index": "an index the appender cannot keep",
        "triggered": "has a trigger",
        "temp_triggered": "has a trigger",
        "checked": "has a CHECK constraint",
        "strict": "STRICT",
        "auto": "AUTOINCREMENT",
        "textual": "affinity would convert",
        "realish": "affinity would convert",
        "defaulted": "a column is missing",
        "nokey": "not a rowid table",
        "nosuch": "no such table",
        "child, foreign keys on": "foreign keys to check",
        "parent, foreign keys on": "foreign keys to check",
        "rowid given": "the rowid is given",
        "text into an integer column": "affinity would convert",
        "a column left out": "a column is missing",
        "no transaction": "no write transaction open",
    }
    assert set(got) == set(expected)
    for case, why in expected.items():
        assert isinstance(got[case], str) and why in got[case], (case, got[case])


def _ingest(db: Path, trace: Path, append: bool) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gmpscope", "ingest", "--no-progress", "--db", f"sqlite:///{db}",
         "--data-dir", str(db.parent / db.stem), str(trace)],
        cwd=ROOT, env=_env(**{sqlite_fast.APPEND_ENV: "1" if append else "0"}),
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


#: The tables a load appends to, and the unique indexes of their keys.
APPENDED = ("intervals", "proc_run_index", "syscall_outcomes", "goroutines",
            "sqlite_autoindex_goroutines_1", "metrics", "sqlite_autoindex_metrics_1",
            "transition_stacks", "sqlite_autoindex_transition_stacks_1")


def _pages(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The appended tables' and indexes' b-tree pages: cells, payload and free
    bytes of each."""
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        return {name: [tuple(r) for r in conn.execute(text(
            "SELECT pagetype, ncell, payload, unused, mx_payload FROM dbstat "
            "WHERE name = :n ORDER BY path"), {"n": name})]
            for name in APPENDED}


@pytest.mark.parametrize("trace", ["go1.23-workers.trace", "go1.21-mixed.trace"])
def test_a_trace_appended_loads_what_statements_load(tmp_path: Path, trace: str) -> None:
    appended, inserted = tmp_path / "appended.db", tmp_path / "inserted.db"
    _ingest(appended, TRACES / trace, True)
    _ingest(inserted, TRACES / trace, False)
    pages = _pages(appended)
    assert pages["intervals"], "the trace has intervals"
    assert pages == _pages(inserted)
    assert_same_database(dump_tables(create_engine(f"sqlite:///{appended}")),
                         dump_tables(create_engine(f"sqlite:///{inserted}")))
