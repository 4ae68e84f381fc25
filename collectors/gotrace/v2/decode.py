"""Driver for the new trace family: reads generations one after another,
merges the per-thread batches through the ordering state machine and yields
events in exactly the order Go's ``trace.Reader`` returns them, including
the Sync event that starts every generation and the one that ends the trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import ClockSnapshot, Event, Loss, StackTable, TraceInfo
from collectors.gotrace.v2.cursor import (
    Cursor,
    CursorError,
    heap_insert,
    heap_remove,
    heap_update,
    ns,
)
from collectors.gotrace.v2.events import Resolver, to_event
from collectors.gotrace.v2.generation import (
    Generation,
    SpillState,
    TableEOF,
    read_generation_marked,
    read_generation_spill,
)
from collectors.gotrace.v2.gosort import go_sort
from collectors.gotrace.v2.order import OrderError
from collectors.gotrace.v2.order_misc import Ordering
from collectors.gotrace.v2.wire import EndOfTrace, WireError, read_batch

_HEADER_LEN = 16


class _Failure(Exception):
    """Decoding must stop here (Go's reader would return this error)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def decode_v2(
    data: memoryview, version: str, stacks: StackTable, info: TraceInfo
) -> Iterator[Event]:
    """Yield the events of a Go 1.22+ trace (``data`` includes the header).

    Yields exactly what Go's reader returns before it stops. When Go would
    stop with an error: if at least one generation was yielded completely,
    the damage is recorded in ``info.loss`` and iteration ends normally;
    otherwise TraceFormatError is raised. ``info.generations`` counts the
    generations yielded completely.
    """
    dec = _Decoder(data, version, stacks, info)
    try:
        yield from dec.run()
    except _Failure as f:
        if dec.completed == 0:
            raise TraceFormatError(f.offset, f.reason) from None
        info.loss = Loss(
            bytes_lost=max(0, len(data) - dec.lost_from),
            generations_lost=_count_generations(data, dec.lost_from),
            error=f.reason,
            offset=f.offset,
        )
    info.generations = dec.completed


def _count_generations(data: memoryview, pos: int) -> int:
    """Best-effort count of the generations in the undecoded tail (at least 1)."""
    gens: set[int] = set()
    try:
        while True:
            _, gen, pos = read_batch(data, pos)
            if gen:
                gens.add(gen)
    except (EndOfTrace, WireError):
        pass
    return max(1, len(gens))


class _Decoder:
    """State of one decoding run (Go's Reader for v2 traces)."""

    def __init__(self, data: memoryview, version: str, stacks: StackTable, info: TraceInfo) -> None:
        self.data = data
        self.version = version
        self.info = info
        self.resolver = Resolver(stacks)
        self.order = Ordering(version)
        self.pos = _HEADER_LEN
        self.gen: Generation | None = None
        self.frontier: list[Cursor] = []
        self.samples: list[tuple[int, int, int, int, int]] = []
        self.si = 0
        self.syncs = 0
        self.last_ts = 0
        self.completed = 0  # generations whose events were all yielded
        self.lost_from = _HEADER_LEN  # file offset of the first generation not yet complete
        self.spill = SpillState()
        self.spill_err_sync = False
        self.read_err: WireError | None = None
        self.done = False

    # ------------------------------------------------------------ emission

    def _ts(self, t: int) -> int:
        # Go forces strictly increasing times across all emitted events.
        if t <= self.last_ts:
            t = self.last_ts + 1
        self.last_ts = t
        return t

    def _sync(self, g: Generation | None, t: int) -> Event:
        self.syncs += 1
        clock = None
        if g is not None and g.has_clock:
            wall = _as_i64(g.snap_sec) * 1_000_000_000 + _as_i64(g.snap_nsec)
            clock = ClockSnapshot(ns(g.snap_time, g.freq), g.snap_mono, wall)
        return Event("Sync", self._ts(t), n=self.syncs, clock=clock)

    def _queued(self, q: tuple[Any, ...]) -> Event:
        try:
            return to_event(q, self._ts(q[1]), self.resolver)
        except OrderError as e:
            raise _Failure(-1, str(e)) from None

    def _sample(self, s: tuple[int, int, int, int, int]) -> Event:
        g = self.gen
        assert g is not None
        try:
            stk = self.resolver.stack(g, s[4])
        except OrderError as e:
            raise _Failure(-1, f"CPU sample: {e}") from None
        return Event("StackSample", self._ts(s[0]), s[1], s[2], s[3], stk)

    # ------------------------------------------------------------ generations

    def _install(self, g: Generation) -> Event:
        self.gen = g
        self.lost_from = g.start
        if self.info.ticks_per_sec == 0:
            self.info.ticks_per_sec = g.ticks_per_sec
        freq = g.freq
        samples = [(ns(t, freq), m, p, gid, stk) for (t, m, p, gid, stk) in g.samples]
        go_sort(samples, _sample_time)
        self.samples = samples
        self.si = 0
        for m in g.batch_ms:
            c = Cursor(m, g.batches[m])
            if not self._next(c, freq):
                continue
            heap_insert(self.frontier, c)
        return self._sync(g, ns(g.min_ts, freq))

    def _next(self, c: Cursor, freq: float) -> bool:
        try:
            return c.next(freq)
        except CursorError as e:
            raise _Failure(e.offset, e.reason) from None

    def _refresh(self) -> Event | None:
        """Move to the next generation: the Sync event to yield, or None at the end."""
        if self.gen is not None:
            self.completed += 1
            self.lost_from = self.gen.end
        if self.version < "1.26":
            return self._refresh_spill()
        if self.read_err is not None:
            self._stored_error(self.read_err)
            return None
        try:
            g, self.pos = read_generation_marked(self.data, self.pos, self.version)
        except WireError as e:
            self.read_err = e
            self.gen = None
            return self._sync(None, self.last_ts)
        if g is None:
            self.gen = None
            self.done = True
            return self._sync(None, self.last_ts)
        return self._install(g)

    def _stored_error(self, err: WireError) -> None:
        """Report a generation read error after its Sync has been yielded."""
        if isinstance(err, TableEOF):
            # Go hands a bare end-of-file up, which its callers treat as the
            # regular end of the trace: no error.
            self.done = True
            return
        raise _Failure(err.offset, err.reason)

    def _refresh_spill(self) -> Event | None:
        sp = self.spill
        if sp.error is not None:
            if self.spill_err_sync:
                self._stored_error(sp.error)
                return None
            self.spill_err_sync = True
            self.gen = None
            return self._sync(None, self.last_ts)
        if self.gen is not None and sp.batch is None:
            self.gen = None
            self.done = True
            return self._sync(None, self.last_ts)
        try:
            g, self.pos = read_generation_spill(self.data, self.pos, sp, self.version)
        except WireError as e:
            sp.error = e
            self.spill_err_sync = True
            self.gen = None
            return self._sync(None, self.last_ts)
        return self._install(g)

    # ------------------------------------------------------------ main loop

    def _try(self, i: int) -> bool:
        c = self.frontier[i]
        g = self.gen
        assert g is not None
        try:
            if not self.order.advance(c.ev, g, c.m, g.gen):
                return False
        except OrderError as e:
            raise _Failure(c.offset(), str(e)) from None
        if self._next(c, g.freq):
            heap_update(self.frontier, i)
        else:
            heap_remove(self.frontier, i)
        return True

    def run(self) -> Iterator[Event]:
        """Go's ReadEvent loop; one iteration per returned event."""
        queue = self.order.queue
        frontier = self.frontier
        advance = self.order.advance
        res = self.resolver
        while True:
            try:
                while queue:
                    q = queue.popleft()
                    t = q[1]
                    if t <= self.last_ts:
                        t = self.last_ts + 1
                    self.last_ts = t
                    yield to_event(q, t, res)
                if self.done:
                    return
                samples = self.samples
                if not frontier and self.si >= len(samples):
                    ev = self._refresh()
                    if ev is not None:
                        yield ev
                    continue
                if self.si < len(samples) and (
                    not frontier or samples[self.si][0] < frontier[0].ev[1]
                ):
                    s = samples[self.si]
                    self.si += 1
                    yield self._sample(s)
                    continue
                g = self.gen
                assert g is not None
                freq, gnum = g.freq, g.gen
                si, nsamp = self.si, len(samples)
                last = self.last_ts
                # Hot loop over the heap head; leaves for samples, other
                # threads' turns are handled inside, and at the generation end.
                while frontier:
                    c = frontier[0]
                    head = c.ev
                    if si < nsamp and samples[si][0] < head[1]:
                        break
                    if advance(head, g, c.m, gnum):
                        if c.next(freq):
                            # heap_update(0) without the calls when nothing moves.
                            t = head[1]
                            n = len(frontier)
                            if (n > 1 and frontier[1].ev[1] < t) or (
                                n > 2 and frontier[2].ev[1] < t
                            ):
                                heap_update(frontier, 0)
                        else:
                            heap_remove(frontier, 0)
                    else:
                        self._advance_other()
                    while queue:
                        q = queue.popleft()
                        t = q[1]
                        if t <= last:
                            t = last + 1
                        last = t
                        yield to_event(q, t, res)
                self.last_ts = last
            except OrderError as e:
                raise _Failure(frontier[0].offset() if frontier else -1, str(e)) from None
            except CursorError as e:
                raise _Failure(e.offset, e.reason) from None

    def _advance_other(self) -> None:
        """Rare path: the earliest thread cannot advance; try the others in
        time order (Go sorts the heap array first, which keeps it a heap)."""
        frontier = self.frontier
        go_sort(frontier, _time)
        for i in range(1, len(frontier)):
            if self._try(i):
                return
        raise _Failure(
            frontier[0].offset() if frontier else -1,
            f"broken trace: failed to advance: no thread can make progress "
            f"in generation {self.gen.gen if self.gen else 0}",
        )


def _time(c: Cursor) -> int:
    return int(c.ev[1])


def _sample_time(s: tuple[int, int, int, int, int]) -> int:
    return s[0]


def _as_i64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x
