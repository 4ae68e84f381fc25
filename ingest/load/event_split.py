"""A trace's events, split by the table they become, as their row groups arrive.

The decoder hands over events in row groups of one wide table (21 columns, most
of them empty for any one kind). Kept whole, the 12.6 M events of a 200 MB trace
took 2 GB as an Arrow table with plain string columns. :class:`EventParts`
instead keeps, per target table (ranges, tasks, regions, logs, metrics, other
events), only that table's kinds and columns: numbers as numpy arrays, strings
as 32-bit codes into one list of distinct values per column (region and metric
names repeat millions of times). The threads' table needs only each M's first
and last event time, which is folded in per row group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from ingest.extensions import optional_extension
from ingest.load.spill_file import Spilled, SpillFile

Arr = npt.NDArray[Any]

#: Kinds stored in other_events (the rest have tables of their own).
OTHER_KINDS = ("Sync", "Label", "StackSample", "Experimental")

#: Target table -> (the event kinds it is made of, the event columns it reads).
TARGETS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ranges": (("RangeBegin", "RangeActive", "RangeEnd"),
               ("kind", "ts", "m", "p", "g", "stack_id", "name", "scope", "scope_id",
                "attrs")),
    "tasks": (("TaskBegin", "TaskEnd"),
              ("kind", "ts", "g", "name", "task_id", "parent_task_id")),
    "regions": (("RegionBegin", "RegionEnd"),
                ("kind", "ts", "g", "name", "task_id", "stack_id")),
    "logs": (("Log",), ("seq", "ts", "g", "task_id", "category", "message", "stack_id")),
    "metrics": (("Metric",), ("seq", "ts", "name", "value", "value_str")),
    "other_events": (OTHER_KINDS,
                     ("seq", "kind", "ts", "m", "p", "g", "stack_id", "name", "scope",
                      "scope_id", "attrs", "sync_n", "clock_trace_ns", "clock_mono_ns",
                      "clock_wall_ns")),
}


#: Events read back at a time by :meth:`EventParts.gather` (8 M: 64 MB of a
#: 64-bit column; the 200 MB benchmark trace's 7.5 M regions events are one).
GATHER_ROWS = 1 << 23

#: The string columns of the events (docs/schema.md, events.parquet).
TEXT_COLUMNS = frozenset({"kind", "name", "value_str", "scope", "attrs", "category",
                          "message"})


@dataclass
class Texts:
    """A string column as codes into ``values``; code 0 is NULL."""

    codes: Arr  # int32
    values: list[str | None]

    def objects(self, null: str | None = None) -> Arr:
        """The column as an object array (one Python object per distinct
        value, shared by the rows), NULL as ``null``."""
        table = np.array([null, *self.values[1:]], dtype=object)
        return table[self.codes]


@dataclass
class Column:
    """A numeric column: values (NULL as 0) and where they are NULL (None: nowhere)."""

    values: Arr
    null: Arr | None = None

    def nulls(self) -> Arr:
        return self.null if self.null is not None else np.zeros(len(self.values), bool)


@dataclass
class EventTable:
    """One target's events in decode order: its columns by name."""

    rows: int
    cols: dict[str, Column | Texts]

    def num(self, name: str) -> Column:
        col = self.cols[name]
        assert isinstance(col, Column), name
        return col

    def text(self, name: str) -> Texts:
        col = self.cols[name]
        assert isinstance(col, Texts), name
        return col


@dataclass
class _Target:
    kinds: tuple[str, ...]
    columns: tuple[str, ...]
    parts: dict[str, list[Arr | Spilled]] = field(default_factory=dict)
    nulls: dict[str, list[Arr | Spilled | None]] = field(default_factory=dict)
    rows: int = 0


class EventParts:
    """Accumulates events row group by row group (:meth:`add`), split by target
    table; :meth:`table` hands one target over (and forgets it).

    With ``spill_dir`` (a big trace: ingest.load.transition_spill.spill_dir)
    the parts go to an unnamed temporary file there as they come, and a
    target's are read back when it is handed over: memory then holds one
    target's events, not every target's."""

    def __init__(self, spill_dir: Path | None = None) -> None:
        self._spill = SpillFile(spill_dir, "events-") if spill_dir is not None else None
        self._targets = {name: _Target(kinds, cols) for name, (kinds, cols) in TARGETS.items()}
        # Per string column (target, column): distinct value -> code (0: NULL).
        self._dicts: dict[tuple[str, str], dict[str | None, int]] = {}
        # Per index column of the C decoder's groups: index -> code (-1: not met).
        self._luts: dict[tuple[str, str], Arr] = {}
        self._m_first: dict[int, int] = {}
        self._m_last: dict[int, int] = {}
        self.rows = 0
        # A row group's threads in one call holding the GIL, where built
        # (ingest/csrc/columnappend.c: why so little work is done in C).
        self._c = optional_extension("ingest.load._columnappend")

    def add(self, chunk: pa.Table) -> None:
        """Take in one row group of events (kind as a string or dictionary column)."""
        n = chunk.num_rows
        if not n:
            return
        self.rows += n
        kind = chunk.column("kind").combine_chunks()
        if not pa.types.is_dictionary(kind.type):
            kind = pc.dictionary_encode(kind)
        names = kind.dictionary.to_pylist()
        codes = kind.indices.to_numpy(zero_copy_only=False)
        self._fold_threads(chunk)
        for tname, target in self._targets.items():
            wanted = [i for i, k in enumerate(names) if k in target.kinds]
            if not wanted:
                continue
            lut = np.zeros(len(names), dtype=bool)
            lut[wanted] = True
            rows = np.flatnonzero(lut[codes])
            if not len(rows):
                continue
            self._take(tname, target, chunk.select(list(target.columns)).take(pa.array(rows)))

    def add_group(self, index: int, table: pa.Table, strings: Sequence[str]) -> None:
        """Take in one row group of the events of one target alone: target
        ``index`` in :data:`TARGETS`' order, decoded apart (:func:`groups`);
        its int32 text columns index ``strings`` (the C decoder's
        ``event_strings``)."""
        if not table.num_rows:
            return
        self.rows += table.num_rows
        self._fold_threads(table)
        tname = list(TARGETS)[index]
        self._take(tname, self._targets[tname], table, strings)

    def _take(self, tname: str, target: _Target, sub: pa.Table,
              strings: Sequence[str] = ()) -> None:
        """The target's columns of ``sub`` (its rows only), kept."""
        target.rows += sub.num_rows
        for cname in target.columns:
            col = sub.column(cname).combine_chunks()
            if cname in TEXT_COLUMNS:
                arr, null = (self._id_codes(tname, cname, col, strings)
                             if pa.types.is_integer(col.type)
                             else self._codes(tname, cname, col)), None
            else:
                null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count \
                    else None
                arr = _narrow(col.fill_null(0).to_numpy() if col.null_count
                              else col.to_numpy())
            target.parts.setdefault(cname, []).append(self._keep(arr))
            target.nulls.setdefault(cname, []).append(
                None if null is None else self._keep(null))

    @property
    def spill_dir(self) -> Path | None:
        """Where the events are spilled (None: kept in memory)."""
        return self._spill.directory if self._spill is not None else None

    def _keep(self, a: Arr) -> Arr | Spilled:
        """``a`` itself, or where it was written when spilling."""
        return a if self._spill is None else self._spill.keep(a)

    def _back(self, part: Arr | Spilled) -> Arr:
        if not isinstance(part, Spilled):
            return part
        assert self._spill is not None
        return self._spill.back(part)

    def flush(self) -> None:
        """The spill file's buffers written out (before a fork)."""
        if self._spill is not None:
            self._spill.flush()

    def close(self) -> None:
        """Drop the spill file (what was not handed over is gone)."""
        if self._spill is not None:
            self._spill.close()

    def _codes(self, tname: str, cname: str, col: pa.Array) -> Arr:
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        known = self._dicts.setdefault((tname, cname), {None: 0})
        local = np.array([known.setdefault(v, len(known))
                          for v in col.dictionary.to_pylist()], dtype=np.int32)
        # The narrowest codes for the values known so far (kinds and names:
        # 8 bits); parts joined later take the widest of their types.
        local = local.astype(_code_type(len(known)))
        idx = col.indices
        if idx.null_count:
            null = idx.is_null().to_numpy(zero_copy_only=False)
            out = local[idx.fill_null(0).to_numpy()] if len(local) else \
                np.zeros(len(idx), np.int8)
            out[null] = 0
            return out
        return local[idx.to_numpy()] if len(local) else np.zeros(len(idx), np.int8)

    def _id_codes(self, tname: str, cname: str, col: pa.Array,
                  strings: Sequence[str]) -> Arr:
        """As :meth:`_codes`, for a column of indices into ``strings`` (null:
        NULL): each index met for the first time is looked up once, in the
        order of its first row, so the codes are those :meth:`_codes` gives."""
        known = self._dicts.setdefault((tname, cname), {None: 0})
        lut = self._luts.get((tname, cname))
        if lut is None or len(lut) < len(strings):
            # Grown by half at least: the strings grow a little at a time.
            grown = np.full(max(len(strings), 3 * len(lut) // 2 if lut is not None else 1024),
                            -1, np.int32)
            if lut is not None:
                grown[:len(lut)] = lut
            self._luts[(tname, cname)] = lut = grown
        null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
        at = (col.fill_null(0) if null is not None else col).to_numpy()
        codes = lut[at]
        new = codes < 0
        if null is not None:
            new &= ~null
        if new.any():
            first, rows = np.unique(at[new], return_index=True)
            for i in first[np.argsort(rows, kind="stable")].tolist():
                lut[i] = known.setdefault(strings[i], len(known))
            codes = lut[at]
        out: Arr = codes.astype(_code_type(len(known)))
        if null is not None:
            out[null] = 0
        return out

    def _fold_threads(self, chunk: pa.Table) -> None:
        m = chunk.column("m")
        if m.null_count:
            m = m.fill_null(-1)
        m_arr = m.to_numpy()
        ts = chunk.column("ts").to_numpy()
        if self._c is not None and m_arr.dtype in (np.int32, np.int64) \
                and ts.dtype == np.int64:
            ids, _, _, low, high = self._c.thread_spans(np.ascontiguousarray(m_arr),
                                                        np.ascontiguousarray(ts))
            for mm, a, b in zip(ids, low, high, strict=True):
                self._m_first[mm] = min(a, self._m_first.get(mm, a))
                self._m_last[mm] = max(b, self._m_last.get(mm, b))
            return
        has = m_arr >= 0
        if not has.any():
            return
        m_arr, ts = m_arr[has], ts[has]
        order = np.argsort(m_arr, kind="stable")
        ms, tss = m_arr[order], ts[order]
        starts = np.flatnonzero(np.r_[True, ms[1:] != ms[:-1]])
        lo = np.minimum.reduceat(tss, starts)
        hi = np.maximum.reduceat(tss, starts)
        for mm, a, b in zip(ms[starts].tolist(), lo.tolist(), hi.tolist(), strict=True):
            self._m_first[mm] = min(a, self._m_first.get(mm, a))
            self._m_last[mm] = max(b, self._m_last.get(mm, b))

    def table(self, name: str, columns: Iterable[str] | None = None) -> EventTable:
        """The events of target ``name``, in decode order, with ``columns`` (all
        by default): the columns taken are forgotten here, the others can be
        taken later (a big table a few columns at a time)."""
        target = self._targets[name]
        cols: dict[str, Column | Texts] = {}
        wanted = tuple(target.columns if columns is None else columns)
        for cname in wanted:
            if cname not in target.columns:
                raise KeyError(f"{name} has no column {cname}")
            parts = [self._back(p) for p in target.parts.pop(cname, [])]
            nulls = [None if x is None else self._back(x) for x in target.nulls.pop(cname, [])]
            values = self._values(name, cname) if cname in TEXT_COLUMNS else None
            cols[cname] = _column(parts, nulls, values)
        rows = target.rows
        if not any(target.parts.values()) and not any(target.nulls.values()):
            target.rows = 0  # every column taken
        return EventTable(rows, _filled(cols, rows))

    def gather(self, name: str, cname: str, at: Arr, *, ascending: bool = False,
               chunk_rows: int | None = None) -> Column:
        """Numeric column ``cname`` of target ``name`` at the event rows ``at``
        (``table(name, (cname,)).num(cname)`` taken at ``at``), its parts read
        back about ``chunk_rows`` events at a time: a big target's column is
        never whole in memory, nor read back twice at once (a part and the
        column joined). ``ascending``: ``at`` is sorted (each chunk's rows are
        then a slice of it). The column stays here until :meth:`forget`."""
        chunk_rows = GATHER_ROWS if chunk_rows is None else chunk_rows
        target = self._targets[name]
        parts = target.parts.get(cname, [])
        nulls = target.nulls.get(cname, [])
        if not parts:
            return Column(np.zeros(len(at), np.int64))
        dtypes = [p.dtype for p in parts]
        dtype = np.dtype(np.uint64) if np.dtype(np.uint64) in dtypes else np.result_type(*dtypes)
        out = np.empty(len(at), dtype)
        null = np.zeros(len(at), bool) if any(x is not None for x in nulls) else None
        sizes = [p.rows if isinstance(p, Spilled) else len(p) for p in parts]
        total = sum(sizes)
        lo = i = 0
        while i < len(parts):
            j, n = i + 1, sizes[i]
            while j < len(parts) and n + sizes[j] <= chunk_rows:
                n += sizes[j]
                j += 1
            values = _join([self._back(p) for p in parts[i:j]], dtype).astype(dtype, copy=False)
            hi = lo + n
            sel: slice | Arr
            if ascending:
                a, b = np.searchsorted(at, [lo, hi]).tolist()
                sel, idx = slice(a, b), at[a:b] - lo
            elif lo == 0 and hi == total:
                sel, idx = slice(None), at
            else:
                sel = np.flatnonzero((at >= lo) & (at < hi))
                idx = at[sel] - lo
            out[sel] = values[idx]
            del values
            if null is not None:
                chunk = [self._back(x) if x is not None else np.zeros(k, bool)
                         for x, k in zip(nulls[i:j], sizes[i:j], strict=True)]
                null[sel] = np.concatenate(chunk)[idx]
            lo, i = hi, j
        return Column(out, null)

    def forget(self, name: str, cname: str) -> None:
        """Drop column ``cname`` of target ``name`` (as :meth:`table` does
        once it has handed it over)."""
        target = self._targets[name]
        target.parts.pop(cname, None)
        target.nulls.pop(cname, None)
        if not any(target.parts.values()) and not any(target.nulls.values()):
            target.rows = 0

    def slices(self, name: str, rows: int) -> Iterator[EventTable]:
        """The events of target ``name`` with every column, ``rows`` at a time
        in decode order (a big table never whole in memory); the target is
        forgotten as they go. Text columns keep the whole target's values; a
        target with no events gives one empty slice."""
        target = self._targets[name]
        if not target.rows:
            yield self.table(name)
            return
        values = {c: self._values(name, c) for c in target.columns if c in TEXT_COLUMNS}
        first = target.parts.get(target.columns[0], [])
        sizes = [p.rows if isinstance(p, Spilled) else len(p) for p in first]
        bounds = np.r_[0, np.cumsum(sizes, dtype=np.int64)]
        total = int(bounds[-1])
        for lo in range(0, total, max(rows, 1)):
            hi = min(lo + rows, total)
            # The parts the slice reaches into, and where in each.
            a = int(np.searchsorted(bounds, lo, side="right")) - 1
            b = int(np.searchsorted(bounds, hi, side="left"))
            cut = [(i, max(lo - int(bounds[i]), 0), min(hi, int(bounds[i + 1])) - int(bounds[i]))
                   for i in range(a, b)]
            cols: dict[str, Column | Texts] = {}
            for cname in target.columns:
                ps, ns = target.parts.get(cname, []), target.nulls.get(cname, [])
                parts = [self._back(ps[i])[x:y] for i, x, y in cut]
                nulls = [self._cut(ns[i], x, y) for i, x, y in cut]
                cols[cname] = _column(parts, nulls, values.get(cname))
            yield EventTable(hi - lo, _filled(cols, hi - lo))
        target.parts.clear()
        target.nulls.clear()
        target.rows = 0

    def _cut(self, part: Arr | Spilled | None, lo: int, hi: int) -> Arr | None:
        return None if part is None else self._back(part)[lo:hi]

    def _values(self, name: str, cname: str) -> list[str | None]:
        """A text column's distinct values by code (forgotten here)."""
        known = self._dicts.pop((name, cname), {None: 0})
        values: list[str | None] = [None] * len(known)
        for v, c in known.items():
            values[c] = v
        return values

    def thread_times(self) -> tuple[Arr, Arr]:
        """(m, ts) pairs: each M's first and last event time, as the threads'
        summary merges them (ingest.derive.intervals.thread_summaries)."""
        ms = np.array(list(self._m_first) + list(self._m_last), dtype=np.int64)
        ts = np.array(list(self._m_first.values()) + list(self._m_last.values()),
                      dtype=np.int64)
        return ms, ts


def groups() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """What a decoder that splits events by kind writes for each target, in
    :data:`TARGETS`' order (:meth:`EventParts.add_group` takes its row
    groups): the target's kinds, and its columns with ``m`` and ``ts`` (each
    M's first and last event time are folded in from every event)."""
    return [(kinds, tuple(dict.fromkeys((*columns, "m", "ts"))))
            for kinds, columns in TARGETS.values()]


def _code_type(n: int) -> Any:
    """The narrowest signed type that holds codes below ``n``."""
    return np.int8 if n <= 2**7 else np.int16 if n <= 2**15 else np.int32


#: Go's NoTask, the largest uint64: -1 in a narrowed task id column (and -1
#: read back as uint64 is NoTask again).
_NO_TASK = np.uint64(2**64 - 1)


def _narrow(values: Arr) -> Arr:
    """64-bit values in 32 bits when they fit (goroutine, stack, P and M ids,
    task ids with NoTask as -1; not times): joined parts take the widest type
    again if one needs it."""
    if not len(values):
        return values
    if values.dtype == np.int64:
        if -2**31 <= int(values.min()) and int(values.max()) < 2**31:
            return values.astype(np.int32)
    elif values.dtype == np.uint64:
        rest = values[values != _NO_TASK]
        if not len(rest) or int(rest.max()) < 2**31:
            out = values.astype(np.int64)
            out[values == _NO_TASK] = -1
            return out.astype(np.int32)
    return values


def _join(parts: list[Arr], dtype: Any) -> Arr:
    if not parts:
        return np.zeros(0, dtype)
    if len(parts) == 1:
        return parts[0]
    if any(p.dtype == np.uint64 for p in parts):
        # A narrowed part (NoTask as -1) beside a whole one: numpy would join
        # int32 and uint64 as float64; back to uint64 (-1 is NoTask again).
        parts = [p.astype(np.uint64) for p in parts]
    return np.concatenate(parts)


def _column(parts: list[Arr], nulls: list[Arr | None],
            values: list[str | None] | None) -> Column | Texts:
    """One column from its parts: codes into ``values`` for a text column."""
    if values is not None:
        return Texts(_join(parts, np.int32), values)
    if not parts:
        return Column(np.zeros(0, np.int64))
    joined = _join(parts, parts[0].dtype)
    null = None
    if any(x is not None for x in nulls):
        null = np.concatenate([x if x is not None else np.zeros(len(p), bool)
                               for x, p in zip(nulls, parts, strict=True)])
    return Column(joined, null)


def _filled(cols: dict[str, Column | Texts], rows: int) -> dict[str, Column | Texts]:
    """``cols`` with a column of a target with no rows made ``rows`` long."""
    for cname, col in cols.items():
        if isinstance(col, Column) and len(col.values) != rows:
            cols[cname] = Column(np.zeros(rows, np.int64))
        elif isinstance(col, Texts) and len(col.codes) != rows:
            cols[cname] = Texts(np.zeros(rows, np.int32), [None])
    return cols


def split_events(chunks: Iterable[pa.Table] | pa.Table,
                 spill_dir: Path | None = None) -> EventParts:
    """:class:`EventParts` of a whole events table (or its row groups)."""
    parts = EventParts(spill_dir)
    if isinstance(chunks, pa.Table):
        chunks = chunks.to_batches(max_chunksize=65536)
        chunks = (pa.Table.from_batches([b]) for b in chunks)
    for chunk in chunks:
        parts.add(chunk)
    return parts
