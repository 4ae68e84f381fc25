"""Transitions as compact columns, built from row groups as the decoder yields them.

The in-memory counterpart of :func:`ingest.columns.read_transitions`: when a raw
trace is ingested with the C decoder, its transitions go straight from the
decoder's Arrow row groups into the same compact arrays (ids in 32 bits where
every value fits, states and reasons as small codes), with no Parquet file
written and read back in between. Same values, same types, same errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from ingest.codes import RESOURCE_CODE, STATE_CODE
from ingest.columns import (
    ParquetDirError,
    Transitions,
    chunk_codes,
    dictionary_lut,
    fits_int32,
    narrow_small,
    reason_codes,
)
from ingest.extensions import optional_extension

Arr = npt.NDArray[Any]

_INTS = ("ts", "id", "m", "p", "g", "stack_id")
_CODES = {"resource": RESOURCE_CODE, "from_state": STATE_CODE, "to_state": STATE_CODE}


class TransitionsBuilder:
    """Add the decoder's transitions row groups with :meth:`add`, then
    :meth:`finish` for the :class:`~ingest.columns.Transitions`.

    ``capacity``: rows to make room for up front. While the row groups fit,
    each goes straight into its place in columns of that length (only the
    pages written are ever in memory, and no column is joined from parts at
    the end: that took 80-120 MB and 0.05-0.2 s on the benchmark trace);
    past it, and with no capacity, the row groups are kept as parts and
    joined by :meth:`finish`.
    """

    def __init__(self, capacity: int = 0) -> None:
        self._ints: dict[str, list[Arr]] = {name: [] for name in _INTS}
        self._wide: set[str] = set()  # columns with a value outside int32
        self._codes: dict[str, list[Arr]] = {name: [] for name in (*_CODES, "reason")}
        self._reasons: dict[str, int] = {}
        self.rows = 0
        self._c = optional_extension("ingest.load._columnappend")
        # The columns filled in place, while the rows fit (None: as parts).
        self._cols: dict[str, Arr] | None = None
        if capacity > 0 and self._c is not None:
            try:
                self._cols = {name: np.empty(capacity, np.int64 if name == "ts" else np.int32)
                              for name in _INTS}
                self._cols.update({name: np.empty(capacity, np.int8) for name in _CODES})
                self._cols["reason"] = np.empty(capacity, np.int16)
            except MemoryError:
                # Room the system will not promise (a huge trace, strict
                # overcommit): the row groups go as parts instead.
                self._cols = None

    def add(self, table: pa.Table) -> None:
        """Keep one row group (its Arrow buffers are not held)."""
        for name in _INTS:
            if table.column(name).null_count:
                raise ParquetDirError(f"transitions: null {name}")
        if self._cols is not None and self.rows + table.num_rows > len(self._cols["ts"]):
            self._to_parts()
        if self._cols is not None:
            self._add_in_place(table)
        else:
            self._add_parts(table)
        self.rows += table.num_rows

    def _add_parts(self, table: pa.Table) -> None:
        for name in _INTS:
            for chunk in table.column(name).chunks:  # no nulls: views of the decoder's buffers
                self._ints[name].append(self._int_part(name, chunk.to_numpy()))
        for name, codes in _CODES.items():
            for chunk in table.column(name).chunks:
                self._codes[name].append(self._code_part(chunk, name, codes, False, np.int8))
        for chunk in table.column("reason").chunks:
            self._codes["reason"].append(
                self._code_part(chunk, "reason", self._reasons, True, np.int16))

    def _add_in_place(self, table: pa.Table) -> None:
        assert self._cols is not None and self._c is not None
        for name in _INTS:
            at = self.rows
            for chunk in table.column(name).chunks:
                src = chunk.to_numpy()
                if src.dtype != np.int64:
                    src = src.astype(np.int64)
                k = len(src)
                if not self._c.narrow_into(src, self._cols[name][at:at + k]):
                    self._widen(name)  # a value outside int32: this column in 64 bits
                    self._c.narrow_into(src, self._cols[name][at:at + k])
                at += k
        for name in (*_CODES, "reason"):
            at = self.rows
            codes, grow = (self._reasons, True) if name == "reason" else (_CODES[name], False)
            out = self._cols[name]
            for chunk in table.column(name).chunks:
                k = len(chunk)
                out[at:at + k] = self._code_part(chunk, name, codes, grow, out.dtype.type)
                at += k

    def _widen(self, name: str) -> None:
        assert self._cols is not None
        narrow = self._cols[name]
        wide = np.empty(len(narrow), np.int64)
        wide[:self.rows] = narrow[:self.rows]
        self._cols[name] = wide
        self._wide.add(name)

    def _to_parts(self) -> None:
        """Past the capacity: what is filled becomes the first part of each
        column, and the row groups go on as parts."""
        assert self._cols is not None
        cols, self._cols = self._cols, None
        for name, col in cols.items():
            parts = self._ints[name] if name in self._ints else self._codes[name]
            parts.append(col[:self.rows])  # a view: joined by finish()

    def _int_part(self, name: str, src: Arr) -> Arr:
        """A row group's int64 column in 32 bits while the whole column fits,
        never a view of the decoder's buffer."""
        narrow = name != "ts" and name not in self._wide
        if self._c is not None and src.dtype == np.int64:
            if narrow:
                out = np.empty(len(src), np.int32)
                if self._c.narrow_into(src, out):
                    return out
                self._wide.add(name)
            out = np.empty(len(src), np.int64)
            self._c.narrow_into(src, out)
            return out
        a = np.asarray(src, dtype=np.int64)
        if narrow and fits_int32(a):
            return a.astype(np.int32)
        if name != "ts":
            self._wide.add(name)
        return a.copy()

    def _code_part(self, chunk: pa.Array, name: str, table: dict[str, int], grow: bool,
                   small: type[np.signedinteger[Any]]) -> Arr:
        """A row group's string column as codes from ``table`` (chunk_codes)."""
        if (self._c is None or chunk.null_count or not pa.types.is_dictionary(chunk.type)
                or chunk.indices.type != pa.int32()):
            return chunk_codes(chunk, name, table, grow).astype(small)
        lut = dictionary_lut(chunk.dictionary, name, table, grow).astype(small)
        out = np.empty(len(chunk), small)
        self._c.codes_into(chunk.indices.to_numpy(), lut, out)
        return out

    def check(self, expected_rows: int) -> None:
        """Raise ParquetDirError when the rows disagree with meta.json's count
        or the reasons are too many to code."""
        if self.rows != expected_rows:
            raise ParquetDirError(f"transitions: {self.rows} rows but meta.json says "
                                  f"{expected_rows}")
        if len(self._reasons) > 32767:
            raise ParquetDirError(f"transitions: too many distinct reasons "
                                  f"({len(self._reasons)})")

    def finish(self, expected_rows: int) -> Transitions:
        """The columns; raises ParquetDirError when they disagree with meta.json."""
        self.check(expected_rows)
        if self._cols is not None:
            cols, self._cols = self._cols, None
            for col in cols.values():
                # Cut to the rows written, in place (realloc; no view of it
                # exists): the room after them, though never written, shares
                # its last huge page with them (numpy asks for huge pages).
                col.resize(self.rows, refcheck=False)
            return Transitions(
                ts=cols["ts"], res=cols["resource"], rid=cols["id"], frm=cols["from_state"],
                to=cols["to_state"], reason=reason_codes(cols.pop("reason"), len(self._reasons)),
                m=cols["m"],
                p=narrow_small(cols.pop("p")), g=cols["g"],
                stack=narrow_small(cols.pop("stack_id")), reasons=list(self._reasons))
        ints: dict[str, Arr] = {}
        for name, parts in self._ints.items():
            wide = name == "ts" or name in self._wide
            dtype: type[np.signedinteger[Any]] = np.int64 if wide else np.int32
            ints[name] = (np.concatenate([p.astype(dtype, copy=False) for p in parts])
                          if parts else np.zeros(0, dtype))
            parts.clear()
        codes: dict[str, Arr] = {}
        for name, parts in self._codes.items():
            small: type[np.signedinteger[Any]] = np.int16 if name == "reason" else np.int8
            codes[name] = np.concatenate(parts) if parts else np.zeros(0, small)
            parts.clear()
        return Transitions(
            ts=ints["ts"], res=codes["resource"], rid=ints["id"], frm=codes["from_state"],
            to=codes["to_state"],
            reason=reason_codes(codes["reason"].astype(np.int16), len(self._reasons)), m=ints["m"],
            p=narrow_small(ints.pop("p")), g=ints["g"], stack=narrow_small(ints.pop("stack_id")),
            reasons=list(self._reasons))
