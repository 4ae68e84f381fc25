"""Ordering handlers for goroutine state changes: creation, start, stop,
block/unblock, coroutine switches, syscalls and the per-generation status
events. See :mod:`order` for the event representation."""

from __future__ import annotations

from typing import Any

from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.order import (
    MAY,
    MUST,
    MUST_NOT,
    NONE,
    PROC_HANDLERS,
    GState,
    Handler,
    MState,
    NewCtx,
    OrderError,
    OrderingBase,
    _succeeds,
    check_ctx,
    check_user,
)
from collectors.gotrace.v2.wire import as_i64


def go_status(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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
                raise OrderError(
                    f"inconsistent thread for syscalling goroutine {gid}: thread has goroutine {g}"
                )
            ng = gid
        else:
            # A goroutine sitting in a syscall on another thread for the
            # whole generation: report it on that thread.
            mst = o.ms.get(mid)
            if mst is not None:
                if mst.g != gid:
                    raise OrderError(
                        f"inconsistent thread for syscalling goroutine {gid}: "
                        f"thread has goroutine {mst.g}"
                    )
                eg = mst.g
            else:
                o.ms[mid] = MState(gid, NONE)
            em = mid
    o.queue.append((*ev, em, p, eg, gt))
    return p, ng


def go_create(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_stop_exec(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_start(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    gid = as_i64(ev[2])
    st = o.gs.get(gid)
    if st is None or st.status != S.GS_RUNNABLE or not _succeeds(st.sgen, st.seq, gen, ev[3]):
        return None
    check_ctx(p, g, m, MUST, MUST, MUST_NOT)
    st.status = S.GS_RUNNING
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return p, gid


def go_unblock(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    gid = as_i64(ev[2])
    st = o.gs.get(gid)
    if st is None or st.status != S.GS_WAITING or not _succeeds(st.sgen, st.seq, gen, ev[3]):
        return None
    st.status = S.GS_RUNNABLE
    st.sgen, st.seq = gen, ev[3]
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_switch(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_syscall_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_syscall_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_syscall_end_blocked(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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


def go_create_syscall(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_ctx(p, g, m, MUST, MAY, MUST_NOT)
    newg = as_i64(ev[2])
    if newg in o.gs:
        raise OrderError(f"tried to create goroutine ({newg}) in syscall that already exists")
    o.gs[newg] = GState(newg, S.GS_SYSCALL, gen)
    o.queue.append((*ev, m, p, g, gt))
    return p, newg


def go_destroy_syscall(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
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
                f"proc {p} in unexpected state {S.PROC_STATUS_NAMES[pst.status]} "
                f"during {o.name(ev[0])}"
            )
        pst.status = S.PS_SYSCALL_ABANDONED
        np = NONE
        o.queue.append((S.EV_PROC_STEAL, ev[1], p, 0, 0, S.PS_SYSCALL, m, p, g, gt))
    o.queue.append((*ev, m, p, g, gt))
    return np, NONE


PROC_AND_GO_HANDLERS: dict[int, Handler] = {
    **PROC_HANDLERS,
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
