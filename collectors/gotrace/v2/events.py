"""Turning ordered wire events into :class:`model.Event` objects, with the
same kinds, fields and stacks that Go's ``trace.Event`` accessors report."""

from __future__ import annotations

from typing import Any, Callable

from collectors.gotrace.model import Event, Frame, StackTable
from collectors.gotrace.v2 import specs as S
from collectors.gotrace.v2.generation import Generation
from collectors.gotrace.v2.order import OrderError
from collectors.gotrace.v2.wire import as_i64

# Position in a queued event tuple of the event's own stack id, per type (0: none).
STACK_POS: list[int] = [0] * 257
# Positions of all stack / string ids that must resolve, per type.
CHECK_STACKS: list[tuple[int, ...]] = [()] * 257
CHECK_STRINGS: list[tuple[int, ...]] = [()] * 257
for _t, _s in enumerate(S.SPECS):
    if _s.timed and _t != S.EV_CPU_SAMPLE:
        if _s.stacks:
            STACK_POS[_t] = 1 + _s.stacks[0]
        CHECK_STACKS[_t] = tuple(1 + i for i in _s.stacks)
        CHECK_STRINGS[_t] = tuple(1 + i for i in _s.strings)


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


def validate_ids(q: tuple[Any, ...]) -> None:
    """Go's check that every stack and string id an event names exists."""
    typ = q[0]
    gt: Generation = q[9]
    for i in CHECK_STACKS[typ]:
        sid = q[i]
        if sid != 0 and sid not in gt.stacks:
            raise OrderError(f"found invalid stack ID {sid} for event {S.SPECS[typ].name}")
    for i in CHECK_STRINGS[typ]:
        sid = q[i]
        if sid != 0 and sid not in gt.strings:
            raise OrderError(f"found invalid string ID {sid} for event {S.SPECS[typ].name}")


_GO = S.GO_STATE_NAMES
_PROC = S.PROC_STATE_NAMES


def _state_name(names: tuple[str, ...], i: int) -> str:
    return names[i] if 0 <= i < len(names) else "Bad"


def _str(gt: Generation, sid: int) -> str:
    s = gt.string(sid)
    if s is None:
        raise OrderError(f"found invalid string ID {sid}")
    return s


Conv = Callable[[Event, tuple[Any, ...], Resolver], None]


def _go(e: Event, rid: int, frm: int, to: int) -> None:
    e.kind = "StateTransition"
    e.resource = "goroutine"
    e.rid = rid
    e.from_state = _GO[frm]
    e.to_state = _GO[to]


def _proc(e: Event, rid: int, frm: int, to: int) -> None:
    e.kind = "StateTransition"
    e.resource = "proc"
    e.rid = rid
    e.from_state = _state_name(_PROC, frm)
    e.to_state = _PROC[to]


def _c_go_create(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    to = S.GO_WAITING if q[0] == S.EV_GO_CREATE_BLOCKED else S.GO_RUNNABLE
    _go(e, as_i64(q[2]), S.GO_NOT_EXIST, to)
    e.tstack = r.stack(q[9], q[3])


def _c_go_start(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, as_i64(q[2]), S.GO_RUNNABLE, S.GO_RUNNING)


def _c_go_unblock(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, as_i64(q[2]), S.GO_WAITING, S.GO_RUNNABLE)


def _c_go_stop(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    to = S.GO_RUNNABLE if q[0] == S.EV_GO_STOP else S.GO_WAITING
    _go(e, e.g, S.GO_RUNNING, to)
    e.reason = _str(q[9], q[2])
    e.tstack = e.stack


def _c_go_destroy(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, e.g, S.GO_RUNNING, S.GO_NOT_EXIST)


def _c_go_syscall_begin(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, e.g, S.GO_RUNNING, S.GO_SYSCALL)
    e.tstack = e.stack


def _c_go_syscall_end(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    to = S.GO_RUNNING if q[0] == S.EV_GO_SYSCALL_END else S.GO_RUNNABLE
    _go(e, e.g, S.GO_SYSCALL, to)


def _c_go_create_syscall(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, as_i64(q[2]), S.GO_NOT_EXIST, S.GO_SYSCALL)


def _c_go_destroy_syscall(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _go(e, e.g, S.GO_SYSCALL, S.GO_NOT_EXIST)


def _c_go_status(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    packed = q[4]
    to = packed & 0xFFFFFFFF
    _go(e, as_i64(q[2]), packed >> 32, S.GO_STATUS_TO_STATE[to] if to < 5 else 0)
    e.tstack = e.stack


def _c_proc_start(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _proc(e, as_i64(q[2]), S.PROC_IDLE, S.PROC_RUNNING)


def _c_proc_stop(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _proc(e, e.p, S.PROC_RUNNING, S.PROC_IDLE)


def _c_proc_steal(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    frm = S.PROC_IDLE if q[5] == S.PS_SYSCALL_ABANDONED else S.PROC_RUNNING
    _proc(e, as_i64(q[2]), frm, S.PROC_IDLE)


def _c_proc_status(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    _proc(e, as_i64(q[2]), q[4], S.PROC_STATUS_TO_STATE[q[3]])


def _metric(name: str) -> Conv:
    def conv(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
        e.kind = "Metric"
        e.name = name
        e.value = q[2]
    return conv


def _c_label(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    e.kind = "Label"
    e.name = _str(q[9], q[2])
    e.scope = "goroutine"
    e.scope_id = e.g


_RANGE_KIND = {
    S.EV_STW_BEGIN: "RangeBegin", S.EV_STW_END: "RangeEnd",
    S.EV_GC_ACTIVE: "RangeActive", S.EV_GC_BEGIN: "RangeBegin", S.EV_GC_END: "RangeEnd",
    S.EV_GC_SWEEP_ACTIVE: "RangeActive", S.EV_GC_SWEEP_BEGIN: "RangeBegin",
    S.EV_GC_SWEEP_END: "RangeEnd",
    S.EV_GC_MARK_ASSIST_ACTIVE: "RangeActive", S.EV_GC_MARK_ASSIST_BEGIN: "RangeBegin",
    S.EV_GC_MARK_ASSIST_END: "RangeEnd",
}


def _c_range(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    typ = q[0]
    e.kind = _RANGE_KIND[typ]
    if typ == S.EV_STW_BEGIN or typ == S.EV_STW_END:
        e.name = "stop-the-world (" + _str(q[9], q[2]) + ")"
        e.scope, e.scope_id = "goroutine", e.g
    elif typ in (S.EV_GC_BEGIN, S.EV_GC_ACTIVE, S.EV_GC_END):
        e.name = "GC concurrent mark phase"
        e.scope, e.scope_id = "global", -1
    elif typ in (S.EV_GC_SWEEP_BEGIN, S.EV_GC_SWEEP_ACTIVE, S.EV_GC_SWEEP_END):
        e.name = "GC incremental sweep"
        e.scope = "proc"
        e.scope_id = as_i64(q[2]) if typ == S.EV_GC_SWEEP_ACTIVE else e.p
        if typ == S.EV_GC_SWEEP_END:
            e.attrs = [("bytes swept", q[2]), ("bytes reclaimed", q[3])]
    else:
        e.name = "GC mark assist"
        e.scope = "goroutine"
        e.scope_id = as_i64(q[2]) if typ == S.EV_GC_MARK_ASSIST_ACTIVE else e.g


def _c_task_begin(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    e.kind = "TaskBegin"
    e.task, e.parent = q[2], q[3]
    e.name = _str(q[9], q[4])


def _c_task_end(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    e.kind = "TaskEnd"
    e.task, e.parent, e.name = q[2], q[4], q[5]


def _c_region(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    e.kind = "RegionBegin" if q[0] == S.EV_USER_REGION_BEGIN else "RegionEnd"
    e.task = q[2]
    e.name = _str(q[9], q[3])


def _c_log(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    e.kind = "Log"
    e.task = q[2]
    e.category = _str(q[9], q[3])
    e.message = _str(q[9], q[4])


def _c_experimental(e: Event, q: tuple[Any, ...], r: Resolver) -> None:
    spec = S.SPECS[q[0]]
    e.kind = "Experimental"
    e.name = spec.name
    attrs: list[tuple[str, int | str]] = []
    for i, an in enumerate(spec.args[1:]):
        v = q[2 + i]
        attrs.append((an, _str(q[9], v) if an.endswith("string") else v))
    e.attrs = attrs


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


def to_event(q: tuple[Any, ...], ts: int, r: Resolver) -> Event:
    """The model event for a queued wire event, at (fixed-up) time ``ts``."""
    typ = q[0]
    e = Event("", ts, q[6], q[7], q[8])
    pos = STACK_POS[typ]
    if pos:
        e.stack = r.stack(q[9], q[pos])
    CONVERTERS[typ](e, q, r)
    return e
