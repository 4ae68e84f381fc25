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
from ingest.store import interval_files
from ingest.store.coded_files import CodedFiles, part_columns
from ingest.store.db import make_engine, write_tx
from tests.support.files_load import fetch, load
from tests.support.ingest_fixtures import ROOT

# 21 metric samples, 213 logs, 489 regions, one of them still open (end NULL).
A = ROOT / "samples" / "go1.27-annotations.trace"
# 341 metric samples, 5 logs, 4 regions, one begun before the trace (start NULL).
B = ROOT / "samples" / "go1.27-slowreq-flightrecorder.trace"

pytestmark = pytest.mark.skipif(not interval_files.register(),
                                reason="the interval files' extension is not built")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, Engine]:
    """The same two traces loaded with their coded rows in files and as rows."""
    out = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for files in (True, False):
            d = tmp_path_factory.mktemp("files" if files else "rows")
            engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
            for trace in (A, B):
                load(engine, trace, d, files, monkeypatch, part_rows=40)
            out.append(engine)
    files_engine, rows_engine = out
    for table in ("metric_rows", "log_rows", "region_rows"):
        (n,) = fetch(rows_engine, f"SELECT count(*) FROM {table}")[0]
        assert n > 40 and fetch(files_engine, f"SELECT count(*) FROM {table}") == [(0,)]
        parts = fetch(files_engine, "SELECT trace_id, part, rows FROM coded_files "
                                    "WHERE table_name = :t ORDER BY trace_id, part", t=table)
        assert sum(p[2] for p in parts) == n and len(parts) > 2
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
]


@pytest.mark.parametrize("sql", QUERIES)
def test_files_answer_as_rows_do(pair: tuple[Engine, Engine], sql: str) -> None:
    files, rows = pair
    (mid,) = fetch(rows, "SELECT seq FROM metric_rows WHERE trace_id = 2 "
                         "ORDER BY seq LIMIT 1 OFFSET 60")[0]
    assert fetch(files, sql, mid=mid) == fetch(rows, sql, mid=mid)


def test_nulls_and_what_the_files_cannot_hold(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's real region rows written again as a further part, with NULLs
    put in every nullable column: SQL reads the NULLs back where they were
    and every other value as it was; the parts the files cannot hold are
    refused (the loader then stores them as rows)."""
    d = tmp_path / "data"
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    res = load(engine, A, d, True, monkeypatch, part_rows=40)
    cols = ("id", "task_id", "name_code", "g", "start_ts", "end_ts_delta", "stack_id")
    got = np.array(fetch(engine, f"SELECT {', '.join(cols)} FROM region_rows_all "
                                 "WHERE trace_id = :t AND end_ts_delta IS NOT NULL ORDER BY id",
                         t=res.id), np.int64)
    n = len(got)
    null = {"task_id": np.arange(n) % 3 == 0, "start_ts": np.arange(n) % 5 == 0,
            "end_ts_delta": np.arange(n) % 7 == 0}
    part: dict[str, Any] = {c: got[:, j].copy() for j, c in enumerate(cols)}
    part["id"] = part["id"] + 1_000_000  # after the trace's own parts
    for c, where in null.items():
        part[c] = Nullable(part[c], where)
    sink = CodedFiles.under(d, interval_files.ROOT)
    assert sink.write("region_rows", part, n)
    stored = {p.name.split(".")[2]: np.load(p) for p in sink.files()}
    assert stored["name_code"].dtype == np.int8 and stored["start_ts"].dtype == np.int64
    (directory,) = fetch(engine, "SELECT directory FROM interval_files WHERE trace_id = :t",
                         t=res.id)[0]
    home = interval_files.resolve(interval_files.db_file(engine) or d, directory)
    for f in sink.files():
        f.rename(home / f.name.replace("region_rows.0.", "region_rows.99."))
    with write_tx(engine) as conn:
        for row in sink.listing(res.id, directory):
            conn.execute(text("INSERT INTO coded_files VALUES (:trace_id, :table_name, 99, "
                              ":first_key, :last_key, :rows, :directory)"), row)
    back = fetch(engine, f"SELECT {', '.join(cols)} FROM region_rows_all "
                         "WHERE trace_id = :t AND id >= 1000000 ORDER BY id", t=res.id)
    assert len(back) == n
    for j, c in enumerate(cols):
        want = [None if c in null and null[c][i] else int(got[i, j]) + (1_000_000 if j == 0 else 0)
                for i in range(n)]
        assert [r[j] for r in back] == want, c
    # The regions view reads them too: an end_ts delta NULL is a NULL end.
    assert fetch(engine, "SELECT count(*) - count(end_ts) FROM regions WHERE trace_id = :t "
                         "AND id >= 1000000", t=res.id) == [(int(null["end_ts_delta"].sum()),)]
    # What stays rows: a NULL where the files keep none, a value at the NULL's
    # place, keys out of order, text in a column kept without text.
    ok = {c: got[:, j] for j, c in enumerate(cols)}
    assert part_columns("region_rows", ok, n) is not None
    low = np.iinfo(np.int64).min
    for bad in ({"g": Nullable(ok["g"], null["task_id"])},
                {"task_id": Nullable(np.where(null["task_id"], 0, low), null["start_ts"])},
                {"id": ok["id"][::-1].copy()},
                {"name_code": np.array(["x"] * n, object)}):
        assert part_columns("region_rows", {**ok, **bad}, n) is None, list(bad)
    metric = {"seq": np.arange(3), "ts": np.arange(3), "name_code": np.zeros(3, np.int32),
              "value": np.arange(3), "value_str": np.array(["a", None, "b"], object)}
    assert part_columns("metric_rows", metric, 3) is None
    # The files go with their trace.
    assert delete_trace(engine, res.id, d) and not home.exists()
    assert fetch(engine, "SELECT count(*) FROM coded_files") == [(0,)]
