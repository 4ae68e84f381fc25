"""The coded tables behind metrics, regions, logs, goroutines, ranges and tasks
(ingest/store/coded_models.py, revision 0009): codes by frequency, deltas, the
views' rows equal to the tables' they replaced through the migration both
ways, on SQLite and PostgreSQL, and a trace's strings deleted with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, inspect, text

from ingest.load.pipeline import ingest_trace_file
from ingest.store import models
from ingest.store.coded_insert import CodeBook, coded_text, encode, in_book, stored_columns
from ingest.store.coded_models import CODED
from ingest.store.db import migrate
from tests.ingest.store.test_ingest_db import _head, _migrate_to
from tests.support.ingest_fixtures import ROOT, TRACES, db_url, engine

FIXTURES = (db_url, engine)

VIEWS = tuple(CODED)
#: Has tasks, regions, logs, GC ranges and metric samples.
ANNOTATED = ROOT / "tests" / "data" / "traces" / "go1.23-workers.trace"


def test_codes_by_first_appearance_nulls_and_duplicates() -> None:
    # "a" first, then "b", then "c"; NULL is no code. The decoder's table
    # may hold one text twice (code 4 is "b" again): one code for both.
    col = coded_text(np.array([1, 2, 0, 2, 1, 3, 4], np.int32), [None, "a", "b", "c", "b"])
    codes, book = encode(col)
    assert book.new_values() == (0, ["a", "b", "c"])
    assert codes.values[~codes.null].tolist() == [0, 1, 1, 0, 2, 1]
    assert codes.null.tolist() == [False, False, True, False, False, False, False]
    # A plain object array or list codes the same.
    for plain in (np.array(list(col), dtype=object), list(col)):
        again, b = encode(plain)
        assert b.new_values() == (0, ["a", "b", "c"])
        assert again.values.tolist() == codes.values.tolist()
        assert again.null.tolist() == codes.null.tolist()


def test_parts_in_one_book_code_as_the_whole() -> None:
    """A column cut into parts, each coded with the book of those before it,
    gets the whole column's codes, and each value's string once."""
    whole = coded_text(np.array([3, 1, 0, 3, 2, 1, 2, 4], np.int32),
                       [None, "a", "b", "c", "a"])
    want, wbook = encode(whole)
    book = CodeBook()
    got, new = [], []
    for a, b in ((0, 3), (3, 4), (4, 8)):
        part = in_book(coded_text(whole.codes[a:b], whole.values), book)
        codes, same = encode(part)
        assert same is book
        got.append(np.where(codes.null, -1, codes.values))
        new.append(book.new_values())
    assert np.concatenate(got).tolist() == np.where(want.null, -1, want.values).tolist()
    assert new == [(0, ["c", "a"]), (2, []), (2, ["b"])]
    assert wbook.new_values() == (0, ["c", "a", "b"])


def test_slices_are_plain_arrays() -> None:
    col = coded_text(np.array([1, 2, 1], np.int32), [None, "a", "b"])
    part = col[1:]
    assert getattr(part, "codes", None) is None
    codes, book = encode(part)
    assert book.new_values() == (0, ["b", "a"]) and codes.values.tolist() == [0, 1]


def test_deltas_keep_nulls() -> None:
    # end_ts - coalesce(start_ts, 0): a region begun before the trace keeps
    # its end whole; one still open stays NULL.
    cols: dict[str, Any] = {
        "id": np.arange(3), "task_id": [None, 1, 2], "name": ["r", "r", "s"],
        "g": np.array([5, 5, 6]), "start_ts": [None, 100, 200], "end_ts": [150, 130, None],
        "stack_id": np.zeros(3, np.int64)}
    table, texts = stored_columns(CODED["regions"], cols)
    d = table["end_ts_delta"]
    assert d.values[~d.null].tolist() == [150, 30]  # type: ignore[union-attr]
    assert d.null.tolist() == [False, False, True]  # type: ignore[union-attr]
    assert texts == [(2, 0, ["r", "s"])]


def _views(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {v: sorted(tuple(r) for r in conn.execute(text(f"SELECT * FROM {v}")))
                for v in VIEWS}


def test_migration_0009_keeps_every_row(engine: Engine, tmp_path: Path) -> None:
    """A database at 0008 (the six as tables) upgrades with every row as it
    was, through the views, and downgrades back to the same tables."""
    from tests.support.consistency import database_problems

    first = ingest_trace_file(engine, ANNOTATED, data_dir=tmp_path / "data")
    second = ingest_trace_file(engine, TRACES[0], data_dir=tmp_path / "data")
    before = _views(engine)
    assert all(before[v] for v in VIEWS), {v: len(r) for v, r in before.items()}
    assert any(r[-1] is None for r in before["ranges"])  # NULL end_attrs kept
    assert set(VIEWS) <= set(inspect(engine).get_view_names())
    _migrate_to(engine, "downgrade", "0008")
    insp = inspect(engine)
    assert set(VIEWS) <= set(insp.get_table_names())
    assert not {"strings", *(c.table.name for c in CODED.values())} & set(insp.get_table_names())
    assert _views(engine) == before
    assert migrate(engine) == _head()
    insp = inspect(engine)
    assert set(VIEWS) <= set(insp.get_view_names())
    assert _views(engine) == before
    with engine.begin() as conn:  # a user's own delete (PostgreSQL: the trigger)
        conn.execute(models.traces.delete().where(models.traces.c.id == first.id))
    with engine.connect() as conn:
        for table in ("strings", *(c.table.name for c in CODED.values())):
            ids = conn.execute(text(f"SELECT DISTINCT trace_id FROM {table}")).scalars().all()
            assert ids in ([second.id], []), table
    third = ingest_trace_file(engine, ANNOTATED, data_dir=tmp_path / "data")
    after = _views(engine)
    for v in VIEWS:  # the same file's rows again, under its new id
        # (but for the goroutines' interval ids, which are the new block's)
        cut = -2 if v == "goroutines" else None
        assert sorted((third.id, *r[1:cut]) for r in before[v] if r[0] == first.id) == \
            [r[:cut] for r in after[v] if r[0] == third.id]
    assert database_problems(engine) == []


def test_views_read_the_coded_columns(engine: Engine, tmp_path: Path) -> None:
    """What the tables store: codes into strings (the first row's value 0),
    and the deltas."""
    res = ingest_trace_file(engine, ANNOTATED, data_dir=tmp_path / "data")
    with engine.connect() as conn:
        top = conn.execute(text(
            "SELECT name FROM metrics WHERE trace_id = :t ORDER BY seq LIMIT 1"),
            {"t": res.id}).scalar_one()
        assert conn.execute(text(
            "SELECT value FROM strings WHERE trace_id = :t AND source = 1 AND code = 0"),
            {"t": res.id}).scalar_one() == top
        rows = conn.execute(text(
            "SELECT r.end_ts_delta, v.start_ts, v.end_ts FROM region_rows_all r "
            "JOIN regions v ON v.trace_id = r.trace_id AND v.id = r.id "
            "WHERE r.trace_id = :t"), {"t": res.id}).all()
        assert rows and all(d == (e - (s or 0) if e is not None else None)
                            for d, s, e in rows)


def test_columns_of_nulls_left_out() -> None:
    """A nullable column NULL on every row is not bound (the metrics of Go's
    new traces have no value_str): the rest are integers."""
    none = coded_text(np.zeros(3, np.int32), [None])
    cols: dict[str, Any] = {"seq": np.arange(3), "ts": np.arange(3), "name": ["a"] * 3,
                            "value": np.arange(3), "value_str": none}
    table, _ = stored_columns(CODED["metrics"], cols)
    assert list(table) == ["seq", "ts", "name_code", "value"]
    some = coded_text(np.array([0, 1, 0], np.int32), [None, "x"])
    for value_str in (some, [None, "x", None]):
        table, _ = stored_columns(CODED["metrics"], {**cols, "value_str": value_str})
        assert list(table)[-1] == "value_str"
    table, _ = stored_columns(CODED["metrics"], {**cols, "value_str": [None] * 3})
    assert "value_str" not in table
