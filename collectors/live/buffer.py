"""A bounded FIFO of windows waiting to be sent: when full, the oldest is dropped
(and counted), so a long ingest outage costs old windows, never memory."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """One pulled window: its raw trace and when it was requested and received
    (wall clock, ns since the epoch)."""

    seq: int
    data: bytes
    start_ns: int
    end_ns: int
    note: str = ""


class WindowBuffer:
    """Thread-safe bounded queue of windows; ``dropped`` counts evictions."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the buffer must hold at least one window")
        self.capacity = capacity
        self.dropped = 0
        self._items: deque[Window] = deque()
        self._cond = threading.Condition()

    def put(self, w: Window) -> Window | None:
        """Append ``w``; returns the window dropped to make room, if any."""
        with self._cond:
            evicted = None
            if len(self._items) >= self.capacity:
                evicted = self._items.popleft()
                self.dropped += 1
            self._items.append(w)
            self._cond.notify()
            return evicted

    def peek(self, timeout: float) -> Window | None:
        """The oldest window (left in place), waiting up to ``timeout`` seconds."""
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
            return self._items[0] if self._items else None

    def done(self, w: Window) -> None:
        """Remove ``w`` once sent (unless it was dropped meanwhile)."""
        with self._cond:
            if self._items and self._items[0] is w:
                self._items.popleft()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
