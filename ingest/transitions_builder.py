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
from ingest.columns import ParquetDirError, Transitions, chunk_codes, fits_int32

Arr = npt.NDArray[Any]

_INTS = ("ts", "id", "m", "p", "g", "stack_id")
_CODES = {"resource": RESOURCE_CODE, "from_state": STATE_CODE, "to_state": STATE_CODE}


class TransitionsBuilder:
    """Add the decoder's transitions row groups with :meth:`add`, then
    :meth:`finish` for the :class:`~ingest.columns.Transitions`."""

    def __init__(self) -> None:
        self._ints: dict[str, list[Arr]] = {name: [] for name in _INTS}
        self._wide: set[str] = set()  # columns with a value outside int32
        self._codes: dict[str, list[Arr]] = {name: [] for name in (*_CODES, "reason")}
        self._reasons: dict[str, int] = {}
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        """Keep one row group (its Arrow buffers are not held)."""
        for name in _INTS:
            col = table.column(name)
            if col.null_count:
                raise ParquetDirError(f"transitions: null {name}")
            a = np.asarray(col.to_numpy(), dtype=np.int64)
            if name != "ts" and name not in self._wide and fits_int32(a):
                a = a.astype(np.int32)
            else:
                if name != "ts":
                    self._wide.add(name)
                a = a.copy()  # not a view of the decoder's buffer
            self._ints[name].append(a)
        for name, codes in _CODES.items():
            for chunk in table.column(name).chunks:
                self._codes[name].append(chunk_codes(chunk, name, codes, False).astype(np.int8))
        for chunk in table.column("reason").chunks:
            self._codes["reason"].append(chunk_codes(chunk, "reason", self._reasons, True))
        self.rows += table.num_rows

    def finish(self, expected_rows: int) -> Transitions:
        """The columns; raises ParquetDirError when they disagree with meta.json."""
        if self.rows != expected_rows:
            raise ParquetDirError(f"transitions: {self.rows} rows but meta.json says "
                                  f"{expected_rows}")
        if len(self._reasons) > 32767:
            raise ParquetDirError(f"transitions: too many distinct reasons "
                                  f"({len(self._reasons)})")
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
            to=codes["to_state"], reason=codes["reason"].astype(np.int16), m=ints["m"],
            p=ints["p"], g=ints["g"], stack=ints["stack_id"], reasons=list(self._reasons))
