"""Arrays kept on the disk while a big trace loads, read back when needed.

A big trace's events, the state-graph edges' dwell times and the proc runs
are written as they come to one unnamed temporary file each, in the data
directory's ``tmp/`` (:func:`ingest.load.transition_spill.spill_dir`): gone
with the process, even after a kill, and never in memory all at once.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[Any]


@dataclass(frozen=True)
class Spilled:
    """Where an array was written: its offset, type and length."""

    offset: int
    dtype: np.dtype[Any]
    rows: int


class SpillFile:
    """An unnamed temporary file in ``directory`` (made on the first array
    kept) that arrays are appended to and read back from."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.prefix = prefix
        self._file: IO[bytes] | None = None

    def keep(self, a: Arr) -> Spilled:
        """Append ``a``; where it went."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=self.directory, prefix=self.prefix)
        offset = self._file.seek(0, os.SEEK_END)
        self._file.write(np.ascontiguousarray(a).data)
        return Spilled(offset, a.dtype, len(a))

    def back(self, part: Spilled) -> Arr:
        """The array written at ``part``."""
        if self._file is None:
            raise OSError(f"{self.prefix}: nothing was spilled")
        self._file.flush()
        self._file.seek(part.offset)
        out = np.fromfile(self._file, dtype=part.dtype, count=part.rows)
        if len(out) != part.rows:
            raise OSError(f"{self.prefix}: the spill file is shorter than written")
        return out

    def close(self) -> None:
        """Drop the file (what was not read back is gone)."""
        if self._file is not None:
            self._file.close()
            self._file = None
