"""Consistency check of the merged old-family stream, as Go's parser does it.

The reference parser refuses a trace whose merged events contradict each
other (a P stopping while running a goroutine, a goroutine unblocked that was
not blocked, ...). While checking, it also rewrites a few events: a GC start
moves to the fake GC P, an unblock of a goroutine blocked on the network
moves to the fake netpoll P, and a stack id naming no stack is dropped.
"""

from __future__ import annotations

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.v1.parser import (
    A0,
    A1,
    A2,
    GC_P,
    NETPOLL_P,
    STK,
    TIMER_P,
    TS,
    TYP,
    Ev,
    G,
    P,
)
from collectors.gotrace.v1.wire import (
    EV_GC_DONE,
    EV_GC_MARK_ASSIST_DONE,
    EV_GC_MARK_ASSIST_START,
    EV_GC_START,
    EV_GC_SWEEP_DONE,
    EV_GC_SWEEP_START,
    EV_GO_BLOCK_NET,
    EV_GO_CREATE,
    EV_GO_END,
    EV_GO_IN_SYSCALL,
    EV_GO_PREEMPT,
    EV_GO_SCHED,
    EV_GO_START,
    EV_GO_START_LABEL,
    EV_GO_STOP,
    EV_GO_SYS_BLOCK,
    EV_GO_SYS_EXIT,
    EV_GO_SYSCALL,
    EV_GO_UNBLOCK,
    EV_GO_WAITING,
    EV_PROC_START,
    EV_PROC_STOP,
    EV_STW_DONE,
    EV_STW_START,
    EV_USER_REGION,
    EV_USER_TASK_CREATE,
    EV_USER_TASK_END,
    NAMES,
)

_DEAD, _RUNNABLE, _RUNNING, _WAITING = 0, 1, 2, 3
# Goroutine record: [state, type of the event that last set it (or -1), in mark assist]
_ST, _LAST, _ASSIST = 0, 1, 2
# P record: [running, goroutine, sweeping]
_RUN, _PG, _SWEEP = 0, 1, 2

# GoSleep, GoBlock, GoBlockSend/Recv/Select/Sync/Cond/Net, GoBlockGC.
_BLOCKS = frozenset((19, 20, 22, 23, 24, 25, 26, 27, 42))
_CHECKED = (
    frozenset(
        (
            EV_PROC_START,
            EV_PROC_STOP,
            EV_GC_START,
            EV_GC_DONE,
            EV_STW_START,
            EV_STW_DONE,
            EV_GC_SWEEP_START,
            EV_GC_SWEEP_DONE,
            EV_GC_MARK_ASSIST_START,
            EV_GC_MARK_ASSIST_DONE,
            EV_GO_WAITING,
            EV_GO_IN_SYSCALL,
            EV_GO_CREATE,
            EV_GO_START,
            EV_GO_START_LABEL,
            EV_GO_END,
            EV_GO_STOP,
            EV_GO_SCHED,
            EV_GO_PREEMPT,
            EV_GO_UNBLOCK,
            EV_GO_SYSCALL,
            EV_GO_SYS_BLOCK,
            EV_GO_SYS_EXIT,
            EV_USER_TASK_CREATE,
            EV_USER_TASK_END,
            EV_USER_REGION,
        )
    )
    | _BLOCKS
)


def _fail(msg: str) -> TraceFormatError:
    return TraceFormatError(-1, msg)


def _check_running(pg: int, g: list[int], ev: Ev, allow_g0: bool) -> None:
    name = NAMES[ev[TYP]]
    if g[_ST] != _RUNNING:
        raise _fail(f"g {ev[G]} is not running while {name} (time {ev[TS]})")
    if pg != ev[G]:
        raise _fail(f"p {ev[P]} is not running g {ev[G]} while {name} (time {ev[TS]})")
    if not allow_g0 and ev[G] == 0:
        raise _fail(f"g 0 did {name} (time {ev[TS]})")


def check(events: list[Ev], stacks: dict[int, list[int]]) -> None:
    """Validate ``events`` in order, rewriting them in place as Go does."""
    gs: dict[int, list[int]] = {0: [_RUNNING, -1, 0]}
    ps: dict[int, list[int]] = {}
    tasks: set[int] = set()
    regions: dict[int, list[tuple[int, int]]] = {}
    in_gc = in_stw = False
    checked = _CHECKED

    def gget(gid: int) -> list[int]:
        # A copy, as Go's map read of a struct; stored back only where Go does.
        r = gs.get(gid)
        return [_DEAD, -1, 0] if r is None else list(r)

    def pget(pid: int) -> list[int]:
        r = ps.get(pid)
        return [0, 0, 0] if r is None else list(r)

    for ev in events:
        typ = ev[TYP]
        if typ in checked:
            ts = ev[TS]
            if typ == EV_PROC_START:
                p = pget(ev[P])
                if p[_RUN]:
                    raise _fail(f"p {ev[P]} is running before start (time {ts})")
                p[_RUN] = 1
                ps[ev[P]] = p
            elif typ == EV_PROC_STOP:
                p = pget(ev[P])
                if not p[_RUN]:
                    raise _fail(f"p {ev[P]} is not running before stop (time {ts})")
                if p[_PG] != 0:
                    raise _fail(
                        f"p {ev[P]} is running a goroutine {p[_PG]} during stop (time {ts})"
                    )
                p[_RUN] = 0
                ps[ev[P]] = p
            elif typ == EV_GC_START:
                if in_gc:
                    raise _fail(f"previous GC is not ended before a new one (time {ts})")
                in_gc = True
                ev[P] = GC_P
            elif typ == EV_GC_DONE:
                if not in_gc:
                    raise _fail(f"bogus GC end (time {ts})")
                in_gc = False
            elif typ == EV_STW_START:
                if in_stw:
                    raise _fail(f"previous STW is not ended before a new one (time {ts})")
                in_stw = True
            elif typ == EV_STW_DONE:
                if not in_stw:
                    raise _fail(f"bogus STW end (time {ts})")
                in_stw = False
            elif typ == EV_GC_SWEEP_START:
                p = pget(ev[P])
                if p[_SWEEP]:
                    raise _fail(f"previous sweeping is not ended before a new one (time {ts})")
                p[_SWEEP] = 1
                ps[ev[P]] = p
            elif typ == EV_GC_SWEEP_DONE:
                p = pget(ev[P])
                if not p[_SWEEP]:
                    raise _fail(f"bogus sweeping end (time {ts})")
                p[_SWEEP] = 0
                ps[ev[P]] = p
            elif typ == EV_GC_MARK_ASSIST_START:
                g = gget(ev[G])
                if g[_ASSIST]:
                    raise _fail(f"previous mark assist is not ended before a new one (time {ts})")
                g[_ASSIST] = 1
                gs[ev[G]] = g
            elif typ == EV_GC_MARK_ASSIST_DONE:
                # An assist may already be running when tracing starts: no check.
                g = gget(ev[G])
                g[_ASSIST] = 0
                gs[ev[G]] = g
            elif typ == EV_GO_WAITING or typ == EV_GO_IN_SYSCALL:
                g = gget(ev[G])
                if g[_ST] != _RUNNABLE:
                    which = "EvGoWaiting" if typ == EV_GO_WAITING else "EvGoInSyscall"
                    raise _fail(f"g {ev[G]} is not runnable before {which} (time {ts})")
                g[_ST] = _WAITING
                g[_LAST] = typ
                gs[ev[G]] = g
            elif typ == EV_GO_CREATE:
                _check_running(pget(ev[P])[_PG], gget(ev[G]), ev, True)
                if ev[A0] in gs:
                    raise _fail(f"g {ev[A0]} already exists (time {ts})")
                gs[ev[A0]] = [_RUNNABLE, typ, 0]
            elif typ == EV_GO_START or typ == EV_GO_START_LABEL:
                g = gget(ev[G])
                p = pget(ev[P])
                if g[_ST] != _RUNNABLE:
                    raise _fail(f"g {ev[G]} is not runnable before start (time {ts})")
                if p[_PG] != 0:
                    raise _fail(
                        f"p {ev[P]} is already running g {p[_PG]} while start g {ev[G]} (time {ts})"
                    )
                g[_ST] = _RUNNING
                g[_LAST] = -1
                p[_PG] = ev[G]
                gs[ev[G]] = g
                ps[ev[P]] = p
            elif typ == EV_GO_END or typ == EV_GO_STOP:
                g = gget(ev[G])
                p = pget(ev[P])
                _check_running(p[_PG], g, ev, False)
                g[_ST] = _DEAD
                p[_PG] = 0
                if typ == EV_GO_END:
                    regions.pop(ev[G], None)
                gs[ev[G]] = g
                ps[ev[P]] = p
            elif typ == EV_GO_SCHED or typ == EV_GO_PREEMPT:
                g = gget(ev[G])
                p = pget(ev[P])
                _check_running(p[_PG], g, ev, False)
                g[_ST] = _RUNNABLE
                g[_LAST] = typ
                p[_PG] = 0
                gs[ev[G]] = g
                ps[ev[P]] = p
            elif typ == EV_GO_UNBLOCK:
                g = gget(ev[G])
                p = pget(ev[P])
                if g[_ST] != _RUNNING:
                    raise _fail(f"g {ev[G]} is not running while unpark (time {ts})")
                if ev[P] != TIMER_P and p[_PG] != ev[G]:
                    raise _fail(f"p {ev[P]} is not running g {ev[G]} while unpark (time {ts})")
                g1 = gget(ev[A0])
                if g1[_ST] != _WAITING:
                    raise _fail(f"g {ev[A0]} is not waiting before unpark (time {ts})")
                if g1[_LAST] == EV_GO_BLOCK_NET:
                    ev[P] = NETPOLL_P
                g1[_ST] = _RUNNABLE
                g1[_LAST] = typ
                gs[ev[A0]] = g1
            elif typ == EV_GO_SYSCALL:
                g = gget(ev[G])
                _check_running(pget(ev[P])[_PG], g, ev, False)
                g[_LAST] = typ
                gs[ev[G]] = g
            elif typ == EV_GO_SYS_BLOCK:
                g = gget(ev[G])
                p = pget(ev[P])
                _check_running(p[_PG], g, ev, False)
                g[_ST] = _WAITING
                p[_PG] = 0
                gs[ev[G]] = g
                ps[ev[P]] = p
            elif typ == EV_GO_SYS_EXIT:
                g = gget(ev[G])
                if g[_ST] != _WAITING:
                    raise _fail(f"g {ev[G]} is not waiting during syscall exit (time {ts})")
                g[_ST] = _RUNNABLE
                g[_LAST] = typ
                gs[ev[G]] = g
            elif typ in _BLOCKS:
                g = gget(ev[G])
                p = pget(ev[P])
                _check_running(p[_PG], g, ev, False)
                g[_ST] = _WAITING
                g[_LAST] = typ
                p[_PG] = 0
                gs[ev[G]] = g
                ps[ev[P]] = p
            elif typ == EV_USER_TASK_CREATE:
                if ev[A0] in tasks:
                    raise _fail(f"task id conflicts (id:{ev[A0]})")
                tasks.add(ev[A0])
            elif typ == EV_USER_TASK_END:
                tasks.discard(ev[A0])
            elif typ == EV_USER_REGION:
                mode = ev[A1]
                stack = regions.get(ev[G])
                if mode == 0:
                    if stack is None:
                        regions[ev[G]] = [(ev[A0], ev[A2])]
                    else:
                        stack.append((ev[A0], ev[A2]))
                elif mode == 1:
                    if stack:
                        if stack[-1] != (ev[A0], ev[A2]):
                            raise _fail(
                                f"misuse of region in goroutine {ev[G]}: region end "
                                f"(task {ev[A0]}, type {ev[A2]}) does not match the innermost one "
                                f"(task {stack[-1][0]}, type {stack[-1][1]}) (time {ts})"
                            )
                        stack.pop()
                        if not stack:
                            del regions[ev[G]]
                else:
                    raise _fail(f"invalid user region mode {mode} (time {ts})")
        stk = ev[STK]
        if stk and not stacks.get(stk):
            ev[STK] = 0
