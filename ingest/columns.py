"""Read a decoded Parquet directory (docs/schema.md) into compact numpy columns.

Transitions are read row group by row group into preallocated arrays of the
narrowest integer type that holds the values, with state and reason strings
turned into small codes, so that a 5-million-transition trace costs about
30 bytes per transition in memory rather than the ~65 of the Arrow table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

FILES = ("meta.json", "transitions.parquet", "events.parquet", "transition_stacks.parquet",
         "stacks.parquet")
DICT_COLUMNS = ["resource", "from_state", "to_state", "reason"]


@dataclass(frozen=True)
class Gather:
    """A column whose row i is ``values[index[i]]``, taken chunk by chunk when
    written, so that the reordered column never exists whole in memory."""

    values: Arr
    index: Arr


@dataclass(frozen=True)
class Nullable:
    """An integer column with SQL NULL where ``null`` is true."""

    values: Arr
    null: Arr


@dataclass(frozen=True)
class Diff:
    """The column ``a - b`` (int64), made chunk by chunk when written: a frames
    column that is never held whole (a syscall's duration). ``a`` and ``b``
    are arrays or Gather columns of the same length."""

    a: Any
    b: Any

    def __len__(self) -> int:
        return len(self.a.index) if isinstance(self.a, Gather) else len(self.a)


@dataclass(frozen=True)
class Computed:
    """A column made chunk by chunk when written: rows ``a..b-1`` are
    ``chunk(a, b)``, an array of ``b - a`` values; never held whole (the
    intervals' ends)."""

    chunk: Callable[[int, int], Arr]
    n: int

    def __len__(self) -> int:
        return self.n


@dataclass(frozen=True)
class Seq:
    """The column ``start, start + 1, ...`` (row ids), made chunk by chunk."""

    start: int


class ParquetDirError(ValueError):
    """The directory is not a decoded trace as docs/schema.md describes."""


@dataclass
class Transitions:
    """The columns of transitions.parquet; row i is the transition with seq i."""

    ts: I64
    res: Arr  # int8 resource code (models.RESOURCE_CODE)
    rid: Arr
    frm: Arr  # int8 state code (models.STATE_CODE)
    to: Arr
    reason: Arr  # index into ``reasons``: int8 up to 127 reasons, else int16
    m: Arr
    p: Arr  # int16 when every proc id fits (columns.narrow_small), else int32 or int64
    g: Arr
    stack: Arr  # int16 when every stack id fits, else int32 or int64
    reasons: list[str]

    def __len__(self) -> int:
        return len(self.ts)

    def release(self, *names: str) -> None:
        """Free columns no reader needs any more: each becomes an empty
        array of its type (so that a late reader fails on lengths instead of
        reading stale data)."""
        for name in names:
            col = getattr(self, name)
            setattr(self, name, np.zeros(0, dtype=col.dtype))


def read_meta(directory: Path) -> dict[str, Any]:
    """meta.json, after checking that every file of the contract is there."""
    missing = [f for f in FILES if not (directory / f).is_file()]
    if missing:
        raise ParquetDirError(f"{directory}: not a decoded trace directory "
                              f"(missing {', '.join(missing)})")
    try:
        meta: dict[str, Any] = json.loads((directory / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise ParquetDirError(f"{directory}/meta.json: unreadable: {e}") from None
    for key in ("go_version", "family", "first_ts", "last_ts", "events", "transitions",
                "loss"):
        if key not in meta:
            raise ParquetDirError(f"{directory}/meta.json: no {key!r}")
    if str(meta.get("schema_version", "1")) != "1":
        raise ParquetDirError(f"{directory}: schema_version {meta.get('schema_version')} "
                              "is newer than this gmpscope reads (1)")
    return meta


def narrow_ids(a: Arr) -> Arr:
    """The same values in int32 when they fit (ids, stack ids, thread ids);
    ``a`` itself when it is int32 already."""
    if a.dtype == np.int32:
        return a
    return a.astype(np.int32) if fits_int32(a) else a


def reason_codes(codes: Arr, reasons: int) -> Arr:
    """Reason codes in int8 while there are at most 127 reasons (Go has a
    dozen or so), else int16."""
    small = np.int8 if reasons <= 127 else np.int16
    return codes.astype(small, copy=False)


def narrow_small(a: Arr) -> Arr:
    """``a`` in int16 when every value fits, else as it is: the transitions'
    proc ids and stack ids, small in practice (10 MB less each, all through a
    load, for the benchmark trace's 4.9 M transitions)."""
    if a.dtype == np.int16:
        return a
    return a.astype(np.int16) if _fits(a, 16) else a


def fits_int32(a: Arr) -> bool:
    """Whether every value of ``a`` fits in int32 (an empty array does)."""
    return _fits(a, 32)


def _fits(a: Arr, bits: int) -> bool:
    """Whether every value of ``a`` fits in a signed integer of ``bits``."""
    return not len(a) or (int(a.min()) >= -(2 ** (bits - 1)) and int(a.max()) < 2 ** (bits - 1))


def dictionary_lut(dictionary: pa.Array, name: str, table: dict[str, int],
                   grow: bool) -> Arr:
    """int16 code from ``table`` of each string of an Arrow dictionary (the
    table extended with new strings when ``grow``; null counts as "")."""
    names = ["" if v is None else v for v in dictionary.to_pylist()]
    if grow:
        for v in names:
            table.setdefault(v, len(table))
    try:
        lut: Arr = np.array([table[v] for v in names] or [0], dtype=np.int16)
    except KeyError as e:
        raise ParquetDirError(f"transitions.parquet: unknown {name} {e.args[0]!r}") from None
    return lut


def chunk_codes(chunk: pa.Array, name: str, table: dict[str, int], grow: bool) -> Arr:
    """One chunk of a string column of transitions as int16 codes from ``table``
    (extended with new strings when ``grow``; null counts as "")."""
    if not pa.types.is_dictionary(chunk.type):
        chunk = chunk.dictionary_encode()
    lut = dictionary_lut(chunk.dictionary, name, table, grow)
    if chunk.null_count and not grow:
        raise ParquetDirError(f"transitions.parquet: null {name}")
    idx = chunk.indices.fill_null(0).to_numpy() if chunk.null_count else \
        chunk.indices.to_numpy()
    codes: Arr = lut[idx]
    return codes


def iter_table(directory: Path, name: str) -> Iterator[pa.Table]:
    """One of the small files, row group by row group (a big trace's events
    are never one table in memory)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    path = directory / f"{name}.parquet"
    try:
        f = pq.ParquetFile(path)
        for i in range(f.num_row_groups):
            yield f.read_row_group(i)
    except (OSError, pa.ArrowException) as e:
        raise ParquetDirError(f"{path}: unreadable: {e}") from None


def read_table(directory: Path, name: str) -> pa.Table:
    """One of the small files (events, transition_stacks, stacks) as an Arrow table."""
    import pyarrow.parquet as pq

    path = directory / f"{name}.parquet"
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise ParquetDirError(f"{path}: unreadable: {e}") from None
