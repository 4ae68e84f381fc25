"""Ordering handlers for everything that is not a proc or goroutine state
change: GC phases, special ranges (sweep, mark assist, stop-the-world),
metrics, user tasks, regions, logs and labels, and experimental events.
See :mod:`order` for the event representation.
"""

from __future__ import annotations

from typing import Any

from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.order import (
    MAY,
    MUST,
    NONE,
    GState,
    Handler,
    NewCtx,
    OrderError,
    OrderingBase,
    PState,
    check_ctx,
    check_user,
)
from collectors.gotrace.v2.order_go import PROC_AND_GO_HANDLERS
from collectors.gotrace.v2.wire import U64_MASK, as_i64

NO_TASK = U64_MASK
GC_UNDETERMINED, GC_NOT_RUNNING, GC_RUNNING = 0, 1, 2


def _begin_range(st: GState | PState, rt: tuple[int, int]) -> None:
    if rt in st.ranges:
        raise OrderError(
            f"discovered event already in-flight for when starting event {S.SPECS[rt[0]].name}"
        )
    st.ranges.append(rt)


def _active_range(st: GState | PState, rt: tuple[int, int], initial: bool) -> None:
    if initial:
        if rt in st.ranges:
            raise OrderError(
                f"found named active range already in first gen: {S.SPECS[rt[0]].name}"
            )
        st.ranges.append(rt)
    elif rt not in st.ranges:
        raise OrderError(f"resource is missing active range: {S.SPECS[rt[0]].name}")


def _end_range(st: GState | PState, typ: int) -> int:
    """Close the in-flight range that ``typ`` ends; return its description."""
    start = S.SPECS[typ].start
    rs = st.ranges
    for i, r in enumerate(rs):
        if r[0] == start:
            desc = r[1]
            # Swap-remove, as Go does: the order of ranges left matters later.
            rs[i] = rs[-1]
            rs.pop()
            return desc
    raise OrderError(f"tried to end event {S.SPECS[start].name}, but not in-flight")


def _name(gt: Generation, sid: int, typ: int) -> str:
    s = gt.string(sid)
    if s is None:
        raise OrderError(f"invalid string ID {sid} for {typ} event")
    return s


def _cur_g(o: OrderingBase, g: int, what: str) -> GState:
    st = o.gs.get(g)
    if st is None:
        raise OrderError(f"encountered {what} without known state for current goroutine {g}")
    return st


# ---------------------------------------------------------------- GC


def gc_active(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    seq = ev[2]
    if gen == o.initial_gen:
        if o.gc_state != GC_UNDETERMINED:
            raise OrderError("GCActive in the first generation isn't first GC event")
        o.gc_seq, o.gc_state = seq, GC_RUNNING
        o.queue.append((*ev, m, p, g, gt))
        return p, g
    if seq != ((o.gc_seq + 1) & U64_MASK):
        return None
    if o.gc_state != GC_RUNNING:
        raise OrderError("encountered GCActive while GC was not in progress")
    o.gc_seq = seq
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def gc_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    seq = ev[2]
    if o.gc_state == GC_UNDETERMINED:
        o.gc_seq, o.gc_state = seq, GC_RUNNING
        o.queue.append((*ev, m, p, g, gt))
        return p, g
    if seq != ((o.gc_seq + 1) & U64_MASK):
        return None
    if o.gc_state == GC_RUNNING:
        raise OrderError("encountered GCBegin while GC was already in progress")
    o.gc_seq, o.gc_state = seq, GC_RUNNING
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def gc_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    seq = ev[2]
    if seq != ((o.gc_seq + 1) & U64_MASK):
        return None
    if o.gc_state == GC_NOT_RUNNING:
        raise OrderError("encountered GCEnd when GC was not in progress")
    if o.gc_state == GC_UNDETERMINED:
        raise OrderError("encountered GCEnd when GC was in an undetermined state")
    o.gc_seq, o.gc_state = seq, GC_NOT_RUNNING
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def sweep_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_ctx(p, g, m, MUST, MUST, MAY)
    _begin_range(o.pstate(p, ev[0]), (S.EV_GC_SWEEP_BEGIN, 0))
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def sweep_active(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    pid = as_i64(ev[2])
    st = o.ps.get(pid)
    if st is None:
        raise OrderError(f"encountered GCSweepActive for unknown proc {pid}")
    _active_range(st, (S.EV_GC_SWEEP_BEGIN, 0), gen == o.initial_gen)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def sweep_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_ctx(p, g, m, MUST, MUST, MAY)
    _end_range(o.pstate(p, ev[0]), ev[0])
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_range_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_user(m, p, g)
    typ = ev[0]
    desc = ev[2] if typ == S.EV_STW_BEGIN else 0
    st = o.gs.get(g)
    if st is None:
        raise OrderError(
            f"encountered event of type {typ} without known state for current goroutine {g}"
        )
    _begin_range(st, (typ, desc))
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_range_active(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    gid = as_i64(ev[2])
    st = o.gs.get(gid)
    if st is None:
        raise OrderError(f"uninitialized goroutine {gid} found during {o.name(ev[0])}")
    _active_range(st, (S.start_type(ev[0]), 0), gen == o.initial_gen)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def go_range_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_user(m, p, g)
    typ = ev[0]
    st = o.gs.get(g)
    if st is None:
        raise OrderError(
            f"encountered event of type {typ} without known state for current goroutine {g}"
        )
    desc = _end_range(st, typ)
    if typ == S.EV_STW_END:
        ev[2] = desc  # the stop-the-world kind, for the range name
    o.queue.append((*ev, m, p, g, gt))
    return p, g


# ---------------------------------------------------------------- simple events


def annotation(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def heap_metric(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    if m == NONE or p == NONE:
        check_ctx(p, g, m, MUST, MUST, MAY)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def alloc_free(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_ctx(p, g, m, MUST, MAY, MAY)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


# ---------------------------------------------------------------- tasks and regions


def task_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    tid = ev[2]
    if tid in o.tasks:
        raise OrderError(f"task ID conflict: {tid}")
    if ev[3] == 0:
        # Parent 0 means "no parent" here, not the background task.
        ev[3] = NO_TASK
    name = _name(gt, ev[4], ev[0])
    o.tasks[tid] = (name, ev[3])
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def task_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    info = o.tasks.pop(ev[2], None)
    if info is not None:
        ev[4], ev[5] = info[1], info[0]
    else:
        ev[4], ev[5] = NO_TASK, ""
    check_user(m, p, g)
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def region_begin(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_user(m, p, g)
    name = _name(gt, ev[3], ev[0])
    _cur_g(o, g, "EvUserRegionBegin").regions.append((ev[2], name))
    o.queue.append((*ev, m, p, g, gt))
    return p, g


def region_end(
    o: OrderingBase, ev: list[Any], gt: Generation, gen: int, m: int, p: int, g: int
) -> NewCtx:
    check_user(m, p, g)
    name = _name(gt, ev[3], ev[0])
    regions = _cur_g(o, g, "EvUserRegionEnd").regions
    if regions:
        # Regions begun before tracing started are unknown; only check known ones.
        top = regions[-1]
        if top != (ev[2], name):
            raise OrderError(
                f"misuse of region in goroutine {g}: region end {{{ev[2]} {name}}} when the "
                f"inner-most active region start event is {{{top[0]} {top[1]}}}"
            )
        regions.pop()
    o.queue.append((*ev, m, p, g, gt))
    return p, g


class Ordering(OrderingBase):
    """The complete ordering state machine."""

    def __init__(self, version: str) -> None:
        super().__init__(version)
        h: dict[int, Handler] = dict(PROC_AND_GO_HANDLERS)
        h.update(
            {
                S.EV_PROCS_CHANGE: annotation,
                S.EV_STW_BEGIN: go_range_begin,
                S.EV_STW_END: go_range_end,
                S.EV_GC_ACTIVE: gc_active,
                S.EV_GC_BEGIN: gc_begin,
                S.EV_GC_END: gc_end,
                S.EV_GC_SWEEP_ACTIVE: sweep_active,
                S.EV_GC_SWEEP_BEGIN: sweep_begin,
                S.EV_GC_SWEEP_END: sweep_end,
                S.EV_GC_MARK_ASSIST_ACTIVE: go_range_active,
                S.EV_GC_MARK_ASSIST_BEGIN: go_range_begin,
                S.EV_GC_MARK_ASSIST_END: go_range_end,
                S.EV_HEAP_ALLOC: heap_metric,
                S.EV_HEAP_GOAL: heap_metric,
                S.EV_GO_LABEL: annotation,
                S.EV_USER_TASK_BEGIN: task_begin,
                S.EV_USER_TASK_END: task_end,
                S.EV_USER_REGION_BEGIN: region_begin,
                S.EV_USER_REGION_END: region_end,
                S.EV_USER_LOG: annotation,
            }
        )
        for typ in range(128, 137):
            h[typ] = alloc_free
        self.handlers = h
