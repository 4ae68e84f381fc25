"""The coded tables' rows kept in column files on SQLite.

A 200 MB trace has 3.3 M metric samples, 1.5 M logs, 3.8 M regions, 0.7 M
goroutines, 0.7 M tasks and 0.3 M ranges. As SQLite b-tree rows they were most
of the load's insert worker (the metrics, logs and regions alone 6.5 s of CPU
beside the derivations: bench/RESULTS.md), however they were fed. When a trace
keeps its intervals in files (ingest.store.interval_files), the coded tables'
rows (``strings`` aside) are kept as column files in the same directory: one
set per part the loader stores, ``<table>.<part>.<column>.npy`` (each column in
the narrowest integer type that holds it, the rows in key order), listed in
``coded_files`` and read by SQL through the C extension's keyed virtual tables
``gmpscope_<table>`` (ingest/csrc/filetables.h). The view ``<table>_all`` is
the table's rows UNION ALL the files' (:func:`views`); the six coded views
(``metrics``, ``goroutines``, ...) and gmpscope's readers
(``ingest.store.coded_models.Coded.rows``) read it. PostgreSQL, and SQLite
without the extension, keep rows.

A part the files cannot hold as it is stays rows: text in a column the files
keep no text for (an old trace's metric ``value_str``), a NULL in a column
they keep none for, a key twice; and a part of fewer than MIN_PART_ROWS rows.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, func, select

from ingest.columns import Nullable
from ingest.npy import save_npy
from ingest.store.coded_models import CODED, FILE_TABLES, coded_files

Arr = npt.NDArray[Any]

#: Columns the files hold no values of (ALWAYS_NULL): a part with one stays rows.
ALWAYS_NULL: dict[str, frozenset[str]] = {"metric_rows": frozenset({"value_str"})}
#: Columns whose NULL the files keep as the stored type's lowest value
#: (filetables.h: NULL_IF_MIN): the table's nullable ones; in the others a part
#: with a NULL stays rows.
NULLABLE: dict[str, frozenset[str]] = {
    c.table.name: frozenset(col.name for col in c.table.columns if col.nullable)
    - ALWAYS_NULL.get(c.table.name, frozenset())
    for c in CODED.values() if c.table.name in FILE_TABLES}

_INTS = (np.int8, np.int16, np.int32, np.int64)

#: A part of fewer rows stays rows: as files it would cost a file and a flush
#: to the disk per column for a handful of rows (a test's parts of 3 rows made
#: thousands; a real load's parts are of up to two million).
MIN_PART_ROWS = 256

#: The coded views over the tables kept in files.
_VIEW_OF = {c.table.name: name for name, c in CODED.items() if c.table.name in FILE_TABLES}


def vtab(table: str) -> str:
    """The virtual table of ``table``'s rows kept in files."""
    return f"gmpscope_{table}"


def views(files: bool) -> dict[str, str]:
    """The views over the tables kept in files, in the order they are made:
    each ``<table>_all`` (with ``files``, SQLite with the extension: the rows
    UNION ALL the files'), then the coded views reading it."""
    out: dict[str, str] = {}
    for table in FILE_TABLES:
        cols = ", ".join(c.name for c in CODED[_VIEW_OF[table]].table.columns)
        rows = f"SELECT {cols} FROM {table}"
        out[f"{table}_all"] = f"{rows} UNION ALL SELECT {cols} FROM {vtab(table)}" \
            if files else rows
    for table in FILE_TABLES:
        view = _VIEW_OF[table]
        out[view] = CODED[view].select_sql(f"{table}_all")
    return out


def rows_in_files(conn: Connection, table: str, trace_id: int) -> int:
    """How many of the trace's rows of ``table`` are kept in files (from the
    listing: counted through the virtual table, SQLite would step every row)."""
    if table not in FILE_TABLES:
        return 0
    f = coded_files
    return int(conn.execute(select(func.coalesce(func.sum(f.c.rows), 0)).where(
        f.c.trace_id == trace_id, f.c.table_name == table)).scalar_one())


def _narrowest(values: Arr, null: Arr | None) -> Arr | None:
    """``values`` in the narrowest integer type that holds them, NULLs
    (``null``) as its lowest value, which no value may then be; None where
    no type can."""
    kept = values if null is None else values[~null]
    lo = int(kept.min()) if len(kept) else 0
    hi = int(kept.max()) if len(kept) else 0
    for t in _INTS:
        info = np.iinfo(t)
        if (lo > info.min if null is not None else lo >= info.min) and hi <= info.max:
            out = values.astype(t)
            if null is not None:
                out[null] = info.min
            return out
    return None


def part_columns(table: str, cols: dict[str, Any], n: int) -> dict[str, Arr] | None:
    """The files' columns of one part of ``table``'s rows (its stored columns,
    ingest.store.coded_insert.stored_columns), or None where the files
    cannot hold them."""
    key = FILE_TABLES[table]
    out: dict[str, Arr] = {}
    for c in CODED[_VIEW_OF[table]].table.columns:
        name = c.name
        if name == "trace_id":
            continue
        col = cols.get(name)
        if name in ALWAYS_NULL.get(table, ()):
            if col is not None:
                return None  # a value the files keep none of
            continue
        nullable = name in NULLABLE[table]
        if col is None:  # every row NULL (stored_columns leaves it out)
            if not nullable:
                return None
            out[name] = np.full(n, np.iinfo(np.int8).min, np.int8)
            continue
        null: Arr | None = None
        if isinstance(col, Nullable):
            values, null = np.asarray(col.values), np.asarray(col.null, bool)
            if null.any() and not nullable:
                return None
        elif isinstance(col, np.ndarray | list):
            values = np.asarray(col)  # a list: of bools or ints (NULL makes it objects)
        else:
            return None
        if values.dtype.kind not in "iub" or len(values) != n:
            return None
        if nullable and null is None:
            null = np.zeros(n, bool)  # its type's lowest value kept free all the same
        stored = _narrowest(values.astype(np.int64, copy=False), null if nullable else None)
        if stored is None:
            return None
        out[name] = stored
    k = out[key].astype(np.int64, copy=False)
    if n and bool(np.any(k[1:] <= k[:-1])):
        # The files' bisection needs the keys ascending (a table's rows have no
        # order but their key's): tasks come in order of first appearance.
        order = np.argsort(k, kind="stable")
        k = k[order]
        if bool(np.any(k[1:] == k[:-1])):
            return None  # a key twice: not a table's rows
        out = {name: values[order] for name, values in out.items()}
    return out


@dataclass
class Part:
    """One part kept in files: its listing row's values."""

    table: str
    part: int
    first_key: int
    last_key: int
    rows: int


@dataclass
class CodedFiles:
    """A load's coded rows kept in files: written to a staging directory as
    the insert worker stores each part, linked into the trace's interval
    directory by :meth:`files` before the commit that lists them."""

    staging: Path
    parts: list[Part] = field(default_factory=list)

    @classmethod
    def under(cls, data_dir: Path, root: str) -> CodedFiles:
        """A sink staging under ``data_dir/root`` (the interval directories'
        root: a killed load's staging is swept with their orphans)."""
        return cls(data_dir / root / f".staging-coded-{uuid.uuid4().hex}")

    def write(self, table: str, cols: dict[str, Any], n: int) -> bool:
        """Keep one part of ``table``'s rows (its stored columns) in files,
        flushed to the disk; False when the files cannot hold it (it is then
        the caller's to store as rows)."""
        if table not in FILE_TABLES or n < max(MIN_PART_ROWS, 1):
            return False
        out = part_columns(table, cols, n)
        if out is None:
            return False
        mine = [p for p in self.parts if p.table == table]
        key = out[FILE_TABLES[table]]
        first, last = int(key[0]), int(key[-1])
        if mine and first <= mine[-1].last_key:
            return False  # the parts of a trace must follow each other
        part = len(mine)
        self.staging.mkdir(parents=True, exist_ok=True)
        for name, values in out.items():
            save_npy(self.staging / f"{table}.{part}.{name}.npy", values, durable=True)
        self.parts.append(Part(table, part, first, last, n))
        return True

    def files(self) -> list[Path]:
        """Every file written (to be linked into the trace's directory)."""
        return sorted(self.staging.glob("*.npy")) if self.parts else []

    def listing(self, trace_id: int, directory: str) -> list[dict[str, Any]]:
        """``coded_files``' rows for the parts written."""
        return [{"trace_id": trace_id, "table_name": p.table, "part": p.part,
                 "first_key": p.first_key, "last_key": p.last_key, "rows": p.rows,
                 "directory": directory} for p in self.parts]

    def remove(self) -> None:
        """The staging goes (after the files are linked, or the load failed)."""
        shutil.rmtree(self.staging, ignore_errors=True)


__all__ = ["ALWAYS_NULL", "NULLABLE", "CodedFiles", "Part", "coded_files", "part_columns",
           "rows_in_files", "views", "vtab"]
