"""Timeline search against SQL over the same rows: a goroutine id, a start
function, a stack function; windows, paging, ``at`` and states."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ingest.views.search import BadQuery, page_of, search
from tests.support.causality import Loaded, backends, load_traces

NAMES = ("chain-1.27", "mutex-1.27", "httpnet-1.19")


@pytest.fixture(scope="module", params=backends())
def store(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    yield from load_traces(request.param, tmp_path_factory, NAMES)


_BASE = ("SELECT v.rid, v.start_ts, v.end_ts, v.state FROM interval_view v "
         "WHERE v.trace_id = :t AND v.resource = 'goroutine' "
         "AND v.start_ts < :t2 AND v.end_ts > :t1 AND ({cond}) "
         "ORDER BY v.start_ts, v.rid, v.seq")
_FUNCTION = ("v.rid IN (SELECT goid FROM goroutines WHERE trace_id = :t "
             "AND lower(start_function) LIKE :p) OR v.stack_id IN (SELECT stack_id "
             "FROM stacks WHERE trace_id = :t AND lower(function) LIKE :p)")


def _sql(store: Loaded, tid: int, cond: str, t1: int, t2: int, **kw: Any) -> list[tuple]:
    return [tuple(r) for r in store.rows(_BASE.format(cond=cond), t=tid, t1=t1, t2=t2, **kw)]


def _all(store: Loaded, name: str, q: str, t1: int | None = None, t2: int | None = None,
         limit: int = 37) -> tuple[list[tuple], dict[str, Any]]:
    """Every match, page by page."""
    f = store.get(name)
    out: list[tuple] = []
    offset = 0
    while True:
        d = search(store.engine, f, q, t1, t2, offset=offset, limit=limit)
        out += [(s["goroutine"], s["start_ts"], s["end_ts"], s["state"]) for s in d["spans"]]
        offset += limit
        if offset >= d["total"]:
            return out, d


def _window(store: Loaded, name: str, whole: bool) -> tuple[int, int]:
    f = store.get(name)
    if whole:
        return f.first_ts, f.last_ts + 1
    third = (f.last_ts - f.first_ts) // 3
    return f.first_ts + third, f.last_ts - third


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_function_search_equals_sql(store: Loaded, name: str, whole: bool) -> None:
    """Start functions and stack functions, any case, substring."""
    tid = store.ids[name]
    t1, t2 = _window(store, name, whole)
    for q in ("main.", "MUTEX", "chanrecv", "sync.(*Mutex).Unlock", "net/http", "a_%b"):
        got, d = _all(store, name, q, None if whole else t1, None if whole else t2)
        pat = "%" + q.lower().replace("_", "\\_").replace("%", "\\%") + "%"
        want = _sql(store, tid, _FUNCTION.replace("LIKE :p", "LIKE :p ESCAPE '\\'"),
                    t1, t2, p=pat)
        assert got == want, q
        assert d["total"] == len(want) and d["goroutines"] == len({r[0] for r in want})
    assert any(_all(store, name, q)[1]["total"] for q in ("main.", "chanrecv"))


@pytest.mark.parametrize("name", NAMES)
def test_goroutine_id_search_equals_sql(store: Loaded, name: str) -> None:
    tid = store.ids[name]
    t1, t2 = _window(store, name, True)
    goids = [r[0] for r in store.rows("SELECT goid FROM goroutines WHERE trace_id = :t "
                                      "ORDER BY transitions DESC LIMIT 3", t=tid)]
    for g in goids:
        for q in (str(g), f"g{g}", f" G{g} "):
            got, d = _all(store, name, q)
            assert d["as"] == "goroutine"
            assert got == _sql(store, tid, "v.rid = :g", t1, t2, g=g)
            assert got


def test_at_starts_the_page_at_the_first_match_from_then(store: Loaded) -> None:
    f = store.get("mutex-1.27")
    full, _ = _all(store, "mutex-1.27", "main.")
    at = full[len(full) // 2][1]
    d = search(store.engine, f, "main.", at=at, limit=5)
    before = sum(1 for r in full if r[1] < at)
    assert d["offset"] == before
    assert [(s["goroutine"], s["start_ts"]) for s in d["spans"]] == \
        [(r[0], r[1]) for r in full[before:before + 5]]


def test_state_filter_and_bad_queries(store: Loaded) -> None:
    f = store.get("chain-1.27")
    d = search(store.engine, f, "main.", state="Waiting", limit=1000)
    full, _ = _all(store, "chain-1.27", "main.")
    assert [(s["goroutine"], s["start_ts"]) for s in d["spans"]] == \
        [(r[0], r[1]) for r in full if r[3] == "Waiting"]
    with pytest.raises(BadQuery):
        search(store.engine, f, "  ")
    with pytest.raises(BadQuery):
        search(store.engine, f, "main.", state="Sleeping")


def test_page_of_equals_a_whole_stable_sort() -> None:
    """Any page of the partition-based pager is that slice of a stable sort,
    ties (many equal times) included."""
    rng = np.random.default_rng(25)
    for n, spread in ((50_000, 1_000), (50_000, 10), (3_000, 5), (0, 1)):
        start = rng.integers(0, spread, n).astype(np.int64)
        whole = np.argsort(start, kind="stable")
        for offset, limit in ((0, 100), (n // 2, 200), (max(0, n - 7), 100), (n + 5, 10)):
            assert page_of(start, offset, limit).tolist() == \
                whole[offset:offset + limit].tolist()
