"""The overview's fast paths give the straightforward computation's numbers:

- the goroutine and thread series (one pass, exact integer ns per bin; the
  whole trace's default bins kept as a report cache) equal, bin by bin, the
  plain sum over the intervals of each one's overlap with the bin, read from
  SQL (interval_view, thread_intervals);
- the counter columns (staged from the loader's columns, or built from SQL,
  then memory-mapped) are the metrics table's samples;
- a fresh process's view read from the caches on disk is the same JSON.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, text

from ingest.columns import Nullable
from ingest.derive.cache import derived_dir
from ingest.derive.frames import FrameStore
from ingest.derive.overview_counters import (
    COUNTER_METRICS,
    COUNTERS_KEY,
    counters_from_db,
    counters_of,
    trace_counters,
)
from ingest.extensions import PURE_ENV
from ingest.load.pipeline import IngestResult
from ingest.views.overview import DEFAULT_BINS, WHOLE_TRACE_KEY, bin_edges, counters_view, overview
from ingest.views.overview_series import AVG_DECIMALS, STATE_SERIES, state_ns
from tests.support.goroutine_series import goroutine_series_rows
from tests.support.ingest_fixtures import TRACES, loaded

Loaded = tuple[Engine, Path, dict[str, IngestResult]]
FIXTURES = (loaded,)

NAMES = [t.name for t in TRACES]


def _overlaps(rows: list[tuple[str, int, int]], edges: np.ndarray) -> dict[str, np.ndarray]:
    """Per series, per bin: the sum over its intervals of
    max(0, min(end, right) - max(start, left)), as exact integers."""
    left, right = edges[:-1], edges[1:]
    out: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(left), np.int64))
    for series, s, e in rows:
        out[series] += np.maximum(0, np.minimum(e, right) - np.maximum(s, left))
    return out


def _goroutine_rows(engine: Engine, tid: int) -> list[tuple[str, int, int]]:
    """(series, start, end) of every goroutine interval in an overview series."""
    return [r for r in goroutine_series_rows(engine, tid) if r[0] in STATE_SERIES]


def _thread_rows(engine: Engine, tid: int) -> list[tuple[str, int, int]]:
    with engine.connect() as conn:
        return [(state, int(s), int(e)) for state, s, e in conn.execute(text(
            "SELECT state, start_ts, end_ts FROM thread_intervals WHERE trace_id = :t"),
            {"t": tid})]


def _window(engine: Engine, tid: int) -> tuple[int, int]:
    with engine.connect() as conn:
        first, last = conn.execute(text("SELECT first_ts, last_ts FROM traces WHERE id = :t"),
                                   {"t": tid}).one()
    return int(first), int(last)


@pytest.mark.parametrize("name", NAMES)
def test_series_equal_the_plain_overlap_sums(loaded: Loaded, name: str) -> None:
    """The whole trace at the default bins (served from the report cache) and
    a zoomed window at odd bins (computed on request): every bin's time in
    every series, goroutines and threads, is the plain overlap sum; the JSON's
    averages are those times over the bin widths, rounded."""
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    first, last = _window(engine, tid)
    g_rows, t_rows = _goroutine_rows(engine, tid), _thread_rows(engine, tid)
    assert g_rows, name
    span = last - first
    for bins, t1, t2 in ((DEFAULT_BINS, None, None),
                         (37, first + span // 5, first + 4 * span // 5)):
        data = overview(engine, frames, tid, bins=bins, t1=t1, t2=t2)
        edges = np.array(data["bins"]["edges"], np.int64)
        assert (edges[0], edges[-1]) == (t1 or first, t2 or last)
        goroutines, threads = state_ns(frames, edges)
        want_g, want_t = _overlaps(g_rows, edges), _overlaps(t_rows, edges)
        widths = np.diff(edges).astype(np.float64)
        for series in STATE_SERIES:
            assert goroutines[series].tolist() == want_g[series].tolist(), series
            assert data["goroutine_states"][series] == np.round(
                want_g[series] / widths, AVG_DECIMALS).tolist(), series
        for state in ("Running", "Syscall"):
            assert threads[state].tolist() == want_t[state].tolist(), state
            assert data["threads"][state] == np.round(
                want_t[state] / widths, AVG_DECIMALS).tolist(), state
    cache = derived_dir(frames)
    assert cache is not None and (cache / f"{WHOLE_TRACE_KEY}.json").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_cached_whole_trace_equals_its_computation(loaded: Loaded, name: str) -> None:
    """The whole trace's cached view: its counters, bands, coverage and key
    numbers are those computed on request (counters_view, never cached)."""
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    cached = overview(engine, frames, tid)
    cache = derived_dir(frames)
    assert cache is not None and (cache / f"{WHOLE_TRACE_KEY}.json").is_file()
    computed = counters_view(engine, frames, tid)
    for field in ("key", "window", "metrics", "gc_bands", "gc_coverage"):
        assert cached[field] == computed[field], field


def _sql_samples(engine: Engine, tid: int) -> dict[str, list[tuple[int, int]]]:
    """Each counter's (ts, value) samples: SQL order by seq, then a stable
    sort by ts."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    with engine.connect() as conn:
        for n, ts, v in conn.execute(text(
                "SELECT name, ts, value FROM metrics WHERE trace_id = :t "
                "AND value IS NOT NULL ORDER BY seq"), {"t": tid}):
            out[n].append((int(ts), int(v)))
    return {n: sorted(out[n], key=lambda s: s[0]) for n in COUNTER_METRICS}


@pytest.mark.parametrize("name", NAMES)
def test_counter_columns_are_the_metrics_table(loaded: Loaded, name: str) -> None:
    """Built from SQL, staged from loader-like columns (every metric, NULL
    values, rows out of seq order), or memory-mapped back from the cache:
    each counter's samples are the metrics table's."""
    engine, data_dir, results = loaded
    tid = results[name].id
    want = _sql_samples(engine, tid)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT seq, ts, name, value FROM metrics "
                                 "WHERE trace_id = :t ORDER BY seq DESC"), {"t": tid}).all()
    null = np.array([r.value is None for r in rows], bool)
    cols = {"seq": np.array([r.seq for r in rows], np.int64),
            "ts": np.array([r.ts for r in rows], np.int64),
            "name": np.array([r.name for r in rows], dtype=object),
            "value": Nullable(np.array([r.value or 0 for r in rows], np.int64), null)}
    frames = FrameStore(engine, data_dir).get(tid)
    for c in (counters_from_db(engine, tid), counters_of(cols),
              trace_counters(engine, frames, tid)):
        assert c.names == list(COUNTER_METRICS)
        for metric in COUNTER_METRICS:
            ts, v = c.series(metric)
            assert list(zip(ts.tolist(), v.tolist(), strict=True)) == want[metric], metric


def test_views_from_the_caches_on_disk(loaded: Loaded) -> None:
    """A new frame store (another worker, a restart) reads the overview's
    caches from disk and answers the same; with them removed it builds them
    again, to the same answer."""
    engine, data_dir, results = loaded
    name = max(NAMES, key=lambda n: results[n].events)
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    want = json.dumps(overview(engine, frames, tid))
    cache = derived_dir(frames)
    assert cache is not None and (cache / COUNTERS_KEY / "manifest.json").is_file()
    again = FrameStore(engine, data_dir).get(tid)
    assert json.dumps(overview(engine, again, tid)) == want
    shutil.rmtree(cache / COUNTERS_KEY)
    (cache / f"{WHOLE_TRACE_KEY}.json").unlink()
    rebuilt = FrameStore(engine, data_dir).get(tid)
    assert json.dumps(overview(engine, rebuilt, tid)) == want
    edges = bin_edges(*_window(engine, tid), DEFAULT_BINS)
    assert json.loads(want)["bins"]["edges"] == edges.tolist()


@pytest.mark.parametrize("form", ["c", "numpy"])
@pytest.mark.parametrize("name", NAMES[:4])
def test_series_a_few_rows_at_a_time_equal_the_plain_overlap_sums(
        loaded: Loaded, name: str, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read a few rows at a time (a wait's category carried across every
    kind of cut), the goroutines' series are still the plain overlap sums,
    summed by the C pass (ingest/csrc/binsums.c) or numpy's."""
    from ingest.views import overview_series

    if form == "numpy":
        monkeypatch.setenv(PURE_ENV, "1")
    else:
        pytest.importorskip("ingest.views._binsums")
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    edges = bin_edges(*_window(engine, tid), 53)
    want = _overlaps(_goroutine_rows(engine, tid), edges)
    for rows in (1, 7, 1000):
        monkeypatch.setattr(overview_series, "_CHUNK", rows)
        goroutines, _ = state_ns(frames, edges)
        for series in STATE_SERIES:
            assert goroutines[series].tolist() == want[series].tolist(), (rows, series)


@pytest.mark.parametrize("name", NAMES[:4])
def test_series_over_uneven_bins_equal_the_plain_overlap_sums(loaded: Loaded, name: str) -> None:
    """Bins far from even (edges at the quantiles of the intervals' starts,
    some repeated: empty bins), where the C pass cannot guess a time's bin
    from its place in the span: still the plain overlap sums."""
    pytest.importorskip("ingest.views._binsums")
    engine, data_dir, results = loaded
    tid = results[name].id
    frames = FrameStore(engine, data_dir).get(tid)
    rows = _goroutine_rows(engine, tid)
    first, last = _window(engine, tid)
    starts = np.array([s for _, s, _ in rows if first <= s <= last], np.int64)
    edges = np.concatenate([[first], np.quantile(starts, np.linspace(0, 1, 41)[1:-1],
                                                 method="lower"), [last]]).astype(np.int64)
    assert len(np.unique(edges)) < len(edges) or np.ptp(np.diff(edges)) > 0
    goroutines, _ = state_ns(frames, edges)
    want = _overlaps(rows, edges)
    for series in STATE_SERIES:
        assert goroutines[series].tolist() == want[series].tolist(), series
