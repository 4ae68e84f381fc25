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

    :meth:`submit` waits until the previous job is done: one table is stored
    while the next is derived, never more (each holds its columns in memory
    until stored). A failure stops the worker; it is raised in the caller by
    the next :meth:`submit` or by :meth:`close`.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._idle = threading.Semaphore(1)
        self._error: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="insert-worker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            if self._error is None and not self._stop:
                try:
                    job()
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    self._error = e
            del job
            self._idle.release()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job`` on the worker once the previous one is done."""
        self._idle.acquire()
        self._check()
        self._queue.put(job)

    def wait_idle(self) -> None:
        """Wait until the job in progress is done; raise its failure."""
        self._idle.acquire()
        self._idle.release()
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
