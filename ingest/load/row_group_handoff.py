"""Row groups handed from the decoding thread to whichever thread is free.

A decode ahead (:mod:`ingest.load.decode_ahead`) runs the C decoder on its own
thread while the caller imports and opens the database; then the caller
waits. Each row group the decoder yields is copied into the transitions'
columns (:class:`ingest.load.transitions_builder.TransitionsBuilder`): ~0.1-0.5 s
on the benchmark trace, much of it the kernel backing the columns' fresh
pages. Done by the decoding thread, that copy sits between one row group's
decode and the next; done by the waiting caller, it runs beside the decode
on the second core. So the decoding thread adds its row groups itself until
the caller calls :meth:`RowGroupHandOff.help`, and from then on only queues
them for the caller.

The copies stay in the decoder's order: one adder at a time takes the queue
from its head. Only the standard library is imported here.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

#: Row groups queued before the decoding thread adds them itself (each is a
#: few MB of Arrow buffers: the queue never holds much).
MAX_QUEUED = 4


class RowGroupHandOff:
    """Row groups passed to ``add`` in the order :meth:`put` is given them,
    by the putting thread or by a helper (:meth:`help`).

    An exception from ``add`` on the helper's side is raised to the putting
    thread at its next :meth:`put` or :meth:`finish`, so the decode stops
    there; the helper returns quietly (the decode's result says what failed).
    """

    def __init__(self) -> None:
        self._add: Callable[[Any], None] | None = None
        self._queue: deque[Any] = deque()
        self._changed = threading.Condition()
        self._adding = threading.Lock()  # one adder at a time, in order
        self._helped = False
        self._closed = False
        self._error: BaseException | None = None

    def bind(self, add: Callable[[Any], None]) -> None:
        """From the decoding thread, before its first :meth:`put`: what adds
        a row group."""
        self._add = add

    def put(self, row_group: Any) -> None:
        """From the decoding thread: one row group, in decoding order."""
        self._raise_helper_error()
        with self._changed:
            self._queue.append(row_group)
            self._changed.notify_all()
            queued = len(self._queue)
        if not self._helped or queued >= MAX_QUEUED:
            self._drain()

    def finish(self) -> None:
        """From the decoding thread, after its last :meth:`put`: every row
        group added (waits for the helper's copy in progress)."""
        try:
            self._drain()
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()
        self._raise_helper_error()

    def close(self) -> None:
        """From the decoding thread when it stops early: the helper returns."""
        with self._changed:
            self._closed = True
            self._queue.clear()
            self._changed.notify_all()

    def help(self) -> None:
        """From a waiting thread: add the row groups queued from now on until
        the decoding thread finishes or closes."""
        with self._changed:
            self._helped = True
        while True:
            with self._changed:
                while not self._queue and not self._closed and self._error is None:
                    self._changed.wait()
                if self._error is not None or (self._closed and not self._queue):
                    return
            try:
                self._drain(helper=True)
            except BaseException:  # noqa: BLE001 - kept for the decoding thread
                return

    def _drain(self, helper: bool = False) -> None:
        with self._adding:
            while True:
                with self._changed:
                    if self._error is not None or not self._queue:
                        return
                    row_group = self._queue.popleft()
                assert self._add is not None, "bind() comes before put()"
                try:
                    self._add(row_group)
                except BaseException as e:
                    if helper:
                        # Recorded before the next adder may look (it holds
                        # no lock yet): the decode stops at its next put or
                        # at its finish, never with a row group missing.
                        with self._changed:
                            self._error = e
                            self._helped = False
                            self._queue.clear()
                            self._changed.notify_all()
                    raise

    def _raise_helper_error(self) -> None:
        with self._changed:
            error, self._error = self._error, None
        if error is not None:
            raise error
