"""The ordering state machine: decides when an event from one thread's batch
may be emitted, validates it against the emulated scheduler state and
queues the resulting events (sometimes more than one).

Behaviour mirrors Go's ``internal/trace`` ordering exactly, because it
determines the order and the execution context of every event. This module
holds the core, procs and goroutines; ranges, GC and user annotations are in
:mod:`order_misc`.

Events are handled as lists ``[type, time, a0, a1, a2, a3]`` (arguments after
the timestamp; unused slots are scratch space for derived values). Queued
events are tuples ``(type, time, a0, a1, a2, a3, m, p, g, generation)``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Optional

from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.wire import U64_MASK, as_i64

NONE = -1
MUST_NOT, MAY, MUST = 0, 1, 2

QueuedEvent = tuple[int, int, int, int, Any, Any, int, int, int, Optional[Generation]]
NewCtx = Optional[tuple[int, int]]


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
            wname = "Syscall" if want == S.GS_SYSCALL and typ == S.EV_GO_DESTROY_SYSCALL else "Running"
            raise OrderError(f"{self.name(typ)} event for goroutine that's not {wname}")
        return st


def _succeeds(sgen: int, seq: int, gen: int, new: int) -> bool:
    return sgen == gen and new == ((seq + 1) & U64_MASK)


# ---------------------------------------------------------------- procs


def proc_status(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                m: int, p: int, g: int) -> NewCtx:
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
            raise OrderError(f"failed to find sched context for proc {pid} that's about to be stolen")
    o.queue.append((*ev, em, ep, eg, gt))
    return np, g


def proc_start(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
               m: int, p: int, g: int) -> NewCtx:
    pid = as_i64(ev[2])
    st = o.ps.get(pid)
    if st is None or st.status != S.PS_IDLE or not _succeeds(st.sgen, st.seq, gen, ev[3]) or p != NONE:
        return None
    check_ctx(p, g, m, MUST, MUST_NOT, MAY)
    st.status = S.PS_RUNNING
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return pid, g


def proc_stop(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
              m: int, p: int, g: int) -> NewCtx:
    st = o.ps.get(p)
    if st is None:
        raise OrderError(f"event {o.name(ev[0])} for proc ({p}) that doesn't exist")
    if st.status != S.PS_RUNNING and st.status != S.PS_SYSCALL:
        raise OrderError(f"{o.name(ev[0])} event for proc that's not Running or Syscall")
    check_ctx(p, g, m, MUST, MUST, MAY)
    st.status = S.PS_IDLE
    o.queue.append((*ev, m, p, g, gt))
    return NONE, g


def proc_steal(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
               m: int, p: int, g: int) -> NewCtx:
    pid = as_i64(ev[2])
    st = o.ps.get(pid)
    if (st is None or (st.status != S.PS_SYSCALL and st.status != S.PS_SYSCALL_ABANDONED)
            or not _succeeds(st.sgen, st.seq, gen, ev[3])):
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
            raise OrderError(f"tried to self-steal proc {pid} (thread {victim}), but got proc {p} instead")
        o.queue.append((*ev, m, p, g, gt))
        return NONE, g
    vst = o.ms.get(victim)
    if vst is None:
        raise OrderError(f"stole proc from non-existent thread {victim}")
    if vst.p != pid:
        raise OrderError(f"tried to steal proc {pid} from thread {victim}, but got proc {vst.p} instead")
    vst.p = NONE  # the victim may now leave its syscall
    o.queue.append((*ev, m, p, g, gt))
    return p, g


# ---------------------------------------------------------------- goroutines


def go_status(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
              m: int, p: int, g: int) -> NewCtx:
    gid = as_i64(ev[2])
    mid = as_i64(ev[3])
    status = ev[4]
    if status >= 5:
        raise OrderError(f"invalid status for goroutine {gid}: {status}")
    old = S.GO_STATUS_TO_STATE[status]
    st = o.gs.get(gid)
    if st is not None:
        if st.status != status:
            raise OrderError(
                f"inconsistent status for goroutine {gid}: old {S.GO_STATUS_NAMES[st.status]}"
                f" vs. new {S.GO_STATUS_NAMES[status]}"
            )
        st.sgen, st.seq = gen, 0
    elif gen == o.initial_gen:
        o.gs[gid] = GState(gid, status, gen)
        old = S.GO_UNDETERMINED
    else:
        raise OrderError(
            f"found goroutine status for new goroutine after the first generation: "
            f"id={gid} status={S.GO_STATUS_NAMES[status]}"
        )
    ev[4] = (old << 32) | status
    ng = g
    em, eg = m, g
    if status == S.GS_RUNNING:
        ng = gid
    elif status == S.GS_SYSCALL:
        if mid == NONE:
            raise OrderError(f"found goroutine {gid} in syscall without a thread")
        if mid == m:
            if gen != o.initial_gen and g != gid:
                raise OrderError(f"inconsistent thread for syscalling goroutine {gid}: thread has goroutine {g}")
            ng = gid
        else:
            # A goroutine sitting in a syscall on another thread for the
            # whole generation: report it on that thread.
            mst = o.ms.get(mid)
            if mst is not None:
                if mst.g != gid:
                    raise OrderError(
                        f"inconsistent thread for syscalling goroutine {gid}: thread has goroutine {mst.g}"
                    )
                eg = mst.g
            else:
                o.ms[mid] = MState(gid, NONE)
            em = mid
    o.queue.append((*ev, em, p, eg, gt))
    return p, ng


def go_create(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
              m: int, p: int, g: int) -> NewCtx:
    check_ctx(p, g, m, MUST, MUST, MAY)
    cur = o.gs.get(g)
    if cur is not None and cur.status != S.GS_RUNNING:
        raise OrderError(f"{o.name(ev[0])} event for goroutine that's not Running")
    newg = as_i64(ev[2])
    if newg in o.gs:
        raise OrderError(f"tried to create goroutine ({newg}) that already exists")
    status = S.GS_WAITING if ev[0] == S.EV_GO_CREATE_BLOCKED else S.GS_RUNNABLE
    o.gs[newg] = GState(newg, status, gen)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_stop_exec(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                 m: int, p: int, g: int) -> NewCtx:
    check_user(m, p, g)
    st = o.running_g(ev[0], g)
    typ = ev[0]
    if typ == S.EV_GO_DESTROY:
        del o.gs[g]
    elif typ == S.EV_GO_STOP:
        st.status = S.GS_RUNNABLE
    else:
        st.status = S.GS_WAITING
    o.queue.append((*ev, m, p, g, gt))
    return p, NONE


def go_start(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
             m: int, p: int, g: int) -> NewCtx:
    gid = as_i64(ev[2])
    st = o.gs.get(gid)
    if st is None or st.status != S.GS_RUNNABLE or not _succeeds(st.sgen, st.seq, gen, ev[3]):
        return None
    check_ctx(p, g, m, MUST, MUST, MUST_NOT)
    st.status = S.GS_RUNNING
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return p, gid


def go_unblock(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
               m: int, p: int, g: int) -> NewCtx:
    gid = as_i64(ev[2])
    st = o.gs.get(gid)
    if st is None or st.status != S.GS_WAITING or not _succeeds(st.sgen, st.seq, gen, ev[3]):
        return None
    st.status = S.GS_RUNNABLE
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_switch(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
              m: int, p: int, g: int) -> NewCtx:
    check_user(m, p, g)
    cur = o.running_g(ev[0], g)
    nextg = as_i64(ev[2])
    nst = o.gs.get(nextg)
    if nst is None or nst.status != S.GS_WAITING or not _succeeds(nst.sgen, nst.seq, gen, ev[3]):
        return None
    o.queue.append((*ev, m, p, g, gt))
    t = ev[1]
    if ev[0] == S.EV_GO_SWITCH:
        cur.status = S.GS_WAITING
        o.queue.append((S.EV_GO_BLOCK, t, 0, 0, 0, 0, m, p, g, gt))
    else:
        del o.gs[g]
        o.queue.append((S.EV_GO_DESTROY, t, 0, 0, 0, 0, m, p, g, gt))
    nst.status = S.GS_RUNNING
    nst.sgen, nst.seq = gen, ev[3]
    o.queue.append((S.EV_GO_START, t, ev[2], ev[3], 0, 0, m, p, NONE, gt))
    return p, nextg


def go_syscall_begin(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                     m: int, p: int, g: int) -> NewCtx:
    check_user(m, p, g)
    st = o.running_g(ev[0], g)
    st.status = S.GS_SYSCALL
    pst = o.pstate(p, ev[0])
    pst.status = S.PS_SYSCALL
    # The P sequence number disambiguates which syscall a later steal refers to.
    if not _succeeds(pst.sgen, pst.seq, gen, ev[2]):
        raise OrderError(
            f"failed to advance {o.name(ev[0])}: can't make sequence: "
            f"{pst.seq} (gen={pst.sgen}) -> {ev[2]} (gen={gen})"
        )
    pst.sgen, pst.seq = gen, ev[2]
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_syscall_end(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                   m: int, p: int, g: int) -> NewCtx:
    check_user(m, p, g)
    st = o.running_g(ev[0], g, S.GS_SYSCALL)
    st.status = S.GS_RUNNING
    pst = o.pstate(p, ev[0])
    if pst.status != S.PS_SYSCALL:
        raise OrderError(
            f"expected proc {p} in state Syscall, but got {S.PROC_STATUS_NAMES[pst.status]} instead"
        )
    pst.status = S.PS_RUNNING
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_syscall_end_blocked(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                           m: int, p: int, g: int) -> NewCtx:
    if p != NONE:
        # While this thread still holds the P in its syscall, wait for the
        # ProcStop or ProcSteal that takes it away.
        if o.pstate(p, ev[0]).status == S.PS_SYSCALL:
            return None
    check_ctx(p, g, m, MUST, MAY, MUST)
    st = o.running_g(ev[0], g, S.GS_SYSCALL)
    st.status = S.GS_RUNNABLE
    o.queue.append((*ev, m, p, g, gt))
    return p, NONE


def go_create_syscall(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                      m: int, p: int, g: int) -> NewCtx:
    check_ctx(p, g, m, MUST, MAY, MUST_NOT)
    newg = as_i64(ev[2])
    if newg in o.gs:
        raise OrderError(f"tried to create goroutine ({newg}) in syscall that already exists")
    o.gs[newg] = GState(newg, S.GS_SYSCALL, gen)
    o.queue.append((*ev, m, p, g, gt))
    return p, newg


def go_destroy_syscall(o: OrderingBase, ev: list[Any], gt: Generation, gen: int,
                       m: int, p: int, g: int) -> NewCtx:
    check_ctx(p, g, m, MUST, MAY, MUST)
    o.running_g(ev[0], g, S.GS_SYSCALL)
    del o.gs[g]
    np = p
    if p != NONE:
        # The thread id may be reused: drop the P now, as if it stole it
        # from itself, and remember that its owner was lost.
        pst = o.pstate(p, ev[0], "invalid")
        if pst.status != S.PS_SYSCALL:
            raise OrderError(
                f"proc {p} in unexpected state {S.PROC_STATUS_NAMES[pst.status]} during {o.name(ev[0])}"
            )
        pst.status = S.PS_SYSCALL_ABANDONED
        np = NONE
        o.queue.append((S.EV_PROC_STEAL, ev[1], p, 0, 0, S.PS_SYSCALL, m, p, g, gt))
    o.queue.append((*ev, m, p, g, gt))
    return np, NONE


PROC_AND_GO_HANDLERS: dict[int, Handler] = {
    S.EV_PROC_START: proc_start,
    S.EV_PROC_STOP: proc_stop,
    S.EV_PROC_STEAL: proc_steal,
    S.EV_PROC_STATUS: proc_status,
    S.EV_GO_CREATE: go_create,
    S.EV_GO_CREATE_BLOCKED: go_create,
    S.EV_GO_CREATE_SYSCALL: go_create_syscall,
    S.EV_GO_START: go_start,
    S.EV_GO_DESTROY: go_stop_exec,
    S.EV_GO_STOP: go_stop_exec,
    S.EV_GO_BLOCK: go_stop_exec,
    S.EV_GO_DESTROY_SYSCALL: go_destroy_syscall,
    S.EV_GO_UNBLOCK: go_unblock,
    S.EV_GO_SWITCH: go_switch,
    S.EV_GO_SWITCH_DESTROY: go_switch,
    S.EV_GO_SYSCALL_BEGIN: go_syscall_begin,
    S.EV_GO_SYSCALL_END: go_syscall_end,
    S.EV_GO_SYSCALL_END_BLOCKED: go_syscall_end_blocked,
    S.EV_GO_STATUS: go_status,
    S.EV_GO_STATUS_STACK: go_status,
}
