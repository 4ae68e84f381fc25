"""Columnar, memory-mapped copies of a trace's big tables, for the views.

The database is the source of truth and answers point and range queries, but
the views (timeline level of detail, goroutines by state over time, latency
histograms, time breakdowns) reduce millions of intervals at a time, which is
numpy's job, not SQL's. :class:`FrameStore` keeps, per trace, a copy
of its ``intervals``, ``proc_runs`` and ``syscalls`` rows in the
database's own order (each goroutine's and proc's rows contiguous and in time
order) under ``DATA_DIR/frames/``, one ``.npy`` file per column; files are
memory-mapped, so several server processes share one copy in the page cache.
The loader writes them while it loads (:class:`FrameWriter`).

The files are a cache: built from the database on first use (any database,
PostgreSQL included, so a team's servers each build their own), rebuilt when
missing or made by an older layout, and removed with the trace.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Boolean, Connection, Engine, select

from ingest import models

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

#: Bumped whenever the file layout changes; older files are rebuilt.
LAYOUT_VERSION = "3"
_FETCH = 200_000

#: Columns copied per table (booleans as 0/1, NULL as -1).
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "intervals": ("rid", "start_ts", "end_ts", "kind", "m", "p", "g", "stack_id", "seq"),
    "proc_runs": ("p", "start_ts", "end_ts", "g", "m", "seq"),
    "syscalls": ("goid", "start_ts", "end_ts", "duration_ns", "m", "p", "start_known",
                 "p_lost", "stolen_ts", "stolen_by_m", "stack_id", "seq"),
}


#: Nanosecond times: always int64 (a narrower time column would overflow in
#: the views' arithmetic with times). The other columns (ids, codes, flags)
#: are stored in the narrowest integer type that holds their values, but no
#: narrower than listed here (int32 by default), so that the views can add
#: and compare them with small numbers without overflowing.
TIME_COLUMNS = frozenset({"start_ts", "end_ts", "duration_ns", "stolen_ts"})
NARROWEST: dict[str, type[np.signedinteger[Any]]] = {
    "kind": np.int16, "start_known": np.int8, "p_lost": np.int8}


def column_dtype(name: str, lo: int, hi: int) -> np.dtype[Any]:
    """The stored type of frame column ``name`` whose values lie in lo..hi.

    Ids and flags take 4 bytes or less instead of 8: the 20 MB benchmark
    trace's frames are 40% smaller, and every byte written to a new file
    costs time (docs/ingest.md).
    """
    if name in TIME_COLUMNS:
        return np.dtype(np.int64)
    floor = np.dtype(NARROWEST.get(name, np.int32)).itemsize
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.bits // 8 >= floor and info.min <= lo and hi <= info.max:
            return np.dtype(t)
    return np.dtype(np.int64)


def _bounds(col: Any, n: int) -> tuple[int, int]:
    """(min, max) of a column's n values (a superset's for a Gather), -1 for NULL."""
    from ingest.columns import Gather, Nullable, Seq

    if n == 0:
        return 0, 0
    if isinstance(col, Seq):
        return col.start, col.start + n - 1
    if isinstance(col, Gather):
        values = col.values
    elif isinstance(col, Nullable):
        lo, hi = _bounds(col.values, len(col.values))
        return min(lo, -1), max(hi, -1)
    else:
        values = col
    if isinstance(values, list):
        ints = [-1 if v is None else int(v) for v in values]
        return min(ints), max(ints)
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return 0, 1
    return int(values.min()), int(values.max())


class TraceNotFound(LookupError):
    """No trace with that id."""


@dataclass(frozen=True)
class Kind:
    """What a transition code in ``intervals.kind`` means."""

    resource: str
    from_state: str
    to_state: str
    reason: str


@dataclass
class Table:
    """One table's columns as integer numpy arrays of equal length: times
    int64, ids and flags narrower (:func:`column_dtype`)."""

    columns: dict[str, Arr]

    def __getitem__(self, name: str) -> Arr:
        return self.columns[name]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


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
class TraceFrames:
    """One trace's intervals, proc runs and syscalls as arrays.

    ``intervals`` rows are ordered by resource (goroutines, then procs), id,
    then time; ``state`` and ``resource`` give each row's state code
    (models.STATE_CODE) and resource code (models.RESOURCE_CODE) and
    ``goroutines``/``procs`` the row ranges of each lane.
    """

    trace_id: int
    first_ts: int
    last_ts: int
    kinds: dict[int, Kind]
    intervals: Table
    proc_runs: Table
    syscalls: Table
    #: The frame directory (None: frames built in memory only); derived values
    #: are cached under it (ingest.derived_cache).
    directory: Path | None = None
    state: npt.NDArray[np.int8] = field(init=False)
    resource: npt.NDArray[np.int8] = field(init=False)
    goroutines: Lanes = field(init=False)
    procs: Lanes = field(init=False)

    def __post_init__(self) -> None:
        top = max(self.kinds, default=0) + 1
        state_of = np.zeros(top, dtype=np.int8)
        res_of = np.zeros(top, dtype=np.int8)
        for code, k in self.kinds.items():
            state_of[code] = models.STATE_CODE.get(k.to_state, 0)
            res_of[code] = models.RESOURCE_CODE.get(k.resource, 0)
        kind = self.intervals["kind"]
        self.state = state_of[kind] if len(kind) else np.zeros(0, np.int8)
        self.resource = res_of[kind] if len(kind) else np.zeros(0, np.int8)
        n_g = int(np.count_nonzero(self.resource == models.GOROUTINE))
        if n_g and int(self.resource[:n_g].max()) != models.GOROUTINE:
            # Databases loaded before goroutine rows were stored ahead of proc rows.
            raise ValueError(f"trace {self.trace_id} was stored by an older gmpscope "
                             "(interleaved interval order): delete and ingest it again")
        rid = self.intervals["rid"]
        self.goroutines = _lanes(rid[:n_g], 0)
        self.procs = _lanes(rid[n_g:], n_g)

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
                hi: int) -> dict[str, I64]:
    """Rows lo..hi (ids) of ``table`` as int64 columns, in id order.

    Straight through the DB-API cursor: SQLAlchemy's row objects would cost
    more than the query (NULL becomes -1, booleans 0/1).
    """
    n = hi - lo + 1
    out = np.empty((n, len(cols)), dtype=np.int64)
    exprs = ", ".join(f"COALESCE(CAST({c} AS BIGINT), -1)" if table.c[c].nullable
                      or isinstance(table.c[c].type, Boolean) else c for c in cols)
    sql = f"SELECT {exprs} FROM {table.name} WHERE id BETWEEN {int(lo)} AND {int(hi)} ORDER BY id"
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


def build_arrays(engine: Engine, trace_id: int) -> tuple[dict[str, Any], dict[str, Table]]:
    """(trace facts, tables) read from the database; raises TraceNotFound."""
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
        for name, cols in TABLE_COLUMNS.items():
            table = models.relation(name)
            if name in blocks:
                lo, hi = blocks[name]
                tables[name] = Table(_read_block(conn, table, cols, lo, hi))
            else:
                tables[name] = Table({c: np.zeros(0, np.int64) for c in cols})
    facts = {"trace_id": trace_id, "first_ts": int(row.first_ts or 0),
             "last_ts": int(row.last_ts or 0), "sha256": row.sha256,
             "kinds": {str(k): [v.resource, v.from_state, v.to_state, v.reason]
                       for k, v in kinds.items()}}
    return facts, tables


# --------------------------------------------------------------------------
# files: one .npy per column, so that a column can be written chunk by chunk
# (the loader never holds a reordered copy of the trace) and read back
# memory-mapped, zero-copy.


def _frame_dir(data_dir: Path, trace_id: int, sha256: str) -> Path:
    return data_dir / "frames" / f"{trace_id}-{sha256[:16]}-v{LAYOUT_VERSION}"


def _column_chunk(col: Any, a: int, b: int) -> Arr:
    from ingest.columns import Gather, Nullable, Seq

    if isinstance(col, Gather):
        return np.take(col.values, col.index[a:b])  # faster than values[index]
    if isinstance(col, Nullable):
        return np.where(col.null[a:b], -1, col.values[a:b])
    if isinstance(col, Seq):
        return np.arange(col.start + a, col.start + b, dtype=np.int64)
    part = col[a:b]
    return np.asarray([-1 if v is None else int(v) for v in part], dtype=np.int64) \
        if isinstance(part, list) else np.asarray(part)


def write_column(d: Path, table: str, name: str, col: Any, n: int) -> None:
    """Write one column of ``n`` rows (a numpy array or an ingest.columns
    Gather/Nullable/Seq) to ``d/<table>.<name>.npy`` in its stored type
    (:func:`column_dtype`), 1M rows at a time.

    Plain writes, not a writable memory map: on a full disk a write returns
    ENOSPC, where a store into a mapped page would kill the process (SIGBUS).
    """
    dtype = column_dtype(name, *_bounds(col, n))
    with open(d / f"{table}.{name}.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": dtype.str, "fortran_order": False, "shape": (n,)})
        step = 1 << 20
        for a in range(0, n, step):
            b = min(n, a + step)
            # The array's own buffer: tobytes() would copy it once more.
            f.write(np.ascontiguousarray(_column_chunk(col, a, b), dtype=dtype).data)


def _write_facts(d: Path, facts: dict[str, Any]) -> None:
    import json

    tmp = d / f".facts.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(facts))
    os.replace(tmp, d / "facts.json")  # written last: marks the set complete


class FrameWriter:
    """Writes a trace's frames while it is loaded, before its id is known.

    Columns go to a staging directory; :meth:`finish` names it after the
    trace once the database transaction has committed, :meth:`abort` removes
    it. Frames are a cache: any failure here only means they are rebuilt from
    the database on first use.

    With ``background``, :meth:`add` hands the columns to a writer thread and
    returns at once: the loader's inserts (SQLite steps without the GIL) and
    these file writes then overlap instead of taking turns. The columns must
    not change after they are added.
    """

    def __init__(self, data_dir: Path, background: bool = False) -> None:
        import queue
        import uuid

        self.data_dir = data_dir
        # Made on the first column written: a load that finds its trace
        # already stored leaves nothing behind.
        self.staging = data_dir / "frames" / f".staging-{uuid.uuid4().hex}"
        self.written: set[str] = set()
        self.error: OSError | None = None
        self._stopped = False
        self._queue: queue.Queue[tuple[str, dict[str, Any], int] | None] | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._queue = queue.Queue()
            self._thread = threading.Thread(target=self._run, name="frame-writer", daemon=True)
            self._thread.start()

    def add(self, table: str, cols: dict[str, Any], n: int) -> None:
        """Write the columns of ``table`` that frames keep (others are ignored).

        In the background mode a failure shows in :attr:`error` and makes
        :meth:`finish` return None; otherwise OSError is raised here.
        """
        if self._queue is not None:
            self._queue.put((table, cols, n))
        else:
            self._write(table, cols, n)

    def _write(self, table: str, cols: dict[str, Any], n: int) -> None:
        self.staging.mkdir(parents=True, exist_ok=True)
        for name in TABLE_COLUMNS[table]:
            write_column(self.staging, table, name, cols[name], n)
        self.written.add(table)

    def _run(self) -> None:
        assert self._queue is not None
        while (item := self._queue.get()) is not None:
            if self.error is None and not self._stopped:
                try:
                    self._write(*item)
                except OSError as e:
                    self.error = e
            del item

    def _drain(self) -> None:
        """Wait until every added table is written (background mode)."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def finish(self, trace_id: int, sha256: str, first_ts: int, last_ts: int,
               kinds: dict[int, Kind]) -> Path | None:
        """Complete the set for trace ``trace_id``; returns its directory."""
        import shutil

        self._drain()
        if self.error is not None:
            self.abort()
            return None
        final = _frame_dir(self.data_dir, trace_id, sha256)
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            for table, names in TABLE_COLUMNS.items():
                if table not in self.written:
                    for name in names:
                        write_column(self.staging, table, name, np.zeros(0, np.int64), 0)
            _write_facts(self.staging, {
                "trace_id": trace_id, "first_ts": first_ts, "last_ts": last_ts,
                "sha256": sha256,
                "kinds": {str(k): [v.resource, v.from_state, v.to_state, v.reason]
                          for k, v in kinds.items()}})
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(self.staging, final)
            for older in final.parent.glob(f"{trace_id}-{sha256[:16]}-v*"):
                if older != final:  # another layout's copy of the same trace
                    shutil.rmtree(older, ignore_errors=True)
        except OSError:
            # Only a cache (a full disk, say): the views rebuild it.
            self.abort()
            return None
        return final

    def add_derived(self, key: str, value: Any) -> bool:
        """Store a derived value (ingest.derived_cache) with the frames being
        written, as ``cached(frames, key, ...)`` would persist it; it moves
        with them at :meth:`finish`. False when it could not be written (it
        is only a cache: built again when first needed)."""
        from ingest.derived_cache import DERIVED_VERSION, save_value

        if self.error is not None or self._stopped:
            return False
        d = self.staging / f"derived-v{DERIVED_VERSION}"
        try:
            d.mkdir(parents=True, exist_ok=True)
            save_value(d / key, value)
        except OSError:
            return False
        return True

    def abort(self) -> None:
        import shutil

        self._stopped = True  # what is still queued is not written
        self._drain()
        shutil.rmtree(self.staging, ignore_errors=True)


def write_frames(data_dir: Path, facts: dict[str, Any], tables: dict[str, Table]) -> Path:
    """Write one trace's tables (already in memory) as a complete frame set."""
    import shutil

    w = FrameWriter(data_dir)
    try:
        for name, table in tables.items():
            w.add(name, table.columns, len(table))
        kinds = {int(k): Kind(*v) for k, v in facts["kinds"].items()}
        d = w.finish(int(facts["trace_id"]), str(facts["sha256"]), int(facts["first_ts"]),
                     int(facts["last_ts"]), kinds)
    finally:
        if w.staging.exists():
            shutil.rmtree(w.staging, ignore_errors=True)
    if d is None:
        raise OSError(f"cannot write frames under {data_dir / 'frames'}")
    return d


def read_frames(d: Path) -> TraceFrames | None:
    """The frames in directory ``d`` (memory-mapped), or None when incomplete."""
    import json

    try:
        facts = json.loads((d / "facts.json").read_text())
        tables: dict[str, Table] = {}
        for name, cols in TABLE_COLUMNS.items():
            arrays = {c: np.load(d / f"{name}.{c}.npy", mmap_mode="r") for c in cols}
            if len({len(a) for a in arrays.values()}) > 1:
                return None
            tables[name] = Table(arrays)
    except (OSError, ValueError, KeyError):
        return None
    kinds = {int(k): Kind(*v) for k, v in facts["kinds"].items()}
    return TraceFrames(trace_id=int(facts["trace_id"]), first_ts=int(facts["first_ts"]),
                       last_ts=int(facts["last_ts"]), kinds=kinds,
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
            d = _frame_dir(self.data_dir, trace_id, sha)
            f = read_frames(d)
            if f is None:
                facts, tables = build_arrays(self.engine, trace_id)
                write_frames(self.data_dir, facts, tables)
                f = read_frames(d)
                if f is None:  # pragma: no cover - we just wrote it
                    raise OSError(f"cannot read back the frames written to {d}")
            with self._lock:
                self._open[trace_id] = (sha, f)
                self._open.move_to_end(trace_id)
                while len(self._open) > self.capacity:
                    self._open.popitem(last=False)
        return f

    def forget(self, trace_id: int) -> None:
        """Drop a trace from the cache and its files (after a delete)."""
        with self._lock:
            self._open.pop(trace_id, None)
        remove_frames(self.data_dir, trace_id)


def iter_lane_rows(lanes: Lanes) -> Iterator[tuple[int, slice]]:
    """(lane id, rows) for every lane."""
    for i, lane_id in enumerate(lanes.ids):
        yield int(lane_id), slice(int(lanes.off[i]), int(lanes.off[i + 1]))
