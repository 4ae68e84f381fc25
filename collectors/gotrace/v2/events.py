"""Turning ordered wire events into :class:`model.Event` objects, with the
same kinds, fields and stacks that Go's ``trace.Event`` accessors report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collectors.gotrace.model import Event, Frame, StackTable
from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.order import OrderError
from collectors.gotrace.v2.wire import as_i64

# Position in a queued event tuple of the event's own stack id, per type (0: none).
STACK_POS: list[int] = [0] * 257
for _t, _s in enumerate(S.SPECS):
    if _s.timed and _t != S.EV_CPU_SAMPLE and _s.stacks:
        STACK_POS[_t] = 1 + _s.stacks[0]


class Resolver:
    """Maps per-generation stack ids to global ids in the trace's StackTable."""

    __slots__ = ("table", "_cache", "_gen")

    def __init__(self, table: StackTable) -> None:
        self.table = table
        self._cache: dict[int, int] = {}
        self._gen: Generation | None = None

    def stack(self, gt: Generation, sid: int) -> int:
        if sid == 0:
            return 0
        if gt is not self._gen:
            self._gen = gt
            self._cache = {}
        gid = self._cache.get(sid)
        if gid is None:
            pcs = gt.stacks.get(sid)
            if pcs is None:
                raise OrderError(f"found invalid stack ID {sid}")
            frames = []
            strings = gt.strings
            for pc in pcs:
                fn, fl, line = gt.pcs[pc]
                frames.append(Frame(pc, strings.get(fn, ""), strings.get(fl, ""), line))
            gid = self._cache[sid] = self.table.intern(tuple(frames))
        return gid


_GO = S.GO_STATE_NAMES
_PROC = S.PROC_STATE_NAMES


def _state_name(names: tuple[str, ...], i: int) -> str:
    return names[i] if 0 <= i < len(names) else "Bad"


def _str(gt: Generation, sid: int) -> str:
    s = gt.string(sid)
    if s is None:
        raise OrderError(f"found invalid string ID {sid}")
    return s


Q = tuple[Any, ...]
Conv = Callable[[Q, int, int, Resolver], Event]
_ST = "StateTransition"
_G = "goroutine"
_P = "proc"
_NOT_EXIST, _RUNNABLE, _RUNNING, _WAITING, _SYSCALL = _GO[1:]
_IDLE = _PROC[S.PROC_IDLE]
_PRUNNING = _PROC[S.PROC_RUNNING]


def _c_go_create(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    to = _WAITING if q[0] == S.EV_GO_CREATE_BLOCKED else _RUNNABLE
    return Event(
        _ST, ts, q[6], q[7], q[8], stk, _G, as_i64(q[2]), _NOT_EXIST, to, "", r.stack(q[9], q[3])
    )


def _c_go_start(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, as_i64(q[2]), _RUNNABLE, _RUNNING)


def _c_go_unblock(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, as_i64(q[2]), _WAITING, _RUNNABLE)


def _c_go_stop(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    to = _RUNNABLE if q[0] == S.EV_GO_STOP else _WAITING
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, q[8], _RUNNING, to, _str(q[9], q[2]), stk)


def _c_go_destroy(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, q[8], _RUNNING, _NOT_EXIST)


def _c_go_syscall_begin(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, q[8], _RUNNING, _SYSCALL, "", stk)


def _c_go_syscall_end(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    to = _RUNNING if q[0] == S.EV_GO_SYSCALL_END else _RUNNABLE
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, q[8], _SYSCALL, to)


def _c_go_create_syscall(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, as_i64(q[2]), _NOT_EXIST, _SYSCALL)


def _c_go_destroy_syscall(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _G, q[8], _SYSCALL, _NOT_EXIST)


def _c_go_status(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    packed = q[4]
    to = packed & 0xFFFFFFFF
    to_state = _GO[S.GO_STATUS_TO_STATE[to] if to < 5 else 0]
    return Event(
        _ST, ts, q[6], q[7], q[8], stk, _G, as_i64(q[2]), _GO[packed >> 32], to_state, "", stk
    )


def _c_proc_start(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _P, as_i64(q[2]), _IDLE, _PRUNNING)


def _c_proc_stop(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(_ST, ts, q[6], q[7], q[8], stk, _P, q[7], _PRUNNING, _IDLE)


def _c_proc_steal(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    frm = _IDLE if q[5] == S.PS_SYSCALL_ABANDONED else _PRUNNING
    return Event(_ST, ts, q[6], q[7], q[8], stk, _P, as_i64(q[2]), frm, _IDLE)


def _c_proc_status(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(
        _ST,
        ts,
        q[6],
        q[7],
        q[8],
        stk,
        _P,
        as_i64(q[2]),
        _state_name(_PROC, q[4]),
        _PROC[S.PROC_STATUS_TO_STATE[q[3]]],
    )


def _metric(name: str) -> Conv:
    def conv(q: Q, ts: int, stk: int, r: Resolver) -> Event:
        return Event("Metric", ts, q[6], q[7], q[8], stk, name=name, value=q[2])

    return conv


def _c_label(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event("Label", ts, q[6], q[7], q[8], stk, name=_str(q[9], q[2]), scope=_G, scope_id=q[8])


_RANGE_KIND = {
    S.EV_STW_BEGIN: "RangeBegin",
    S.EV_STW_END: "RangeEnd",
    S.EV_GC_ACTIVE: "RangeActive",
    S.EV_GC_BEGIN: "RangeBegin",
    S.EV_GC_END: "RangeEnd",
    S.EV_GC_SWEEP_ACTIVE: "RangeActive",
    S.EV_GC_SWEEP_BEGIN: "RangeBegin",
    S.EV_GC_SWEEP_END: "RangeEnd",
    S.EV_GC_MARK_ASSIST_ACTIVE: "RangeActive",
    S.EV_GC_MARK_ASSIST_BEGIN: "RangeBegin",
    S.EV_GC_MARK_ASSIST_END: "RangeEnd",
}


def _c_range(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    typ = q[0]
    e = Event(_RANGE_KIND[typ], ts, q[6], q[7], q[8], stk)
    if typ == S.EV_STW_BEGIN or typ == S.EV_STW_END:
        e.name = "stop-the-world (" + _str(q[9], q[2]) + ")"
        e.scope, e.scope_id = _G, e.g
    elif typ in (S.EV_GC_BEGIN, S.EV_GC_ACTIVE, S.EV_GC_END):
        e.name = "GC concurrent mark phase"
        e.scope, e.scope_id = "global", -1
    elif typ in (S.EV_GC_SWEEP_BEGIN, S.EV_GC_SWEEP_ACTIVE, S.EV_GC_SWEEP_END):
        e.name = "GC incremental sweep"
        e.scope = _P
        e.scope_id = as_i64(q[2]) if typ == S.EV_GC_SWEEP_ACTIVE else e.p
        if typ == S.EV_GC_SWEEP_END:
            e.attrs = [("bytes swept", q[2]), ("bytes reclaimed", q[3])]
    else:
        e.name = "GC mark assist"
        e.scope = _G
        e.scope_id = as_i64(q[2]) if typ == S.EV_GC_MARK_ASSIST_ACTIVE else e.g
    return e


def _c_task_begin(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(
        "TaskBegin", ts, q[6], q[7], q[8], stk, name=_str(q[9], q[4]), task=q[2], parent=q[3]
    )


def _c_task_end(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event("TaskEnd", ts, q[6], q[7], q[8], stk, name=q[5], task=q[2], parent=q[4])


def _c_region(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    kind = "RegionBegin" if q[0] == S.EV_USER_REGION_BEGIN else "RegionEnd"
    return Event(kind, ts, q[6], q[7], q[8], stk, name=_str(q[9], q[3]), task=q[2])


def _c_log(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    return Event(
        "Log",
        ts,
        q[6],
        q[7],
        q[8],
        stk,
        task=q[2],
        category=_str(q[9], q[3]),
        message=_str(q[9], q[4]),
    )


def _c_experimental(q: Q, ts: int, stk: int, r: Resolver) -> Event:
    spec = S.SPECS[q[0]]
    attrs: list[tuple[str, int | str]] = []
    for i, an in enumerate(spec.args[1:]):
        v = q[2 + i]
        attrs.append((an, _str(q[9], v) if an.endswith("string") else v))
    return Event("Experimental", ts, q[6], q[7], q[8], stk, name=spec.name, attrs=attrs)


CONVERTERS: dict[int, Conv] = {
    S.EV_GO_CREATE: _c_go_create,
    S.EV_GO_CREATE_BLOCKED: _c_go_create,
    S.EV_GO_START: _c_go_start,
    S.EV_GO_UNBLOCK: _c_go_unblock,
    S.EV_GO_SWITCH: _c_go_unblock,
    S.EV_GO_SWITCH_DESTROY: _c_go_unblock,
    S.EV_GO_STOP: _c_go_stop,
    S.EV_GO_BLOCK: _c_go_stop,
    S.EV_GO_DESTROY: _c_go_destroy,
    S.EV_GO_SYSCALL_BEGIN: _c_go_syscall_begin,
    S.EV_GO_SYSCALL_END: _c_go_syscall_end,
    S.EV_GO_SYSCALL_END_BLOCKED: _c_go_syscall_end,
    S.EV_GO_CREATE_SYSCALL: _c_go_create_syscall,
    S.EV_GO_DESTROY_SYSCALL: _c_go_destroy_syscall,
    S.EV_GO_STATUS: _c_go_status,
    S.EV_GO_STATUS_STACK: _c_go_status,
    S.EV_PROC_START: _c_proc_start,
    S.EV_PROC_STOP: _c_proc_stop,
    S.EV_PROC_STEAL: _c_proc_steal,
    S.EV_PROC_STATUS: _c_proc_status,
    S.EV_PROCS_CHANGE: _metric("/sched/gomaxprocs:threads"),
    S.EV_HEAP_ALLOC: _metric("/memory/classes/heap/objects:bytes"),
    S.EV_HEAP_GOAL: _metric("/gc/heap/goal:bytes"),
    S.EV_GO_LABEL: _c_label,
    S.EV_USER_TASK_BEGIN: _c_task_begin,
    S.EV_USER_TASK_END: _c_task_end,
    S.EV_USER_REGION_BEGIN: _c_region,
    S.EV_USER_REGION_END: _c_region,
    S.EV_USER_LOG: _c_log,
}
for _typ in _RANGE_KIND:
    CONVERTERS[_typ] = _c_range
for _typ in range(128, 137):
    CONVERTERS[_typ] = _c_experimental


def to_event(q: Q, ts: int, r: Resolver) -> Event:
    """The model event for a queued wire event, at (fixed-up) time ``ts``."""
    # Every stack and string id an event names is resolved below, which
    # raises for unknown ids: that is Go's table-id validation too.
    typ = q[0]
    pos = STACK_POS[typ]
    return CONVERTERS[typ](q, ts, r.stack(q[9], q[pos]) if pos and q[pos] else 0, r)
