"""Files written once and not read again soon: their pages leave the page
cache as soon as they are on disk.

A load writes ~500 MB of frames and lane sets that its own process does not
read back (the views read them later, a window at a time). Left in the page
cache they cost twice: every new page of cache is memory the kernel must find
(on this project's virtual machines, ~3 ms of system time per MB written to
new files, against ~0.6 ms when the same pages are written back and dropped as
they go and so reused), and they push out pages that are read again. So, as
databases do with their write-once files (PostgreSQL's ``*_flush_after``,
RocksDB's ``bytes_per_sync``), each window of a file starts its write-back as
soon as it is written (``sync_file_range``), and the window before it, by
then on disk, is dropped (``posix_fadvise(POSIX_FADV_DONTNEED)``). The data
is the same; only where it is kept changes. Elsewhere than Linux the files are
written plainly.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ingest.memory import libc

#: Bytes between two write-back starts: large enough for the disk to see big
#: writes, small enough that the dirty pages stay few.
WINDOW = 16 << 20

_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4

#: The first bytes of each file stay in the page cache: a frame file's .npy
#: header is read whenever its frames are mapped (``np.load``), and the
#: first mapping after a load is on the loader's own path. With the headers
#: dropped too, that read waited for the disk (~3.5 ms a file, 0.1 s for the
#: benchmark trace's 27 frame files); kept, they take a page each.
KEEP_HEAD = 4096


@functools.cache
def _sync_file_range() -> Any:
    if not sys.platform.startswith("linux") or not hasattr(os, "posix_fadvise"):
        return None
    c = libc()
    fn = getattr(c, "sync_file_range", None) if c is not None else None
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def start_write_back(fd: int) -> None:
    """Ask the kernel to start writing the file's dirty pages to disk, without
    waiting for them (``sync_file_range(SYNC_FILE_RANGE_WRITE)``; nothing
    elsewhere than Linux). Raises OSError as the call fails."""
    sfr = _sync_file_range()
    if sfr is not None and sfr(fd, 0, 0, _WRITE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class DroppingFile:
    """A new file written front to back whose written pages are sent to disk
    and dropped from the page cache window by window (see the module).

    ``write`` and ``close`` raise OSError as plain writes do (a full disk:
    ENOSPC). Use as a context manager; a file that fails is left as it is, for
    the caller to remove.
    """

    def __init__(self, path: Path, wait: bool = True) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        # wait=False: never wait for the disk; what is not written back yet
        # when it would be dropped stays in the page cache (the kernel writes
        # it back and frees it later, as for a plain write).
        self._wait = _WAIT_BEFORE | _WRITE | _WAIT_AFTER if wait else _WRITE
        self.offset = 0
        self._started = 0  # write-back started for [0, _started)
        self._dropped = 0  # on disk and dropped: [0, _dropped)
        self._sfr = _sync_file_range()

    def write(self, data: Any) -> int:
        """Write all of ``data`` (any buffer); returns its length in bytes."""
        view = memoryview(data).cast("B")
        n = len(view)
        done = 0
        while done < n:
            done += os.write(self.fd, view[done:done + (1 << 30)])
        self.offset += n
        if self._sfr is not None and self.offset - self._started >= WINDOW:
            self._window()
        return n

    def _window(self) -> None:
        # The previous window has had a whole window's writing to reach the
        # disk: wait for what is left of it, drop it, then start this one.
        if self._started > self._dropped:
            self._sync(self._dropped, self._started - self._dropped, self._wait)
            self._drop(self._dropped, self._started)
            self._dropped = self._started
        self._sync(self._started, self.offset - self._started, _WRITE)
        self._started = self.offset

    def _drop(self, start: int, end: int) -> None:
        start = max(start, KEEP_HEAD)
        if end > start:
            os.posix_fadvise(self.fd, start, end - start, os.POSIX_FADV_DONTNEED)

    def _sync(self, offset: int, length: int, flags: int) -> None:
        if self._sfr(self.fd, offset, length, flags) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def close(self) -> None:
        """Write back and drop what is left, then close the file."""
        if self.fd < 0:
            return
        try:
            if self._sfr is not None and self.offset > self._dropped:
                self._sync(self._dropped, self.offset - self._dropped, self._wait)
                self._drop(0, self.offset)
        finally:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> DroppingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def save_npy(path: Path, array: np.ndarray[Any, Any], wait: bool = True) -> None:
    """``np.save(path, array)`` through a :class:`DroppingFile` (same bytes:
    the .npy header, then the array in C order); ``wait`` as DroppingFile's."""
    array = np.ascontiguousarray(array)
    with DroppingFile(path, wait) as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
                "shape": array.shape})
        flat = array.reshape(-1).view(np.uint8)
        for a in range(0, len(flat), WINDOW):
            f.write(flat[a:a + WINDOW])
