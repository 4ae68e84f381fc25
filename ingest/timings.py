"""Where one load's time went: seconds per phase, for `gmpscope ingest --json`
and bench/ingest.py.

Phases may overlap (the inserts run on the insert worker while the next table
is derived), so the seconds add up to more than the wall time; ``load`` is
the whole load after decoding.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Timings:
    """Seconds per named phase; adding is safe from several threads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as (part of) phase ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def timed(self, name: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)``, timed as phase ``name``."""
        with self.phase(name):
            return fn(*args)

    def each(self, name: str, items: Iterable[T]) -> Iterator[T]:
        """``items``, the time spent producing each one counted as ``name``."""
        it = iter(items)
        while True:
            start = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.add(name, time.perf_counter() - start)
            yield item
            # Not held while the next item is made: a loader's table would
            # stay in memory through the next table's derivation.
            del item

    def as_dict(self) -> dict[str, float]:
        """Phase -> seconds (rounded to ms), in the order the phases began."""
        with self._lock:
            return {k: round(v, 3) for k, v in self.seconds.items()}
