"""transitions.parquet read whole, one column at a time: the oracle the tests
hold the loader's row-group readers (ingest.load.transitions_builder,
ingest.load.transition_spill) against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from ingest.codes import RESOURCE_CODE, STATE_CODE
from ingest.columns import (
    DICT_COLUMNS,
    ParquetDirError,
    Transitions,
    chunk_codes,
    narrow_ids,
    narrow_small,
    reason_codes,
)

Arr = npt.NDArray[Any]


def _dict_codes(pf: pq.ParquetFile, name: str, table: dict[str, int], n: int,
                grow: bool = False) -> Arr:
    """A dictionary-encoded string column as int16 codes from ``table``
    (extended with new strings when ``grow``; null counts as "")."""
    col = pf.read(columns=[name], use_threads=True).column(0)
    out = np.empty(n, dtype=np.int16)
    pos = 0
    for chunk in col.chunks:
        codes = chunk_codes(chunk, name, table, grow)
        k = len(codes)
        if pos + k > n:
            raise ParquetDirError(f"transitions.parquet: column {name} is longer than {n}")
        out[pos:pos + k] = codes
        pos += k
    if pos != n:
        raise ParquetDirError(f"transitions.parquet: column {name} has {pos} rows, not {n}")
    return out


def read_transitions(directory: Path, expected_rows: int | None = None) -> Transitions:
    """transitions.parquet as compact columns (see :class:`Transitions`)."""
    path = directory / "transitions.parquet"
    try:
        pf = pq.ParquetFile(path, read_dictionary=DICT_COLUMNS)
    except (OSError, pa.ArrowException) as e:
        raise ParquetDirError(f"{path}: unreadable: {e}") from None
    n = pf.metadata.num_rows
    if expected_rows is not None and n != expected_rows:
        raise ParquetDirError(f"{path}: {n} rows but meta.json says {expected_rows}")
    missing = {"ts", "id", "m", "p", "g", "stack_id", *DICT_COLUMNS} - set(pf.schema_arrow.names)
    if missing:
        raise ParquetDirError(f"{path}: missing columns {sorted(missing)}")
    # One column at a time (multi-threaded over row groups): peak memory is one
    # Arrow column plus the compact arrays, not the whole Arrow table.
    try:
        ints: dict[str, Arr] = {}
        for name in ("ts", "id", "m", "p", "g", "stack_id"):
            col = pf.read(columns=[name], use_threads=True).column(0)
            if col.null_count:
                raise ParquetDirError(f"{path}: null {name}")
            arr = col.to_numpy()
            del col
            ints[name] = arr if name == "ts" else narrow_ids(arr)
            del arr
            # Arrow's allocator keeps freed buffers for reuse; hand them back
            # column by column so that the peak holds one Arrow column.
            pa.default_memory_pool().release_unused()
        res = _dict_codes(pf, "resource", RESOURCE_CODE, n)
        frm = _dict_codes(pf, "from_state", STATE_CODE, n)
        to = _dict_codes(pf, "to_state", STATE_CODE, n)
        reasons: dict[str, int] = {}
        reason = _dict_codes(pf, "reason", reasons, n, grow=True)
    except pa.ArrowException as e:
        raise ParquetDirError(f"{path}: unreadable: {e}") from None
    # Arrow's allocator keeps freed column buffers for reuse; hand them back.
    pa.default_memory_pool().release_unused()
    for name, a in (("ts", ints["ts"]), ("resource", res)):
        if len(a) != n:
            raise ParquetDirError(f"{path}: column {name} has {len(a)} rows, not {n}")
    if len(reasons) > 32767:
        raise ParquetDirError(f"{path}: too many distinct reasons ({len(reasons)})")
    return Transitions(
        ts=ints["ts"], res=res.astype(np.int8), rid=ints["id"], frm=frm.astype(np.int8),
        to=to.astype(np.int8), reason=reason_codes(reason, len(reasons)), m=ints["m"],
        p=narrow_small(ints.pop("p")),
        g=ints["g"], stack=narrow_small(ints.pop("stack_id")), reasons=list(reasons),
    )
