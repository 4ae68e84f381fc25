"""``GET /api/sql`` through a real ``gmpscope serve`` on SQLite and PostgreSQL.

The example queries are checked against the same traces' decoded Parquet files
read in plain Python (tests/support/sql_oracle.py); every refused statement
answers 4xx and leaves every table's row count and the stored traces as they
were; a runaway query ends at the time limit (set short here, through
``GMPSCOPE_SQL_TIMEOUT_MS``) while the server keeps answering; the row cap
cuts with ``truncated``; CSV carries the same rows.
"""

from __future__ import annotations

import csv
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from collectors.gotrace.todir import decode_file_to_dir
from ingest.store.db import make_engine
from ingest.views.sql_examples import BLOCKED_NS, CHANNEL_REASONS
from tests.support.ingest_service import Database, new_db
from tests.support.server import SAMPLES, Served
from tests.support.sql_oracle import (
    Decoded,
    channel_blocked,
    read_decoded,
    syscalls_longest,
    time_per_state_per_p,
)

TRACES = [p for p in SAMPLES if p.name in ("go1.27-httpnet.trace",
                                           "go1.27-syscallblock.trace")]
TIMEOUT_MS = 1500
MAX_ROWS = 500
RUNAWAY = ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
           "WHERE n < 1000000000000) SELECT count(*) FROM c")


class SQLServer:
    def __init__(self, served: Served, db: Database, ids: dict[str, int],
                 decoded: dict[str, Decoded]) -> None:
        self.served, self.db, self.ids, self.decoded = served, db, ids, decoded

    def sql(self, sql: str, **params: Any) -> requests.Response:
        return self.served.get("/api/sql", params={"sql": sql, **params})


@pytest.fixture(scope="module")
def server(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLServer]:
    tmp = tmp_path_factory.mktemp(f"sql-{db_kind}")
    db = new_db(db_kind, tmp)
    env = dict(os.environ, GMPSCOPE_SQL_TIMEOUT_MS=str(TIMEOUT_MS),
               GMPSCOPE_SQL_MAX_ROWS=str(MAX_ROWS))
    decoded = {}
    for t in TRACES:
        decode_file_to_dir(t, tmp / t.stem)
        decoded[t.name] = read_decoded(tmp / t.stem)
    try:
        with Served(tmp / "data", TRACES, db_url=db.url,
                    env=env) as served:
            ids = {t["name"]: t["id"] for t in served.get("/api/traces").json()["traces"]}
            assert set(ids) == {t.name for t in TRACES}
            yield SQLServer(served, db, ids, decoded)
    finally:
        db.close()


def _examples(s: SQLServer, name: str) -> dict[str, str]:
    r = s.served.get("/api/sql/examples", params={"trace_id": s.ids[name]})
    assert r.status_code == 200, r.text
    return {e["name"]: e["sql"] for e in r.json()["examples"]}


def _run(s: SQLServer, sql: str) -> dict[str, Any]:
    r = s.sql(sql)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["truncated"] is False
    return body


def _records(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(body["columns"], row, strict=True)) for row in body["rows"]]


@pytest.mark.parametrize("trace", [t.name for t in TRACES])
def test_longest_syscalls_match_the_decoded_trace(server: SQLServer, trace: str) -> None:
    body = _run(server, _examples(server, trace)["longest-syscalls"])
    got = _records(body)
    want = syscalls_longest(server.decoded[trace])
    assert len(got) == min(20, len(want)) > 0
    assert [r["duration_ns"] for r in got] == [iv.duration_ns for iv in want[:len(got)]]
    if len(want) == len(got) or want[len(got) - 1].duration_ns != want[len(got)].duration_ns:
        # No tie at the cut: the same syscalls, each with its stack in depth order.
        d = server.decoded[trace]
        assert sorted((r["goid"], r["start_ts"], r["duration_ns"], r["stack"]) for r in got) \
            == sorted((iv.rid, iv.start_ts, iv.duration_ns, d.stack_text(iv.stack_id))
                      for iv in want[:len(got)])
    assert all(r["outcome"] in ("returned", "blocked", "exited", "unfinished") for r in got)


@pytest.mark.parametrize("trace", [t.name for t in TRACES])
def test_channel_blocked_matches_the_decoded_trace(server: SQLServer, trace: str) -> None:
    got = _records(_run(server, _examples(server, trace)["channel-blocked"]))
    want = channel_blocked(server.decoded[trace], CHANNEL_REASONS, BLOCKED_NS)
    assert want, "the sample has channel waits over 10 ms"
    assert sorted((r["goid"], r["reason"], r["start_ts"], r["duration_ns"], r["stack_id"])
                  for r in got) == sorted((iv.rid, iv.reason, iv.start_ts, iv.duration_ns,
                                           iv.stack_id) for iv in want)
    assert [r["duration_ns"] for r in got] == sorted((r["duration_ns"] for r in got),
                                                     reverse=True)


@pytest.mark.parametrize("trace", [t.name for t in TRACES])
def test_time_per_state_per_p_matches_the_decoded_trace(server: SQLServer, trace: str) -> None:
    got = _records(_run(server, _examples(server, trace)["time-per-state-per-p"]))
    want = time_per_state_per_p(server.decoded[trace])
    assert {(r["p"], r["state"]): (r["intervals"], r["total_ns"]) for r in got} == want
    assert len(got) == len(want)


#: Statements that must never run: (SQL, the status both databases answer or
#: None where they differ but both refuse with a 4xx).
REFUSED = [
    ("INSERT INTO traces (id) VALUES (99)", 403),
    ("DELETE FROM traces", 403),
    ("UPDATE traces SET name = 'x'", 403),
    ("DROP TABLE intervals", 403),
    ("CREATE TABLE t (a INTEGER)", 403),
    ("ATTACH DATABASE '/tmp/gmpscope-attached.db' AS x", 403),
    ("DETACH DATABASE main", 403),
    ("PRAGMA writable_schema=1", 403),
    ("PRAGMA journal_mode=DELETE", 403),
    ("PRAGMA query_only=0", 403),
    ("VACUUM", 403),
    ("BEGIN", 403),
    ("COMMIT", 403),
    ("SELECT load_extension('/tmp/nothing.so')", None),
    ("SELECT pg_read_file('/etc/hostname')", None),
    ("SELECT 1; DELETE FROM traces", 400),
    ("SELECT count(*) FROM traces; DROP TABLE traces", 400),
    ("WITH x AS (SELECT 1) DELETE FROM traces", None),
    ("WITH x AS (DELETE FROM traces RETURNING id) SELECT * FROM x", None),
    ("/* comment */ DELETE FROM traces", 403),
]


def _intervals(db: Database) -> int:
    """Rows of ``intervals`` (a table or a view, as the storage has it: read
    through the store's own engine, which sets up what the view needs)."""
    engine = make_engine(db.url, migrate_to_head=False)
    try:
        with engine.connect() as c:
            n: int = c.execute(sa.text("SELECT count(*) FROM intervals")).scalar_one()
    finally:
        engine.dispose()
    return n


def test_refusals_leave_the_data_intact(server: SQLServer) -> None:
    before = server.db.row_counts()
    shas = server.db.trace_shas()
    intervals = _intervals(server.db)
    assert intervals > 0 and before["traces"] == len(TRACES)
    for sql, status in REFUSED:
        r = server.sql(sql)
        assert 400 <= r.status_code < 500, (sql, r.status_code, r.text)
        if status is not None:
            assert r.status_code == status, (sql, r.text)
        message = r.json()["error"]
        assert message and "\n" not in message, (sql, message)
    # What SQLite refuses by its authorizer (the first word is allowed):
    if server.db.kind == "sqlite":
        for sql in ("PRAGMA writable_schema=1", "SELECT load_extension('/tmp/nothing.so')",
                    "WITH x AS (SELECT 1) DELETE FROM traces"):
            assert server.sql(sql).status_code == 403, sql
    else:
        assert server.sql("SELECT pg_read_file('/etc/hostname')").status_code == 403
    assert server.db.row_counts() == before
    assert _intervals(server.db) == intervals
    assert server.db.trace_shas() == shas
    assert not Path("/tmp/gmpscope-attached.db").exists()
    assert _run(server, "SELECT count(*) AS n FROM traces")["rows"] == [[len(TRACES)]]


def test_bad_sql_is_a_400_with_the_databases_message(server: SQLServer) -> None:
    r = server.sql("SELECT * FROM no_such_table")
    assert r.status_code == 400 and "no_such_table" in r.json()["error"]
    assert server.served.get("/api/sql").status_code == 400
    assert server.sql("   ").status_code == 400
    assert server.sql("SELECT 1", format="xml").status_code == 400


def test_runaway_query_ends_at_the_time_limit(server: SQLServer) -> None:
    outcome: dict[str, requests.Response] = {}

    def runaway() -> None:
        outcome["runaway"] = server.sql(RUNAWAY)

    thread = threading.Thread(target=runaway)
    thread.start()
    # Meanwhile the server answers others.
    other = server.sql("SELECT count(*) AS n FROM traces")
    thread.join()
    assert other.status_code == 200 and other.json()["rows"] == [[len(TRACES)]]
    r = outcome["runaway"]
    assert r.status_code == 400, r.text
    assert r.json()["error"] == (f"the query ran longer than the {TIMEOUT_MS / 1000:g} s "
                                 "limit and was stopped")
    # And after it, too.
    assert _run(server, "SELECT count(*) AS n FROM traces")["rows"] == [[len(TRACES)]]


def test_row_cap_and_truncated(server: SQLServer) -> None:
    with_ids = "SELECT id FROM interval_view ORDER BY id"
    r = server.sql(with_ids)
    assert r.status_code == 200
    body = r.json()
    assert body["truncated"] is True and body["limit"] == MAX_ROWS
    assert len(body["rows"]) == body["row_count"] == MAX_ROWS
    assert _intervals(server.db) > MAX_ROWS
    ten = server.sql(with_ids, limit=10).json()
    assert ten["rows"] == body["rows"][:10] and ten["truncated"] is True
    # Exactly as many rows as the limit: not truncated; one fewer: truncated.
    n = len(TRACES)
    assert server.sql("SELECT id FROM traces", limit=n).json()["truncated"] is False
    assert server.sql("SELECT id FROM traces", limit=n - 1).json()["truncated"] is True
    for bad in (0, MAX_ROWS + 1, "x"):
        assert server.sql(with_ids, limit=bad).status_code == 400


def test_csv_carries_the_json_rows(server: SQLServer) -> None:
    sql = _examples(server, TRACES[0].name)["time-per-state-per-p"]
    body = _run(server, sql)
    r = server.sql(sql, format="csv")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv")
    assert r.headers["X-Truncated"] == "false"
    assert "attachment" in r.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows[0] == body["columns"]
    assert rows[1:] == [[str(v) for v in row] for row in body["rows"]]
    capped = server.sql("SELECT id FROM traces", format="csv", limit=1)
    assert capped.headers["X-Truncated"] == "true"
    assert len(list(csv.reader(io.StringIO(capped.text)))) == 2
