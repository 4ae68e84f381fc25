"""Writing a trace's frames (ingest.derive.frames): the columns' stored types, the
files, and the writer the loader feeds while it loads.

One ``.npy`` file per column, written chunk by chunk (the loader never holds
a reordered copy of the trace), ids and flags in the narrowest integer type
that holds them; :class:`FrameWriter` stages a set and names it after the
trace once the database has committed it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ingest.derive.cache import DERIVED_VERSION, save_value
from ingest.derive.frame_layout import (
    LOADER_NAME,
    TABLE_COLUMNS,
    Kind,
    Table,
    frame_dir,
    kinds_of,
    read_tables,
)

Arr = npt.NDArray[Any]

#: Nanosecond times: always int64 (a narrower time column would overflow in
#: the views' arithmetic with times). The other columns (ids, codes, flags)
#: are stored in the narrowest integer type that holds their values, but no
#: narrower than listed here (int32 by default), so that the views can add
#: and compare them with small numbers without overflowing.
TIME_COLUMNS = frozenset({"start_ts", "end_ts", "duration_ns", "stolen_ts"})
NARROWEST: dict[str, type[np.signedinteger[Any]]] = {
    "kind": np.int16, "start_known": np.int8, "p_lost": np.int8, "outcome": np.int8,
    # 2 bytes where they fit (GOMAXPROCS, an M's id, a stack's id of all but the
    # biggest traces): 136 of the 200 MB trace's MB of frames, with the outcome's
    # one.
    "m": np.int16, "p": np.int16, "stack_id": np.int16, "stolen_by_m": np.int16}


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
    from ingest.columns import Computed, Diff, Gather, Nullable, Seq

    if n == 0:
        return 0, 0
    if isinstance(col, Diff | Computed):
        return _bounds(_column_chunk(col, 0, n), n)
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


def _column_chunk(col: Any, a: int, b: int) -> Arr:
    from ingest.columns import Computed, Diff, Gather, Nullable, Seq

    if isinstance(col, Computed):
        return col.chunk(a, b)
    if isinstance(col, Diff):
        out: Arr = np.subtract(_column_chunk(col.a, a, b), _column_chunk(col.b, a, b),
                               dtype=np.int64)
        return out
    if isinstance(col, Gather):
        return np.take(col.values, col.index[a:b])  # faster than values[index]
    if isinstance(col, Nullable):
        return np.where(col.null[a:b], -1, col.values[a:b])
    if isinstance(col, Seq):
        return np.arange(col.start + a, col.start + b, dtype=np.int64)
    part = col[a:b]
    return np.asarray([-1 if v is None else int(v) for v in part], dtype=np.int64) \
        if isinstance(part, list) else np.asarray(part)


#: Writes queued at most before :meth:`FrameWriter.add` waits.
_QUEUED = 2


class _Parted:
    """A table written part by part: its open column files and rows so far."""

    def __init__(self, d: Path, table: str, rows: int,
                 bounds: dict[str, tuple[int, int]], durable: bool = False) -> None:
        self.rows, self.done = rows, 0
        self.durable = durable
        self.files: dict[str, tuple[Any, np.dtype[Any]]] = {}
        try:
            for name in TABLE_COLUMNS[table]:
                dtype = np.dtype(np.int64) if name in TIME_COLUMNS else column_dtype(
                    name, *bounds[name])
                f = open(d / f"{table}.{name}.npy", "wb")  # noqa: SIM115 - closed by close()
                self.files[name] = (f, dtype)
                np.lib.format.write_array_header_1_0(
                    f, {"descr": dtype.str, "fortran_order": False, "shape": (rows,)})
        except BaseException:
            try:
                self.close()
            except OSError:
                pass  # the first error is the one to raise
            raise

    def append(self, cols: dict[str, Any], n: int) -> None:
        if self.done + n > self.rows:
            raise OSError(f"frames: {self.done + n} rows written of {self.rows}")
        for name, (f, dtype) in self.files.items():
            loader = LOADER_NAME.get(name)
            col = cols[loader] if loader in cols else cols[name]
            for a in range(0, n, 1 << 20):
                b = min(n, a + (1 << 20))
                f.write(np.ascontiguousarray(_column_chunk(col, a, b), dtype=dtype).data)
            if self.durable:
                # The part on its way to the disk now: the fsync after the
                # last part then waits for little (the 200 MB trace's
                # intervals: eight files flushed one after another at the
                # load's end).
                f.flush()
                start_writeback(f.fileno())
        self.done += n

    def close(self) -> None:
        """Close every file (each one, even when another fails); the first
        error (a full disk flushing the last writes) is raised after."""
        error: OSError | None = None
        for f, _ in self.files.values():
            try:
                f.close()
            except OSError as e:
                error = error or e
        self.files = {}
        if error is not None:
            raise error


def write_column(d: Path, table: str, name: str, col: Any, n: int) -> None:
    """Write one column of ``n`` rows (a numpy array or an ingest.columns
    Gather/Nullable/Seq) to ``d/<table>.<name>.npy`` in its stored type
    (:func:`column_dtype`), 1M rows at a time.

    Plain writes, not a writable memory map: on a full disk a write returns
    ENOSPC, where a store into a mapped page would kill the process (SIGBUS).
    """
    dtype = np.dtype(np.int64) if name in TIME_COLUMNS else column_dtype(name, *_bounds(col, n))
    path = d / f"{table}.{name}.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": dtype.str, "fortran_order": False, "shape": (n,)})
        step = 1 << 20
        for a in range(0, n, step):
            b = min(n, a + step)
            # The array's own buffer: tobytes() would copy it once more.
            f.write(np.ascontiguousarray(_column_chunk(col, a, b), dtype=dtype).data)


def _link_or_copy(src: Path, dest: Path) -> bool:
    """``dest`` as a hard link of ``src`` (True), or a copy where links cannot
    be made (False: another file system)."""
    import shutil

    try:
        os.link(src, dest)
        return True
    except OSError:
        shutil.copyfile(src, dest)
        return False


@cache
def _sync_file_range() -> Callable[..., int] | None:
    """Linux's sync_file_range(2) from the C library, None where there is none."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return cast(Callable[..., int], fn)


#: sync_file_range's SYNC_FILE_RANGE_WRITE: start writing the dirty pages, do not wait.
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int) -> None:
    """Start writing a file's dirty pages to the disk without waiting for
    them (an fsync later finds them written or under way); nothing where the
    system has no sync_file_range, or it fails (the fsync still flushes)."""
    fn = _sync_file_range()
    if fn is not None:
        fn(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def _fsync(path: Path) -> None:
    """Flush a file's (or a directory's) content to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    the database on first use; but a table given to :meth:`publish` is its own
    home (the intervals on SQLite), and a failure there fails the load.

    With ``background``, :meth:`add` hands the columns to a writer thread and
    returns at once: the loader's inserts (SQLite steps without the GIL) and
    these file writes then overlap instead of taking turns. The columns must
    not change after they are added.
    """

    def __init__(self, data_dir: Path, background: bool = False,
                 durable: frozenset[str] = frozenset()) -> None:
        import queue
        import uuid

        self.data_dir = data_dir
        #: Tables whose files are flushed to the disk as they are written
        #: (the ones :meth:`publish` makes a home of).
        self.durable = durable
        # Made on the first column written: a load that finds its trace
        # already stored leaves nothing behind.
        self.staging = data_dir / "frames" / f".staging-{uuid.uuid4().hex}"
        self.written: set[str] = set()
        self.error: OSError | None = None
        self._stopped = False
        self._queue: queue.Queue[Callable[[], None] | None] | None = None
        self._parted: dict[str, _Parted] = {}
        self._thread: threading.Thread | None = None
        if background:
            # A few tables (or parts) ahead at most: a loader that derives
            # faster than the files are written waits, rather than holding
            # every part it made meanwhile. The thread starts when the loader
            # says (:meth:`start_background`): before, it may fork
            # (ingest.load.event_side), and the work is done on the caller's.
            self._queue = queue.Queue(maxsize=_QUEUED)

    def add(self, table: str, cols: dict[str, Any], n: int) -> None:
        """Write the columns of ``table`` that frames keep (others are ignored).

        In the background mode a failure shows in :attr:`error` and makes
        :meth:`finish` return None; otherwise OSError is raised here.
        """
        self._do(partial(self._write, table, cols, n))

    def begin(self, table: str, rows: int, bounds: dict[str, tuple[int, int]]) -> None:
        """``table`` comes in parts from now on, each given to :meth:`add`:
        ``rows`` in all, its columns stored in the types their ``bounds``
        (lowest, highest value) call for (:func:`column_dtype`). It counts
        as written once they all are."""
        self._do(partial(self._begin, table, rows, bounds))

    def start_background(self) -> None:
        """From now on the background mode's writes go to its thread."""
        if self._queue is not None and self._thread is None and not self._stopped:
            self._thread = threading.Thread(target=self._run, name="frame-writer", daemon=True)
            self._thread.start()

    def _do(self, work: Callable[[], None]) -> None:
        if self._queue is not None and self._thread is not None:
            self._queue.put(work)
        else:
            work()

    def _begin(self, table: str, rows: int, bounds: dict[str, tuple[int, int]]) -> None:
        self.staging.mkdir(parents=True, exist_ok=True)
        self._parted[table] = _Parted(self.staging, table, rows, bounds,
                                      durable=table in self.durable)

    def _write(self, table: str, cols: dict[str, Any], n: int) -> None:
        self.staging.mkdir(parents=True, exist_ok=True)
        parted = self._parted.get(table)
        if parted is not None:
            parted.append(cols, n)
            if parted.done == parted.rows:
                parted.close()
                del self._parted[table]
                if table in self.durable:
                    for name in TABLE_COLUMNS[table]:
                        _fsync(self.staging / f"{table}.{name}.npy")
                self.written.add(table)
            return
        for name in TABLE_COLUMNS[table]:
            # The loader's own column where it has one (its ``outcome`` is text).
            loader = LOADER_NAME.get(name)
            write_column(self.staging, table, name,
                         cols[loader] if loader in cols else cols[name], n)
            if table in self.durable:
                # Here, on the writer's thread, while the loader goes on:
                # publish() finds the pages already on the disk.
                _fsync(self.staging / f"{table}.{name}.npy")
        self.written.add(table)

    def publish(self, tables: tuple[str, ...], home: Path, others: Sequence[Path] = ()) -> None:
        """Keep ``tables``' files, once written, under ``home`` too: flushed
        to the disk and hard-linked there (a copy where links cannot be
        made), the directory itself made durable; and the files ``others``
        (already flushed: ingest.store.coded_files). For tables whose home
        these files are (ingest.store.interval_files), before the database
        commits where they are. Raises OSError when they cannot be."""
        import shutil
        import uuid

        self._drain()
        if self.error is not None:
            raise self.error
        missing = [t for t in tables if t not in self.written]
        if missing:
            raise OSError(f"{', '.join(missing)}: no frame files written")
        tmp = home.parent / f".staging-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            for table in tables:
                for name in TABLE_COLUMNS[table]:
                    src = self.staging / f"{table}.{name}.npy"
                    if table not in self.durable:
                        _fsync(src)
                    if not _link_or_copy(src, tmp / src.name):
                        _fsync(tmp / src.name)
            for src in others:
                if not _link_or_copy(src, tmp / src.name):
                    _fsync(tmp / src.name)
            _fsync(tmp)
            if home.exists():  # a deleted trace's, whose removal failed
                shutil.rmtree(home)
            os.replace(tmp, home)
            _fsync(home.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def link(self, table: str, source: Path) -> None:
        """Take ``table``'s files from directory ``source`` (hard links; copies
        where links cannot be made) instead of writing them."""
        self._drain()
        self.staging.mkdir(parents=True, exist_ok=True)
        for name in TABLE_COLUMNS[table]:
            src = source / f"{table}.{name}.npy"
            _link_or_copy(src, self.staging / src.name)
        self.written.add(table)

    def _run(self) -> None:
        assert self._queue is not None
        while (item := self._queue.get()) is not None:
            if self.error is None and not self._stopped:
                try:
                    item()
                except OSError as e:
                    self.error = e
            del item

    def _drain(self) -> None:
        """Wait until every added table is written (background mode)."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._parted and self.error is None and not self._stopped:
            self.error = OSError(f"frames: {', '.join(self._parted)} not given every row")

    def finish(self, trace_id: int, sha256: str, first_ts: int, last_ts: int,
               kinds: dict[int, Kind]) -> Path | None:
        """Complete the set for trace ``trace_id``; returns its directory."""
        import shutil

        self._drain()
        if self.error is not None:
            self.abort()
            return None
        final = frame_dir(self.data_dir, trace_id, sha256)
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
            if not _complete(final):
                # Never a complete set: another process (the loader, another
                # worker) may be reading it and saving derived values into it.
                # The same trace's frames are the same whoever wrote them.
                if final.exists():  # torn (a crash while it was removed)
                    shutil.rmtree(final, ignore_errors=True)
                try:
                    os.replace(self.staging, final)
                except OSError:
                    if not _complete(final):
                        raise
            if self.staging.exists():  # another writer's set was there first
                shutil.rmtree(self.staging, ignore_errors=True)
            for older in final.parent.glob(f"{trace_id}-{sha256[:16]}-v*"):
                if older != final:  # another layout's copy of the same trace
                    shutil.rmtree(older, ignore_errors=True)
        except OSError:
            # Only a cache (a full disk, say): the views rebuild it.
            self.abort()
            return None
        return final

    def add_derived(self, key: str, value: Any) -> bool:
        """Store a derived value (ingest.derive.cache) with the frames being
        written, as ``cached(frames, key, ...)`` would persist it; it moves
        with them at :meth:`finish`. False when it could not be written (it
        is only a cache: built again when first needed)."""
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
        for parted in self._parted.values():
            try:
                parted.close()
            except OSError:
                pass  # its files go below
        self._parted.clear()
        shutil.rmtree(self.staging, ignore_errors=True)


def _complete(d: Path) -> bool:
    """Whether ``d`` holds a whole frame set (every column and the facts)."""
    return read_tables(d) is not None


def write_frames(data_dir: Path, facts: dict[str, Any], tables: dict[str, Table],
                 linked: dict[str, Path] | None = None) -> Path:
    """Write one trace's tables (already in memory) as a complete frame set;
    ``linked``: tables whose files are taken from a directory instead
    (their home: ingest.store.interval_files)."""
    import shutil

    w = FrameWriter(data_dir)
    try:
        for name, source in (linked or {}).items():
            w.link(name, source)
        for name, table in tables.items():
            if name not in (linked or {}):
                w.add(name, table.columns, len(table))
        kinds = kinds_of(facts)
        d = w.finish(int(facts["trace_id"]), str(facts["sha256"]), int(facts["first_ts"]),
                     int(facts["last_ts"]), kinds)
    finally:
        if w.staging.exists():
            shutil.rmtree(w.staging, ignore_errors=True)
    if d is None:
        raise OSError(f"cannot write frames under {data_dir / 'frames'}")
    return d
