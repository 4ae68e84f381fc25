"""Arrays kept on the disk while a big trace loads, read back when needed.

A big trace's events, the state-graph edges' dwell times, the proc runs and
the regions' rows are written as they come to one unnamed temporary file each, in the data
directory's ``tmp/`` (:func:`ingest.load.transition_spill.spill_dir`): gone
with the process, even after a kill, and never in memory all at once.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import deque
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


#: Bytes of kept arrays waiting to be written before :meth:`SpillFile.keep`
#: waits for the writer.
MAX_PENDING = 64 << 20


class SpillFile:
    """An unnamed temporary file in ``directory`` (made on the first array
    kept) that arrays are appended to and read back from.

    The writes are made by a thread of the file's own, from its making until
    :meth:`close` (after which nothing is kept): the loader derives its next part while the
    kernel copies the last into the page cache (the 200 MB trace's ~900 MB
    of spilled events, dwells, runs and regions: about a second of the
    loader's thread). A kept array must not change afterwards; at most
    :data:`MAX_PENDING` bytes wait to be written. A failed write (a full
    disk) is raised by the next :meth:`keep` or :meth:`back`."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.prefix = prefix
        self._file: IO[bytes] | None = None
        self._end = 0
        self._pending: deque[tuple[int, Arr]] = deque()
        self._pending_bytes = 0
        self._changed = threading.Condition()
        self._closing = False
        self._error: OSError | None = None
        # Started here, not at the first keep: a writer of a name shared with
        # the database's writers (Thread.start) called from keep() would make
        # every caller of keep look like one to tests/ingest/api's check.
        self._writer = threading.Thread(target=self._write, name=f"gmpscope-{prefix}",
                                        daemon=True)
        self._writer.start()

    def keep(self, a: Arr) -> Spilled:
        """Append ``a`` (written soon, by the file's writer); where it goes."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=self.directory, prefix=self.prefix)
        a = np.ascontiguousarray(a)
        offset = self._end
        self._end += a.nbytes
        with self._changed:
            if self._closing:
                raise OSError(f"{self.prefix}: the spill file is closed")
            while self._pending_bytes > MAX_PENDING and self._error is None:
                self._changed.wait()
            self._raise_error()
            if a.nbytes:
                self._pending.append((offset, a))
                self._pending_bytes += a.nbytes
                self._changed.notify_all()
        return Spilled(offset, a.dtype, len(a))

    def _write(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._closing:
                    self._changed.wait()
                if not self._pending:
                    return
                offset, a = self._pending[0]
            assert self._file is not None  # made before the first array queued
            fd = self._file.fileno()
            try:
                view = a.data.cast("B")
                done = 0
                while done < len(view):
                    done += os.pwrite(fd, view[done:], offset + done)
            except OSError as e:
                with self._changed:
                    self._error = e
                    self._pending.clear()
                    self._pending_bytes = 0
                    self._changed.notify_all()
                return
            with self._changed:
                self._pending.popleft()
                self._pending_bytes -= a.nbytes
                self._changed.notify_all()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise OSError(f"{self.prefix}: a spill write failed: {self._error}") \
                from self._error

    def back(self, part: Spilled, first: int = 0, last: int | None = None) -> Arr:
        """The array written at ``part`` (its rows ``first`` to ``last``),
        once the writer has written what was kept; safe beside other
        threads' calls of it once nothing is being kept."""
        if self._file is None:
            raise OSError(f"{self.prefix}: nothing was spilled")
        with self._changed:
            while self._pending and self._error is None:
                self._changed.wait()
            self._raise_error()
        last = part.rows if last is None else min(last, part.rows)
        count = max(last - first, 0)
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

    def close(self) -> None:
        """Drop the file (what was not read back is gone), its writer ended;
        nothing is kept after."""
        with self._changed:
            self._closing = True
            self._pending.clear()
            self._pending_bytes = 0
            self._changed.notify_all()
        self._writer.join()
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
