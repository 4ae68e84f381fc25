"""Storing a coded table's rows (ingest.store.coded_models): the view's columns
as the loader derives them, turned into codes, deltas and ``strings`` rows.

Text columns arrive as object arrays (one Python object per distinct value,
shared by the rows). Those made by :func:`coded_text` also carry the codes
they were made from, so that a column of millions of rows is coded without
hashing a string per row (3.7 M metric names: 0.55 s through a dict).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from ingest.columns import Nullable
from ingest.store.bulk import Advance, Col, column_length, insert_columns
from ingest.store.coded_models import CODED, Coded, strings

Arr = npt.NDArray[Any]


class CodedText(np.ndarray):  # type: ignore[type-arg, unused-ignore]
    """An object array of strings whose row i is ``values[codes[i]]`` (None:
    NULL), keeping ``codes`` and ``values``. Readers see the object array; a
    slice or a copy is a plain one (its codes are dropped)."""

    codes: Arr | None
    values: list[str | None]

    def __array_finalize__(self, obj: Any) -> None:
        self.codes = None
        self.values = []


def coded_text(codes: Arr, values: Sequence[str | None]) -> CodedText:
    """The column ``values[codes]`` as a :class:`CodedText`."""
    table = np.empty(len(values), dtype=object)
    table[:] = list(values)
    out = table[codes].view(CodedText)
    out.codes = codes
    out.values = list(values)
    return out


def encode(col: Any) -> tuple[Nullable, list[str]]:
    """A text column as codes (NULL where the value is) into its distinct
    values, the most frequent first (ties by value: the same rows always
    get the same codes)."""
    if isinstance(col, CodedText) and col.codes is not None:
        codes, values = np.asarray(col.codes), col.values
    else:
        items = col.tolist() if isinstance(col, np.ndarray) else list(col)
        index: dict[Any, int] = {}
        codes = np.fromiter((index.setdefault(v, len(index)) for v in items), np.int64,
                            len(items))
        values = list(index)
    counts = np.bincount(codes, minlength=len(values)).tolist() if len(codes) else \
        [0] * len(values)
    total: dict[str, int] = {}
    for v, c in zip(values, counts, strict=True):
        if v is not None and c:
            total[v] = total.get(v, 0) + c
    ordered = sorted(total, key=lambda v: (-total[v], v))
    new = {v: i for i, v in enumerate(ordered)}
    remap = np.array([-1 if v is None else new.get(v, -1) for v in values] or [-1], np.int32)
    coded = remap[codes]
    return Nullable(np.maximum(coded, 0), coded < 0), ordered


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
                   ) -> tuple[dict[str, Col], list[tuple[int, list[str]]]]:
    """The table's columns for the view's ``cols``, and the strings of each
    coded column (strings.source, values in code order)."""
    out: dict[str, Col] = {}
    texts: list[tuple[int, list[str]]] = []
    for name, col in cols.items():
        if name in coded.sources:
            codes, values = encode(col)
            out[coded.stored(name)] = _plain(codes)
            texts.append((coded.sources[name], values))
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
                advance: Advance | None = None) -> int:
    """Insert one trace's rows of the coded view ``view`` (given by the view's
    columns) into its table, and its strings; the rows inserted."""
    coded = CODED[view]
    lengths = [n for n in map(column_length, cols.values()) if n is not None]
    if not lengths or not max(lengths):
        return 0
    table_cols, texts = stored_columns(coded, cols)
    for source, values in texts:
        if values:
            insert_columns(conn, strings, {
                "source": np.full(len(values), source, np.int64),
                "code": np.arange(len(values), dtype=np.int64), "value": values},
                {"trace_id": trace_id})
    return insert_columns(conn, coded.table, table_cols, {"trace_id": trace_id}, advance)
