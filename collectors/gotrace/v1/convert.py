"""Old-family events -> the shared event model, as Go 1.27 converts them.

Go reads an old trace by parsing it whole and translating each old event
into the new (1.22+) event model, treating the trace as one generation. The
translation has quirks that show in ``go tool trace -d=parsed`` and that we
reproduce on purpose:

- goroutines that existed before tracing started are reported by status
  events; the first Gomaxprocs event ends that phase and is itself dropped;
- a syscall that did not block becomes a 1 ns Syscall->Running pair;
- GoStartLabel becomes GoStart plus a Label event;
- those synthesized events take the thread of their P (0 when unknown) and
  keep goroutine 0 as 0, unlike the general path (-1 for both);
- TaskEnd reports the task's raw parent id (0 for none), TaskBegin NoTask;
- timestamps are forced strictly increasing, 1 ns apart at worst.
"""

from __future__ import annotations

from collections.abc import Callable

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import NO_TASK, NONE, Event, Frame, StackTable
from collectors.gotrace.v1 import wire as w
from collectors.gotrace.v1.parser import A0, A1, A2, A3, STK, TS, TYP, Ev, G, P, Parser

# Strings the converter adds after the trace's own and the inline ones.
_BUILTINS = (
    "forever",
    "preempted",
    "runtime.Gosched",
    "sleep",
    "chan send",
    "chan receive",
    "network",
    "sync",
    "sync.(*Cond).Wait",
    "select",
    "",
    "GC mark assist wait for work",
)
#: STW reason names by reason number (0 is unknown).
STW_REASONS = (
    "",
    "GC mark termination",
    "GC sweep termination",
    "write heap dump",
    "goroutine profile",
    "goroutine profile cleanup",
    "all goroutine stack trace",
    "read mem stats",
    "AllThreadsSyscall",
    "GOMAXPROCS",
    "start trace",
    "stop trace",
    "CountPagesInUse (test)",
    "ReadMetricsSlow (test)",
    "ReadMemStatsSlow (test)",
    "PageCachePagesLeaked (test)",
    "ResetDebugLog (test)",
)
_ALL_BUILTINS = _BUILTINS + STW_REASONS

#: Reason of the Running->Waiting/Runnable transition per old blocking event.
_BLOCK_REASON = {
    w.EV_GO_STOP: "forever",
    w.EV_GO_SLEEP: "sleep",
    w.EV_GO_BLOCK: "",
    w.EV_GO_BLOCK_SEND: "chan send",
    w.EV_GO_BLOCK_RECV: "chan receive",
    w.EV_GO_BLOCK_SELECT: "select",
    w.EV_GO_BLOCK_SYNC: "sync",
    w.EV_GO_BLOCK_COND: "sync.(*Cond).Wait",
    w.EV_GO_BLOCK_NET: "network",
    w.EV_GO_BLOCK_GC: "GC mark assist wait for work",
}
_STOP_REASON = {w.EV_GO_SCHED: "runtime.Gosched", w.EV_GO_PREEMPT: "preempted"}

_GC = "GC concurrent mark phase"
_SWEEP = "GC incremental sweep"
_ASSIST = "GC mark assist"
_GOAL = "/gc/heap/goal:bytes"
_HEAP = "/memory/classes/heap/objects:bytes"
_PROCS = "/sched/gomaxprocs:threads"

_ST = "StateTransition"
_GOR = "goroutine"
_PROC = "proc"
_UNDET = "Undetermined"

_TWO63 = 1 << 63
_TWO64 = 1 << 64


def _gid(v: int) -> int:
    """Go's GoID(v) for a uint64 v."""
    return v - _TWO64 if v >= _TWO63 else v


def stw_reason(minor: int, kind: int) -> str:
    """Name of an old STW kind id as Go 1.27 maps it per format version."""
    if minor < 21:
        r = kind + 1 if kind in (0, 1) else 0
    elif minor == 21:
        r = kind if kind < len(STW_REASONS) else 0
    else:
        r = 0
    return STW_REASONS[r]


def mark_blocking_syscalls(events: list[Ev]) -> None:
    """Flag (in A0, unused by GoSysCall) each syscall whose goroutine's next
    event is GoSysBlock: the converter looks ahead for exactly that."""
    next_typ: dict[int, int] = {}
    for i in range(len(events) - 1, -1, -1):
        ev = events[i]
        typ = ev[TYP]
        g = ev[G]
        if typ == w.EV_GO_SYSCALL:
            ev[A0] = 1 if next_typ.get(g) == w.EV_GO_SYS_BLOCK else 0
        next_typ[g] = typ


class Converter:
    """Turns merged, validated old events into model events (un-bumped
    timestamps: the driver makes them strictly increasing)."""

    def __init__(self, parser: Parser, stacks: StackTable) -> None:
        self.minor = parser.minor
        self._strings = parser.strings
        self._inline = parser.inline_strings
        top = max(self._strings) if self._strings else 0
        if top + len(self._inline) + len(_ALL_BUILTINS) > w.MASK64:
            raise TraceFormatError(-1, "trace contains too many strings")
        self._top = top
        self._v1_stacks = parser.stacks
        self._pcs = parser.pcs
        self._table = stacks
        self._interned: dict[int, int] = {}
        self.pre_init = True
        self._created_pre_init: dict[int, None] = {}
        self._seen_procs: set[int] = set()
        self._proc_m: dict[int, int] = {}
        self._last_stw = ""
        self._tasks: dict[int, tuple[str, int]] = {}

    # ------------------------------------------------------------------
    # Lookups

    def string(self, sid: int, what: str) -> str:
        """A string by id in the converter's id space (trace strings, then
        inline UserLog messages, then its own); Go panics on a missing one."""
        if sid == 0:
            return ""
        s = self._strings.get(sid)
        if s is not None:
            return s
        k = sid - self._top - 1
        if 0 <= k < len(self._inline):
            return self._inline[k]
        k -= len(self._inline)
        if 0 <= k < len(_ALL_BUILTINS):
            return _ALL_BUILTINS[k]
        raise TraceFormatError(
            -1, f"{what} refers to string id {sid}, which the trace does not define"
        )

    def stack(self, sid: int) -> int:
        """Global id of old stack ``sid`` (0 for none)."""
        if sid == 0:
            return 0
        got = self._interned.get(sid)
        if got is not None:
            return got
        pcs = self._v1_stacks.get(sid)
        if pcs is None:
            raise TraceFormatError(
                -1, f"an event refers to stack id {sid}, which the trace does not define"
            )
        frames = []
        for pc in pcs:
            fn, file, line = self._pcs[pc]
            frames.append(
                Frame(
                    pc, self.string(fn, "a stack frame"), self.string(file, "a stack frame"), line
                )
            )
        got = self._interned[sid] = self._table.intern(tuple(frames))
        return got

    # ------------------------------------------------------------------

    def convert(self, ev: Ev, out: Callable[[Event], None]) -> None:
        """Emit the model events for one old event (possibly none)."""
        typ = ev[TYP]
        p = ev[P]
        ts = ev[TS]
        if typ == w.EV_GOMAXPROCS and self.pre_init:
            # End of the initial phase: goroutines created before it that never
            # showed a status are runnable. Go emits them in map order; we sort.
            self.pre_init = False
            for gid in sorted(self._created_pre_init):
                out(_go(ts, NONE, NONE, NONE, 0, _gid(gid), _UNDET, "Runnable"))
            self._created_pre_init = {}
            return
        if typ == w.EV_GO_SYS_BLOCK:
            return
        if typ == w.EV_GO_CREATE and self.pre_init:
            self._created_pre_init[ev[A0]] = None
            return
        if typ == w.EV_GO_START_LABEL:
            m = self._proc_m.get(p, 0)
            g = _gid(ev[G])
            out(_go(ts, m, p, g, 0, _gid(ev[A0]), "Runnable", "Running"))
            label = self.string(ev[A2], "a goroutine label")
            out(Event("Label", ts, m, p, g, name=label, scope=_GOR, scope_id=g))
            return
        if typ == w.EV_GO_SYSCALL and not ev[A0]:
            m = self._proc_m.get(p, 0)
            g = _gid(ev[G])
            s = self.stack(ev[STK])
            out(_go(ts, m, p, g, s, g, "Running", "Syscall", "", s))
            out(_go(ts + 1, m, p, g, 0, g, "Syscall", "Running"))
            return
        # General path: the execution context of the old event.
        m = NONE
        if p != -1 and typ != w.EV_CPU_SAMPLE:
            m = self._proc_m.get(p, NONE)
        g = ev[G]
        g = NONE if g == 0 else _gid(g)
        e = self._event(ev, typ, ts, m, p, g)
        if typ == w.EV_PROC_STOP:
            self._proc_m.pop(p, None)
        out(e)

    def _event(self, ev: Ev, typ: int, ts: int, m: int, p: int, g: int) -> Event:
        stk = ev[STK]
        if typ in _BLOCK_REASON:
            s = self.stack(stk)
            return _go(ts, m, p, g, s, g, "Running", "Waiting", _BLOCK_REASON[typ], s)
        if typ == w.EV_GO_UNBLOCK:
            return _go(ts, m, p, g, self.stack(stk), _gid(ev[A0]), "Waiting", "Runnable")
        if typ == w.EV_GO_START:
            if self.pre_init:
                self._created_pre_init.pop(ev[A0], None)
                return _go(ts, m, p, g, 0, _gid(ev[A0]), _UNDET, "Running")
            return _go(ts, m, p, g, 0, _gid(ev[A0]), "Runnable", "Running")
        if typ in _STOP_REASON:
            s = self.stack(stk)
            return _go(ts, m, p, g, s, g, "Running", "Runnable", _STOP_REASON[typ], s)
        if typ == w.EV_GO_CREATE:
            # Go does not check the new goroutine's stack id: a bad one panics.
            new_stack = ev[A1]
            if new_stack > 0xFFFFFFFF:
                raise TraceFormatError(-1, f"a goroutine creation refers to stack id {new_stack}")
            tstack = self.stack(new_stack)
            s = self.stack(stk)
            return _go(ts, m, p, g, s, _gid(ev[A0]), "NotExist", "Runnable", "", tstack)
        if typ == w.EV_GO_END:
            return _go(ts, m, p, g, 0, g, "Running", "NotExist")
        if typ == w.EV_PROC_START:
            self._proc_m[p] = _gid(ev[A0])
            if p != -1:  # the general rule: no thread for events without a P
                m = self._proc_m[p]
            if p in self._seen_procs:
                return _proc(ts, m, p, g, "Idle", "Running")
            self._seen_procs.add(p)
            return _proc(ts, m, p, g, _UNDET, "Running")
        if typ == w.EV_PROC_STOP:
            if p in self._seen_procs:
                return _proc(ts, m, p, g, "Running", "Idle")
            self._seen_procs.add(p)
            return _proc(ts, m, p, g, _UNDET, "Idle")
        if typ == w.EV_GO_SYSCALL:  # one that blocked (see mark_blocking_syscalls)
            s = self.stack(stk)
            return _go(ts, m, p, g, s, g, "Running", "Syscall", "", s)
        if typ == w.EV_GO_SYS_EXIT:
            return _go(ts, m, p, g, 0, g, "Syscall", "Runnable")
        if typ == w.EV_GO_WAITING or typ == w.EV_GO_IN_SYSCALL:
            self._created_pre_init.pop(ev[A0], None)
            to = "Waiting" if typ == w.EV_GO_WAITING else "Syscall"
            return _go(ts, m, p, g, 0, _gid(ev[A0]), _UNDET, to)
        if typ == w.EV_HEAP_ALLOC:
            return Event("Metric", ts, m, p, g, name=_HEAP, value=ev[A0])
        if typ == w.EV_HEAP_GOAL:
            return Event("Metric", ts, m, p, g, name=_GOAL, value=ev[A0])
        if typ == w.EV_GOMAXPROCS:
            return Event("Metric", ts, m, p, g, self.stack(stk), name=_PROCS, value=ev[A0])
        return self._other(ev, typ, ts, m, p, g)

    def _other(self, ev: Ev, typ: int, ts: int, m: int, p: int, g: int) -> Event:
        """Ranges, tasks, regions, logs and CPU samples."""
        stk = ev[STK]
        if typ == w.EV_GC_START:
            return _range("RangeBegin", ts, m, p, g, self.stack(stk), _GC, "global", NONE)
        if typ == w.EV_GC_DONE:
            return _range("RangeEnd", ts, m, p, g, 0, _GC, "global", NONE)
        if typ == w.EV_STW_START or typ == w.EV_STW_DONE:
            kind = "RangeBegin"
            if typ == w.EV_STW_START:
                self._last_stw = stw_reason(self.minor, ev[A0])
            else:
                kind = "RangeEnd"
            name = f"stop-the-world ({self._last_stw})"
            return _range(kind, ts, m, p, g, 0, name, _GOR, g)
        if typ == w.EV_GC_SWEEP_START:
            return _range("RangeBegin", ts, m, p, g, self.stack(stk), _SWEEP, _PROC, p)
        if typ == w.EV_GC_SWEEP_DONE:
            e = _range("RangeEnd", ts, m, p, g, 0, _SWEEP, _PROC, p)
            e.attrs = [("bytes swept", ev[A0]), ("bytes reclaimed", ev[A1])]
            return e
        if typ == w.EV_GC_MARK_ASSIST_START:
            return _range("RangeBegin", ts, m, p, g, self.stack(stk), _ASSIST, _GOR, g)
        if typ == w.EV_GC_MARK_ASSIST_DONE:
            return _range("RangeEnd", ts, m, p, g, 0, _ASSIST, _GOR, g)
        s = self.stack(stk)
        if typ == w.EV_USER_TASK_CREATE:
            name = self.string(ev[A2], "a task")
            self._tasks[ev[A0]] = (name, ev[A1])
            parent = ev[A1] if ev[A1] != 0 else NO_TASK
            return Event("TaskBegin", ts, m, p, g, s, task=ev[A0], parent=parent, name=name)
        if typ == w.EV_USER_TASK_END:
            # Go reports the parent as the task was created with it (0 for none).
            known = self._tasks.pop(ev[A0], None)
            name, parent = known if known is not None else ("", NO_TASK)
            return Event("TaskEnd", ts, m, p, g, s, task=ev[A0], parent=parent, name=name)
        if typ == w.EV_USER_REGION:
            kind = "RegionBegin" if ev[A1] == 0 else "RegionEnd"
            name = self.string(ev[A2], "a region")
            return Event(kind, ts, m, p, g, s, task=ev[A0], name=name)
        if typ == w.EV_USER_LOG:
            category = self.string(ev[A1], "a log")
            message = self._inline[ev[A3]]
            return Event("Log", ts, m, p, g, s, task=ev[A0], category=category, message=message)
        if typ == w.EV_CPU_SAMPLE:
            return Event("StackSample", ts, m, p, g, s)
        raise TraceFormatError(-1, f"unexpected event type {typ}")


def _go(
    ts: int, m: int, p: int, g: int, stk: int, rid: int, frm: str, to: str,
    reason: str = "", tstack: int = 0,
) -> Event:  # fmt: skip
    """A goroutine state transition."""
    return Event(_ST, ts, m, p, g, stk, _GOR, rid, frm, to, reason, tstack)


def _proc(ts: int, m: int, p: int, g: int, frm: str, to: str) -> Event:
    """A proc state transition (of the event's own P)."""
    return Event(_ST, ts, m, p, g, 0, _PROC, p, frm, to)


def _range(
    kind: str, ts: int, m: int, p: int, g: int, stk: int, name: str, scope: str, scope_id: int
) -> Event:
    return Event(kind, ts, m, p, g, stk, name=name, scope=scope, scope_id=scope_id)
