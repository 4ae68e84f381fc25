"""The Perfetto export read back with the ``perfetto`` package's protos
(tests/support/perfetto_read.py, which pairs slices and flows as Perfetto's
trace processor does) and compared with the same trace's intervals in SQL,
with Go's own parsed events (wake-ups) and with the metrics rows."""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views import perfetto
from ingest.views.perfetto_data import goroutine_label, state_name
from tests.support.goparsed import go_parsed
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.perfetto_read import PerfettoTrace, read

REPO = Path(__file__).resolve().parents[3]
#: Real workload traces (samples/README.md): sync wake-ups, syscalls, network.
SAMPLES = ("go1.27-mutex.trace", "go1.27-syscallblock.trace", "go1.27-httpnet.trace")
NONE = -1


@pytest.fixture(scope="module", params=backends())
def stored(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Engine, dict[str, tuple[int, PerfettoTrace]]]]:
    base = tmp_path_factory.mktemp("perfetto")
    for url in make_db_url(request.param, base):
        eng = make_engine(url)
        store = FrameStore(eng, base / "data")
        out: dict[str, tuple[int, PerfettoTrace]] = {}
        for name in SAMPLES:
            res = ingest_trace_file(eng, REPO / "samples" / name, data_dir=base / "data")
            buf = io.BytesIO()
            perfetto.write(eng, store.get(res.id), buf)
            out[name] = (res.id, read(buf.getvalue()))
        yield eng, out
        eng.dispose()


def rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params))


def _goroutine_tracks(pt: PerfettoTrace) -> dict[int, Any]:
    root = pt.by_name("Goroutines by start function", parent=0)
    return {int(t.name[1:]): t for g in pt.children(root.uuid) for t in pt.children(g.uuid)}


@pytest.mark.parametrize("sample", SAMPLES)
def test_goroutine_slices_are_the_intervals(stored: Any, sample: str) -> None:
    engine, out = stored
    trace_id, pt = out[sample]
    want: dict[int, list[tuple[int, int, str, int]]] = defaultdict(list)
    for rid, start, end, state, reason in rows(
            engine, "SELECT rid, start_ts, end_ts, state, reason FROM interval_view "
            "WHERE trace_id = :t AND resource = 'goroutine' AND state != 'NotExist'",
            t=trace_id):
        want[rid].append((start, end, state_name(state, reason), 0))
    tracks = _goroutine_tracks(pt)
    assert set(tracks) == set(want) | {g for g, t in tracks.items() if not t.slices}
    for goid, t in tracks.items():
        assert t.slices == sorted(want.get(goid, [])), goid
    assert sum(len(t.slices) for t in tracks.values()) == sum(map(len, want.values())) > 1000


@pytest.mark.parametrize("sample", SAMPLES)
def test_goroutine_groups_are_start_functions(stored: Any, sample: str) -> None:
    engine, out = stored
    trace_id, pt = out[sample]
    fn = dict(rows(engine, "SELECT goid, start_function FROM goroutines WHERE trace_id = :t",
                   t=trace_id))
    root = pt.by_name("Goroutines by start function", parent=0)
    groups = pt.children(root.uuid)
    for g in groups:
        members = pt.children(g.uuid)
        assert g.name == f"{fn[int(members[0].name[1:])] or '(unknown start)'} ({len(members)})"
        assert {fn.get(int(m.name[1:])) or "" for m in members} == \
            {fn.get(int(members[0].name[1:])) or ""}
    assert len(groups) == len({f or "" for f in fn.values()})


@pytest.mark.parametrize("sample", SAMPLES)
def test_proc_and_thread_slices(stored: Any, sample: str) -> None:
    engine, out = stored
    trace_id, pt = out[sample]
    fn = {g: f or "" for g, f in rows(
        engine, "SELECT goid, start_function FROM goroutines WHERE trace_id = :t", t=trace_id)}
    procs = pt.by_name("Procs (P)", parent=0)
    by_p: dict[int, list[Any]] = defaultdict(list)
    for p, start, end, g in rows(engine, "SELECT p, start_ts, end_ts, g FROM proc_runs "
                                 "WHERE trace_id = :t ORDER BY p, start_ts, id", t=trace_id):
        by_p[p].append((start, end, goroutine_label(g, fn.get(g, ""))))
    assert {t.name for t in pt.children(procs.uuid)} == {f"P{p}" for p in by_p}
    for p, runs in by_p.items():
        got = pt.by_name(f"P{p}", procs.uuid).slices
        # An end is cut at the next run's start only where two runs overlapped.
        cut = [(s, min(e, runs[i + 1][0]) if i + 1 < len(runs) else e, n, 0)
               for i, (s, e, n) in enumerate(runs)]
        assert got == sorted(cut)

    threads = pt.by_name("Threads (M)", parent=0)
    by_m: Counter[int] = Counter()
    named: Counter[tuple[int, str]] = Counter()
    for m, state, g in rows(engine, "SELECT m, state, g FROM thread_intervals "
                            "JOIN traces ON traces.id = :t WHERE thread_intervals.trace_id = :t "
                            "AND m >= 0", t=trace_id):
        by_m[m] += 1
        label = goroutine_label(g, fn.get(g, ""))
        named[(m, label if state == "Running" else f"syscall: {label}")] += 1
    assert {t.name for t in pt.children(threads.uuid)} == {f"M{m}" for m in by_m}
    for m, n in by_m.items():
        t = pt.by_name(f"M{m}", threads.uuid)
        assert len(t.slices) == n
        assert Counter((m, s[2]) for s in t.slices) == Counter(
            {k: v for k, v in named.items() if k[0] == m})
        assert all(s[3] == 0 for s in t.slices)


def go_wakeups(trace: Path) -> set[tuple[int, int, int, int]]:
    """(waker, woken, wake ts, woken's next Running ts) from Go's own parsed
    events: each goroutine Waiting -> Runnable made in another goroutine's
    context and followed by that goroutine's Runnable -> Running."""
    events, err = go_parsed(trace)
    assert err is None
    pending: dict[int, tuple[int, int]] = {}
    out = set()
    for e in events:
        if e.kind != "StateTransition" or e.resource != "goroutine":
            continue
        waker = pending.pop(e.rid, None)
        if waker is not None and e.from_state == "Runnable" and e.to_state == "Running":
            out.add((waker[0], e.rid, waker[1], e.ts))
        if (e.from_state, e.to_state) == ("Waiting", "Runnable") and e.g not in (NONE, e.rid):
            pending[e.rid] = (e.g, e.ts)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLES)
def test_flows_are_go_wakeups(stored: Any, sample: str) -> None:
    _, out = stored
    _, pt = out[sample]
    goid = {t.uuid: g for g, t in _goroutine_tracks(pt).items()}
    got = {(goid[f.source_track], goid[f.dest_track], f.source_ts, f.dest_ts)
           for f in pt.flows.values()}
    assert len(got) == len(pt.flows)
    want = go_wakeups(REPO / "samples" / sample)
    assert got == want and want
    # Each flow starts inside one of the waker's slices (or at its edge).
    for f in pt.flows.values():
        src = pt.tracks[f.source_track]
        assert any(s <= f.source_ts <= e for s, e, _, _ in src.slices)
        assert f.dest_name == "Running"


@pytest.mark.parametrize("sample", SAMPLES)
def test_counters(stored: Any, sample: str) -> None:
    engine, out = stored
    trace_id, pt = out[sample]
    want: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for name, ts, value in rows(engine, "SELECT name, ts, value FROM metrics WHERE "
                                "trace_id = :t AND value IS NOT NULL ORDER BY seq", t=trace_id):
        want[name].append((ts, value))
    assert want
    for name, samples in want.items():
        t = pt.by_name(name, parent=0)
        assert t.is_counter and t.counts == sorted(samples, key=lambda s: s[0])
    # Goroutines: every goroutine that exists at the end was counted in and
    # not out; the count never goes below zero.
    g = pt.by_name("Goroutines", parent=0).counts
    alive = rows(engine, "SELECT COUNT(*) FROM goroutines WHERE trace_id = :t AND "
                 "final_state NOT IN ('NotExist', 'Undetermined')", t=trace_id)[0][0]
    assert g[-1][1] == alive and min(v for _, v in g) >= 0
    sc = pt.by_name("Threads in syscall", parent=0).counts
    n_sys = rows(engine, "SELECT COUNT(*) FROM syscalls WHERE trace_id = :t", t=trace_id)[0][0]
    assert (n_sys == 0) == (not sc)
    if sc:
        assert min(v for _, v in sc) >= 0 and sc[-1][1] == rows(
            engine, "SELECT COUNT(*) FROM syscalls WHERE trace_id = :t AND end_ts >= "
            "(SELECT last_ts FROM traces WHERE id = :t)", t=trace_id)[0][0]
