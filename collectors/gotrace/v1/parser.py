"""Old-family events, strings and stacks: indexing pass and batch loading.

``scan.py`` splits the file into per-P batches of raw events; batches are
then loaded one at a time, in the order the merge (``order.py``) asks for
them, as Go does, which is also the order in which strings, stacks and the
frequency are learnt (it matters only for damaged traces that define one
twice).

An event is a plain list (see the index constants below) because millions
of them are created and a few fields are rewritten later.
"""

from __future__ import annotations

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.v1.scan import Raw, scan
from collectors.gotrace.v1.wire import (
    ARG_COUNT,
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
    NAMES,
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
# Raw events that produce no event (EvCPUSample never reaches a batch here).
_SPECIAL = frozenset((EV_BATCH, EV_FREQUENCY, EV_TIMER_GOROUTINE, EV_STACK))


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
        #: P -> its batches of raw events not yet loaded (first-seen P order).
        self.batches: dict[int, list[list[Raw]]] = {}
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

    def index(self) -> None:
        """Split the file into batches and collect the CPU samples."""
        found = scan(self.data, self.start, self.minor)
        self.batches = found.batches
        self._next_batch = {pid: 0 for pid in found.batches}
        for _, a in found.cpu_samples:
            # [delta, real ticks, P, G, stack]: placed by the real time.
            ev: Ev = [to_int64(a[1]), EV_CPU_SAMPLE, to_int32(a[2]), a[3], 0, a[2], a[3], 0, 0]
            ev[STK] = a[4] & 0xFFFFFFFF
            self.cpu_samples.append(ev)

    def load_batch(self, pid: int) -> list[Ev] | None:
        """Events of the next batch of ``pid`` (may be empty); None when the
        P has no batches left."""
        batches = self.batches.get(pid)
        i = self._next_batch.get(pid, 0)
        if batches is None or i >= len(batches):
            return None
        self._next_batch[pid] = i + 1
        raws = batches[i]
        batches[i] = []  # loaded once; let the raw events go
        out: list[Ev] = []
        append = out.append
        strings = self.strings
        arg_count = ARG_COUNT
        has_stack = HAS_STACK
        special = _SPECIAL
        for raw in raws:
            typ, args, text, at, err = raw
            if typ == EV_STRING:
                sid = args[0]
                if sid == 0:
                    raise TraceFormatError(at, "string has invalid id 0")
                if sid in strings:
                    raise TraceFormatError(at, f"string has duplicate id {sid}")
                if err is not None or text is None:
                    raise TraceFormatError(at, err or "bad string")
                strings[sid] = text
                continue
            if err is not None:
                raise TraceFormatError(at, err)
            n = len(args)
            if typ in special:
                if typ == EV_STACK:
                    self._parse_stack(args, at)
                elif n != arg_count[typ]:
                    raise TraceFormatError(
                        at,
                        f"{NAMES[typ]} has wrong number of arguments: "
                        f"want {arg_count[typ]}, got {n}",
                    )
                else:
                    self._parse_special(typ, args, at)
                continue
            if n != arg_count[typ]:
                raise TraceFormatError(
                    at,
                    f"{NAMES[typ]} has wrong number of arguments: want {arg_count[typ]}, got {n}",
                )
            ts = self._last_ts + args[0]
            if ts > INT64_MAX or ts < INT64_MIN:
                ts = to_int64(ts)
            self._last_ts = ts
            ev: Ev = [ts, typ, self._last_p, self._last_g, 0, 0, 0, 0, 0]
            if has_stack[typ]:
                n -= 1
                ev[STK] = args[n] & 0xFFFFFFFF
            if n > 1:
                ev[A0] = args[1]
                if n > 2:
                    ev[A1] = args[2]
                    if n > 3:
                        ev[A2] = args[3]
            if typ in _STARTS_G:
                self._last_g = ev[G] = ev[A0]
            elif typ in _ENDS_G:
                self._last_g = 0
            elif typ in _G_FROM_ARG:
                ev[G] = ev[A0]
            elif typ == EV_USER_LOG:
                msg = text if text is not None else ""
                iid = self._inline_ids.get(msg)
                if iid is None:
                    iid = self._inline_ids[msg] = len(self.inline_strings)
                    self.inline_strings.append(msg)
                ev[A3] = iid
            append(ev)
        return out

    def _parse_special(self, typ: int, args: list[int], at: int) -> None:
        """Batch headers, the frequency and timer goroutines: no event."""
        if typ == EV_BATCH:
            self._last_gs[self._last_p] = self._last_g
            pid = args[0]
            self._last_p = -1 if pid == MASK64 else pid
            self._last_g = self._last_gs.get(self._last_p, 0)
            self._last_ts = to_int64(args[1])
        elif typ == EV_FREQUENCY:
            self.ticks_per_sec = to_int64(args[0])
            if self.ticks_per_sec <= 0:
                raise TraceFormatError(at, "time stamps out of order")
        else:
            self.timer_goids.add(args[0])

    def _parse_stack(self, args: list[int], at: int) -> None:
        if len(args) < 2:
            raise TraceFormatError(
                at, f"EvStack has wrong number of arguments: want at least 2, got {len(args)}"
            )
        size = args[1]
        if size > 1000:
            raise TraceFormatError(at, f"EvStack has bad number of frames: {size}")
        want = 2 + 4 * size
        if len(args) != want:
            raise TraceFormatError(
                at, f"EvStack has wrong number of arguments: want {want}, got {len(args)}"
            )
        sid = args[0] & 0xFFFFFFFF
        if sid == 0 or size == 0:
            return
        pcs = self.pcs
        for i in range(2, want, 4):
            pc = args[i]
            if pc not in pcs:
                pcs[pc] = (args[i + 1], args[i + 2], args[i + 3])
        self.stacks[sid] = args[2::4]
