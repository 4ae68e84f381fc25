"""SQLite's metric, log and region rows kept in column files
(ingest.store.coded_files), read by SQL through the keyed virtual tables behind
``metric_rows_all``, ``log_rows_all`` and ``region_rows_all``: the same rows as a
load that stores them as rows, whatever the constraints, with a trace's rows
in several parts; NULLs kept as the stored type's lowest value; a part the
files cannot hold stays rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.columns import Nullable
from ingest.load.delete import delete_trace
from ingest.store import coded_files, interval_files
from ingest.store.coded_files import ALWAYS_NULL, NULLABLE, CodedFiles, part_columns
from ingest.store.coded_models import FILE_TABLES
from ingest.store.db import make_engine, write_tx
from tests.support.files_load import fetch, load
from tests.support.ingest_fixtures import ROOT

# 21 metric samples, 213 logs, 489 regions, one of them still open (end NULL).
A = ROOT / "samples" / "go1.27-annotations.trace"
# 341 metric samples, 5 logs, 4 regions, one begun before the trace (start NULL).
B = ROOT / "samples" / "go1.27-slowreq-flightrecorder.trace"
GC = ROOT / "samples" / "go1.27-gcpressure.trace"

pytestmark = pytest.mark.skipif(not interval_files.register(),
                                reason="the interval files' extension is not built")


@pytest.fixture(autouse=True)
def _small_parts_in_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of any size kept in files: these traces' tables are small."""
    monkeypatch.setattr(coded_files, "MIN_PART_ROWS", 0)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, Engine]:
    """The same two traces loaded with their coded rows in files and as rows."""
    out = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(coded_files, "MIN_PART_ROWS", 0)  # (module-scoped: set here)
        for files in (True, False):
            d = tmp_path_factory.mktemp("files" if files else "rows")
            engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
            for trace in (A, B):
                load(engine, trace, d, files, monkeypatch, part_rows=40)
            out.append(engine)
    files_engine, rows_engine = out
    for table in FILE_TABLES:
        (n,) = fetch(rows_engine, f"SELECT count(*) FROM {table}")[0]
        assert n and fetch(files_engine, f"SELECT count(*) FROM {table}") == [(0,)], table
        parts = fetch(files_engine, "SELECT trace_id, part, rows FROM coded_files "
                                    "WHERE table_name = :t ORDER BY trace_id, part", t=table)
        assert sum(p[2] for p in parts) == n, table
        # The events' tables made PART_ROWS rows at a time (a spilled trace's
        # goroutines, bucket by bucket: tests/ingest/load/test_bucket_tables.py).
        assert len(parts) > 2 or table not in ("metric_rows", "log_rows", "region_rows"), table
    return files_engine, rows_engine


QUERIES = [
    "SELECT * FROM metrics ORDER BY trace_id, seq",
    "SELECT * FROM logs ORDER BY trace_id, seq",
    "SELECT * FROM regions ORDER BY trace_id, id",
    "SELECT * FROM metric_rows_all WHERE trace_id = 1 ORDER BY seq",
    "SELECT * FROM metric_rows_all WHERE trace_id = 2 AND seq > :mid ORDER BY seq LIMIT 7",
    "SELECT * FROM metric_rows_all WHERE seq BETWEEN :mid AND :mid + 5000 ORDER BY seq, trace_id",
    "SELECT * FROM metric_rows_all WHERE seq = :mid OR seq = :mid + 1 OR trace_id = 99",
    "SELECT * FROM metric_rows_all WHERE seq < 1 OR seq IS NULL OR seq = 'x'",
    "SELECT * FROM metric_rows_all WHERE seq <= 100.5 ORDER BY trace_id, seq",
    "SELECT trace_id, count(*), count(value), sum(value % 1000), min(seq), max(seq) "
    "FROM metric_rows_all GROUP BY trace_id",
    "SELECT * FROM log_rows_all WHERE trace_id = 1 AND seq >= :mid ORDER BY seq LIMIT 3",
    "SELECT * FROM log_rows_all WHERE trace_id = 2 AND seq < :mid ORDER BY seq DESC LIMIT 3",
    "SELECT * FROM region_rows_all WHERE id = 41",
    "SELECT * FROM region_rows_all WHERE trace_id = 1 AND id > 38 AND id <= 81 ORDER BY id",
    "SELECT count(task_id), count(start_ts), count(end_ts_delta), sum(end_ts_delta) "
    "FROM region_rows_all GROUP BY trace_id",
    "SELECT m.name, count(*) FROM metrics m GROUP BY m.trace_id, m.name ORDER BY 1, 2",
    "SELECT * FROM goroutines ORDER BY trace_id, goid",
    "SELECT * FROM goroutines WHERE trace_id = 2 AND goid = (SELECT max(goid) FROM goroutines "
    "WHERE trace_id = 2)",
    "SELECT g.goid, count(*) FROM goroutines g JOIN interval_view v ON v.id BETWEEN "
    "g.first_interval AND g.last_interval WHERE g.trace_id = 1 AND g.goid < 30 "
    "GROUP BY g.goid ORDER BY g.goid",
    "SELECT * FROM tasks ORDER BY trace_id, task_id",
    "SELECT * FROM task_rows_all WHERE trace_id = 1 AND task_id BETWEEN 5 AND 90 ORDER BY task_id",
    "SELECT * FROM ranges ORDER BY trace_id, id",
    "SELECT kind, count(*), sum(active_at_start), count(end_attrs) FROM ranges GROUP BY kind",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_files_answer_as_rows_do(pair: tuple[Engine, Engine], sql: str) -> None:
    files, rows = pair
    (mid,) = fetch(rows, "SELECT seq FROM metric_rows WHERE trace_id = 2 "
                         "ORDER BY seq LIMIT 1 OFFSET 60")[0]
    assert fetch(files, sql, mid=mid) == fetch(rows, sql, mid=mid)


@pytest.mark.parametrize("table", list(FILE_TABLES))
def test_nulls_read_back_where_they_were(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         table: str) -> None:
    """A trace's real rows of ``table`` written again as a further part, with
    NULLs put in every nullable column besides its own: SQL reads the NULLs
    back where they were and every other value as it was."""
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    # (A has one range; the GC-heavy sample many.)
    res = load(engine, GC if table == "range_rows" else A, d, True, monkeypatch, part_rows=40)
    key = FILE_TABLES[table]
    cols = [c for c in fetch_columns(engine, table) if c not in ALWAYS_NULL.get(table, ())]
    got = fetch(engine, f"SELECT {', '.join(cols)} FROM {table}_all WHERE trace_id = :t "
                        f"ORDER BY {key}", t=res.id)
    n = len(got)
    assert n > 5
    want: dict[str, list[int | None]] = {}
    part: dict[str, Any] = {}
    for j, c in enumerate(cols):
        values = [r[j] for r in got]
        if c == key:
            values = [int(v) + 1_000_000_000 for v in values]  # after the trace's own
        elif c in NULLABLE[table]:
            values = [None if i % (j + 2) == 0 else v for i, v in enumerate(values)]
        want[c] = values
        null = np.array([v is None for v in values])
        arr = np.array([0 if v is None else int(v) for v in values], np.int64)
        part[c] = Nullable(arr, null) if null.any() else arr
    sink = CodedFiles.under(d, interval_files.ROOT)
    assert sink.write(table, part, n)
    (directory,) = fetch(engine, "SELECT directory FROM interval_files WHERE trace_id = :t",
                         t=res.id)[0]
    home = interval_files.resolve(interval_files.db_file(engine) or d, directory)
    for f in sink.files():
        f.rename(home / f.name.replace(f"{table}.0.", f"{table}.99."))
    with write_tx(engine) as conn:
        for row in sink.listing(res.id, directory):
            conn.execute(text("INSERT INTO coded_files VALUES (:trace_id, :table_name, 99, "
                              ":first_key, :last_key, :rows, :directory)"), row)
    back = fetch(engine, f"SELECT {', '.join(cols)} FROM {table}_all WHERE trace_id = :t "
                         f"AND {key} >= 1000000000 ORDER BY {key}", t=res.id)
    assert len(back) == n
    for j, c in enumerate(cols):
        assert [None if r[j] is None else int(r[j]) for r in back] == want[c], c


def fetch_columns(engine: Engine, table: str) -> list[str]:
    """The table's columns but trace_id."""
    with engine.connect() as conn:
        return [r[1] for r in conn.execute(text(f"PRAGMA table_info({table})"))
                if r[1] != "trace_id"]


def test_what_the_files_cannot_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts the files cannot hold are refused (the loader then stores them
    as rows); a part whose keys are not in order is written in key order; the
    files go with their trace."""
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    res = load(engine, A, d, True, monkeypatch, part_rows=40)
    cols = ("id", "task_id", "name_code", "g", "start_ts", "end_ts_delta", "stack_id")
    got = np.array(fetch(engine, f"SELECT {', '.join(cols)} FROM region_rows_all "
                                 "WHERE trace_id = :t AND end_ts_delta IS NOT NULL ORDER BY id",
                         t=res.id), np.int64)
    n = len(got)
    null = np.arange(n) % 3 == 0
    # What stays rows: a NULL where the files keep none, a value at the NULL's
    # place, keys out of order, text in a column kept without text.
    ok = {c: got[:, j] for j, c in enumerate(cols)}
    good = part_columns("region_rows", ok, n)
    assert good is not None and good["name_code"].dtype == np.int8
    backwards = part_columns("region_rows", {c: v[::-1].copy() for c, v in ok.items()}, n)
    assert backwards is not None
    assert all(np.array_equal(backwards[c], good[c]) for c in good)
    low = np.iinfo(np.int64).min
    for bad in ({"g": Nullable(ok["g"], null)},
                {"task_id": Nullable(np.where(null, low, 0), ~null)},
                {"id": np.zeros(n, np.int64)},
                {"name_code": np.array(["x"] * n, object)}):
        assert part_columns("region_rows", {**ok, **bad}, n) is None, list(bad)
    metric = {"seq": np.arange(3), "ts": np.arange(3), "name_code": np.zeros(3, np.int32),
              "value": np.arange(3), "value_str": np.array(["a", None, "b"], object)}
    assert part_columns("metric_rows", metric, 3) is None
    # The files go with their trace.
    home = interval_files.trace_home(engine.connect(), interval_files.db_file(engine), res.id)
    assert home is not None and any(home.glob("region_rows.*.npy"))
    assert delete_trace(engine, res.id, d) and not home.exists()
    assert fetch(engine, "SELECT count(*) FROM coded_files") == [(0,)]
