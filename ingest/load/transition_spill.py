"""A trace's transitions as they are decoded, kept for a derivation bucket by
bucket: the goroutines' rows by goroutine id, the procs' rows apart.

The loader derives the tables of the transitions bucket by bucket
(:mod:`ingest.load.bucket_tables`), so memory holds one bucket at a time, not
the trace's every transition (545 MB of the 200 MB benchmark trace's 1.3 GB
peak). A small trace stays in memory as one bucket. A big one
(``SPILL_MIN_BYTES`` of trace or more) is written to one unnamed temporary
file (a kill leaves nothing behind) as sorted runs, an external sort's: every
``FLUSH_ROWS`` goroutine rows, sorted by goroutine id (stably: each
goroutine's rows stay in Go's order). A bucket is then the rows of a range of
goroutine ids, about ``BUCKET_ROWS`` of them (a goroutine's rows are never
split), read from each run in turn: the buckets in order are the goroutines
in id order, each goroutine's rows in Go's order, with their transition
numbers (``seq``).

What the derivation needs of the whole trace is gathered on the way: the
count of each (resource, from, to, reason), every column's bounds (the frames'
stored types), each thread's first and last time, and the last time.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from ingest.codes import GOROUTINE, PROC
from ingest.columns import ParquetDirError, Transitions, narrow_small, reason_codes
from ingest.extensions import optional_extension
from ingest.load.transitions_builder import _CODES, _INTS, TransitionsBuilder

Arr = npt.NDArray[Any]

#: Buffered goroutine rows before they are written to the spill file, a run.
#: Small enough that a column of it (1 MB of timestamps) stays in the CPU's
#: caches while the run is gathered into goroutine order: with 1 << 20 rows
#: the flusher's thread took 2.6 s of the 200 MB trace's decode, 1.5-1.7 s
#: with this (more runs, each read back as one more span per bucket).
FLUSH_ROWS = 1 << 17
#: Rows of a bucket (at least one range's) when the trace is spilled.
BUCKET_ROWS = 1 << 21
#: Traces this big or bigger are spilled; smaller ones stay in memory, one bucket.
SPILL_MIN_BYTES = 64 << 20
#: The same for a decoded directory, in transitions (a trace of 64 MB has about 6 M).
SPILL_MIN_ROWS = 6 << 20

#: The columns kept per row, in the spill file's order.
_NAMES = (*_INTS, *_CODES, "reason", "seq")
#: Columns whose bounds are kept (the frames' stored types).
BOUNDED = ("id", "m", "p", "g", "stack_id")


@dataclass
class _Run:
    """Rows sorted by goroutine id in the spill file: each column's offset
    and type, the distinct ids and where each one's rows start."""

    columns: tuple[tuple[int, np.dtype[Any]], ...]
    goids: Arr
    starts: Arr  # len(goids) + 1 row numbers


@dataclass
class Bucket:
    """One bucket's transitions and each row's transition number."""

    tr: Transitions
    #: Row i's transition number; None: row i is transition i (a trace in
    #: memory: its one bucket, in Go's order).
    seq: Arr | None
    #: The bucket's rows followed by the ``extra`` rows :meth:`TransitionSpill.buckets`
    #: was given, and their transition numbers (``tr`` and ``seq`` are views
    #: of their first rows); None without extra rows.
    joined: Transitions | None = None
    joined_seq: Arr | None = None


class TransitionSpill(TransitionsBuilder):
    """Add the decoder's transitions row groups with :meth:`add` (as to a
    :class:`TransitionsBuilder`), then :meth:`seal`; then :meth:`buckets`
    and :meth:`procs` give them back partitioned.

    ``spill_dir``: where the spill file goes (None: memory only, one bucket).
    """

    def __init__(self, spill_dir: Path | None = None, capacity: int = 0) -> None:
        # In memory, the rows go straight into columns of ``capacity`` rows
        # (TransitionsBuilder's; the untouched room takes no memory): one
        # bucket, never joined from parts.
        super().__init__(capacity=0 if spill_dir is not None else capacity)
        self._dir = spill_dir
        self._file: IO[bytes] | None = None
        self._buffer: list[tuple[dict[str, Arr], Arr | None]] = []
        self._buffered = 0
        self._runs: list[_Run] = []
        # The run being sorted and written by the flusher thread (one at a time).
        self._writing: Future[_Run] | None = None
        self._flusher: ThreadPoolExecutor | None = None
        self._procs: list[dict[str, Arr]] = []
        self._kinds: dict[tuple[int, int], int] = {}
        self.bounds: dict[str, tuple[int, int]] = {}
        self.last_ts: int | None = None
        #: Each thread's first and last transition time, in Go's order.
        self.thread_first: dict[int, int] = {}
        self.thread_last: dict[int, int] = {}
        self.sealed = False

    # ------------------------------------------------------------ filling

    def add(self, table: pa.Table) -> None:
        """Keep one row group (see TransitionsBuilder.add)."""
        if self._dir is not None:
            super().add(table)  # to _add_parts below
            return
        start = self.rows
        before = {n: len(p) for n, p in (*self._ints.items(), *self._codes.items())}
        super().add(table)
        if self.rows == start:
            return
        if self._cols is not None:
            self._note({n: c[start:self.rows] for n, c in self._cols.items()})
        else:
            self._note({n: _join(p[before[n]:], _EMPTY[n])
                        for n, p in (*self._ints.items(), *self._codes.items())})

    def _add_parts(self, table: pa.Table) -> None:
        if self._dir is None:
            TransitionsBuilder._add_parts(self, table)
            return
        cols: dict[str, Arr] = {}
        for name in _INTS:
            parts = [self._int_part(name, c.to_numpy()) for c in table.column(name).chunks]
            cols[name] = _join(parts, np.int64 if name == "ts" else np.int32)
        for name, codes in _CODES.items():
            cols[name] = _join([self._code_part(c, name, codes, False, np.int8)
                                for c in table.column(name).chunks], np.int8)
        cols["reason"] = _join([self._code_part(c, "reason", self._reasons, True, np.int16)
                                for c in table.column("reason").chunks], np.int16)
        n = len(cols["ts"])
        if not n:
            return
        seq_type = np.int32 if self.rows + n < 2**31 else np.int64
        cols["seq"] = np.arange(self.rows, self.rows + n, dtype=seq_type)
        self._note(cols)
        res = cols["resource"]
        if bool((res != GOROUTINE).any()):
            pmask = res == PROC
            if bool((~pmask & (res != GOROUTINE)).any()):
                raise ParquetDirError("transitions: a resource neither goroutine nor proc")
            self._procs.append({k: v[pmask] for k, v in cols.items()})
            # The goroutines' rows are taken out on the flusher's thread.
            self._partition(cols, ~pmask)
            return
        self._partition(cols)

    def _note(self, cols: dict[str, Arr]) -> None:
        """Kinds counted, bounds and the last time kept, for one row group."""
        top = int(cols["ts"].max())
        self.last_ts = top if self.last_ts is None else max(self.last_ts, top)
        for name in BOUNDED:
            a = cols[name]
            lo, hi = int(a.min()), int(a.max())
            old = self.bounds.get(name)
            self.bounds[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
        self._note_threads(cols["m"], cols["ts"])
        nr = max(len(self._reasons), 1)
        edge = cols["resource"].astype(np.int32) * 8
        edge += cols["from_state"]
        edge *= 8
        edge += cols["to_state"]
        code = edge * nr
        code += cols["reason"]
        counts = np.bincount(code)
        for c in np.flatnonzero(counts).tolist():
            key = divmod(c, nr)
            self._kinds[key] = self._kinds.get(key, 0) + int(counts[c])

    def _note_threads(self, m: Arr, ts: Arr) -> None:
        """The first and last time of each thread in one row group (the
        threads' table's; a bucket is not in Go's order across goroutines)."""
        c = self._c
        if c is not None and m.dtype in (np.int32, np.int64) and ts.dtype == np.int64:
            # One call holding the GIL (ingest/csrc/columnappend.c says why).
            ids, firsts, lasts, _, _ = c.thread_spans(np.ascontiguousarray(m),
                                                      np.ascontiguousarray(ts))
            for i, f, la in zip(ids, firsts, lasts, strict=True):
                self.thread_first.setdefault(i, f)
                self.thread_last[i] = la
            return
        has = m >= 0
        if not bool(has.any()):
            return
        m, ts = m[has].astype(np.int64), ts[has]
        top = int(m.max())
        pos = np.arange(len(m))
        if top < 1 << 20:
            first = np.full(top + 1, len(m))
            last = np.full(top + 1, -1)
            np.minimum.at(first, m, pos)
            np.maximum.at(last, m, pos)
            ids = np.flatnonzero(last >= 0)
            first, last = first[ids], last[ids]
        else:
            ids, first = np.unique(m, return_index=True)
            _, back = np.unique(m[::-1], return_index=True)
            last = len(m) - 1 - back
        for i, f, la in zip(ids.tolist(), ts[first].tolist(), ts[last].tolist(), strict=True):
            self.thread_first.setdefault(i, f)
            self.thread_last[i] = la

    def _partition(self, cols: dict[str, Arr], keep: Arr | None = None) -> None:
        """Buffer a row group's goroutine rows (with ``keep``: its rows where
        it is true) for the next run."""
        n = len(cols["ts"]) if keep is None else int(np.count_nonzero(keep))
        if not n:
            return
        self._buffer.append((cols, keep))
        self._buffered += n
        if self._dir is not None and self._buffered >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        """The buffered goroutine rows to the spill file, sorted by id: a run,
        sorted and written on the flusher thread while the next rows arrive
        (numpy's gathers and the write hold no GIL: they run beside the
        decoder and this thread's copies)."""
        if not self._buffer:
            return
        if self._file is None:
            assert self._dir is not None
            self._dir.mkdir(parents=True, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=self._dir, prefix="transitions-")
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="gmpscope-spill")
        parts, self._buffer, self._buffered = self._buffer, [], 0
        self._wait_written()
        assert self._flusher is not None
        self._writing = self._flusher.submit(self._write_run, parts)

    def _wait_written(self) -> None:
        """The run being written, written (its error raised here)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            self._runs.append(writing.result())

    def _write_run(self, parts: list[tuple[dict[str, Arr], Arr | None]]) -> _Run:
        assert self._file is not None

        def column(name: str) -> list[Arr]:
            return [p[name] if keep is None else p[name][keep] for p, keep in parts]

        rid = _join(column("id"), np.int32)
        by, starts = _by_id(rid)
        # numpy gathers by an int32 index by casting it to intp for each column
        # and taking its slower general path: cast once.
        by = by.astype(np.intp, copy=False)
        goids = rid[by[starts[:-1]]].astype(np.int64)
        del rid
        f = self._file
        columns = []
        for name in _NAMES:
            col = _join(column(name), _EMPTY[name])[by]
            columns.append((f.seek(0, os.SEEK_END), col.dtype))
            f.write(np.ascontiguousarray(col).data)
        return _Run(tuple(columns), goids, starts)

    def seal(self, expected_rows: int) -> TransitionSpill:
        """Check the rows against meta.json's count; the spill, ready to read."""
        self.check(expected_rows)
        if self._dir is not None:
            self._flush()
            self._wait_written()
            self._stop_flusher()
            if self._file is not None:
                self._file.flush()
        self.sealed = True
        return self

    def _stop_flusher(self) -> None:
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)
            self._flusher = None

    def close(self) -> None:
        """Drop the spill file and the buffers."""
        self._stop_flusher()  # a run being written finishes first
        self._writing = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self._buffer, self._runs = [], []
        self._procs = []

    # ------------------------------------------------------------ reading

    @property
    def spill_dir(self) -> Path | None:
        """Where the spill files go (None: the trace is kept in memory)."""
        return self._dir

    @property
    def reasons(self) -> list[str]:
        return list(self._reasons)

    def kind_counts(self) -> dict[tuple[int, int], int]:
        """Transitions per ((resource * 8 + from) * 8 + to, reason code)."""
        return dict(self._kinds)


    def buckets(self, bucket_rows: int | None = None,
                extra: Bucket | None = None) -> Iterator[Bucket]:
        """The goroutines' rows, bucket by bucket in goroutine id order (one
        bucket when the trace is in memory); what is read is forgotten.
        ``extra``: rows read after each spilled bucket's into the same
        columns (:attr:`Bucket.joined`): the procs' steals that each bucket's
        syscalls are derived beside, with no copy of the bucket joined to them."""
        if self._dir is None:
            # In memory: every row (the procs' too) one bucket, in Go's order.
            if self.rows:
                yield Bucket(TransitionsBuilder.finish(self, self.rows), None)
            return
        if not self._runs:
            return
        limit = bucket_rows if bucket_rows is not None else BUCKET_ROWS
        goids = np.concatenate([r.goids for r in self._runs])
        rows = np.concatenate([np.diff(r.starts) for r in self._runs])
        ids, inverse = np.unique(goids, return_inverse=True)
        per_id = np.bincount(inverse, weights=rows, minlength=len(ids)).astype(np.int64)
        del goids, rows, inverse
        # Each id in the bucket its first row falls in: a bucket holds up to
        # ``limit`` rows and the rest of its last goroutine's.
        before = np.cumsum(per_id) - per_id
        bucket = before // max(limit, 1)
        cut = np.flatnonzero(bucket[1:] != bucket[:-1]) + 1
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(ids)], strict=True):
            yield self._bucket(int(ids[a]), int(ids[b - 1]), extra)
        self._runs = []

    def procs(self) -> Bucket:
        """The procs' rows, in Go's order, when they are kept apart (a spilled
        trace; in memory they are in the one bucket and this is empty)."""
        parts, self._procs = self._procs, []
        return self._make(_take_columns(parts) if parts else
                          {n: np.zeros(0, _EMPTY[n]) for n in _NAMES})

    def _bucket(self, lo: int, hi: int, extra: Bucket | None = None) -> Bucket:
        """Goroutines lo..hi's rows, from every run in turn (Go's order), read
        straight into their columns, ``extra``'s rows after them."""
        assert self._file is not None
        spans: list[tuple[_Run, int, int]] = []
        for run in self._runs:
            a = int(np.searchsorted(run.goids, lo, side="left"))
            b = int(np.searchsorted(run.goids, hi, side="right"))
            first, last = int(run.starts[a]), int(run.starts[b])
            if last > first:
                spans.append((run, first, last))
        n = sum(last - first for _, first, last in spans)
        more = _extra_columns(extra) if extra is not None and len(extra.tr) else {}
        m = len(more["ts"]) if more else 0
        cols: dict[str, Arr] = {}
        for i, name in enumerate(_NAMES):
            types = [run.columns[i][1] for run, _, _ in spans]
            if name in more:
                types.append(more[name].dtype)
            out = np.empty(n + m, np.result_type(*types) if types else _EMPTY[name])
            at = 0
            for run, first, last in spans:
                offset, dtype = run.columns[i]
                self._read(offset + first * dtype.itemsize, dtype, out[at:at + last - first])
                at += last - first
            if m:
                out[n:] = more[name]
            cols[name] = out
        bucket = self._make(cols)
        if not m:
            return bucket
        joined, seq = bucket.tr, bucket.seq
        assert seq is not None
        return Bucket(_head(joined, n), seq[:n], joined, seq)

    def _read(self, offset: int, dtype: np.dtype[Any], out: Arr) -> None:
        """``len(out)`` values of ``dtype`` at ``offset`` of the spill file into ``out``."""
        assert self._file is not None
        if out.dtype == dtype:
            # pread: the file is only read from now on (sealed: flushed).
            view = out.data.cast("B")
            fd, got = self._file.fileno(), 0
            while got < len(view):
                k = os.preadv(fd, [view[got:]], offset + got)
                if not k:
                    break
                got += k
            if got != len(view):
                raise OSError("the transitions' spill file is shorter than written")
            return
        self._file.seek(offset)
        part = np.fromfile(self._file, dtype=dtype, count=len(out))
        if len(part) != len(out):
            raise OSError("the transitions' spill file is shorter than written")
        out[:] = part

    def _make(self, cols: dict[str, Arr]) -> Bucket:
        tr = Transitions(
            ts=cols["ts"], res=cols["resource"], rid=cols["id"], frm=cols["from_state"],
            to=cols["to_state"], reason=reason_codes(cols["reason"], len(self._reasons)),
            m=cols["m"], p=narrow_small(cols["p"]), g=cols["g"],
            stack=narrow_small(cols["stack_id"]), reasons=list(self._reasons))
        return Bucket(tr, cols.get("seq"))


def _extra_columns(extra: Bucket) -> dict[str, Arr]:
    """A bucket's rows by the spill's column names."""
    tr = extra.tr
    assert extra.seq is not None
    return {"ts": tr.ts, "id": tr.rid, "m": tr.m, "p": tr.p, "g": tr.g, "stack_id": tr.stack,
            "resource": tr.res, "from_state": tr.frm, "to_state": tr.to, "reason": tr.reason,
            "seq": extra.seq}


def _head(tr: Transitions, n: int) -> Transitions:
    """The first ``n`` rows of ``tr``, as views."""
    return Transitions(ts=tr.ts[:n], res=tr.res[:n], rid=tr.rid[:n], frm=tr.frm[:n],
                       to=tr.to[:n], reason=tr.reason[:n], m=tr.m[:n], p=tr.p[:n], g=tr.g[:n],
                       stack=tr.stack[:n], reasons=tr.reasons)


_EMPTY: dict[str, Any] = {**{n: np.int32 for n in _INTS}, "ts": np.int64,
                          **{n: np.int8 for n in _CODES}, "reason": np.int16,
                          "seq": np.int32}


def _by_id(rid: Arr) -> tuple[Arr, Arr]:
    """A stable sort of goroutine ids: (the rows in id order, where each id's
    rows start in it, one more at the end); by counting sort in C where the
    ids allow it (ingest/csrc/intervalorder.c), else numpy's."""
    n = len(rid)
    c = optional_extension("ingest.derive._intervalorder")
    if c is not None and rid.dtype == np.int32:
        order: Arr = np.empty(n, np.int32)
        first = np.empty(n, bool)
        last = np.empty(n, bool)
        if c.order_intervals(np.zeros(n, np.int8), rid, order, first, last):
            return order, np.append(np.flatnonzero(first), n)
    by: Arr = np.argsort(rid, kind="stable")
    s = rid[by]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if n else np.zeros(0, np.int64)
    return by, np.append(starts, n)


def _take_columns(parts: list[dict[str, Arr]]) -> dict[str, Arr]:
    """Each column joined from the parts', which are dropped column by column
    (never two copies of the rows at once)."""
    return {n: _join([p.pop(n) for p in parts], _EMPTY[n]) for n in _NAMES}


def _join(parts: list[Arr], dtype: Any) -> Arr:
    """Parts as one array (the widest part's type; ``dtype`` when none)."""
    if not parts:
        return np.zeros(0, dtype)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts)


def spill_dir(data_dir: Path | None, *, trace_bytes: int = 0, rows: int = 0) -> Path | None:
    """Where a trace's transitions are spilled: the data directory's ``tmp``
    (the system's temporary directory without one) for a big trace (of
    ``trace_bytes`` or of ``rows`` transitions), None (memory) for the others."""
    if trace_bytes < SPILL_MIN_BYTES and rows < SPILL_MIN_ROWS:
        return None
    return data_dir / "tmp" if data_dir is not None else Path(tempfile.gettempdir())


def read_transitions_spill(directory: Path, expected_rows: int,
                           where: Path | None) -> TransitionSpill:
    """transitions.parquet of a decoded directory into a spill, row group by
    row group (never whole in memory)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from ingest.columns import DICT_COLUMNS

    path = directory / "transitions.parquet"
    try:
        pf = pq.ParquetFile(path, read_dictionary=DICT_COLUMNS)
    except (OSError, pa.ArrowException) as e:
        raise ParquetDirError(f"{path}: unreadable: {e}") from None
    if pf.metadata.num_rows != expected_rows:
        raise ParquetDirError(f"{path}: {pf.metadata.num_rows} rows but meta.json says "
                              f"{expected_rows}")
    names = ("ts", "id", "m", "p", "g", "stack_id", *DICT_COLUMNS)
    missing = set(names) - set(pf.schema_arrow.names)
    if missing:
        raise ParquetDirError(f"{path}: missing columns {sorted(missing)}")
    spill = TransitionSpill(where, capacity=expected_rows)
    try:
        for batch in pf.iter_batches(batch_size=1 << 16, columns=list(names)):
            spill.add(pa.Table.from_batches([batch]))
    except pa.ArrowException as e:
        spill.close()
        raise ParquetDirError(f"{path}: unreadable: {e}") from None
    except BaseException:
        spill.close()
        raise
    return spill.seal(expected_rows)
