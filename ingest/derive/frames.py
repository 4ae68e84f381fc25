"""Columnar, memory-mapped copies of a trace's big tables, for the views.

The database is the source of truth and answers point and range queries, but
the views (timeline level of detail, goroutines by state over time, latency
histograms, time breakdowns) reduce millions of intervals at a time, which is
numpy's job, not SQL's. :class:`FrameStore` keeps, per trace, a copy
of its ``intervals``, ``proc_runs`` and ``syscalls`` rows in the
database's own order (each goroutine's and proc's rows contiguous and in time
order) under ``DATA_DIR/frames/``, one ``.npy`` file per column; files are
memory-mapped, so several server processes share one copy in the page cache.
The loader writes them while it loads (:class:`ingest.derive.frame_writer.FrameWriter`).

The files are a cache: built from the database on first use (any database,
PostgreSQL included, so a team's servers each build their own), rebuilt when
missing or made by an older layout, and removed with the trace. The one
exception: on SQLite the intervals' files are hard links of their home
(ingest.store.interval_files), linked again when the set is rebuilt. Which
columns are kept and where a set lies on disk is ingest.derive.frame_layout's;
writing a set is ingest.derive.frame_writer's (the store calls it to build a
missing set; it never imports this module).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Boolean, Connection, Engine, select

from ingest.derive.cache import cached, release_cached
from ingest.derive.cache import release_columns as release_columns  # re-exported: the views use it
from ingest.derive.cache import release_pages as release_pages  # re-exported: the lane sets use it
from ingest.derive.frame_layout import (
    SYSCALL_OUTCOMES,
    TABLE_COLUMNS,
    Kind,
    Table,
    frame_dir,
    kinds_of,
    read_tables,
)
from ingest.derive.frame_writer import write_frames
from ingest.memory import libc
from ingest.store import interval_files, models, pg_chunk_io, pg_chunks

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

_FETCH = 200_000

class TraceNotFound(LookupError):
    """No trace with that id."""


@dataclass
class Lanes:
    """Contiguous groups of rows: lane ``ids[i]`` owns rows ``off[i]:off[i+1]``."""

    ids: I64
    off: I64

    def rows(self, lane_id: int) -> slice:
        i = int(np.searchsorted(self.ids, lane_id))
        if i >= len(self.ids) or self.ids[i] != lane_id:
            return slice(0, 0)
        return slice(int(self.off[i]), int(self.off[i + 1]))


@dataclass
class Opened:
    """What opening a trace's frames takes from every row: each row's state
    code and the row ranges of each goroutine and proc."""

    state: npt.NDArray[np.int8]
    goroutines: Lanes
    procs: Lanes


@dataclass
class TraceFrames:
    """One trace's intervals, proc runs and syscalls as arrays.

    ``intervals`` rows are ordered by resource (goroutines, then procs), id,
    then time; ``state`` and ``resource`` give each row's state code
    (models.STATE_CODE) and resource code (models.RESOURCE_CODE; built when
    asked for) and ``goroutines``/``procs`` the row ranges of each lane.
    """

    trace_id: int
    first_ts: int
    last_ts: int
    kinds: dict[int, Kind]
    intervals: Table
    proc_runs: Table
    syscalls: Table
    #: The frame directory (None: frames built in memory only); derived values
    #: are cached under it (ingest.derive.cache).
    directory: Path | None = None
    state: npt.NDArray[np.int8] = field(init=False)
    goroutines: Lanes = field(init=False)
    procs: Lanes = field(init=False)

    def __post_init__(self) -> None:
        # Kept beside the frames (ingest.derive.cache): a worker's first
        # request for a trace maps them instead of scanning every row (0.3 s
        # of the 200 MB trace), and their pages are shared by the workers.
        opened = cached(self, "frames_opened", self._opened, persist=(Opened, Lanes))
        self.state, self.goroutines, self.procs = opened.state, opened.goroutines, opened.procs

    def _opened(self) -> Opened:
        """Each row's state and the goroutines' and procs' lanes, from the rows."""
        kind = self.intervals["kind"]
        state = self._per_kind(models.STATE_CODE, "to_state")[kind] if len(kind) else \
            np.zeros(0, np.int8)
        resource = self.resource
        # ``resource`` is not kept (a byte a row, 20 MB of a 200 MB trace's
        # worker): goroutine rows come first, so row < goroutines.off[-1]
        # says as much; it is built again if asked for.
        del vars(self)["resource"]
        release_pages(kind)  # read whole once; a few rows at a time after
        n_g = int(np.count_nonzero(resource == models.GOROUTINE))
        if n_g and int(resource[:n_g].max()) != models.GOROUTINE:
            # Databases loaded before goroutine rows were stored ahead of proc rows.
            raise ValueError(f"trace {self.trace_id} was stored by an older gmpscope "
                             "(interleaved interval order): delete and ingest it again")
        del resource
        rid = self.intervals["rid"]
        opened = Opened(state, _lanes(rid[:n_g], 0), _lanes(rid[n_g:], n_g))
        release_pages(rid)
        return opened

    @cached_property
    def resource(self) -> npt.NDArray[np.int8]:
        """Each row's resource code (models.RESOURCE_CODE)."""
        kind = self.intervals["kind"]
        return self._per_kind(models.RESOURCE_CODE, "resource")[kind] if len(kind) else \
            np.zeros(0, np.int8)

    def _per_kind(self, codes: dict[str, int], attr: str) -> npt.NDArray[np.int8]:
        out = np.zeros(max(self.kinds, default=0) + 1, dtype=np.int8)
        for code, k in self.kinds.items():
            out[code] = codes.get(getattr(k, attr), 0)
        return out

    def remapped(self) -> TraceFrames:
        """These frames on mappings of their own, sharing what opening them
        computed (the states, the lanes): a thread whose view hands its
        pages back (:meth:`release`) then takes none from under another's,
        without opening the frames again (0.5 s on the 200 MB trace)."""
        if self.directory is None:
            return self
        found = read_tables(self.directory)
        if found is None:
            raise OSError(f"the frames in {self.directory} are gone")
        out = copy.copy(self)
        vars(out).pop("_derived_cache", None)  # the values kept for these frames
        out.intervals, out.proc_runs, out.syscalls = (
            found[1]["intervals"], found[1]["proc_runs"], found[1]["syscalls"])
        return out

    def release(self) -> None:
        """Hand back what a view's scan left in this process: the pages of
        the memory-mapped columns and of the mapped values cached with them
        (:func:`release_pages`; the page cache still holds them for the next
        request), and the C heap's free memory (:func:`trim_heap`). A view
        that read whole columns calls it when done, so that a worker does not
        keep hundreds of MB after the request."""
        for table in (self.intervals, self.proc_runs, self.syscalls):
            table.release()
            for col in table.columns.values():
                release_pages(col)
        release_cached(self)
        trim_heap()

    def reason_codes(self) -> dict[int, str]:
        """Kind code -> reason, for splitting states by reason."""
        return {code: k.reason for code, k in self.kinds.items()}


def _lanes(rid: Arr, base: int) -> Lanes:
    if not len(rid):
        return Lanes(np.zeros(0, np.int64), np.zeros(1, np.int64))
    starts = np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]])
    off = np.r_[starts, len(rid)].astype(np.int64) + base
    return Lanes(rid[starts].astype(np.int64), off)


# --------------------------------------------------------------------------
# building from the database


def _read_block(conn: Connection, table: Any, cols: tuple[str, ...], lo: int,
                hi: int, exprs: dict[str, str] | None = None,
                source: str | None = None) -> dict[str, I64]:
    """Rows lo..hi (ids) of ``table`` as int64 columns, in id order;
    ``exprs``: the SQL of columns that are not the table's own; ``source``:
    what to read them from instead of the table itself.

    Straight through the DB-API cursor: SQLAlchemy's row objects would cost
    more than the query (NULL becomes -1, booleans 0/1).
    """
    n = hi - lo + 1
    out = np.empty((n, len(cols)), dtype=np.int64)
    sel = ", ".join((exprs or {}).get(c) or (
        f"COALESCE(CAST({c} AS BIGINT), -1)" if table.c[c].nullable
        or isinstance(table.c[c].type, Boolean) else c) for c in cols)
    sql = (f"SELECT {sel} FROM {source or table.name} "
           f"WHERE id BETWEEN {int(lo)} AND {int(hi)} ORDER BY id")
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql)
        k = 0
        while True:
            part = cur.fetchmany(_FETCH)
            if not part:
                break
            out[k:k + len(part)] = np.array(part, dtype=np.int64).reshape(len(part), len(cols))
            k += len(part)
    finally:
        cur.close()
    if k != n:
        raise ValueError(f"{table.name}: expected {n} rows in ids {lo}..{hi}, read {k}")
    return {c: np.ascontiguousarray(out[:, i]) for i, c in enumerate(cols)}


def _read_chunks(conn: Connection, name: str, cols: tuple[str, ...], lo: int, hi: int,
                 ibase: int) -> dict[str, I64]:
    """PostgreSQL: the frame columns of ids lo..hi read from their chunks'
    arrays (ingest.store.pg_chunks), as _read_block gives them."""
    if pg_chunks.OUTCOMES != SYSCALL_OUTCOMES:  # pragma: no cover - kept equal
        raise ValueError("the chunks' syscall outcomes are not the frames'")
    stored = {"row": "interval_id"}
    raw = pg_chunk_io.read_block(conn, name, [stored.get(c, c) for c in cols], lo, hi)
    out: dict[str, I64] = {}
    for c in cols:
        v = raw[stored.get(c, c)].astype(np.int64)
        if c == "row":
            v -= ibase
        elif c.startswith("stolen_"):
            v[v == pg_chunks.NULL_VALUE] = -1
        out[c] = v
    return out


def build_arrays(engine: Engine, trace_id: int,
                 skip: frozenset[str] = frozenset()) -> tuple[dict[str, Any], dict[str, Table]]:
    """(trace facts, tables) read from the database, but those in ``skip``;
    raises TraceNotFound."""
    t = models.traces
    rr = models.row_ranges
    tc = models.transition_counts
    with engine.connect() as conn:
        row = conn.execute(select(t.c.first_ts, t.c.last_ts, t.c.sha256)
                           .where(t.c.id == trace_id)).first()
        if row is None:
            raise TraceNotFound(trace_id)
        kinds = {r.kind: Kind(r.resource, r.from_state, r.to_state, r.reason)
                 for r in conn.execute(select(tc.c.kind, tc.c.resource, tc.c.from_state,
                                              tc.c.to_state, tc.c.reason)
                                       .where(tc.c.trace_id == trace_id))}
        blocks = {r.table_name: (r.first_id, r.last_id) for r in conn.execute(
            select(rr.c.table_name, rr.c.first_id, rr.c.last_id)
            .where(rr.c.trace_id == trace_id))}
        tables: dict[str, Table] = {}
        ibase = blocks.get("intervals", (0, 0))[0]
        # proc_run_index's and syscall_outcomes' rows, wherever they are kept
        # (models.file_views).
        files = conn.dialect.name == "sqlite" and interval_files.register()
        sources = {"proc_runs": models.proc_run_source(files),
                   "syscalls": models.syscall_source(files)}
        outcome = "CASE outcome " + " ".join(
            f"WHEN '{o}' THEN {i}" for i, o in enumerate(SYSCALL_OUTCOMES)) + " END"
        for name, cols in TABLE_COLUMNS.items():
            # proc_runs and syscalls: their rows in the tables that store
            # them, the interval's id as its row in intervals.
            table = models.intervals if name == "intervals" else models.RANGED[name]
            if name in skip:
                continue
            if name in blocks and conn.dialect.name == "postgresql":
                tables[name] = Table(_read_chunks(conn, name, cols, *blocks[name], ibase))
            elif name in blocks:
                lo, hi = blocks[name]
                tables[name] = Table(_read_block(
                    conn, table, cols, lo, hi,
                    {"row": f"interval_id - {int(ibase)}", "outcome": outcome},
                    sources.get(name)))
            else:
                tables[name] = Table({c: np.zeros(0, np.int64) for c in cols})
    facts = {"trace_id": trace_id, "first_ts": int(row.first_ts or 0),
             "last_ts": int(row.last_ts or 0), "sha256": row.sha256,
             "kinds": {str(k): [v.resource, v.from_state, v.to_state, v.reason]
                       for k, v in kinds.items()}}
    return facts, tables


# --------------------------------------------------------------------------
# files (their layout: ingest.derive.frame_layout)


def trim_heap() -> None:
    """Return the C heap's free memory to the system (glibc's malloc_trim).

    glibc raises its mmap threshold after a big block is freed, so numpy
    temporaries of up to 32 MB then come from the heap, whose free pages
    stay in the process (a whole-trace view left 50-100 MB) until trimmed.
    A no-op elsewhere than glibc."""
    c = libc()
    trim = getattr(c, "malloc_trim", None) if c is not None else None
    if trim is not None:
        trim(0)


def read_frames(d: Path) -> TraceFrames | None:
    """The frames in directory ``d`` (memory-mapped), or None when incomplete."""
    found = read_tables(d)
    if found is None:
        return None
    facts, tables = found
    return TraceFrames(trace_id=int(facts["trace_id"]), first_ts=int(facts["first_ts"]),
                       last_ts=int(facts["last_ts"]), kinds=kinds_of(facts),
                       intervals=tables["intervals"], proc_runs=tables["proc_runs"],
                       syscalls=tables["syscalls"], directory=d)


def remove_frames(data_dir: Path, trace_id: int) -> None:
    """Delete every cached frame set of a trace."""
    import shutil

    root = data_dir / "frames"
    if root.is_dir():
        for d in root.glob(f"{trace_id}-*"):
            shutil.rmtree(d, ignore_errors=True)


class FrameStore:
    """Per-app cache of :class:`TraceFrames`, built on first use.

    Kept on the Flask app (never module-global); thread-safe; holds at most
    ``capacity`` traces open (they are memory-mapped, so this bounds address
    space and file handles, not RAM).
    """

    def __init__(self, engine: Engine, data_dir: Path, capacity: int = 8) -> None:
        self.engine = engine
        self.data_dir = data_dir
        self.capacity = capacity
        self._open: OrderedDict[int, tuple[str, TraceFrames]] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[int, threading.Lock] = {}

    def get(self, trace_id: int) -> TraceFrames:
        """The frames of ``trace_id``; raises TraceNotFound.

        Checked against the trace's hash on every call (one point lookup): a
        deleted trace is gone at once, and an id that SQLite reuses after a
        delete never shows the old trace's frames.
        """
        t = models.traces
        with self.engine.connect() as conn:
            sha = conn.execute(select(t.c.sha256).where(t.c.id == trace_id)).scalar()
        if sha is None:
            with self._lock:
                self._open.pop(trace_id, None)
            raise TraceNotFound(trace_id)
        with self._lock:
            hit = self._open.get(trace_id)
            if hit is not None and hit[0] == sha:
                self._open.move_to_end(trace_id)
                return hit[1]
            build_lock = self._building.setdefault(trace_id, threading.Lock())
        with build_lock:
            with self._lock:
                hit = self._open.get(trace_id)
            if hit is not None and hit[0] == sha:
                return hit[1]
            d = frame_dir(self.data_dir, trace_id, sha)
            f = read_frames(d)
            if f is None:
                # Intervals kept in files are linked, not read and copied.
                with self.engine.connect() as conn:
                    home = interval_files.trace_home(
                        conn, interval_files.db_file(self.engine), trace_id)
                linked = {} if home is None else {
                    t: home for t in TABLE_COLUMNS
                    if (home / f"{t}.{TABLE_COLUMNS[t][0]}.npy").exists()}
                facts, tables = build_arrays(self.engine, trace_id, frozenset(linked))
                write_frames(self.data_dir, facts, tables, linked)
                f = read_frames(d)
                if f is None:  # pragma: no cover - we just wrote it
                    raise OSError(f"cannot read back the frames written to {d}")
            trim_heap()  # the opening's temporaries
            with self._lock:
                self._open[trace_id] = (sha, f)
                self._open.move_to_end(trace_id)
                while len(self._open) > self.capacity:
                    self._open.popitem(last=False)
        return f

    def release_all(self) -> None:
        """:meth:`TraceFrames.release` of every open trace (for a server to
        call when a request ends)."""
        with self._lock:
            open_frames = [f for _, f in self._open.values()]
        for f in open_frames:
            f.release()

    def forget(self, trace_id: int) -> None:
        """Drop a trace from the cache and its files (after a delete)."""
        with self._lock:
            self._open.pop(trace_id, None)
        remove_frames(self.data_dir, trace_id)

