"""Per-thread cursors over a generation's event batches, and the min-heap
(by next event time) that merges them.

The heap is kept exactly as Go keeps it (same sift rules, same tie
behaviour), because the slot layout decides which thread is tried first
when timestamps are equal.
"""

from __future__ import annotations

from typing import Any

from collectors.gotrace.v2.specs import TIMED_NARGS
from collectors.gotrace.v2.wire import Batch

_BIG = 9.223372036854775807e18
_I64_MIN = -(1 << 63)


class CursorError(Exception):
    """A malformed event inside a batch."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def ns(t: int, freq: float) -> int:
    """Raw timestamp -> ns, truncating the float64 product as Go does."""
    x = t * freq
    if x < _BIG:
        return int(x)
    # Out of int64 range (or NaN/Inf): amd64 conversion yields MinInt64.
    return _I64_MIN


class Cursor:
    """Reads the events of one thread's batches in order."""

    __slots__ = ("m", "batches", "idx", "off", "last", "ev", "data", "end", "base", "evoff")

    def __init__(self, m: int, batches: list[Batch]) -> None:
        self.m = m
        self.batches = batches
        self.idx = -1
        self.off = 0
        self.last = 0
        self.data = b""
        self.end = 0
        self.base = 0  # file offset of the current batch payload
        self.evoff = -1  # file offset of the event in ``ev``
        # [type, time, a0, a1, a2, a3] of the event at the head of this cursor.
        self.ev: list[Any] = [0, 0, 0, 0, 0, 0]

    def _load(self) -> bool:
        """Move to the next batch that still has data (times restart there)."""
        batches = self.batches
        idx = self.idx
        while True:
            idx += 1
            if idx >= len(batches):
                self.idx = len(batches)
                self.data, self.end, self.off = b"", 0, 0
                return False
            b = batches[idx]
            if b.data:
                self.idx = idx
                self.data, self.end, self.off, self.base = b.data, len(b.data), 0, b.data_offset
                self.last = 0
                return True

    def next(self, freq: float) -> bool:
        """Load the next event into ``ev``; False when there are no more."""
        pos = self.off
        if pos >= self.end:
            if not self._load():
                return False
            pos = 0
        if self.last == 0:
            self.last = ns(self.batches[self.idx].time, freq)
        data = self.data
        end = self.end
        typ = data[pos]
        nargs = TIMED_NARGS[typ]
        if nargs < 0:
            if nargs == -1:
                raise CursorError(self.base + pos, f"found invalid event type: {typ}")
            raise CursorError(self.base + pos, f"found event without a timestamp: type={typ}")
        pos += 1
        ev = self.ev
        ev[0] = typ
        for k in range(1, nargs + 1):
            if pos >= end:
                raise self._bad(pos, k)
            x = data[pos]
            pos += 1
            if x >= 0x80:
                x &= 0x7F
                s = 7
                i = 1
                while True:
                    if pos >= end:
                        raise self._bad(pos, k)
                    c = data[pos]
                    pos += 1
                    if i == 9 and c > 1:
                        raise self._bad(pos, k)
                    if c < 0x80:
                        x |= c << s
                        break
                    x |= (c & 0x7F) << s
                    s += 7
                    i += 1
            ev[k] = x
        # ev[1] held the raw delta; turn it into an absolute ns time.
        t = ev[1] * freq
        t = (int(t) if t < _BIG else _I64_MIN) + self.last
        ev[1] = t
        self.last = t
        self.evoff = self.base + self.off
        self.off = pos
        return True

    def _bad(self, pos: int, k: int) -> CursorError:
        return CursorError(
            self.base + pos,
            "found invalid uvarint for timestamp" if k == 1 else "found invalid uvarint",
        )

    def offset(self) -> int:
        """File offset of the event at the head of this cursor (for error reports)."""
        return self.evoff


def _sift_up(h: list[Cursor], i: int) -> int:
    while i > 0:
        parent = (i - 1) // 2
        if h[parent].ev[1] > h[i].ev[1]:
            h[parent], h[i] = h[i], h[parent]
            i = parent
        else:
            break
    return i


def _sift_down(h: list[Cursor], i: int) -> None:
    n = len(h)
    while True:
        best = i
        if i < n:
            bt = h[i].ev[1]
        else:
            bt = 1 << 63  # larger than any time
        for j in (2 * i + 1, 2 * i + 2):
            if j < n:
                t = h[j].ev[1]
                if t < bt:
                    bt = t
                    best = j
        if best == i:
            return
        h[i], h[best] = h[best], h[i]
        i = best


def heap_insert(h: list[Cursor], c: Cursor) -> None:
    h.append(c)
    _sift_up(h, len(h) - 1)


def heap_update(h: list[Cursor], i: int) -> None:
    if _sift_up(h, i) == i:
        _sift_down(h, i)


def heap_remove(h: list[Cursor], i: int) -> None:
    # Bubble the slot to the root regardless of times, then drop it.
    while i > 0:
        parent = (i - 1) // 2
        h[parent], h[i] = h[i], h[parent]
        i = parent
    h[0], h[-1] = h[-1], h[0]
    h.pop()
    _sift_down(h, 0)
