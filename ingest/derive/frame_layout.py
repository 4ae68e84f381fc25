"""The frames' layout: which columns of which tables are kept, what an
interval's kind code means, and where and how a set lies on disk.

Shared by the reader (ingest.derive.frames), the writer
(ingest.derive.frame_writer) and the loader; it imports neither, so the
writer (which the frame store calls to build a missing set) and the store
never import each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.npy import map_npy

Arr = npt.NDArray[Any]

#: Bumped whenever the file layout changes; older files are rebuilt.
LAYOUT_VERSION = "5"

#: Columns stored per table (booleans as 0/1, NULL as -1). A proc run and a
#: syscall are each one goroutine interval: their tables store the interval's
#: ``row`` (its index in ``intervals``) and only what is their own (layout 4;
#: layout 3 stored copies, 443 of the 200 MB busyservice trace's MB); a
#: syscall's outcome as its code in SYSCALL_OUTCOMES (layout 5).
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "intervals": ("rid", "start_ts", "end_ts", "kind", "m", "p", "g", "stack_id", "seq"),
    "proc_runs": ("row",),
    "syscalls": ("row", "start_known", "p_lost", "stolen_ts", "stolen_by_m", "outcome"),
}

#: ``syscalls.outcome``'s codes (ingest.derive.intervals.syscalls; the C
#: virtual table gmpscope_syscall_outcomes has the same list).
SYSCALL_OUTCOMES = ("returned", "blocked", "exited", "unfinished", "other")

#: The columns proc_runs and syscalls read from their interval's row: table
#: column -> intervals column (as the SQL views proc_runs and syscalls do).
ROW_COLUMNS: dict[str, dict[str, str]] = {
    "proc_runs": {"p": "p", "start_ts": "start_ts", "end_ts": "end_ts", "g": "rid", "m": "m",
                  "seq": "seq"},
    "syscalls": {"goid": "rid", "start_ts": "start_ts", "end_ts": "end_ts", "m": "m", "p": "p",
                 "stack_id": "stack_id", "seq": "seq"},
}

#: The loader's name of a stored column, where it differs (ingest.derive.intervals).
LOADER_NAME = {"row": "interval_row", "outcome": "outcome_code"}


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
    int64, ids and flags narrower (:func:`ingest.derive.frame_writer.column_dtype`).

    ``via_row``: columns that are another table's, read at this table's
    ``row`` column (made when first asked for, kept until :meth:`release`);
    ``duration_ns`` is ``end_ts - start_ts`` where it is not stored."""

    columns: dict[str, Arr]
    via_row: dict[str, Arr] = field(default_factory=dict)
    _made: dict[str, Arr] = field(default_factory=dict, repr=False)

    def __getitem__(self, name: str) -> Arr:
        col = self.columns.get(name)
        if col is not None:
            return col
        made = self._made.get(name)
        if made is None:
            if name in self.via_row:
                made = gather_released(self.via_row[name], self.columns["row"])
            elif name == "duration_ns" and "end_ts" in self.via_row:
                made = np.subtract(self["end_ts"], self["start_ts"], dtype=np.int64)
            else:
                raise KeyError(name)
            self._made[name] = made
        return made

    def take(self, name: str, rows: Arr) -> Arr:
        """Column ``name`` at ``rows``, gathered part by part with a mapped
        column's pages handed back (:func:`gather_released`): for rows
        scattered over the whole table. A column read at another table's
        rows is gathered through them, never made whole."""
        if name in self.columns or name in self._made:
            return gather_released(self[name], rows)
        return self._via(name, gather_released(self.columns["row"], rows))

    def _via(self, name: str, at: Arr) -> Arr:
        """Column ``name``, one read at another table's rows, at those rows ``at``."""
        if name in self.via_row:
            return gather_released(self.via_row[name], at)
        if name == "duration_ns" and "end_ts" in self.via_row:
            return np.subtract(self._via("end_ts", at), self._via("start_ts", at),
                               dtype=np.int64)
        raise KeyError(name)

    def part(self, names: tuple[str, ...], a: int, b: int) -> dict[str, Arr]:
        """Columns ``names`` of rows ``a:b``, copied into memory, and the pages
        of the mapped columns they were read from handed back: a whole-table
        scan part by part (:func:`parts`) keeps one part resident, not the
        table."""
        from ingest.derive.cache import release_pages

        out: dict[str, Arr] = {}
        rows: Arr | None = None
        for name in names:
            if name in self.columns or name in self._made:
                out[name] = np.array(self[name][a:b])
            elif name == "duration_ns" and "start_ts" in out and "end_ts" in out:
                out[name] = np.subtract(out["end_ts"], out["start_ts"], dtype=np.int64)
            elif name in self.via_row or name == "duration_ns":
                if rows is None:
                    rows = np.array(self.columns["row"][a:b])
                out[name] = self._via(name, rows)
            else:
                raise KeyError(name)
        for col in (*self.columns.values(), *self.via_row.values()):
            release_pages(col)
        return out

    def release(self) -> None:
        """Drop the columns made from another table's."""
        self._made.clear()

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


#: Rows gathered between two hand-backs of a mapped column's pages.
GATHER_ROWS = 1 << 21
#: Bytes of a mapped column gathered from between two hand-backs, at most,
#: when the rows are in ascending order.
GATHER_SPAN = 64 << 20


def parts(table: Table, names: tuple[str, ...],
          size: int | None = None) -> Iterator[tuple[int, dict[str, Arr]]]:
    """(first row, :meth:`Table.part`) of each ``size`` rows (default
    :data:`GATHER_ROWS`) of ``table``, in order."""
    from ingest.memory import libc

    trim = getattr(libc(), "malloc_trim", None)
    size = size or GATHER_ROWS
    n = len(table)
    for a in range(0, n, size):
        yield a, table.part(names, a, min(n, a + size))
        if trim is not None:
            # What the caller made of the part and let go of goes back to the
            # system (glibc keeps temporaries of up to 32 MB in its heap, between
            # what the caller keeps: 300 MB of a 1 GB trace's scan).
            trim(0)


def gather_released(source: Arr, rows: Arr) -> Arr:
    """``source[rows]``, part by part, the memory-mapped ``source``'s pages
    handed back after each part (ingest.derive.cache.release_pages): rows
    scattered over a whole column (a table's rows into the intervals) would
    otherwise keep every page of it in this process's memory, the
    intervals' seven columns 750 MB on the 200 MB benchmark trace.

    :data:`GATHER_ROWS` rows at a time, and when they are in ascending
    order :data:`GATHER_SPAN` bytes of ``source`` at most (a few million
    rows spread over the whole column touch every page of it: 1.6 GB of
    start and end times on the 1 GB trace)."""
    from ingest.derive.cache import release_pages

    out: Arr = np.empty(len(rows), dtype=source.dtype)
    bounds = [*range(0, len(rows), GATHER_ROWS), len(rows)]
    if len(rows) > 1 and bool(np.all(rows[1:] >= rows[:-1])):
        step = max(1, GATHER_SPAN // max(1, source.itemsize))
        cuts = np.searchsorted(rows, np.arange(step, len(source), step)).tolist()
        bounds = sorted({*bounds, *cuts})
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b > a:
            np.take(source, rows[a:b], out=out[a:b])
            release_pages(source)
    return out


# --------------------------------------------------------------------------
# files: one .npy per column, so that a column can be written chunk by chunk
# (the loader never holds a reordered copy of the trace) and read back
# memory-mapped, zero-copy; ``facts.json``, written last, marks a set complete.


def frame_dir(data_dir: Path, trace_id: int, sha256: str) -> Path:
    """The directory of a trace's frames in the current layout."""
    return data_dir / "frames" / f"{trace_id}-{sha256[:16]}-v{LAYOUT_VERSION}"


def read_tables(d: Path) -> tuple[dict[str, Any], dict[str, Table]] | None:
    """(facts, tables) of the set in directory ``d``, its columns
    memory-mapped; None when the set is incomplete (a column or the facts
    missing, or columns of one table of different lengths)."""
    try:
        facts = json.loads((d / "facts.json").read_text())
        tables: dict[str, Table] = {}
        for name, cols in TABLE_COLUMNS.items():
            arrays = {c: map_npy(d / f"{name}.{c}.npy") for c in cols}
            if len({len(a) for a in arrays.values()}) > 1:
                return None
            tables[name] = Table(arrays)
    except (OSError, ValueError, KeyError):
        return None
    link_rows(tables)
    return facts, tables


def link_rows(tables: dict[str, Table]) -> None:
    """Point proc_runs' and syscalls' interval columns at ``intervals``."""
    iv = tables["intervals"]
    for name, cols in ROW_COLUMNS.items():
        if name in tables:
            tables[name].via_row = {c: iv.columns[src] for c, src in cols.items()}


def kinds_of(facts: dict[str, Any]) -> dict[int, Kind]:
    """The kind codes stored in a set's facts."""
    return {int(k): Kind(*v) for k, v in facts["kinds"].items()}
