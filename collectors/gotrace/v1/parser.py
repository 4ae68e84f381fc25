"""Old-family events, strings and stacks: indexing pass and batch loading.

The file is read twice, as Go's reference parser does: a first pass records
where each P's batches start and collects the CPU samples; then batches are
loaded one at a time, in the order the merge (``order.py``) asks for them,
which is also the order in which strings, stacks and the frequency are
learnt.

An event is a plain list (see the index constants below) because millions
of them are created and a few fields are rewritten later.
"""

from __future__ import annotations

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.v1 import wire
from collectors.gotrace.v1.wire import (
    ARG_COUNT,
    DESCS,
    EV_BATCH,
    EV_CPU_SAMPLE,
    EV_FREQUENCY,
    EV_STACK,
    EV_STRING,
    EV_TIMER_GOROUTINE,
    EV_USER_LOG,
    HAS_STACK,
    INT64_MAX,
    INT64_MIN,
    MASK64,
)

# Event list layout.
TS = 0  # int64 ticks (later ns)
TYP = 1
P = 2  # int32 P, or one of the fake Ps below
G = 3  # uint64 goroutine
A0 = 4  # four uint64 arguments A0..A3
A1 = 5
A2 = 6
A3 = 7
STK = 8  # uint32 stack id

Ev = list[int]  # an event: [ts, typ, p, g, a0, a1, a2, a3, stk]

# Fake Ps the reference parser moves some events to.
TIMER_P = 1000001
NETPOLL_P = 1000002
SYSCALL_P = 1000003
GC_P = 1000004
PROFILE_P = 1000005

_WRAP = 1 << 64

# Event types after which the batch's current goroutine is "none".
_ENDS_G = frozenset((15, 16, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27, 30, 42))
# Event types whose goroutine is named by their first argument.
_G_FROM_ARG = frozenset((29, 31, 32))
_STARTS_G = frozenset((14, 38, 41))


def to_int64(v: int) -> int:
    """Reinterpret a uint64 (or any int) as Go's int64 would wrap it."""
    if INT64_MIN <= v <= INT64_MAX:
        return v
    v &= MASK64
    return v - _WRAP if v > INT64_MAX else v


def to_int32(v: int) -> int:
    """Go's int32(v) for a uint64 v."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class Parser:
    """State of one old-family parse: dictionaries and the per-P cursors."""

    def __init__(self, data: bytes, minor: int, start: int) -> None:
        self.data = data
        self.minor = minor
        self.start = start
        self.strings: dict[int, str] = {}
        self.inline_strings: list[str] = []
        self._inline_ids: dict[str, int] = {}
        #: P -> offsets of its batches not yet loaded (first-seen P order).
        self.batches: dict[int, list[int]] = {}
        self._next_batch: dict[int, int] = {}
        #: stack id -> PCs (only non-empty stacks with a non-zero id).
        self.stacks: dict[int, list[int]] = {}
        #: PC -> (func string id, file string id, line); the first one wins.
        self.pcs: dict[int, tuple[int, int, int]] = {}
        self.ticks_per_sec = 0
        self.cpu_samples: list[Ev] = []
        self.timer_goids: set[int] = set()
        # Per-batch decoding state; a P's goroutine carries across its batches.
        self._last_ts = 0
        self._last_g = 0
        self._last_p = 0
        self._last_gs: dict[int, int] = {}

    # ------------------------------------------------------------------
    # Pass 1

    def index(self) -> None:
        """Record batch offsets per P and collect CPU samples."""
        data = self.data
        end = len(data)
        minor = self.minor
        read_raw = wire.read_raw
        batches = self.batches
        off = self.start
        cur: list[int] | None = None
        cur_p = 0
        while off < end:
            try:
                raw = read_raw(data, off, minor, None)
            except wire.EndOfData:
                break
            off = raw.end
            typ = raw.typ
            if typ == EV_STRING:
                continue
            if typ == EV_BATCH:
                pid = raw.args[0]
                cur_p = -1 if pid == MASK64 else pid
                cur = batches.setdefault(cur_p, [])
                cur.append(raw.start)
            elif cur is None or not batches.get(cur_p):
                raise TraceFormatError(
                    raw.start,
                    f"read event {typ} with current P of {cur_p}, but P has no batches yet",
                )
            if typ == EV_CPU_SAMPLE:
                a = raw.args
                if len(a) != 5:
                    raise TraceFormatError(
                        raw.start,
                        f"CPU sample has wrong number of arguments: want 5, got {len(a)}",
                    )
                # [delta, real ticks, P, G, stack]; placed by the real time.
                self.cpu_samples.append(
                    [to_int64(a[1]), EV_CPU_SAMPLE, to_int32(a[2]), a[3], 0, a[2], a[3], 0,
                     a[4] & 0xFFFFFFFF]
                )
        self._next_batch = {pid: 0 for pid in batches}

    # ------------------------------------------------------------------
    # Pass 2

    def load_batch(self, pid: int) -> list[Ev] | None:
        """Events of the next batch of ``pid`` (may be empty); None when the
        P has no batches left."""
        offsets = self.batches.get(pid)
        i = self._next_batch.get(pid, 0)
        if offsets is None or i >= len(offsets):
            return None
        self._next_batch[pid] = i + 1
        data = self.data
        end = len(data)
        minor = self.minor
        read_raw = wire.read_raw
        strings = self.strings
        off = offsets[i]
        out: list[Ev] = []
        append = out.append
        got_header = False
        while off < end:
            raw = read_raw(data, off, minor, strings)
            off = raw.end
            typ = raw.typ
            if typ == EV_STRING or typ == EV_CPU_SAMPLE:
                continue
            if typ == EV_BATCH:
                if got_header:
                    break
                got_header = True
            ev = self._parse(raw)
            if ev is not None:
                append(ev)
        return out

    def _parse(self, raw: wire.RawEvent) -> Ev | None:
        typ = raw.typ
        args = raw.args
        desc = DESCS[typ]
        want = len(args) if typ == EV_STACK else ARG_COUNT[typ]
        if len(args) != want:
            raise TraceFormatError(
                raw.start,
                f"{desc.name} has wrong number of arguments: want {want}, got {len(args)}",
            )
        if typ == EV_BATCH:
            self._last_gs[self._last_p] = self._last_g
            pid = args[0]
            self._last_p = -1 if pid == MASK64 else pid
            self._last_g = self._last_gs.get(self._last_p, 0)
            self._last_ts = to_int64(args[1])
            return None
        if typ == EV_FREQUENCY:
            self.ticks_per_sec = to_int64(args[0])
            if self.ticks_per_sec <= 0:
                raise TraceFormatError(raw.start, "time stamps out of order")
            return None
        if typ == EV_TIMER_GOROUTINE:
            self.timer_goids.add(args[0])
            return None
        if typ == EV_STACK:
            self._parse_stack(raw)
            return None
        ts = self._last_ts + args[0]
        if ts > INT64_MAX or ts < INT64_MIN:
            ts = to_int64(ts)
        self._last_ts = ts
        ev: Ev = [ts, typ, self._last_p, self._last_g, 0, 0, 0, 0, 0]
        n = len(args)
        if HAS_STACK[typ]:
            ev[STK] = args[n - 1] & 0xFFFFFFFF
            n -= 1
        for i in range(1, n):
            ev[A0 + i - 1] = args[i]
        if typ in _STARTS_G:
            self._last_g = ev[G] = ev[A0]
        elif typ in _ENDS_G:
            self._last_g = 0
        elif typ in _G_FROM_ARG:
            ev[G] = ev[A0]
        elif typ == EV_USER_LOG:
            text = raw.text if raw.text is not None else ""
            sid = self._inline_ids.get(text)
            if sid is None:
                sid = self._inline_ids[text] = len(self.inline_strings)
                self.inline_strings.append(text)
            ev[A3] = sid
        return ev

    def _parse_stack(self, raw: wire.RawEvent) -> None:
        args = raw.args
        if len(args) < 2:
            raise TraceFormatError(
                raw.start, f"EvStack has wrong number of arguments: want at least 2, got {len(args)}"
            )
        size = args[1]
        if size > 1000:
            raise TraceFormatError(raw.start, f"EvStack has bad number of frames: {size}")
        want = 2 + 4 * size
        if len(args) != want:
            raise TraceFormatError(
                raw.start, f"EvStack has wrong number of arguments: want {want}, got {len(args)}"
            )
        sid = args[0] & 0xFFFFFFFF
        if sid == 0 or size == 0:
            return
        pcs = self.pcs
        stk = args[2::4]
        for i in range(2, want, 4):
            pc = args[i]
            if pc not in pcs:
                pcs[pc] = (args[i + 1], args[i + 2], args[i + 3])
        self.stacks[sid] = stk
