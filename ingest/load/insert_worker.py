"""One thread that runs a load's inserts while the loader derives the next table.

SQLite and psycopg release the GIL while they store rows, and the loader's
derivations are mostly numpy, so the two overlap on a second core instead of
taking turns. The transaction's connection is used by this thread alone
between the first :meth:`InsertWorker.submit` and :meth:`InsertWorker.close`:
the caller must not touch it meanwhile.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType


class InsertWorker:
    """Runs submitted inserts in order on one thread, one at a time.

    Each job holds its table's columns in memory until it is stored. With
    ``ahead_bytes`` 0, :meth:`submit` waits until the job before is done: one
    table is stored while the next is derived, never more. Otherwise the
    loader runs ahead: :meth:`submit` waits only while the jobs not yet done
    and the new one hold more than ``ahead_bytes`` of columns (as their
    ``nbytes`` say), so that a run of tables slow to store (the events')
    overlaps the derivations after it that store little (the transitions'
    buckets) instead of the loader waiting for each. A failure stops the
    worker; it is raised in the caller by the next :meth:`submit` or by
    :meth:`close`.
    """

    def __init__(self, ahead_bytes: int = 0) -> None:
        self.ahead_bytes = ahead_bytes
        self._queue: queue.Queue[tuple[Callable[[], object], int] | None] = queue.Queue()
        self._changed = threading.Condition()
        self._pending = 0  # jobs submitted and not yet done
        self._pending_bytes = 0
        self._error: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="insert-worker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            job, nbytes = item
            del item
            if self._error is None and not self._stop:
                try:
                    job()
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    self._error = e
            del job
            with self._changed:
                self._pending -= 1
                self._pending_bytes -= nbytes
                self._changed.notify_all()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, job: Callable[[], object], nbytes: int = 0) -> None:
        """Run ``job`` (holding ``nbytes`` of columns) on the worker after
        those before it; waits while that would hold too much (see the class)."""
        with self._changed:
            while (self._pending and self._error is None
                   and self._pending_bytes + nbytes > self.ahead_bytes):
                self._changed.wait()
            self._check()
            self._pending += 1
            self._pending_bytes += nbytes
        self._queue.put((job, nbytes))

    def wait_idle(self) -> None:
        """Wait until every job submitted is done; raise a failure."""
        with self._changed:
            while self._pending and self._error is None:
                self._changed.wait()
        self._check()

    def close(self) -> None:
        """Wait for every queued job; raise the first failure."""
        self._join()
        self._check()

    def _join(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def __enter__(self) -> InsertWorker:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is not None:
            # The caller failed: drop what is queued, and wait until the
            # connection is free again before the transaction rolls back.
            self._stop = True
            self._join()
        else:
            self.close()
