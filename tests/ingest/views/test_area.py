"""Area selection statistics against SQL sums over the same rows, clipped to
the window: per state, per goroutine group, per function (Waiting time by
the innermost frame of the stack where the goroutine blocked), procs' own
states."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ingest.views.area import BadLanes, Lane, area, parse_lanes
from tests.support.causality import Loaded, backends, load_traces

NAMES = ("chain-1.27", "mutex-1.27", "httpnet-1.19")
CLIP = ("(CASE WHEN v.end_ts < :t2 THEN v.end_ts ELSE :t2 END)"
        " - (CASE WHEN v.start_ts > :t1 THEN v.start_ts ELSE :t1 END)")
ALIVE = ("v.trace_id = :t AND v.resource = 'goroutine' AND v.state <> 'NotExist'"
         " AND v.start_ts < :t2 AND v.end_ts > :t1")


@pytest.fixture(scope="module", params=backends())
def store(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    yield from load_traces(request.param, tmp_path_factory, NAMES)


def _selections(store: Loaded, name: str) -> list[tuple[list[str], str]]:
    """(lanes, the same rows as an SQL condition on interval_view v)."""
    tid = store.ids[name]
    busiest = store.rows("SELECT goid FROM goroutines WHERE trace_id = :t "
                         "ORDER BY transitions DESC LIMIT 2", t=tid)
    group = store.rows("SELECT start_function FROM goroutines WHERE trace_id = :t AND "
                       "start_function LIKE 'main.%' GROUP BY start_function "
                       "ORDER BY count(*) DESC LIMIT 1", t=tid)[0][0]
    m = store.rows("SELECT m FROM threads WHERE trace_id = :t ORDER BY running_ns DESC "
                   "LIMIT 1", t=tid)[0][0]
    g1, g2 = busiest[0][0], busiest[1][0]
    esc = group.replace("'", "''")
    return [
        (["p:0", "p:1"], "v.state = 'Running' AND v.p IN (0, 1)"),
        ([f"g:{g1}", f"g:{g2}"], f"v.rid IN ({g1}, {g2})"),
        ([f"group:{group}"], "v.rid IN (SELECT goid FROM goroutines WHERE trace_id = :t "
                             f"AND start_function = '{esc}')"),
        ([f"m:{m}"], f"v.state IN ('Running', 'Syscall') AND v.m = {m}"),
        ([f"m:{m}", f"g:{g1}", "p:0"],
         f"(v.state IN ('Running', 'Syscall') AND v.m = {m}) OR v.rid = {g1} "
         "OR (v.state = 'Running' AND v.p = 0)"),
    ]


def _windows(store: Loaded, name: str) -> list[tuple[int, int]]:
    f = store.get(name)
    third = (f.last_ts - f.first_ts) // 3
    return [(f.first_ts, f.last_ts), (f.first_ts + third, f.last_ts - third)]


@pytest.mark.parametrize("name", NAMES)
def test_states_groups_and_functions_equal_sql(store: Loaded, name: str) -> None:
    tid = store.ids[name]
    f = store.get(name)
    for lanes, cond in _selections(store, name):
        for t1, t2 in _windows(store, name):
            d = area(store.engine, f, t1, t2, parse_lanes(lanes))
            kw = {"t": tid, "t1": t1, "t2": t2}
            where = f"{ALIVE} AND ({cond})"
            states = {r[0]: int(r[1]) for r in store.rows(
                f"SELECT v.state, sum({CLIP}) FROM interval_view v WHERE {where} "
                "GROUP BY v.state", **kw)}
            assert {s["state"]: s["ns"] for s in d["states"]} == states, lanes
            assert states or t1 != f.first_ts, "each selection holds rows over the whole trace"
            assert d["total_ns"] == sum(states.values())
            assert d["rows"] == store.rows(f"SELECT count(*) FROM interval_view v "
                                           f"WHERE {where}", **kw)[0][0]
            groups = {(r[0] or "(unknown)"): int(r[1]) for r in store.rows(
                f"SELECT g.start_function, sum({CLIP}) FROM interval_view v "
                "JOIN goroutines g ON g.trace_id = v.trace_id AND g.goid = v.rid "
                f"WHERE {where} GROUP BY g.start_function", **kw)}
            got = {x["start_function"]: x["ns"] for x in d["groups"]}
            if len(groups) <= 50:  # the answer lists the top 50
                assert got == groups, lanes
            waiting = {r[0]: int(r[1]) for r in store.rows(
                f"SELECT coalesce(s.function, '(no stack)'), sum({CLIP}) FROM interval_view v "
                "LEFT JOIN stacks s ON s.trace_id = v.trace_id AND s.stack_id = v.stack_id "
                f"AND s.depth = 0 WHERE {where} AND v.state = 'Waiting' "
                "GROUP BY coalesce(s.function, '(no stack)')", **kw)}
            got_w = {x["function"]: x["states"]["Waiting"] for x in d["functions"]
                     if "Waiting" in x["states"]}
            if len(d["functions"]) < 50:
                assert got_w == waiting, lanes
            assert sum(x["ns"] for x in d["functions"]) <= d["total_ns"]
            if len(d["functions"]) < 50:
                assert sum(x["ns"] for x in d["functions"]) == d["total_ns"]


@pytest.mark.parametrize("name", NAMES)
def test_proc_states_equal_sql(store: Loaded, name: str) -> None:
    tid = store.ids[name]
    f = store.get(name)
    for t1, t2 in _windows(store, name):
        d = area(store.engine, f, t1, t2, parse_lanes(["p:0", "p:1"]))
        want = {r[0]: int(r[1]) for r in store.rows(
            f"SELECT v.state, sum({CLIP}) FROM interval_view v WHERE v.trace_id = :t "
            "AND v.resource = 'proc' AND v.rid IN (0, 1) AND v.start_ts < :t2 "
            "AND v.end_ts > :t1 GROUP BY v.state", t=tid, t1=t1, t2=t2)}
        assert d["proc_states"] == want
        assert d["links"]["latency"] == f"/traces/{tid}/latency?t1={t1}&t2={t2}"


def test_canvas_lane_keys_name_the_same_rows(store: Loaded) -> None:
    """The timeline's keys (p0, m12, g42, group:<code>) select what p:0, m:12,
    g:42 and group:<name> do; its GC/STW bands hold nothing."""
    from ingest.derive.goroutine_lanes import goroutine_table

    f = store.get("chain-1.27")
    names = goroutine_table(store.engine, f).names
    code = names.index("main.holder")
    m = store.rows("SELECT m FROM threads WHERE trace_id = :t LIMIT 1",
                   t=store.ids["chain-1.27"])[0][0]
    a = area(store.engine, f, f.first_ts, f.last_ts,
             parse_lanes(["gc", "stw", "p0", f"m{m}", "g1", f"group:{code}"]))
    b = area(store.engine, f, f.first_ts, f.last_ts,
             parse_lanes(["p:0", f"m:{m}", "g:1", "group:main.holder"]))
    assert a["states"] == b["states"] and a["groups"] == b["groups"] and a["rows"] > 0


def test_lanes_are_checked() -> None:
    assert parse_lanes(["group:pkg.F[a,b]"]) == [Lane("group", "pkg.F[a,b]")]
    assert parse_lanes(["p3", "m77", "g5"]) == [Lane("p", "3"), Lane("m", "77"), Lane("g", "5")]
    for bad in ([], ["gc"], ["x:1"], ["p:zero"], ["g:"], ["p"], ["q3"]):
        with pytest.raises(BadLanes):
            parse_lanes(bad)
