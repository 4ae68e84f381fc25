"""The frames' layout: which columns of which tables are kept, what an
interval's kind code means, and where and how a set lies on disk.

Shared by the reader (ingest.derive.frames), the writer
(ingest.derive.frame_writer) and the loader; it imports neither, so the
writer (which the frame store calls to build a missing set) and the store
never import each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[Any]

#: Bumped whenever the file layout changes; older files are rebuilt.
LAYOUT_VERSION = "3"

#: Columns copied per table (booleans as 0/1, NULL as -1).
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "intervals": ("rid", "start_ts", "end_ts", "kind", "m", "p", "g", "stack_id", "seq"),
    "proc_runs": ("p", "start_ts", "end_ts", "g", "m", "seq"),
    "syscalls": ("goid", "start_ts", "end_ts", "duration_ns", "m", "p", "start_known",
                 "p_lost", "stolen_ts", "stolen_by_m", "stack_id", "seq"),
}


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
    int64, ids and flags narrower (:func:`ingest.derive.frame_writer.column_dtype`)."""

    columns: dict[str, Arr]

    def __getitem__(self, name: str) -> Arr:
        return self.columns[name]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


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
            arrays = {c: np.load(d / f"{name}.{c}.npy", mmap_mode="r") for c in cols}
            if len({len(a) for a in arrays.values()}) > 1:
                return None
            tables[name] = Table(arrays)
    except (OSError, ValueError, KeyError):
        return None
    return facts, tables


def kinds_of(facts: dict[str, Any]) -> dict[int, Kind]:
    """The kind codes stored in a set's facts."""
    return {int(k): Kind(*v) for k, v in facts["kinds"].items()}
