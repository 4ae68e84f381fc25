"""Merge the old family's per-P batches into one consistent event stream.

Events within a P's batches are in order; across Ps the reference parser
repeatedly takes, among the heads of all Ps whose goroutine precondition is
already met (tracked by per-goroutine sequence numbers and a coarse status),
the one with the smallest timestamp. Afterwards syscall exits get their real
timestamps, the stream is re-sorted stably, and ticks become nanoseconds.

Events with equal timestamps on different Ps (common: old tracers divide
the CPU tick counter by 64) come out in whatever order Go's binary heap,
compared on timestamps only, yields; we reproduce that heap exactly. Go seeds
the merge with its Ps in map order, which is random, so Go's own output is
not deterministic at such ties; we use the Ps' first-seen order, which is
the most likely order for up to 8 Ps.
"""

from __future__ import annotations

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.v1.parser import (
    A0,
    A1,
    A2,
    GC_P,
    PROFILE_P,
    SYSCALL_P,
    TIMER_P,
    TS,
    TYP,
    Ev,
    G,
    P,
    Parser,
    to_int64,
)
from collectors.gotrace.v1.wire import (
    EV_GC_START,
    EV_GO_CREATE,
    EV_GO_IN_SYSCALL,
    EV_GO_START,
    EV_GO_START_LABEL,
    EV_GO_START_LOCAL,
    EV_GO_SYS_BLOCK,
    EV_GO_SYS_EXIT,
    EV_GO_SYS_EXIT_LOCAL,
    EV_GO_UNBLOCK,
    EV_GO_UNBLOCK_LOCAL,
    EV_GO_WAITING,
    INT64_MAX,
    INT64_MIN,
    MASK64,
)

# Coarse goroutine status used only for ordering.
_DEAD, _RUNNABLE, _RUNNING, _WAITING = 0, 1, 2, 3
_UNORDERED = MASK64  # the event has no ordering precondition
_GARBAGE = MASK64 - 1  # pseudo goroutine that orders GC starts
_NOSEQ = MASK64  # any sequence number is fine / keep the current one
_SEQINC = MASK64 - 1  # the next sequence number is the current one plus one

# GoSleep, GoBlock*, GoSysBlock, GoBlockGC (not GoStop or GoEnd: those are unordered).
_BLOCKS = frozenset((19, 20, 22, 23, 24, 25, 26, 27, 30, 42))
_STOPS = frozenset((17, 18))
_LOCAL_TO_GLOBAL = {
    EV_GO_START_LOCAL: EV_GO_START,
    EV_GO_UNBLOCK_LOCAL: EV_GO_UNBLOCK,
    EV_GO_SYS_EXIT_LOCAL: EV_GO_SYS_EXIT,
}

TIME_ORDER = "time stamps out of order"

Transition = tuple[int, int, int, int, int]  # g, need seq, need status, next seq, next status


def _transition(ev: Ev) -> Transition:
    """What goroutine state ``ev`` needs, and leaves behind."""
    typ = ev[TYP]
    if typ == EV_GO_CREATE:
        return ev[A0], 0, _DEAD, 1, _RUNNABLE
    if typ == EV_GO_WAITING or typ == EV_GO_IN_SYSCALL:
        return ev[G], 1, _RUNNABLE, 2, _WAITING
    if typ == EV_GO_START or typ == EV_GO_START_LABEL:
        return ev[G], ev[A1], _RUNNABLE, (ev[A1] + 1) & MASK64, _RUNNING
    if typ == EV_GO_START_LOCAL:
        return ev[G], _NOSEQ, _RUNNABLE, _SEQINC, _RUNNING
    if typ in _BLOCKS:
        return ev[G], _NOSEQ, _RUNNING, _NOSEQ, _WAITING
    if typ in _STOPS:
        return ev[G], _NOSEQ, _RUNNING, _NOSEQ, _RUNNABLE
    if typ == EV_GO_UNBLOCK or typ == EV_GO_SYS_EXIT:
        return ev[A0], ev[A1], _WAITING, (ev[A1] + 1) & MASK64, _RUNNABLE
    if typ == EV_GO_UNBLOCK_LOCAL or typ == EV_GO_SYS_EXIT_LOCAL:
        return ev[A0], _NOSEQ, _WAITING, _SEQINC, _RUNNABLE
    if typ == EV_GC_START:
        return _GARBAGE, ev[A0], _DEAD, (ev[A0] + 1) & MASK64, _DEAD
    return _UNORDERED, 0, 0, 0, 0


_ORDERED_TYPES = (
    frozenset(
        (
            EV_GO_CREATE,
            EV_GO_WAITING,
            EV_GO_IN_SYSCALL,
            EV_GO_START,
            EV_GO_START_LABEL,
            EV_GO_START_LOCAL,
            EV_GO_UNBLOCK,
            EV_GO_SYS_EXIT,
            EV_GO_UNBLOCK_LOCAL,
            EV_GO_SYS_EXIT_LOCAL,
            EV_GC_START,
        )
    )
    | _BLOCKS
    | _STOPS
)


class _Proc:
    __slots__ = ("pid", "events", "pos", "done")

    def __init__(self, pid: int, events: list[Ev]) -> None:
        self.pid = pid
        self.events = events
        self.pos = 0
        self.done = False


_Item = tuple[int, Ev, "_Proc"]


def merge(parser: Parser) -> list[Ev]:
    """Interleave all batches (loading them lazily) into one ordered list."""
    samples = sorted(parser.cpu_samples, key=lambda e: e[TS])
    procs = [_Proc(pid, []) for pid in parser.batches]
    procs.append(_Proc(PROFILE_P, samples))
    available = list(procs)
    gs: dict[int, tuple[int, int]] = {}
    frontier: list[_Item] = []
    out: list[Ev] = []
    append = out.append
    ordered = _ORDERED_TYPES
    load = parser.load_batch
    while True:
        i = 0
        while i < len(available):
            proc = available[i]
            evs = proc.events
            while proc.pos >= len(evs):
                loaded = load(proc.pid)
                if loaded is None:
                    break
                proc.events = evs = loaded
                proc.pos = 0
            if proc.pos >= len(evs):
                proc.done = True
                available[i] = available[-1]
                available.pop()
                continue
            ev = evs[proc.pos]
            if ev[TYP] in ordered:
                g, need_seq, need_st, _, _ = _transition(ev)
                if g != _UNORDERED:
                    cur_seq, cur_st = gs.get(g, (0, _DEAD))
                    if not ((need_seq == _NOSEQ or need_seq == cur_seq) and need_st == cur_st):
                        i += 1
                        continue
            proc.pos += 1
            available[i] = available[-1]
            available.pop()
            # Binary-heap push comparing timestamps only (ties keep heap order).
            ts = ev[TS]
            item = (ts, ev, proc)
            frontier.append(item)
            j = len(frontier) - 1
            while j > 0:
                k = (j - 1) >> 1
                if not ts < frontier[k][0]:
                    break
                frontier[j] = frontier[k]
                j = k
            frontier[j] = item
        if not frontier:
            if any(not p.done for p in procs):
                raise TraceFormatError(-1, "no consistent ordering of events possible")
            break
        # Binary-heap pop: swap root and last, sift the new root down over the
        # others, take the last: the same moves as Go's container/heap.
        h = frontier
        n = len(h) - 1
        top = h[0]
        h[0] = h[n]
        h[n] = top
        i = 0
        while True:
            j = 2 * i + 1
            if j >= n:
                break
            if j + 1 < n and h[j + 1][0] < h[j][0]:
                j += 1
            if not h[j][0] < h[i][0]:
                break
            h[i], h[j] = h[j], h[i]
            i = j
        _, ev, proc = h.pop()
        typ = ev[TYP]
        if typ in ordered:
            g, need_seq, need_st, next_seq, next_st = _transition(ev)
            if g != _UNORDERED:
                cur_seq, cur_st = gs.get(g, (0, _DEAD))
                if not ((need_seq == _NOSEQ or need_seq == cur_seq) and need_st == cur_st):
                    raise TraceFormatError(-1, "encountered impossible goroutine state transition")
                if next_seq == _NOSEQ:
                    next_seq = cur_seq
                elif next_seq == _SEQINC:
                    next_seq = (cur_seq + 1) & MASK64
                gs[g] = (next_seq, next_st)
            if typ in _LOCAL_TO_GLOBAL:
                ev[TYP] = _LOCAL_TO_GLOBAL[typ]
        append(ev)
        available.append(proc)
    return out


def finish_times(events: list[Ev], parser: Parser) -> list[Ev]:
    """Check time order, give syscall exits their real time, re-sort, and
    convert ticks to nanoseconds (also moving events to fake Ps)."""
    prev = INT64_MIN
    for ev in events:
        if ev[TS] < prev:
            raise TraceFormatError(-1, TIME_ORDER)
        prev = ev[TS]
    last_block: dict[int, int] = {}
    for ev in events:
        typ = ev[TYP]
        if typ == EV_GO_SYS_BLOCK or typ == EV_GO_IN_SYSCALL:
            last_block[ev[G]] = ev[TS]
        elif typ == EV_GO_SYS_EXIT:
            real = to_int64(ev[A2])
            if real == 0:
                continue
            block = last_block.get(ev[G], 0)
            if block == 0:
                raise TraceFormatError(-1, "stray syscall exit")
            if real < block:
                raise TraceFormatError(-1, TIME_ORDER)
            ev[TS] = real
    events.sort(key=lambda e: e[TS])  # stable, as Go's sort.Stable
    if parser.ticks_per_sec == 0:
        raise TraceFormatError(-1, "no EvFrequency event")
    if events:
        base = events[0][TS]
        scale = 1e9 / float(parser.ticks_per_sec)
        timers = parser.timer_goids
        for ev in events:
            d = ev[TS] - base
            if d > INT64_MAX or d < INT64_MIN:
                d = to_int64(d)
            ns = float(d) * scale
            # Go converts out-of-range floats to the most negative int64 (amd64).
            ev[TS] = int(ns) if -9.223372036854776e18 <= ns < 9.223372036854776e18 else INT64_MIN
            typ = ev[TYP]
            if typ == EV_GO_UNBLOCK and timers and ev[G] in timers:
                ev[P] = TIMER_P
            elif typ == EV_GO_SYS_EXIT:
                ev[P] = SYSCALL_P
    return events


__all__ = ["merge", "finish_times", "GC_P", "TIME_ORDER"]
