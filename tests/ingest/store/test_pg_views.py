"""PostgreSQL's own views over the chunk rows (revision 0016,
ingest.store.pg_chunks): every test trace shows the same rows through every
view over intervals on PostgreSQL as on SQLite, the range functions give the
views' rows of any id range, and the readers that filter the chunks' arrays
(views.intervals.thread_intervals, views.offcpu.running) return what SQLite's
views give. Needs GMPSCOPE_TEST_PG_URL."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.store.db import make_engine
from ingest.views import intervals, offcpu
from tests.support.ingest_fixtures import TRACES, make_db_url

pytestmark = pytest.mark.skipif(not os.environ.get("GMPSCOPE_TEST_PG_URL"),
                                reason="needs GMPSCOPE_TEST_PG_URL")

#: The views that read the chunks (directly or through intervals; SQLite keeps
#: the rows of interval_rows, proc_run_index and syscall_outcomes in files).
VIEWS = ("intervals", "proc_runs", "syscalls", "thread_intervals", "interval_view",
         "transitions")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Engine]]:
    """{backend: engine} with every test trace ingested, in the same order."""
    from ingest.load.pipeline import ingest_trace_file

    base = tmp_path_factory.mktemp("views")
    gens = {b: make_db_url(b, base / b) for b in ("sqlite", "postgresql")}
    engines = {}
    for b, gen in gens.items():
        (base / b).mkdir()
        engines[b] = make_engine(next(gen))
        for t in TRACES:
            ingest_trace_file(engines[b], t, data_dir=base / b / "data")
    yield engines
    for b, gen in gens.items():
        engines[b].dispose()
        for _ in gen:
            pass


def _rows(engine: Engine, sql: str, **args: Any) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return sorted((tuple(r) for r in conn.execute(text(sql), args)), key=repr)


@pytest.mark.parametrize("view", VIEWS)
def test_views_show_sqlites_rows(both: dict[str, Engine], view: str) -> None:
    sqlite = _rows(both["sqlite"], f"SELECT * FROM {view}")
    assert sqlite, view  # the traces have rows of every view
    assert _rows(both["postgresql"], f"SELECT * FROM {view}") == sqlite


def test_range_functions_give_the_views_rows(both: dict[str, Engine]) -> None:
    pg = both["postgresql"]
    with pg.connect() as conn:
        blocks = conn.execute(text(
            "SELECT table_name, first_id, last_id FROM row_ranges ORDER BY first_id")).all()
    assert {b.table_name for b in blocks} == {"intervals", "proc_runs", "syscalls"}
    for name, lo, hi in blocks:
        # The whole block, one id, and a range cutting chunks at both ends.
        for a, b in ((lo, hi), (lo, lo), (lo + 700, min(hi, lo + 2500))):
            got = _rows(pg, f"SELECT * FROM gmpscope_{name}(:a, :b)", a=a, b=b)
            assert got == _rows(pg, f"SELECT * FROM {name} WHERE id BETWEEN :a AND :b",
                                a=a, b=b)
            assert len(got) == max(0, min(b, hi) - a + 1)


def _ms_and_spans(engine: Engine) -> list[tuple[int, int, int, int]]:
    """(trace, m, start, end) of each M of each trace, with its rows' span."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT trace_id, m, min(start_ts), max(end_ts) FROM thread_intervals "
            "GROUP BY trace_id, m ORDER BY trace_id, m"))]


def test_thread_readers_give_sqlites_rows(both: dict[str, Engine]) -> None:
    spans = _ms_and_spans(both["sqlite"])
    assert len({s[0] for s in spans}) == len(TRACES)
    assert spans == _ms_and_spans(both["postgresql"])
    for tid, m, lo, hi in spans:
        mid = (lo + hi) // 2
        for t1, t2 in ((lo, hi + 1), (mid - (hi - lo) // 10, mid + 1)):
            want = intervals.thread_intervals(both["sqlite"], tid, m, t1, t2)
            got = intervals.thread_intervals(both["postgresql"], tid, m, t1, t2)
            assert got == want
    for tid in sorted({s[0] for s in spans}):
        m, lo, hi = next((m, lo, hi) for t, m, lo, hi in spans if t == tid)
        mid = (lo + hi) // 2
        g = int(offcpu.running(both["sqlite"], tid)[0][0])
        for args in ({}, {"m": m}, {"t1": mid, "t2": hi}, {"t1": lo, "t2": mid, "m": m},
                     {"g": g}, {"t2": mid}):
            ran = _sorted(offcpu.running(both["sqlite"], tid, **args))
            assert ran, args
            assert _sorted(offcpu.running(both["postgresql"], tid, **args)) == ran, args


def _sorted(cols: tuple[Any, ...]) -> list[tuple[int, ...]]:
    return sorted(zip(*(np.asarray(c).tolist() for c in cols), strict=True))


def test_logs_pages_are_sqlites(both: dict[str, Engine]) -> None:
    """The logs page's rows on PostgreSQL (rows there) are SQLite's (column
    files), filtered or not, at every offset, and the totals agree."""
    from ingest.views.annotations import logs

    with both["sqlite"].connect() as conn:
        traces = conn.execute(text(
            "SELECT trace_id, count(*), min(g), min(category) FROM logs GROUP BY trace_id "
            "HAVING count(*) > 3")).all()
    assert traces
    for tid, n, g, category in traces:
        for args in ({}, {"offset": n // 2}, {"offset": n - 2}, {"g": g},
                     {"category": category}, {"text": "e"}, {"limit": 0}):
            kw: dict[str, Any] = {"limit": 5, **args}
            want = logs(both["sqlite"], tid, **kw)
            got = logs(both["postgresql"], tid, **kw)
            assert got == want, kw
            assert len(want["rows"]) == min(kw["limit"], want["total"] - kw.get("offset", 0))


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


def _plan(engine: Engine, sql: str) -> dict[str, Any]:
    """The top node of the server's plan of ``sql`` (EXPLAIN VERBOSE)."""
    with engine.connect() as conn:
        plan = conn.execute(text(f"EXPLAIN (VERBOSE, FORMAT JSON) {sql}")).scalar_one()
    top: dict[str, Any] = (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]
    return top


def _is_array(expr: str) -> bool:
    """Whether a plan's output expression is a whole chunk array, detoasted
    (``c.x || '{}'::bigint[]``), not a value taken from one."""
    while expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1]
    return re.fullmatch(r"\w+\.\w+ \|\| '\{\}'::[\w ]+\[\]", expr) is not None


#: Every view over chunk rows and the column a test sorts it by.
CHUNK_VIEWS = {"interval_rows": "start_ts", "proc_run_index": "interval_id",
               "syscall_outcomes": "stolen_ts", "thread_intervals": "end_ts",
               "metric_rows": "value", "region_rows": "start_ts", "log_rows": "ts",
               "goroutine_rows": "first_ts", "task_rows": "start_ts", "range_rows": "start_ts",
               "transition_stacks": "stack_id"}


@pytest.mark.parametrize("view", CHUNK_VIEWS)
def test_sorts_over_chunk_views_carry_scalars(both: dict[str, Engine], view: str) -> None:
    """A sort of a view's rows sorts its values, not each row's chunk arrays
    (revision 0022; a window over the 200 MB trace's intervals by goroutine
    took over 150 s carrying them, 4.3 s now): the arrays, detoasted as
    ``a || '{}'``, are read inside the view's subquery, and the sort outputs
    none."""
    # A window: its rows are sorted before it, and the values it passes on
    # are taken after it (where a plain ORDER BY takes them before the sort).
    col = CHUNK_VIEWS[view]
    plan = _plan(both["postgresql"], f"SELECT *, lag({col}) OVER (ORDER BY {col}) FROM {view}")
    sort = next(n for n in _plan_nodes(plan) if n["Node Type"] == "Sort")
    assert sort["Output"]
    assert not [o for o in sort["Output"] if _is_array(o)], sort["Output"]
    # The arrays are read below the sort, each detoasted once a chunk.
    assert any(_is_array(o) for n in _plan_nodes(sort) for o in n.get("Output", ()))


def test_conditions_reach_inside_chunk_views(both: dict[str, Engine]) -> None:
    """A condition on a view's column is tested where the values are taken,
    before the other columns' values are (an OFFSET 0 kept it out)."""
    nodes = list(_plan_nodes(_plan(both["postgresql"],
                                   "SELECT max(end_ts) FROM thread_intervals WHERE m = 5")))
    tests = [n.get("Join Filter", "") + n.get("Filter", "") for n in nodes]
    assert any("'{}'" in f and "= 5" in f for f in tests), tests
    assert not [n for n in nodes if n["Node Type"] == "Subquery Scan"]
