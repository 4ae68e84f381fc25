"""The overview's runtime-metrics counters as compact columns: a cache of SQL
``metrics``.

The overview draws three of Go's runtime/metrics counters (heap objects, heap
goal, GOMAXPROCS). A busy 200 MB trace holds 3.7 M heap samples: reading them
back from SQL costs 3-8 s a request, so they are kept as memory-mapped columns
(times and values as steps from one sample to the next, mostly 2 bytes
each) beside the frames
(``derived-v<N>/overview_counters/``), read a window at a time by the views
(:mod:`ingest.views.overview`). The loader can stage
them from the metrics columns it has at hand (:func:`counters_of`, through
``FrameWriter.add_derived(COUNTERS_KEY, ...)``); otherwise the first view builds
them from the database (:func:`counters_from_db`, one scan, fetched in
chunks). Either way the rows are those of
``SELECT ts, value FROM metrics WHERE name = ? AND value IS NOT NULL ORDER BY seq``,
then stably sorted by ``ts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.columns import Nullable
from ingest.derive.cache import Steps, TraceFrames, cached
from ingest.store.coded_models import metric_rows_all, read_strings

I64 = npt.NDArray[np.int64]

#: Metrics plotted on the overview (Go's runtime/metrics names).
HEAP_METRICS = ("/memory/classes/heap/objects:bytes", "/gc/heap/goal:bytes")
GOMAXPROCS_METRIC = "/sched/gomaxprocs:threads"
COUNTER_METRICS = (*HEAP_METRICS, GOMAXPROCS_METRIC)
#: The derived-value key the columns are cached (and staged) under.
COUNTERS_KEY = "overview_counters"

_FETCH = 262_144


@dataclass
class Counters:
    """Samples of ``names``: metric ``names[i]`` owns rows ``off[i]:off[i+1]``
    of ``ts`` and ``value``, sorted by time (ties in sample order)."""

    names: list[str]
    off: I64
    ts: Steps  # a metric's samples a few us apart: 2 bytes a sample, not 8
    value: Steps  # the heap grows by small steps between collections: likewise

    def series(self, name: str) -> tuple[I64, I64]:
        """(ts, value) of one metric (empty when the trace has none)."""
        return self.all_series([name])[name]

    def all_series(self, names: Sequence[str]) -> dict[str, tuple[I64, I64]]:
        """:meth:`series` of each of ``names`` (the columns read once)."""
        z = np.zeros(0, np.int64)
        known = any(n in self.names for n in names)
        ts = self.ts.values() if known else z
        value = self.value.values() if known else z
        out: dict[str, tuple[I64, I64]] = {}
        for name in names:
            if name not in self.names:
                out[name] = z, z
                continue
            i = self.names.index(name)
            a, b = int(self.off[i]), int(self.off[i + 1])
            out[name] = ts[a:b], value[a:b]
        return out


#: The dataclasses the kept counters are made of (ingest.derive.cache.load_value).
COUNTER_CLASSES = (Counters, Steps)


def counters_of(cols: Mapping[str, Any]) -> Counters:
    """The counters from the loader's metrics columns (``seq``, ``ts``,
    ``name`` and ``value``, a :class:`ingest.columns.Nullable` or an int
    array; samples without a value left out)."""
    parts = CounterParts()
    parts.add(cols)
    return parts.finish()


class CounterParts:
    """The counters from the metrics table's parts (a big trace's, stored in
    parts): each part keeps only its counter samples' seq, time and value,
    by counter, and each counter is ordered on its own at the end (sample
    order, then a stable sort by time: one counter's samples in memory twice
    at a time, not every sample)."""

    key = COUNTERS_KEY

    def __init__(self) -> None:
        self._parts: list[list[tuple[I64, I64, I64]]] = [[] for _ in COUNTER_METRICS]

    def add(self, cols: Mapping[str, Any]) -> None:
        """Take in one part's columns, as :func:`counters_of` takes them."""
        seq = np.asarray(cols["seq"], np.int64)
        ts = np.asarray(cols["ts"], np.int64)
        value = cols["value"]
        if isinstance(value, Nullable):
            v, null = np.asarray(value.values, np.int64), np.asarray(value.null, bool)
        else:
            v, null = np.asarray(value, np.int64), np.zeros(len(ts), bool)
        which = _counter_codes(cols["name"])
        which[null] = -1
        self.add_samples(which, seq, ts, v)

    def add_samples(self, which: npt.NDArray[np.integer[Any]], seq: I64, ts: I64,
                    v: I64) -> None:
        """Take in samples by their counter (index into COUNTER_METRICS; -1:
        another metric, or no value)."""
        for i in range(len(COUNTER_METRICS)):
            mine = np.flatnonzero(which == i)
            if len(mine):
                self._parts[i].append((seq[mine], ts[mine], v[mine]))

    def finish(self) -> Counters:
        """The counters of every part taken in: each counter's samples in
        sample (seq) order, then stably by time."""
        ts_parts: list[I64] = []
        v_parts: list[I64] = []
        counts = []
        for i, parts in enumerate(self._parts):
            self._parts[i] = []
            seq, ts, v = (np.concatenate([np.zeros(0, np.int64), *(p[k] for p in parts)])
                          for k in (0, 1, 2))
            del parts
            if len(seq) > 1 and bool((seq[1:] < seq[:-1]).any()):
                order = np.argsort(seq, kind="stable")
                ts, v = ts[order], v[order]
            if len(ts) > 1 and bool((ts[1:] < ts[:-1]).any()):
                order = np.argsort(ts, kind="stable")
                ts, v = ts[order], v[order]
            del seq
            ts_parts.append(ts)
            v_parts.append(v)
            counts.append(len(ts))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        ts_all = np.concatenate([np.zeros(0, np.int64), *ts_parts])
        del ts_parts
        steps_ts = Steps.of(ts_all)
        del ts_all
        v_all = np.concatenate([np.zeros(0, np.int64), *v_parts])
        del v_parts
        return Counters(list(COUNTER_METRICS), offsets, steps_ts, Steps.of(v_all))


def counter_lut(values: Sequence[str | None]) -> npt.NDArray[np.int8]:
    """Each of a name column's distinct values (by code) as its counter
    (index into COUNTER_METRICS; -1: another metric)."""
    return np.array([COUNTER_METRICS.index(v) if v in COUNTER_METRICS else -1
                     for v in values], np.int8)


def _counter_codes(names: Any) -> npt.NDArray[np.int8]:
    """Each sample's counter (index into COUNTER_METRICS; -1: another
    metric): through the codes of a loader's coded column
    (ingest.store.coded_insert.CodedText) when it has them."""
    codes = getattr(names, "codes", None)
    if codes is not None:
        lut = counter_lut(names.values)
        return lut[codes] if len(lut) else np.full(len(codes), -1, np.int8)
    name_arr = np.asarray(names, dtype=object)
    out = np.full(len(name_arr), -1, np.int8)
    for i, n in enumerate(COUNTER_METRICS):
        out[name_arr == n] = i
    return out


def counters_from_db(engine: Engine, trace_id: int) -> Counters:
    """The counters of ``trace_id`` read from SQL: one scan of the samples'
    coded table (``metric_rows_all``, the rows of the view ``metrics``) for the
    names' codes, fetched in chunks straight from the driver's cursor (no
    row objects; a Python tuple per sample at a time would take ~0.5 GB on a
    200 MB trace)."""
    mt = metric_rows_all
    parts: list[npt.NDArray[np.int64]] = []
    with engine.connect() as conn:
        names = read_strings(conn, trace_id, "metrics.name")
        lut = counter_lut(names)  # name code -> counter
        wanted = np.flatnonzero(lut >= 0).tolist()
        stmt = (select(mt.c.name_code, mt.c.ts, mt.c.value)
                .where(mt.c.trace_id == trace_id, mt.c.name_code.in_(wanted),
                       mt.c.value.is_not(None))
                .order_by(mt.c.seq))
        cursor = conn.execute(stmt).cursor if wanted else None
        while cursor is not None and (rows := cursor.fetchmany(_FETCH)):
            parts.append(np.array(rows, dtype=np.int64).reshape(-1, 3))
    arr = np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)
    counters = CounterParts()
    # In seq order already (ORDER BY seq): the row's place stands for it.
    counters.add_samples(lut[arr[:, 0]], np.arange(len(arr), dtype=np.int64),
                         arr[:, 1].copy(), arr[:, 2].copy())
    return counters.finish()


def trace_counters(engine: Engine, frames: TraceFrames, trace_id: int) -> Counters:
    """The counters of the trace of ``frames``: staged by the loader or built
    from the database once, then memory-mapped from the frames' directory."""
    return cached(frames, COUNTERS_KEY, lambda: counters_from_db(engine, trace_id),
                  persist=COUNTER_CLASSES)
