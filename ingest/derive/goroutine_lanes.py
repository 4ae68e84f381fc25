"""The timeline's goroutine lanes: one goroutine's intervals as a lane set,
and the goroutine table (grouping by start function, lifetimes) that lays
the G lanes out. The loader makes the table from the columns it stores
(:func:`goroutines_of`), the views from the database (:func:`goroutine_table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.codes import STATE_CODE
from ingest.derive.cache import cached
from ingest.derive.frame_layout import gather_released
from ingest.derive.frames import TraceFrames
from ingest.derive.lanesets import (
    I64,
    REF_SOURCES,
    SRC_INTERVAL,
    LaneSet,
    LaneSetKey,
    build_index,
    kind_categories,
    ref_dtype,
)
from ingest.store.coded_models import goroutine_rows_all, read_strings


def goroutine_laneset(frames: TraceFrames, goid: int, lo: int, hi: int) -> LaneSet:
    """One goroutine's rows ``lo:hi`` of ``frames.intervals`` as an indexed lane
    set of one lane (cached per goroutine: worth it for long-lived ones)."""
    def build() -> LaneSet:
        iv = frames.intervals
        # Refs as int32 where they fit (ref_dtype), as the P and M sets':
        # the busiest goroutines' sets share the memory budget of the values
        # held in memory (ingest.derive.cache.MEMORY_BUDGET) with the table.
        rows = np.arange(lo, hi, dtype=ref_dtype(frames))
        cat = kind_categories(frames)[iv["kind"][lo:hi]]
        return build_index(LaneSet(np.array([goid], np.int64), np.array([0], np.int64),
                                   np.array([hi - lo], np.int64), iv["start_ts"][lo:hi],
                                   iv["end_ts"][lo:hi], cat,
                                   rows * REF_SOURCES + SRC_INTERVAL))
    return cached(frames, f"g:{goid}:{lo}:{hi}", build)


@dataclass
class Goroutines:
    """The goroutine lanes' table: grouping by start function, lifetimes."""

    goid: I64
    group: npt.NDArray[np.signedinteger[Any]]  # index into names (int16 where they fit)
    names: list[str]  # start functions ("" unknown), ordered by goroutine count, desc
    alive_lo: I64  # first row's start
    alive_hi: I64  # end of the last row that is not NotExist
    lo: I64  # rows in frames.intervals
    hi: I64


@dataclass
class GoroutineGroups:
    """The goroutine table as kept: each goroutine's group (in the order of
    the frames' goroutine lanes, by goid; int16 where the groups fit), and
    the groups' names. The rest of :class:`Goroutines` is the frames'."""

    group: npt.NDArray[np.signedinteger[Any]]
    names: list[str]


def goroutine_groups(engine: Engine, frames: TraceFrames) -> GoroutineGroups:
    """The goroutines' start-function groups as kept (cached, on disk): the
    part of :func:`goroutine_table` a load builds ahead of the first view."""
    def build() -> GoroutineGroups:
        # The goroutines' coded table (the view's rows) and the functions'
        # strings: a code a row, not a joined string.
        g = goroutine_rows_all
        with engine.connect() as conn:
            functions = read_strings(conn, frames.trace_id, "goroutines.start_function")
            # Straight through the DB-API cursor, a batch of rows at a time into
            # arrays: millions of Row objects (or tuples) would cost more than
            # the query, and hold 0.5 GB on the 1 GB benchmark trace.
            cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            goids, codes = [], []
            try:
                cur.execute(f"SELECT goid, start_function_code FROM {g.name} "
                            f"WHERE trace_id = {int(frames.trace_id)} ORDER BY goid")
                while batch := cur.fetchmany(_FETCH_ROWS):
                    goids.append(np.fromiter((r[0] for r in batch), np.int64, len(batch)))
                    codes.append(np.fromiter((-1 if r[1] is None else r[1] for r in batch),
                                             np.int64, len(batch)))
            finally:
                cur.close()
        sql_goid = np.concatenate(goids) if goids else np.zeros(0, np.int64)
        code = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        ids = np.asarray(frames.goroutines.ids, np.int64)
        return goroutines_of_codes(ids, sql_goid, code, functions)

    kept: GoroutineGroups = cached(frames, LaneSetKey.GOROUTINES, build,
                                   persist=(GoroutineGroups,))
    if len(kept.group) != len(frames.goroutines.ids):  # pragma: no cover - a foreign copy
        kept = build()
    return kept


#: Goroutine rows fetched from the database a batch.
_FETCH_ROWS = 1 << 16


def goroutine_table(engine: Engine, frames: TraceFrames) -> Goroutines:
    """Goroutines with their start-function group (kept: :func:`goroutine_groups`)
    and lifetime (from the frames' goroutine lanes; cached in memory)."""
    kept = goroutine_groups(engine, frames)
    return cached(frames, "goroutine_table", lambda: _on_lanes(frames, kept))


def _on_lanes(frames: TraceFrames, kept: GoroutineGroups) -> Goroutines:
    """The table of the goroutines of ``frames``, grouped as ``kept`` says."""
    lanes = frames.goroutines
    n = len(lanes.ids)
    lo = np.asarray(lanes.off[:-1], np.int64) if n else np.zeros(0, np.int64)
    hi = np.asarray(lanes.off[1:], np.int64) if n else np.zeros(0, np.int64)
    if n:
        iv = frames.intervals
        last = hi - 1
        gone = frames.state[last] == STATE_CODE["NotExist"]
        # Gathered part by part with the mapped pages handed back: a row of
        # each goroutine touches every page of the columns (1.6 GB of them on
        # the 1 GB benchmark trace).
        start, end = iv["start_ts"], iv["end_ts"]
        alive_lo = gather_released(start, lo).astype(np.int64)
        alive_hi = np.where(gone, gather_released(start, last),
                            gather_released(end, last)).astype(np.int64)
    else:
        alive_lo = alive_hi = np.zeros(0, np.int64)
    return Goroutines(np.asarray(lanes.ids, np.int64), np.asarray(kept.group),
                      list(kept.names), alive_lo, alive_hi, lo, hi)


def goroutines_of(goids: I64, fn_goids: I64, functions: list[str | None]) -> GoroutineGroups:
    """The groups of the goroutines ``goids`` (ascending: the frames'
    goroutine lanes), given the start function of each goroutine in
    ``fn_goids`` (ascending); the rows and lifetimes are read from the frames."""
    code_of: dict[str, int] = {}
    sql_code = np.fromiter((code_of.setdefault(fn or "", len(code_of)) for fn in functions),
                           dtype=np.int64, count=len(functions))
    return _ranked(goids, fn_goids, sql_code, list(code_of))


def goroutines_of_codes(goids: I64, fn_goids: I64, fn_code: I64,
                        functions: list[str]) -> GoroutineGroups:
    """:func:`goroutines_of` with each goroutine's start function as its code
    in ``functions`` (-1: none), as the database keeps it."""
    codes, back = np.unique(fn_code, return_inverse=True)
    code_of: dict[str, int] = {}
    name_code = np.array([code_of.setdefault(functions[c] if c >= 0 else "", len(code_of))
                          for c in codes.tolist()], np.int64)
    return _ranked(goids, fn_goids, name_code[back.reshape(-1)], list(code_of))


def _ranked(goids: I64, fn_goids: I64, sql_code: I64, first_names: list[str]) -> GoroutineGroups:
    """The groups of ``goids``, given the name code (in ``first_names``) of the
    start function of each goroutine in ``fn_goids``: groups ranked by
    goroutine count (desc), then name, the unknown start function ("") last;
    a group per name whatever order the codes came in."""
    code_of = {name: c for c, name in enumerate(first_names)}
    pos = np.searchsorted(fn_goids, goids)
    pos_c = np.minimum(pos, max(len(fn_goids) - 1, 0))
    found = (pos < len(fn_goids)) & (fn_goids[pos_c] == goids) if len(sql_code) else \
        np.zeros(len(goids), dtype=bool)
    unknown = code_of.setdefault("", len(code_of))
    raw = np.where(found, sql_code[pos_c], unknown) if len(sql_code) else \
        np.full(len(goids), unknown, np.int64)
    first_names = list(code_of)
    counts = np.bincount(raw, minlength=len(first_names))
    # Groups by goroutine count (desc), unknown start function last.
    rank = sorted(range(len(first_names)), key=lambda c: (
        counts[c] == 0, first_names[c] == "", -int(counts[c]), first_names[c]))
    names = [first_names[c] for c in rank]
    remap = np.empty(len(first_names), np.int64)
    remap[rank] = np.arange(len(rank))
    group = remap[raw]
    return GoroutineGroups(group.astype(np.int16 if len(names) < 2**15 else np.int32), names)
