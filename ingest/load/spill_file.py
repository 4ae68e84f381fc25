"""Arrays kept on the disk while a big trace loads, read back when needed.

A big trace's events, the state-graph edges' dwell times, the proc runs and
the regions' rows are written as they come to one unnamed temporary file each, in the data
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

    def back(self, part: Spilled, first: int = 0, last: int | None = None) -> Arr:
        """The array written at ``part`` (its rows ``first`` to ``last``); safe
        beside other threads' calls of it once nothing is being kept."""
        if self._file is None:
            raise OSError(f"{self.prefix}: nothing was spilled")
        last = part.rows if last is None else min(last, part.rows)
        count = max(last - first, 0)
        self._file.flush()
        # pread at the offset, not a seek and a read: threads may read back
        # parts of one file at once.
        out = np.empty(count, part.dtype)
        view = out.data.cast("B")
        at, fd = part.offset + first * part.dtype.itemsize, self._file.fileno()
        done = 0
        while done < len(view):
            n = os.preadv(fd, [view[done:]], at + done)
            if n <= 0:
                raise OSError(f"{self.prefix}: the spill file is shorter than written")
            done += n
        return out

    def flush(self) -> None:
        """Every array kept written out of this process's buffers (before a
        fork: a child and its parent would each write what is buffered)."""
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Drop the file (what was not read back is gone)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class KeptColumns:
    """Whole columns made one at a time and read back a range of rows at a
    time: in a spill file when there is a ``directory`` (a big trace's table
    is then never in memory whole), else in memory."""

    def __init__(self, directory: Path | None, prefix: str) -> None:
        self._file = SpillFile(directory, prefix) if directory is not None else None
        self._cols: dict[str, Arr | Spilled] = {}

    def keep(self, name: str, a: Arr) -> None:
        self._cols[name] = a if self._file is None else self._file.keep(a)

    def rows(self, name: str, first: int, last: int) -> Arr:
        col = self._cols[name]
        if isinstance(col, Spilled):
            assert self._file is not None
            return self._file.back(col, first, last)
        return col[first:last]

    def close(self) -> None:
        self._cols.clear()
        if self._file is not None:
            self._file.close()
