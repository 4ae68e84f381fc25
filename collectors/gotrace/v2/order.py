"""The ordering state machine: decides when an event from one thread's batch
may be emitted, validates it against the emulated scheduler state and
queues the resulting events (sometimes more than one).

Behaviour mirrors Go's ``internal/trace`` ordering exactly, because it
determines the order and the execution context of every event. This module
holds the core and the proc handlers; goroutines are in :mod:`order_go`; ranges,
GC and user annotations are in :mod:`order_misc`.

Events are handled as lists ``[type, time, a0, a1, a2, a3]`` (arguments after
the timestamp; unused slots are scratch space for derived values). Queued
events are tuples ``(type, time, a0, a1, a2, a3, m, p, g, generation)``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.wire import U64_MASK, as_i64

NONE = -1
MUST_NOT, MAY, MUST = 0, 1, 2

QueuedEvent = tuple[int, int, int, int, Any, Any, int, int, int, Generation | None]
NewCtx = tuple[int, int] | None


class OrderError(Exception):
    """The events contradict each other: the trace is broken."""


class GState:
    """Emulated goroutine."""

    __slots__ = ("gid", "status", "sgen", "seq", "regions", "ranges")

    def __init__(self, gid: int, status: int, sgen: int) -> None:
        self.gid = gid
        self.status = status
        self.sgen = sgen  # generation of the sequence counter
        self.seq = 0
        self.regions: list[tuple[int, str]] = []
        self.ranges: list[tuple[int, int]] = []


class PState:
    """Emulated proc."""

    __slots__ = ("pid", "status", "sgen", "seq", "ranges")

    def __init__(self, pid: int, status: int, sgen: int) -> None:
        self.pid = pid
        self.status = status
        self.sgen = sgen
        self.seq = 0
        self.ranges: list[tuple[int, int]] = []


class MState:
    """Emulated thread: the goroutine and proc bound to it."""

    __slots__ = ("g", "p")

    def __init__(self, g: int, p: int) -> None:
        self.g = g
        self.p = p


def check_ctx(p: int, g: int, m: int, rm: int, rp: int, rg: int) -> None:
    """Raise OrderError when the context (m, p, g) breaks the requirements."""
    if rm == MUST and m == NONE:
        raise OrderError("expected a thread but didn't have one")
    if rm == MUST_NOT and m != NONE:
        raise OrderError("expected no thread but had one")
    if rp == MUST and p == NONE:
        raise OrderError("expected a proc but didn't have one")
    if rp == MUST_NOT and p != NONE:
        raise OrderError("expected no proc but had one")
    if rg == MUST and g == NONE:
        raise OrderError("expected a goroutine but didn't have one")
    if rg == MUST_NOT and g != NONE:
        raise OrderError("expected no goroutine but had one")


def check_user(m: int, p: int, g: int) -> None:
    """Requirements of events emitted by running user code: M, P and G."""
    if m == NONE or p == NONE or g == NONE:
        check_ctx(p, g, m, MUST, MUST, MUST)


Handler = Callable[["OrderingBase", list[Any], Generation, int, int, int, int], NewCtx]


class OrderingBase:
    """Scheduler emulation shared by all handlers."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.gs: dict[int, GState] = {}
        self.ps: dict[int, PState] = {}
        self.ms: dict[int, MState] = {}
        self.tasks: dict[int, tuple[str, int]] = {}  # active task -> (type, parent)
        self.gc_seq = 0
        self.gc_state = 0  # 0 undetermined, 1 not running, 2 running
        self.initial_gen = 0
        self.queue: deque[QueuedEvent] = deque()
        self.handlers: dict[int, Handler] = {}

    def name(self, typ: int) -> str:
        return S.event_name(self.version, typ)

    def advance(self, ev: list[Any], gt: Generation, m: int, gen: int) -> bool:
        """Try to advance ``ev`` read from thread ``m``; True when it (and
        possibly derived events) was queued. Raises OrderError when broken."""
        if self.initial_gen == 0:
            self.initial_gen = gen
        ms = None
        if m == NONE:
            p = g = NONE
        else:
            ms = self.ms.get(m)
            if ms is None:
                # Created even when the event cannot advance yet (Go does too).
                ms = self.ms[m] = MState(NONE, NONE)
            p, g = ms.p, ms.g
        h = self.handlers.get(ev[0])
        if h is None:
            raise OrderError(f"bad event type found while ordering: {ev[0]}")
        new = h(self, ev, gt, gen, m, p, g)
        if new is None:
            return False
        if ms is not None:
            ms.p, ms.g = new
        return True

    def push(self, ev: list[Any], gt: Generation | None, m: int, p: int, g: int) -> None:
        self.queue.append((ev[0], ev[1], ev[2], ev[3], ev[4], ev[5], m, p, g, gt))

    def pstate(self, pid: int, typ: int, what: str = "uninitialized") -> PState:
        st = self.ps.get(pid)
        if st is None:
            raise OrderError(f"{what} proc {pid} found during {self.name(typ)}")
        return st

    def running_g(self, typ: int, g: int, want: int = S.GS_RUNNING) -> GState:
        """The state of the current goroutine, which must be in ``want``."""
        st = self.gs.get(g)
        if st is None:
            raise OrderError(f"event {self.name(typ)} for goroutine ({g}) that doesn't exist")
        if st.status != want:
            wname = (
                "Syscall" if want == S.GS_SYSCALL and typ == S.EV_GO_DESTROY_SYSCALL else "Running"
            )
            raise OrderError(f"{self.name(typ)} event for goroutine that's not {wname}")
        return st


def _succeeds(sgen: int, seq: int, gen: int, new: int) -> bool:
    return sgen == gen and new == ((seq + 1) & U64_MASK)


# ---------------------------------------------------------------- procs


def proc_status(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    pid = as_i64(ev[2])
    status = ev[3]
    if status >= 5:
        raise OrderError(f"invalid status for proc {pid}: {status}")
    old = S.PROC_STATUS_TO_STATE[status]
    st = o.ps.get(pid)
    if st is not None:
        if status == S.PS_SYSCALL_ABANDONED and st.status == S.PS_SYSCALL:
            # Nothing was lost after all: the P is still known to be in a syscall.
            old = S.PROC_RUNNING
            ev[3] = S.PS_SYSCALL
        elif status == S.PS_SYSCALL_ABANDONED and st.status == S.PS_SYSCALL_ABANDONED:
            old = S.PROC_IDLE
            ev[3] = S.PS_SYSCALL_ABANDONED
        elif st.status != status:
            raise OrderError(
                f"inconsistent status for proc {pid}: old {S.PROC_STATUS_NAMES[st.status]}"
                f" vs. new {S.PROC_STATUS_NAMES[status]}"
            )
        st.sgen, st.seq = gen, 0
    else:
        o.ps[pid] = PState(pid, status, gen)
        old = S.PROC_UNDETERMINED if gen == o.initial_gen else S.PROC_NOT_EXIST
    ev[4] = old
    np = pid if status == S.PS_RUNNING or status == S.PS_SYSCALL else p
    em, ep, eg = m, p, g
    if status == S.PS_SYSCALL_ABANDONED and old == S.PROC_RUNNING:
        # The status comes from the thread stealing the P; report it in the
        # context of the thread the P is still bound to.
        found = False
        for mid, mst in o.ms.items():
            if mst.p == pid:
                em, ep, eg = mid, pid, mst.g
                found = True
        if not found:
            raise OrderError(
                f"failed to find sched context for proc {pid} that's about to be stolen"
            )
    o.queue.append((*ev, em, ep, eg, gt))
    return np, g


def proc_start(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    pid = as_i64(ev[2])
    st = o.ps.get(pid)
    if (
        st is None
        or st.status != S.PS_IDLE
        or not _succeeds(st.sgen, st.seq, gen, ev[3])
        or p != NONE
    ):
        return None
    check_ctx(p, g, m, MUST, MUST_NOT, MAY)
    st.status = S.PS_RUNNING
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return pid, g


def proc_stop(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    st = o.ps.get(p)
    if st is None:
        raise OrderError(f"event {o.name(ev[0])} for proc ({p}) that doesn't exist")
    if st.status != S.PS_RUNNING and st.status != S.PS_SYSCALL:
        raise OrderError(f"{o.name(ev[0])} event for proc that's not Running or Syscall")
    check_ctx(p, g, m, MUST, MUST, MAY)
    st.status = S.PS_IDLE
    o.queue.append((*ev, m, p, g, gt))
    return NONE, g


def proc_steal(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    pid = as_i64(ev[2])
    st = o.ps.get(pid)
    if (
        st is None
        or (st.status != S.PS_SYSCALL and st.status != S.PS_SYSCALL_ABANDONED)
        or not _succeeds(st.sgen, st.seq, gen, ev[3])
    ):
        return None
    check_ctx(p, g, m, MUST, MAY, MAY)
    old = st.status
    ev[5] = old  # lets the event report Idle->Idle when information was lost
    st.status = S.PS_IDLE
    st.sgen, st.seq = gen, ev[3]
    if old == S.PS_SYSCALL_ABANDONED:
        o.queue.append((*ev, m, p, g, gt))
        return p, g
    victim = as_i64(ev[4])
    if victim == m:
        if p != pid:
            raise OrderError(
                f"tried to self-steal proc {pid} (thread {victim}), but got proc {p} instead"
            )
        o.queue.append((*ev, m, p, g, gt))
        return NONE, g
    vst = o.ms.get(victim)
    if vst is None:
        raise OrderError(f"stole proc from non-existent thread {victim}")
    if vst.p != pid:
        raise OrderError(
            f"tried to steal proc {pid} from thread {victim}, but got proc {vst.p} instead"
        )
    vst.p = NONE  # the victim may now leave its syscall
    o.queue.append((*ev, m, p, g, gt))
    return p, g


PROC_HANDLERS: dict[int, Handler] = {
    S.EV_PROC_START: proc_start,
    S.EV_PROC_STOP: proc_stop,
    S.EV_PROC_STEAL: proc_steal,
    S.EV_PROC_STATUS: proc_status,
}
