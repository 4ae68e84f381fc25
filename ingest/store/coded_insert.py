"""Storing a coded table's rows (ingest.store.coded_models): the view's columns
as the loader derives them, turned into codes, deltas and ``strings`` rows.

Text columns arrive as object arrays (one Python object per distinct value,
shared by the rows). Those made by :func:`coded_text` also carry the codes
they were made from, so that a column of millions of rows is coded without
hashing a string per row (3.7 M metric names: 0.55 s through a dict).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from ingest.columns import Nullable
from ingest.store import pg_coded
from ingest.store.bulk import Advance, Col, column_length, insert_columns
from ingest.store.coded_files import CodedFiles
from ingest.store.coded_models import CODED, Coded, strings

Arr = npt.NDArray[Any]


class CodeBook:
    """The codes one coded column of one trace has given so far: a table stored
    in parts (a big trace's goroutines, bucket by bucket) carries one book per
    coded column from part to part, so that every part codes a value alike
    and each value's ``strings`` row is stored once."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        #: How many of the codes have their strings row stored.
        self.stored = 0

    def new_values(self) -> tuple[int, list[str]]:
        """The values coded since the last call (their strings rows to store),
        in code order, and the first one's code."""
        first = self.stored
        values = list(self.codes)[first:]
        self.stored = len(self.codes)
        return first, values


class CodedText(np.ndarray):  # type: ignore[type-arg, unused-ignore]
    """An object array of strings whose row i is ``values[codes[i]]`` (None:
    NULL), keeping ``codes`` and ``values``, and the :class:`CodeBook` of the
    table's earlier parts when it is a part of one. Readers see the object
    array; a slice or a copy is a plain one (its codes and book are dropped)."""

    codes: Arr | None
    values: list[str | None]
    book: CodeBook | None

    def __array_finalize__(self, obj: Any) -> None:
        self.codes = None
        self.values = []
        self.book = None


def coded_text(codes: Arr, values: Sequence[str | None]) -> CodedText:
    """The column ``values[codes]`` as a :class:`CodedText`."""
    table = np.empty(len(values), dtype=object)
    table[:] = list(values)
    out = table[codes].view(CodedText)
    out.codes = codes
    out.values = list(values)
    return out


def in_book(col: Any, book: CodeBook) -> CodedText:
    """``col`` (a text column) as a part of a table stored in parts, coded
    with ``book``."""
    out = col if isinstance(col, CodedText) else np.asarray(
        col if isinstance(col, np.ndarray) else list(col), dtype=object).view(CodedText)
    out.book = book
    return out


def encode(col: Any, book: CodeBook | None = None) -> tuple[Nullable, CodeBook]:
    """A text column as codes (NULL where the value is NULL): each value's code
    is its order of first appearance among the rows (of this table's earlier
    parts too, through the column's or the given ``book``), so the rows get
    the same codes however the table is cut into parts. The book says which
    values are new (:meth:`CodeBook.new_values`)."""
    if book is None:
        book = col.book if isinstance(col, CodedText) and col.book is not None else CodeBook()
    known = book.codes
    if isinstance(col, CodedText) and col.codes is not None:
        codes = np.asarray(col.codes)
        n = len(codes)
        # Each code's first row: the last of repeated assignments wins
        # (numpy's documented rule), so assign from the last row back.
        first = np.full(max(len(col.values), 1), n, np.int64)
        first[codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
        present = np.flatnonzero(first < n)
        remap = np.full(len(first), -1, np.int32)
        for c in present[np.argsort(first[present], kind="stable")].tolist():
            v = col.values[c]
            if v is not None:
                remap[c] = known.setdefault(v, len(known))
        coded = remap[codes] if n else np.zeros(0, np.int32)
    else:
        items = col.tolist() if isinstance(col, np.ndarray) else list(col)
        coded = np.fromiter((-1 if v is None else known.setdefault(v, len(known))
                             for v in items), np.int32, len(items))
    return Nullable(np.maximum(coded, 0), coded < 0), book


def ints(col: Any) -> Nullable:
    """An integer column (array, Nullable, list of int and None) as a Nullable."""
    if isinstance(col, Nullable):
        return Nullable(np.asarray(col.values, np.int64), np.asarray(col.null, bool))
    if isinstance(col, np.ndarray) and col.dtype != object:
        return Nullable(col.astype(np.int64, copy=False), np.zeros(len(col), bool))
    items = col.tolist() if isinstance(col, np.ndarray) else list(col)
    null = np.fromiter((v is None for v in items), bool, len(items))
    values = np.fromiter((0 if v is None else v for v in items), np.int64, len(items))
    return Nullable(values, null)


def _plain(col: Nullable) -> Nullable | Arr:
    """A Nullable without NULLs as its array (the bulk paths' fastest form)."""
    return col.values if not bool(col.null.any()) else col


def stored_columns(coded: Coded, cols: dict[str, Any]
                   ) -> tuple[dict[str, Col], list[tuple[int, int, list[str]]]]:
    """The table's columns for the view's ``cols``, and the strings of each
    coded column not stored before (strings.source, the first one's code,
    values in code order)."""
    out: dict[str, Col] = {}
    texts: list[tuple[int, int, list[str]]] = []
    for name, col in cols.items():
        if name in coded.sources:
            codes, book = encode(col)
            out[coded.stored(name)] = _plain(codes)
            texts.append((coded.sources[name], *book.new_values()))
        elif name in coded.deltas:
            v, base = ints(col), ints(cols[coded.deltas[name]])
            out[coded.stored(name)] = _plain(
                Nullable(v.values - np.where(base.null, 0, base.values), v.null))
        elif not _all_null(col):  # (a column of NULLs is left to its default)
            out[name] = col
    return out, texts


def _all_null(col: Any) -> bool:
    """Whether every row of a column is NULL (a metric's ``value_str`` on
    every sample of Go's new traces): left out of the insert, the rest of
    the columns are integers, bound as such (PostgreSQL: a binary COPY)."""
    if isinstance(col, Nullable):
        return bool(np.all(col.null))
    if isinstance(col, CodedText) and col.codes is not None:
        none = np.array([v is None for v in col.values] or [True], bool)
        return bool(none[col.codes].all())
    if isinstance(col, np.ndarray) and col.dtype == object or isinstance(col, list):
        return all(v is None for v in col)
    return False


def store_coded(conn: Connection, trace_id: int, view: str, cols: dict[str, Any],
                advance: Advance | None = None, files: CodedFiles | None = None) -> int:
    """Insert one trace's rows of the coded view ``view`` (given by the view's
    columns) into its table, and its strings; the rows inserted. With
    ``files`` (SQLite keeping the trace's intervals in files) the rows of the
    tables kept in files too go there instead (ingest.store.coded_files)."""
    prepared = prepare_coded(view, cols, files)
    if prepared is None:
        return 0
    store_prepared(conn, trace_id, prepared, advance)
    return prepared.rows


@dataclass
class PreparedCoded:
    """One part of a coded view's rows, coded for storing: the strings rows
    it adds, and its table's columns unless they went to files."""

    view: str
    rows: int
    texts: list[tuple[int, int, list[str]]]
    #: None: the rows are kept in files already (ingest.store.coded_files).
    table_cols: dict[str, Col] | None


def prepare_coded(view: str, cols: dict[str, Any],
                  files: CodedFiles | None = None) -> PreparedCoded | None:
    """The part's rows coded (and written to ``files`` where they can be),
    without the database: a forked worker does this (ingest.load.event_side);
    None for a part of no rows."""
    coded = CODED[view]
    lengths = [n for n in map(column_length, cols.values()) if n is not None]
    if not lengths or not max(lengths):
        return None
    n = max(lengths)
    table_cols, texts = stored_columns(coded, cols)
    in_files = files is not None and files.write(coded.table.name, table_cols, n)
    return PreparedCoded(view, n, texts, None if in_files else table_cols)


def store_prepared(conn: Connection, trace_id: int, prepared: PreparedCoded,
                   advance: Advance | None = None) -> None:
    """Insert a prepared part's strings, and its rows unless in files."""
    for source, first, values in prepared.texts:
        if values:
            insert_columns(conn, strings, {
                "source": np.full(len(values), source, np.int64),
                "code": np.arange(first, first + len(values), dtype=np.int64),
                "value": values}, {"trace_id": trace_id})
    n, table_cols = prepared.rows, prepared.table_cols
    if table_cols is None:
        if advance is not None:
            advance(n)
        return
    if conn.dialect.name == "postgresql" and prepared.view in pg_coded.CHUNKED:
        # There the biggest coded tables are chunk rows (ingest.store.pg_coded).
        pg_coded.write_chunks(conn, prepared.view, trace_id, table_cols, n, advance)
        return
    insert_columns(conn, CODED[prepared.view].table, table_cols, {"trace_id": trace_id},
                   advance)
