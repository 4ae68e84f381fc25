"""The SQL page's query layer on small data: the first word read past comments,
values made JSON, an in-memory SQLite database (one shared connection) left as
it was after a query, a refusal or a time-out, CSV."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import text

from ingest.store.db import make_engine
from ingest.views.sql import SQLResult, _jsonable, run_query
from ingest.views.sql_guard import SQLError, SQLRefused, SQLTimeout, first_keyword

RUNAWAY = ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
           "WHERE n < 1000000000000) SELECT count(*) FROM c")


@pytest.mark.parametrize(("sql", "word"), [
    ("SELECT 1", "select"), ("  with x as (select 1) select * from x", "with"),
    ("-- a comment\n/* another\n one */ (SELECT 1)", "select"), ("DELETE FROM t", "delete"),
    ("/* unfinished", ""), ("", ""), ("-- only a comment", ""), ("((values (1)))", "values"),
])
def test_first_keyword(sql: str, word: str) -> None:
    assert first_keyword(sql) == word


def test_values_as_json() -> None:
    assert _jsonable(Decimal("131985281")) == 131985281
    assert _jsonable(Decimal("1.5")) == 1.5
    assert _jsonable(float("nan")) is None and _jsonable(float("inf")) is None
    assert _jsonable(b"\x00\xff") == "\\x00ff"
    assert _jsonable(dt.datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05"
    assert _jsonable(True) is True and _jsonable(2**63 - 1) == 2**63 - 1


def test_csv_text_writes_null_as_empty() -> None:
    r = SQLResult(columns=["a", "b"], rows=[[1, None], [2, "x,y"]], truncated=False,
                  limit=10, elapsed_ms=0.0, database="sqlite")
    assert r.csv_text() == 'a,b\n1,\n2,"x,y"\n'


def test_in_memory_database_keeps_its_one_connection_usable() -> None:
    engine = make_engine("sqlite://")
    try:
        with engine.begin() as c:
            c.execute(text("CREATE TEMP TABLE kept (x INTEGER)"))
            c.execute(text("INSERT INTO kept VALUES (1), (2), (3)"))
        r = run_query(engine, "SELECT x FROM kept ORDER BY x", limit=2, timeout_ms=10_000)
        assert r.rows == [[1], [2]] and r.truncated
        with pytest.raises(SQLRefused, match="DELETE"):
            run_query(engine, "WITH y AS (SELECT 1) DELETE FROM kept", limit=5,
                      timeout_ms=10_000)
        with pytest.raises(SQLTimeout):
            run_query(engine, RUNAWAY, limit=5, timeout_ms=50)
        with pytest.raises(SQLError, match="one statement"):
            run_query(engine, "SELECT 1; DELETE FROM kept", limit=5, timeout_ms=10_000)
        # The same connection: its data, writable again, no guard left on it.
        with engine.begin() as c:
            assert c.execute(text("PRAGMA query_only")).scalar() == 0
            c.execute(text("INSERT INTO kept VALUES (4)"))
            assert c.execute(text("SELECT count(*) FROM kept")).scalar() == 4
            c.execute(text("CREATE TEMP TABLE more (y INTEGER)"))
    finally:
        engine.dispose()


def test_file_database_refusals_and_pragmas(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        info = run_query(engine, "PRAGMA table_info(traces)", limit=100, timeout_ms=10_000)
        assert "sha256" in [row[1] for row in info.rows]
        for sql, what in [("PRAGMA journal_mode=DELETE", "PRAGMA journal_mode=DELETE"),
                          ("PRAGMA writable_schema=1", "PRAGMA writable_schema=1"),
                          ("SELECT load_extension('x')", "load_extension()"),
                          ("ATTACH DATABASE 'x.db' AS x", "ATTACH")]:
            with pytest.raises(SQLRefused, match=what.replace("(", r"\(").replace(")", r"\)")):
                run_query(engine, sql, limit=5, timeout_ms=10_000)
        assert run_query(engine, "PRAGMA journal_mode", limit=5,
                         timeout_ms=10_000).rows == [["wal"]]
        assert not (tmp_path / "x.db").exists()
    finally:
        engine.dispose()
