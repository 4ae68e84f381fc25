"""The annotations page's index (ingest.derive.annotation_index) on the annotations
workload's real trace: built from the tables' columns (the loader's forms) it equals
the build from the database; kept with the frames it reads back equal; each task's
children, regions, logs and goroutines equal SQL's GROUP BY; the task pages' orders
equal SQLite's ORDER BY; log totals from the index equal SQL's COUNT; wide id ranges
take the lexsort path and agree with arithmetic written out."""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from ingest.columns import Nullable
from ingest.config import Settings, sqlite_url
from ingest.derive import annotation_index as ix
from ingest.derive.cache import DERIVED_VERSION, load_value
from ingest.derive.frames import FrameStore
from ingest.load.pipeline import ingest_trace_file
from ingest.store import models
from ingest.store.db import make_engine
from ingest.views.annotations import MAX_TASK_LIMIT, logs, task_page
from tests.ingest.derive.test_derived_cache import assert_same_value
from tests.support.ingest_fixtures import backends, make_db_url

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-annotations.trace"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[FrameStore, int, Path]:
    d = tmp_path_factory.mktemp("annotations")
    settings = Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db"))
    engine = make_engine(settings.db_url)
    res = ingest_trace_file(engine, SAMPLE, data_dir=settings.data_dir)
    return FrameStore(engine, settings.data_dir), res.id, d / "t.db"


def _con(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def _columns(db: Path, tid: int, table: str, cols: str, key: str) -> dict[str, list[Any]]:
    rows = _con(db).execute(f"SELECT {cols} FROM {table} WHERE trace_id = ? ORDER BY {key}",
                            (tid,)).fetchall()
    names = [c.strip() for c in cols.split(",")]
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _nullable(values: list[int | None]) -> Nullable:
    null = np.array([v is None for v in values], dtype=bool)
    return Nullable(np.array([0 if v is None else v for v in values], dtype=np.int64), null)


def test_columns_and_database_agree(loaded: tuple[FrameStore, int, Path]) -> None:
    """The loader's build (lists with None, or Nullable columns and object arrays
    of strings) equals the build from the database, array by array, dtypes too."""
    store, tid, db = loaded
    engine = store.engine
    t = _columns(db, tid, "tasks", "task_id, parent_id, name, start_ts, end_ts", "task_id")
    r = _columns(db, tid, "regions", "name, task_id, g, start_ts, end_ts", "id")
    lg = _columns(db, tid, "logs", "category, task_id, g", "seq")
    assert len(t["task_id"]) == 202 and None in t["parent_id"] and None in r["end_ts"]
    want_t = ix.read_task_index(engine, tid)
    want_r = ix.read_region_index(engine, tid)
    want_l = ix.read_log_index(engine, tid)
    assert_same_value(ix.task_index_of(t["task_id"], t["parent_id"], t["name"],
                                       t["start_ts"], t["end_ts"]), want_t, "tasks")
    assert_same_value(ix.region_index_of(r["name"], r["task_id"], r["g"], r["start_ts"],
                                         r["end_ts"]), want_r, "regions")
    assert_same_value(ix.log_index_of(lg["category"], lg["task_id"], lg["g"]), want_l, "logs")
    # As arrays: the loader's Nullable columns and object arrays of strings.
    assert_same_value(ix.task_index_of(
        np.array(t["task_id"], dtype=np.int64), _nullable(t["parent_id"]),
        np.array(t["name"], dtype=object), _nullable(t["start_ts"]), _nullable(t["end_ts"])),
        want_t, "tasks")
    assert_same_value(ix.region_index_of(
        np.array(r["name"], dtype=object), _nullable(r["task_id"]),
        np.array(r["g"], dtype=np.int64), _nullable(r["start_ts"]), _nullable(r["end_ts"])),
        want_r, "regions")
    assert_same_value(ix.log_index_of(np.array(lg["category"], dtype=object),
                                      _nullable(lg["task_id"]), np.array(lg["g"])),
                      want_l, "logs")


def test_the_loaders_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """index_of_table on the columns the loader stages (its stage_table, spied on)
    equals the build from the database it stored them in."""
    import ingest.load.insert_tables as loader

    seen: dict[str, tuple[str, Any] | None] = {}
    stage = loader.stage_table

    def spy(staged: Any, table_name: str, cols: dict[str, Any], *args: Any) -> None:
        if table_name in ix.TABLE_KEYS:
            seen[table_name] = ix.index_of_table(table_name, cols)
        stage(staged, table_name, cols, *args)

    monkeypatch.setattr(loader, "stage_table", spy)
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    tid = ingest_trace_file(engine, SAMPLE, data_dir=tmp_path).id
    assert sorted(seen) == ["logs", "regions", "tasks"]
    for table, read in (("tasks", ix.read_task_index), ("regions", ix.read_region_index),
                        ("logs", ix.read_log_index)):
        got = seen[table]
        assert got is not None and got[0] == ix.TABLE_KEYS[table]
        assert_same_value(got[1], read(engine, tid), table)
    assert ix.index_of_table("ranges", {}) is None
    # The loader staged them with the frames: read back before any view built them.
    frames = FrameStore(engine, tmp_path).get(tid)
    assert frames.directory is not None
    for table, key in ix.TABLE_KEYS.items():
        d = frames.directory / f"derived-v{DERIVED_VERSION}" / key
        assert (d / "manifest.json").is_file(), key
        got = load_value(d, ix._CLASSES)
        assert_same_value(got, seen[table][1], key)  # type: ignore[index]


def _plain(engine: Any, trace_id: int, table: Any, names: str, key: str) -> list[list[Any]]:
    """Columns ``names`` of a trace's rows of ``table``, in ``key`` order."""
    with engine.connect() as conn:
        rows = conn.execute(select(*(table.c[n] for n in names.split()))
                            .where(table.c.trace_id == trace_id)
                            .order_by(table.c[key])).all()
    return [list(c) for c in zip(*rows, strict=True)]


@pytest.mark.parametrize("backend", backends())
def test_every_backend(loaded: tuple[FrameStore, int, Path], backend: str,
                       tmp_path: Path) -> None:
    """On every backend (PostgreSQL when GMPSCOPE_TEST_PG_URL is set) the build
    from the database equals the build from its columns read plainly, and the
    task pages list the same tasks as on SQLite (PostgreSQL stores a NUL
    character as U+FFFD, so the strings may differ)."""
    store, tid, _ = loaded
    for url in make_db_url(backend, tmp_path):
        engine = make_engine(url)
        try:
            other = ingest_trace_file(engine, SAMPLE, data_dir=tmp_path / "data").id

            def columns(table: Any, names: str, key: str) -> list[list[Any]]:
                return _plain(engine, other, table, names, key)  # noqa: B023 - called at once

            assert_same_value(ix.read_task_index(engine, other), ix.task_index_of(*columns(
                models.tasks, "task_id parent_id name start_ts end_ts", "task_id")), "tasks")
            assert_same_value(ix.read_region_index(engine, other), ix.region_index_of(*columns(
                models.regions, "name task_id g start_ts end_ts", "id")), "regions")
            assert_same_value(ix.read_log_index(engine, other), ix.log_index_of(*columns(
                models.logs, "category task_id g", "seq")), "logs")
            for sort in ("duration", "start"):
                got = task_page(engine, other, limit=MAX_TASK_LIMIT, sort=sort)["rows"]
                want = task_page(store.engine, tid, limit=MAX_TASK_LIMIT, sort=sort)["rows"]
                assert [r["task_id"] for r in got] == [r["task_id"] for r in want]
                assert [r["goroutines"] for r in got] == [r["goroutines"] for r in want]
            assert logs(engine, other, category="shard")["total"] == logs(
                store.engine, tid, category="shard")["total"] == 160
        finally:
            engine.dispose()


def test_kept_with_the_frames(loaded: tuple[FrameStore, int, Path]) -> None:
    """Built once, written beside the frames, read back (memory-mapped) equal."""
    store, tid, _ = loaded
    frames = store.get(tid)
    for key, cached_fn, read in ((ix.TASKS_KEY, ix.task_index, ix.read_task_index),
                                 (ix.REGIONS_KEY, ix.region_index, ix.read_region_index),
                                 (ix.LOGS_KEY, ix.log_index, ix.read_log_index)):
        first = cached_fn(store.engine, frames)
        assert frames.directory is not None
        assert (frames.directory / f"derived-v{DERIVED_VERSION}" / key / "manifest.json").is_file()
        fresh = FrameStore(store.engine, store.data_dir).get(tid)  # a new process, say
        assert_same_value(cached_fn(store.engine, fresh), read(store.engine, tid), key)
        assert_same_value(first, read(store.engine, tid), key)


def test_each_task_equals_sql(loaded: tuple[FrameStore, int, Path]) -> None:
    """Children, regions, logs and goroutines of every task, as SQL counts them."""
    store, tid, db = loaded
    con = _con(db)
    page = task_page(store.engine, tid, store.get(tid), limit=MAX_TASK_LIMIT)
    assert page["total"] == len(page["rows"]) == 202
    children = Counter(p for (p,) in con.execute(
        "SELECT parent_id FROM tasks WHERE trace_id = ?", (tid,)))
    counts: dict[str, Counter[int]] = {}
    gs: dict[int, set[int]] = defaultdict(set)
    for table in ("regions", "logs"):
        counts[table] = Counter()
        for task, g, n in con.execute(f"SELECT task_id, g, COUNT(*) FROM {table} "
                                      "WHERE trace_id = ? GROUP BY task_id, g", (tid,)):
            counts[table][task] += n
            gs[task].add(g)
    assert sum(counts["regions"].values()) > 0 and sum(counts["logs"].values()) > 0
    for row in page["rows"]:
        t = row["task_id"]
        assert row["children"] == children[t]
        assert row["regions"] == counts["regions"][t] and row["logs"] == counts["logs"][t]
        want = gs[t] | {g for g in (row["start_g"], row["end_g"]) if g is not None and g >= 0}
        assert row["goroutines"] == sorted(want)


SQL_ORDER = {
    "duration": "end_ts - start_ts IS NULL, end_ts - start_ts DESC, start_ts, task_id",
    "start": "start_ts IS NULL DESC, start_ts, task_id",
}


@pytest.mark.parametrize("sort", ["duration", "start"])
def test_orders_equal_sqlite(loaded: tuple[FrameStore, int, Path], sort: str) -> None:
    store, tid, db = loaded
    con = _con(db)
    names = [None] + [n for (n,) in con.execute(
        "SELECT DISTINCT coalesce(name, '') FROM tasks WHERE trace_id = ?", (tid,))]
    assert "" in names and "request" in names
    frames = store.get(tid)
    for name in names:
        where = "" if name is None else " AND coalesce(name, '') = ?"
        args: tuple[Any, ...] = (tid,) if name is None else (tid, name)
        want = [t for (t,) in con.execute(f"SELECT task_id FROM tasks WHERE trace_id = ?{where} "
                                          f"ORDER BY {SQL_ORDER[sort]}", args)]
        page = task_page(store.engine, tid, frames, limit=MAX_TASK_LIMIT, name=name, sort=sort)
        assert [r["task_id"] for r in page["rows"]] == want and page["total"] == len(want)
        part = task_page(store.engine, tid, frames, limit=5, offset=3, name=name, sort=sort)
        assert [r["task_id"] for r in part["rows"]] == want[3:8]
    assert task_page(store.engine, tid, frames, name="no such type")["total"] == 0


def test_log_totals_equal_sql(loaded: tuple[FrameStore, int, Path]) -> None:
    """Totals the index answers (no filter, a category, a task) equal SQL's COUNT."""
    store, tid, db = loaded
    con = _con(db)
    frames = store.get(tid)
    n = con.execute("SELECT COUNT(*) FROM logs WHERE trace_id = ?", (tid,)).fetchone()[0]
    assert logs(store.engine, tid, frames, limit=0)["total"] == n > 0
    cats = con.execute("SELECT category, COUNT(*) FROM logs WHERE trace_id = ? "
                       "GROUP BY category", (tid,)).fetchall()
    for cat, k in cats:
        got = logs(store.engine, tid, frames, category=cat, limit=3)
        assert got["total"] == k and [r["category"] for r in got["rows"]] == [cat] * min(3, k)
    assert logs(store.engine, tid, frames, category="no such category")["total"] == 0
    for task, k in con.execute("SELECT task_id, COUNT(*) FROM logs WHERE trace_id = ? AND "
                               "task_id IS NOT NULL GROUP BY task_id", (tid,)).fetchall()[:20]:
        assert logs(store.engine, tid, frames, task_id=task, limit=0)["total"] == k
    assert logs(store.engine, tid, frames, task_id=-12345, limit=0)["total"] == 0


def test_wide_ranges() -> None:
    """Task ids and goroutines too far apart for one int64 key take the lexsort path;
    both paths agree with the counts written out."""
    big = 2**62
    task = [-big, big, 5, 5, 5, None, -big]
    g = [1, 2, big, 3, 3, 9, -big]
    got = ix.log_index_of(["a"] * len(task), task, g).tasks
    assert got.task_id.tolist() == [-big, 5, big]
    assert got.rows.tolist() == [2, 3, 1]
    assert [got.g[got.g_off[i]:got.g_off[i + 1]].tolist() for i in range(3)] == [
        [-big, 1], [3, big], [2]]
    small = ix.log_index_of(["a"] * 6, [7, 3, 3, 7, 3, None], [2, 1, 1, 2, 4, 8]).tasks
    assert small.task_id.tolist() == [3, 7] and small.rows.tolist() == [3, 2]
    assert small.g.tolist() == [1, 4, 2] and small.g_off.tolist() == [0, 2, 3]


def test_names_ordered_and_null_as_empty() -> None:
    """Names by code point, NULL counted with "": one row each, stats by arithmetic."""
    t = ix.task_index_of([3, 1, 2, 4], [None, None, 1, 1], ["b", None, "", "é"],
                         [10, 0, None, 5], [40, 7, 9, None])
    assert t.stats.names == ["", "b", "é"]
    assert t.stats.count.tolist() == [2, 1, 1] and t.stats.timed.tolist() == [1, 1, 0]
    assert t.stats.total[:2].tolist() == [7, 30] and t.stats.max[:2].tolist() == [7, 30]
    assert t.children.tolist() == [2, 0, 0, 0]
    # Timed longest first (3: 30 ns, 1: 7 ns), then the untimed: no start first (2), then 4.
    assert t.task_id[t.by_duration].tolist() == [3, 1, 2, 4]
    assert t.task_id[t.by_start].tolist() == [2, 1, 4, 3]
