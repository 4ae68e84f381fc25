"""The kernel's write-back of a load's SQLite files, started before the
checkpoint needs them on disk.

A trace load leaves ~300 MB in SQLite's write-ahead log at its commit; the
checkpoint that follows copies it into the database file. With
``synchronous=NORMAL`` nothing is forced to disk before the checkpoint, which
then waits twice: ``fsync`` of the log before the copy (0.18-0.4 s on the
benchmark trace) and of the database file after it (0.13-0.2 s). The disk
idles until then. A thread that asks the kernel every few milliseconds to
start writing back what is dirty (``sync_file_range`` with
``SYNC_FILE_RANGE_WRITE``, which waits for nothing) from the end of the
intervals' insert (the log is then ~90% written; earlier, the write-back
slowed the insert itself) to the end of the checkpoint leaves the two
``fsync`` calls little to wait for. What reaches the disk, and when it is
durable, does not change: the checkpoint's ``fsync`` calls still make it so.
Elsewhere than Linux this does nothing.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ingest.derive.page_cache import start_write_back

#: Seconds between two write-back starts.
EVERY = 0.02


class Writeback:
    """Starts write-back of ``paths`` every :data:`EVERY` seconds on a
    thread, from :meth:`start` until :meth:`stop`, through the file
    descriptors this process already has open on them (SQLite's).

    It never opens or closes the files itself: closing any descriptor of a
    file drops every POSIX lock this process holds on it, SQLite's included
    (fcntl(2)), and another process could then take the database for its
    own (a last connection's checkpoint and log removal while ours still use
    it). A file not open here is skipped; errors are ignored: write-back is
    only a hint.
    """

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths  # none: start() does nothing
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Writeback:
        """Start the thread (once)."""
        if self._thread is None and self.paths and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="sqlite-writeback",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        targets = [str(p.resolve()) for p in self.paths]
        fds: dict[str, int] = {}
        while True:
            for target in targets:
                fd = fds.get(target)
                if fd is None or _fd_path(fd) != target:
                    fd = _open_fd(target)
                    if fd is None:
                        fds.pop(target, None)
                        continue
                    fds[target] = fd
                try:
                    start_write_back(fd)
                except OSError:
                    pass  # closed and reused meanwhile: a hint lost
            if self._stop.wait(EVERY):
                return


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _open_fd(target: str) -> int | None:
    """A descriptor this process has open on ``target`` (Linux's /proc)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for name in names:
        if _fd_path(int(name)) == target:
            return int(name)
    return None


def sqlite_files(database: str | None) -> list[Path]:
    """The write-ahead log and the file of the SQLite database ``database``
    (an Engine URL's database part); none for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return []
    return [Path(database + "-wal"), Path(database)]
