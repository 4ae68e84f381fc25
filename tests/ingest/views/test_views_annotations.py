"""Tasks, regions and logs (ingest.views.annotations, /api/traces/<id>/annotations)
on the annotations workload's real trace: counts equal Go's parse, the
program's awkward strings come back literally, the task tree is a tree, task
types equal SQL and an independent nearest-rank, pages of tasks partition them,
log filters equal SQL, and every answer stays bounded (also on a copy of the
sample's database with tens of thousands of tasks added)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from ingest.api.blueprint import jsonable
from ingest.store import interval_files
from ingest.store.db import make_engine
from ingest.views.annotations import MAX_TASK_LIMIT, annotations_data, logs, task_types
from tests.support.coded_rows import new_codes
from tests.support.goparsed import GoEvent, go_parsed
from tests.support.server import Served

SAMPLE = "go1.27-annotations.trace"
TRACE = Path(__file__).resolve().parents[3] / "samples" / SAMPLE
NO_TASK = (1 << 64) - 1

#: Strings the workload writes (collectors/workloads/cmd/annotations, ``awkward``,
#: by index there; the valid UTF-8 ones: invalid bytes are stored as U+FFFD).
AWKWARD = {
    0: "héllo wörld ✓ 日本語 🚀",
    1: "say \"hi\" and 'bye'",
    2: "C:\\temp\\new folder\\",
    3: "line one\nline two\ttabbed\r",
    4: "",
    5: "nul\x00inside",
    7: "emoji 👩\u200d👩\u200d👧 zwj, combining é, rtl שלום",
}


def _stored(s: str) -> str:
    """A Go string as the database keeps it: invalid UTF-8 bytes become U+FFFD."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@pytest.fixture(scope="module")
def go_events() -> list[GoEvent]:
    events, err = go_parsed(TRACE)
    assert err is None
    return events


@pytest.fixture(scope="module")
def doc(samples_server: Served, sample_ids: dict[str, int]) -> dict:  # type: ignore[type-arg]
    r = samples_server.get(f"/api/traces/{sample_ids[SAMPLE]}/annotations",
                           params={"limit": 5000, "task_limit": MAX_TASK_LIMIT})
    assert r.status_code == 200
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.slow
def test_counts_equal_go(doc: dict, go_events: list[GoEvent]) -> None:  # type: ignore[type-arg]
    logs = [e for e in go_events if e.kind == "Log"]
    assert doc["logs"]["total"] == len(logs) == len(doc["logs"]["rows"])
    assert [(r["category"], r["message"], r["g"], r["ts"]) for r in doc["logs"]["rows"]] == [
        (_stored(e.category), _stored(e.message), e.g, e.ts) for e in logs]
    task_ids = {e.task for e in go_events if e.kind in ("TaskBegin", "TaskEnd")} - {NO_TASK}
    assert {t["task_id"] for t in doc["tasks"]["rows"]} == task_ids
    assert doc["tasks"]["total"] == len(task_ids) == len(doc["tasks"]["rows"])
    begins = Counter(e.name for e in go_events if e.kind == "RegionBegin")
    ends = Counter(e.name for e in go_events if e.kind == "RegionEnd")
    # A region is a begin, or an end whose begin is not in the trace.
    want = {_stored(n): max(begins[n], ends[n]) for n in begins | ends}
    assert {r["name"]: r["count"] for r in doc["regions"]} == want
    # Begun and never ended: counted, not timed.
    open_ = sum(begins[n] - ends[n] for n in begins if begins[n] > ends[n])
    assert sum(r["count"] - r["timed"] for r in doc["regions"]) == open_ > 0


def test_awkward_strings_round_trip(doc: dict) -> None:  # type: ignore[type-arg]
    cats = {c["category"] for c in doc["logs"]["categories"]}
    msgs = {r["message"] for r in doc["logs"]["rows"]}
    regions = {r["name"] for r in doc["regions"]}
    for i, s in AWKWARD.items():
        assert s in cats, repr(s)
        assert f"message {i}: {s}" in msgs, repr(s)
        assert s in regions, repr(s)
    assert "bad utf-8: \ufffd\ufffd\ufffd" in cats
    # The runtime keeps the first 1024 bytes of a 3200-byte string (Go's parse shows
    # the same), and so do we.
    long = ("0123456789abcdef" * 200)[:1024]
    assert long in cats and long in msgs


def test_region_stats_arithmetic(doc: dict) -> None:  # type: ignore[type-arg]
    for r in doc["regions"]:
        if r["timed"]:
            assert r["mean_ns"] == pytest.approx(r["total_ns"] / r["timed"])
            assert r["p50_ns"] <= r["p99_ns"] <= r["max_ns"]
    outer = next(r for r in doc["regions"] if r["name"] == "outer")
    inner = next(r for r in doc["regions"] if r["name"] == "inner ✓")
    assert outer["count"] == inner["count"] == 160  # 40 rounds x 4 shards
    assert outer["total_ns"] > inner["total_ns"]  # inner nests in middle in outer


def test_task_tree(doc: dict) -> None:  # type: ignore[type-arg]
    tasks = doc["tasks"]["rows"]
    by_id = {t["task_id"]: t for t in tasks}
    for t in tasks:
        if t["parent_id"] is not None and t["parent_id"] in by_id:
            assert t["depth"] == by_id[t["parent_id"]]["depth"] + 1
        else:
            assert t["depth"] == 0
        assert t["children"] == sum(c["parent_id"] == t["task_id"] for c in tasks)
        if t["duration_ns"] is not None:
            assert t["duration_ns"] == t["end_ts"] - t["start_ts"] >= 0
    shards = [t for t in tasks if t["name"].startswith("shard-")]
    assert len(shards) == 160 and all(t["depth"] == 1 for t in shards)
    requests = [t for t in tasks if t["name"] == "request"]
    assert len(requests) == 40 and all(t["children"] == 4 for t in requests)
    # The parent task ends on another goroutine than the one that began it.
    assert all(t["start_g"] != t["end_g"] for t in requests)
    assert set(requests[0]["goroutines"]) >= {requests[0]["start_g"], requests[0]["end_g"]}


def test_log_filters(samples_server: Served, sample_ids: dict[str, int]) -> None:
    base = f"/api/traces/{sample_ids[SAMPLE]}/annotations"
    shard = samples_server.get(base + "?category=shard").json()["logs"]
    assert shard["total"] == 160 and {r["category"] for r in shard["rows"]} == {"shard"}
    quoted = samples_server.get(base, params={"text": 'say "hi"'}).json()["logs"]
    assert quoted["total"] > 0
    assert all('say "hi"' in r["category"] + r["message"] for r in quoted["rows"])
    # % and _ are literal characters, not wildcards.
    assert samples_server.get(base, params={"text": "%"}).json()["logs"]["total"] == 0
    g = shard["rows"][0]["g"]
    by_g = samples_server.get(base + f"?g={g}").json()["logs"]
    assert by_g["total"] > 0 and {r["g"] for r in by_g["rows"]} == {g}
    assert samples_server.get(base + "?limit=3").json()["logs"]["rows"].__len__() == 3
    assert samples_server.get(base + "?g=x").status_code == 400
    assert samples_server.get("/api/traces/999999/annotations").status_code == 404


# --- task types, task pages, log filters in SQL, bounded answers -------------------------


def _db(served: Served) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{served.data_dir / 'gmpscope.db'}?mode=ro", uri=True)


def _nearest_rank(values: list[int], q: float) -> int:
    """Nearest-rank quantile, written out: the ceil(q*n)-th smallest value."""
    return sorted(values)[max(1, math.ceil(q * len(values))) - 1]


def _check_types(types: list[dict[str, Any]], con: sqlite3.Connection, tid: int) -> None:
    counts = dict(con.execute("SELECT coalesce(name, ''), COUNT(*) FROM tasks "
                              "WHERE trace_id = ? GROUP BY 1", (tid,)).fetchall())
    assert {t["name"]: t["count"] for t in types} == counts
    durs: dict[str, list[int]] = {}
    for name, s, e in con.execute("SELECT name, start_ts, end_ts FROM tasks WHERE trace_id = ?",
                                  (tid,)):
        if s is not None and e is not None:
            durs.setdefault(name or "", []).append(e - s)
    for t in types:
        d = durs.get(t["name"], [])
        assert t["timed"] == len(d)
        assert t["total_ns"] == sum(d)
        if d:
            for q, key in ((0.5, "p50_ns"), (0.9, "p90_ns"), (0.99, "p99_ns"), (1.0, "max_ns")):
                assert t[key] == _nearest_rank(d, q), (t["name"], key)
        else:
            assert t["p50_ns"] is t["max_ns"] is None
    assert [t["total_ns"] for t in types] == sorted((t["total_ns"] for t in types),
                                                     reverse=True)


def test_task_types_equal_sql(samples_server: Served, sample_ids: dict[str, int]) -> None:
    con = _db(samples_server)
    seen = 0
    for tid in sample_ids.values():
        types = samples_server.get(f"/api/traces/{tid}/annotations",
                                   params={"task_limit": 0, "limit": 0}).json()["task_types"]
        _check_types(types, con, tid)
        seen += bool(types)
    assert seen >= 1
    types = {t["name"]: t for t in samples_server.get(
        f"/api/traces/{sample_ids[SAMPLE]}/annotations").json()["task_types"]}
    assert types["request"]["count"] == 40 and types["shard-0"]["timed"] == 40
    assert types["never ended"]["timed"] == 0 and types["never ended"]["count"] == 1


@pytest.mark.parametrize("sort", ["duration", "start"])
def test_task_pages_partition(samples_server: Served, sample_ids: dict[str, int],
                              sort: str) -> None:
    base = f"/api/traces/{sample_ids[SAMPLE]}/annotations"
    whole = samples_server.get(base, params={"task_limit": MAX_TASK_LIMIT,
                                             "task_sort": sort}).json()["tasks"]
    pages: list[list[dict[str, Any]]] = []
    off = 0
    while True:
        page = samples_server.get(base, params={"task_limit": 7, "task_offset": off,
                                                "task_sort": sort, "limit": 0}).json()["tasks"]
        assert len(page["rows"]) <= 7 and page["total"] == whole["total"]
        if not page["rows"]:
            break
        pages.append(page["rows"])
        off += 7
    ids = [t["task_id"] for p in pages for t in p]
    assert len(ids) == len(set(ids)) == whole["total"] == 202  # disjoint, all of them
    assert ids == [t["task_id"] for t in whole["rows"]]
    rows = [t for p in pages for t in p]
    assert rows == whole["rows"]  # depth, children, goroutines: the same on any page
    if sort == "duration":
        timed = [t["duration_ns"] for t in rows if t["duration_ns"] is not None]
        assert timed == sorted(timed, reverse=True)
        assert all(t["duration_ns"] is None for t in rows[len(timed):])
    else:
        starts = [t["start_ts"] for t in rows if t["start_ts"] is not None]
        assert starts == sorted(starts)
    shard = samples_server.get(base, params={"task_name": "shard-2", "task_sort": sort,
                                             "task_limit": 15}).json()["tasks"]
    assert shard["total"] == 40 and len(shard["rows"]) == 15
    assert {t["name"] for t in shard["rows"]} == {"shard-2"}
    assert all(t["depth"] == 1 and t["parent_id"] is not None for t in shard["rows"])
    unnamed = samples_server.get(base, params={"task_name": ""}).json()["tasks"]
    assert unnamed["total"] == 1 and unnamed["rows"][0]["name"] == ""


def test_task_params_checked(samples_server: Served, sample_ids: dict[str, int]) -> None:
    base = f"/api/traces/{sample_ids[SAMPLE]}/annotations"
    for params in ({"task_limit": MAX_TASK_LIMIT + 1}, {"task_limit": -1},
                   {"task_offset": -1}, {"task_offset": "x"}, {"task_sort": "name"},
                   {"limit": 5001}, {"offset": -3}):
        r = samples_server.get(base, params=params)
        assert r.status_code == 400 and "error" in r.json(), params


def test_answers_stay_small(samples_server: Served, sample_ids: dict[str, int]) -> None:
    for tid in sample_ids.values():
        r = samples_server.get(f"/api/traces/{tid}/annotations")
        doc = r.json()
        assert len(r.content) <= 1_000_000
        assert len(doc["tasks"]["rows"]) <= doc["tasks"]["limit"] == 200
        assert len(doc["logs"]["rows"]) <= 1000
        small = samples_server.get(f"/api/traces/{tid}/annotations",
                                   params={"task_limit": 3, "limit": 2}).json()
        assert len(small["tasks"]["rows"]) == min(3, small["tasks"]["total"])
        assert len(small["logs"]["rows"]) == min(2, small["logs"]["total"])


@pytest.fixture(scope="module")
def busy(samples_server: Served, sample_ids: dict[str, int],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, int]]:
    """A copy of the sample's database whose annotations trace gains 30,000 timed
    tasks of three types (children of a request task) and log records whose
    messages hold ``%``, ``_`` and mixed case."""
    tid = sample_ids[SAMPLE]
    path = tmp_path_factory.mktemp("busy") / "busy.db"
    assert interval_files.register()  # before the connections: the logs' rows in files
    src, dst = _db(samples_server), sqlite3.connect(path)
    src.backup(dst)
    src.close()
    # The copy reads the files the original keeps (named relative to its directory).
    for listing in ("interval_files", "coded_files"):
        dst.execute(f"UPDATE {listing} SET directory = ? || '/' || directory "
                    "WHERE directory NOT LIKE '/%'", (str(samples_server.data_dir),))
    parent = dst.execute("SELECT task_id FROM tasks WHERE trace_id = ? AND name = 'request'",
                         (tid,)).fetchone()[0]
    start = 10_000_000
    # tasks and logs are views over coded tables (ingest/store/coded_models.py):
    # the new texts get codes after the trace's own, the rows those codes.
    names = new_codes(dst, tid, "tasks.name", [f"busy-{k}" for k in range(3)])
    dst.executemany(
        "INSERT INTO task_rows (trace_id, task_id, parent_id, name_code, start_ts, "
        "end_ts_delta, start_g, end_g_delta) VALUES (?, ?, ?, ?, ?, ?, 1, 0)",
        [(tid, 1_000_000 + i, parent, names[i % 3], start + i, (i * 7919) % 100_003)
         for i in range(30_000)])
    seq = dst.execute("SELECT max(seq) FROM logs WHERE trace_id = ?", (tid,)).fetchone()[0]
    msgs = ["100% done_now", "100x done-now", "1005 doneXnow", "DONE_NOW 100%", "a\\b%_c"]
    busy_code = new_codes(dst, tid, "logs.category", ["busy"])[0]
    msg_codes = new_codes(dst, tid, "logs.message", msgs)
    dst.executemany(
        "INSERT INTO log_rows (trace_id, seq, ts, g, task_id, category_code, message_code, "
        "stack_id) VALUES (?, ?, ?, 1, ?, ?, ?, 0)",
        [(tid, seq + 1 + i, start + i, 1_000_000 + i % 5, busy_code,
          msg_codes[i % len(msgs)]) for i in range(500)])
    dst.commit()
    dst.close()
    engine = make_engine(f"sqlite:///{path}")
    yield engine, tid
    engine.dispose()


def test_busy_trace_bounded(busy: tuple[Engine, int]) -> None:
    engine, tid = busy
    for limit in (0, 1, 200, MAX_TASK_LIMIT):
        doc = annotations_data(engine, tid, task_limit=limit, limit=100)
        assert len(doc["tasks"]["rows"]) == limit and doc["tasks"]["total"] == 30_202
        if limit <= 200:
            assert len(json.dumps(jsonable(doc))) <= 1_000_000
    doc = annotations_data(engine, tid, task_limit=MAX_TASK_LIMIT + 10, task_offset=29_000)
    assert len(doc["tasks"]["rows"]) == 30_202 - 29_000
    con = sqlite3.connect(str(engine.url.database))
    _check_types(task_types(engine, tid), con, tid)
    # A busy task's parent (a request) has its own depth: 1 below it, whichever page.
    first = annotations_data(engine, tid, task_name="busy-1", task_limit=5)["tasks"]["rows"]
    assert all(t["depth"] == 1 and t["name"] == "busy-1" for t in first)
    longest = [t["duration_ns"] for t in first]
    assert longest == sorted(longest, reverse=True)


@pytest.mark.parametrize(("text", "task_id"), [
    ("%", None), ("_", None), ("0%", None), ("e_n", None), ("100%", None), ("DONE_", None),
    ("done_now", None), ("\\", None), ("%_", None), ("message 1", None), ("_", 1_000_002),
    ("nul\x00in", None), ("ÖRLD", None), ("wörld", None)])
def test_log_filters_equal_sql(busy: tuple[Engine, int], text: str, task_id: int | None) -> None:
    engine, tid = busy
    con = sqlite3.connect(str(engine.url.database))
    want = [seq for seq, cat, msg, task in con.execute(
        "SELECT seq, category, message, task_id FROM logs WHERE trace_id = ? ORDER BY seq",
        (tid,)) if (text in cat or text in msg) and (task_id is None or task == task_id)]
    got = logs(engine, tid, text=text, task_id=task_id, limit=7, offset=3)
    assert got["total"] == len(want)
    assert [r["seq"] for r in got["rows"]] == want[3:10]
    n = con.execute("SELECT COUNT(*) FROM logs WHERE trace_id = ? AND category = 'busy' AND "
                    "g = 1", (tid,)).fetchone()[0]
    assert logs(engine, tid, category="busy", g=1, limit=0)["total"] == n == 500
