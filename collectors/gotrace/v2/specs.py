"""Wire event types of the new trace family (Go 1.22+) and their layout.

Event type numbers are the bytes that start each event on the wire. The
batch reader uses one table for every on-disk version (as Go's reader does);
the per-version subset only matters for the names in error messages.
"""

from __future__ import annotations

from typing import NamedTuple

# Structural events (not surfaced directly).
EV_NONE = 0
EV_EVENT_BATCH = 1
EV_STACKS = 2
EV_STACK = 3
EV_STRINGS = 4
EV_STRING = 5
EV_CPU_SAMPLES = 6
EV_CPU_SAMPLE = 7
EV_FREQUENCY = 8
# Procs.
EV_PROCS_CHANGE = 9
EV_PROC_START = 10
EV_PROC_STOP = 11
EV_PROC_STEAL = 12
EV_PROC_STATUS = 13
# Goroutines.
EV_GO_CREATE = 14
EV_GO_CREATE_SYSCALL = 15
EV_GO_START = 16
EV_GO_DESTROY = 17
EV_GO_DESTROY_SYSCALL = 18
EV_GO_STOP = 19
EV_GO_BLOCK = 20
EV_GO_UNBLOCK = 21
EV_GO_SYSCALL_BEGIN = 22
EV_GO_SYSCALL_END = 23
EV_GO_SYSCALL_END_BLOCKED = 24
EV_GO_STATUS = 25
# Stop-the-world.
EV_STW_BEGIN = 26
EV_STW_END = 27
# GC.
EV_GC_ACTIVE = 28
EV_GC_BEGIN = 29
EV_GC_END = 30
EV_GC_SWEEP_ACTIVE = 31
EV_GC_SWEEP_BEGIN = 32
EV_GC_SWEEP_END = 33
EV_GC_MARK_ASSIST_ACTIVE = 34
EV_GC_MARK_ASSIST_BEGIN = 35
EV_GC_MARK_ASSIST_END = 36
EV_HEAP_ALLOC = 37
EV_HEAP_GOAL = 38
# User annotations.
EV_GO_LABEL = 39
EV_USER_TASK_BEGIN = 40
EV_USER_TASK_END = 41
EV_USER_REGION_BEGIN = 42
EV_USER_REGION_END = 43
EV_USER_LOG = 44
# Go 1.23+.
EV_GO_SWITCH = 45
EV_GO_SWITCH_DESTROY = 46
EV_GO_CREATE_BLOCKED = 47
EV_GO_STATUS_STACK = 48
EV_EXPERIMENTAL_BATCH = 49
# Go 1.25+.
EV_SYNC = 50
EV_CLOCK_SNAPSHOT = 51
# Go 1.26+.
EV_END_OF_GENERATION = 52

#: Pseudo type used for Sync events, outside the byte range.
EV_SYNC_EVENT = 256

# Goroutine statuses on the wire.
GS_BAD, GS_RUNNABLE, GS_RUNNING, GS_SYSCALL, GS_WAITING = range(5)
# Proc statuses on the wire.
PS_BAD, PS_RUNNING, PS_IDLE, PS_SYSCALL, PS_SYSCALL_ABANDONED = range(5)

# Goroutine / proc states as the API reports them (indexes into the names).
GO_UNDETERMINED, GO_NOT_EXIST, GO_RUNNABLE, GO_RUNNING, GO_WAITING, GO_SYSCALL = range(6)
PROC_UNDETERMINED, PROC_NOT_EXIST, PROC_RUNNING, PROC_IDLE = range(4)

GO_STATE_NAMES = ("Undetermined", "NotExist", "Runnable", "Running", "Waiting", "Syscall")
PROC_STATE_NAMES = ("Undetermined", "NotExist", "Running", "Idle")
GO_STATUS_NAMES = ("Bad", "Runnable", "Running", "Syscall", "Waiting")
PROC_STATUS_NAMES = ("Bad", "Running", "Idle", "Syscall", "SyscallAbandoned")

#: Wire goroutine status -> API state.
GO_STATUS_TO_STATE = (GO_UNDETERMINED, GO_RUNNABLE, GO_RUNNING, GO_SYSCALL, GO_WAITING)
#: Wire proc status -> API state (a proc in a syscall still counts as running).
PROC_STATUS_TO_STATE = (PROC_UNDETERMINED, PROC_RUNNING, PROC_IDLE, PROC_RUNNING, PROC_IDLE)


class Spec(NamedTuple):
    """Layout of one wire event type."""

    name: str
    args: tuple[str, ...]  # argument names; for timed events the first is "dt"
    timed: bool = False
    stacks: tuple[int, ...] = ()  # arg positions (0 = dt) holding stack ids; first = event stack
    strings: tuple[int, ...] = ()  # arg positions holding string ids
    start: int = EV_NONE  # for an "end" event, the matching "begin" type
    experimental: bool = False


def _t(
    name: str,
    *args: str,
    stacks: tuple[int, ...] = (),
    strings: tuple[int, ...] = (),
    start: int = EV_NONE,
    exp: bool = False,
) -> Spec:
    return Spec(name, ("dt",) + args, True, stacks, strings, start, exp)


_EMPTY = Spec("", ())

_TABLE: dict[int, Spec] = {
    EV_EVENT_BATCH: Spec("EventBatch", ("gen", "m", "time", "size")),
    EV_STACKS: Spec("Stacks", ()),
    EV_STACK: Spec("Stack", ("id", "nframes")),
    EV_STRINGS: Spec("Strings", ()),
    EV_STRING: Spec("String", ("id",)),
    EV_CPU_SAMPLES: Spec("CPUSamples", ()),
    EV_CPU_SAMPLE: Spec("CPUSample", ("time", "m", "p", "g", "stack"), stacks=(4,)),
    EV_FREQUENCY: Spec("Frequency", ("freq",)),
    EV_PROCS_CHANGE: _t("ProcsChange", "procs_value", "stack", stacks=(2,)),
    EV_PROC_START: _t("ProcStart", "p", "p_seq"),
    EV_PROC_STOP: _t("ProcStop"),
    EV_PROC_STEAL: _t("ProcSteal", "p", "p_seq", "m"),
    EV_PROC_STATUS: _t("ProcStatus", "p", "pstatus"),
    EV_GO_CREATE: _t("GoCreate", "new_g", "new_stack", "stack", stacks=(3, 2)),
    EV_GO_CREATE_SYSCALL: _t("GoCreateSyscall", "new_g"),
    EV_GO_START: _t("GoStart", "g", "g_seq"),
    EV_GO_DESTROY: _t("GoDestroy"),
    EV_GO_DESTROY_SYSCALL: _t("GoDestroySyscall"),
    EV_GO_STOP: _t("GoStop", "reason_string", "stack", stacks=(2,), strings=(1,)),
    EV_GO_BLOCK: _t("GoBlock", "reason_string", "stack", stacks=(2,), strings=(1,)),
    EV_GO_UNBLOCK: _t("GoUnblock", "g", "g_seq", "stack", stacks=(3,)),
    EV_GO_SYSCALL_BEGIN: _t("GoSyscallBegin", "p_seq", "stack", stacks=(2,)),
    EV_GO_SYSCALL_END: _t("GoSyscallEnd", start=EV_GO_SYSCALL_BEGIN),
    EV_GO_SYSCALL_END_BLOCKED: _t("GoSyscallEndBlocked", start=EV_GO_SYSCALL_BEGIN),
    EV_GO_STATUS: _t("GoStatus", "g", "m", "gstatus"),
    EV_STW_BEGIN: _t("STWBegin", "kind_string", "stack", stacks=(2,), strings=(1,)),
    EV_STW_END: _t("STWEnd", start=EV_STW_BEGIN),
    EV_GC_ACTIVE: _t("GCActive", "gc_seq", start=EV_GC_BEGIN),
    EV_GC_BEGIN: _t("GCBegin", "gc_seq", "stack", stacks=(2,)),
    EV_GC_END: _t("GCEnd", "gc_seq", start=EV_GC_BEGIN),
    EV_GC_SWEEP_ACTIVE: _t("GCSweepActive", "p", start=EV_GC_SWEEP_BEGIN),
    EV_GC_SWEEP_BEGIN: _t("GCSweepBegin", "stack", stacks=(1,)),
    EV_GC_SWEEP_END: _t("GCSweepEnd", "swept_value", "reclaimed_value", start=EV_GC_SWEEP_BEGIN),
    EV_GC_MARK_ASSIST_ACTIVE: _t("GCMarkAssistActive", "g", start=EV_GC_MARK_ASSIST_BEGIN),
    EV_GC_MARK_ASSIST_BEGIN: _t("GCMarkAssistBegin", "stack", stacks=(1,)),
    EV_GC_MARK_ASSIST_END: _t("GCMarkAssistEnd", start=EV_GC_MARK_ASSIST_BEGIN),
    EV_HEAP_ALLOC: _t("HeapAlloc", "heapalloc_value"),
    EV_HEAP_GOAL: _t("HeapGoal", "heapgoal_value"),
    EV_GO_LABEL: _t("GoLabel", "label_string", strings=(1,)),
    EV_USER_TASK_BEGIN: _t(
        "UserTaskBegin", "task", "parent_task", "name_string", "stack", stacks=(4,), strings=(3,)
    ),
    EV_USER_TASK_END: _t("UserTaskEnd", "task", "stack", stacks=(2,)),
    EV_USER_REGION_BEGIN: _t(
        "UserRegionBegin", "task", "name_string", "stack", stacks=(3,), strings=(2,)
    ),
    EV_USER_REGION_END: _t(
        "UserRegionEnd",
        "task",
        "name_string",
        "stack",
        stacks=(3,),
        strings=(2,),
        start=EV_USER_REGION_BEGIN,
    ),
    EV_USER_LOG: _t(
        "UserLog", "task", "key_string", "value_string", "stack", stacks=(4,), strings=(2, 3)
    ),
    EV_GO_SWITCH: _t("GoSwitch", "g", "g_seq"),
    EV_GO_SWITCH_DESTROY: _t("GoSwitchDestroy", "g", "g_seq"),
    EV_GO_CREATE_BLOCKED: _t("GoCreateBlocked", "new_g", "new_stack", "stack", stacks=(3, 2)),
    EV_GO_STATUS_STACK: _t("GoStatusStack", "g", "m", "gstatus", "stack", stacks=(4,)),
    EV_EXPERIMENTAL_BATCH: Spec("ExperimentalBatch", ("exp", "gen", "m", "time")),
    EV_SYNC: Spec("Sync", ()),
    EV_CLOCK_SNAPSHOT: _t("ClockSnapshot", "mono", "sec", "nsec"),
    EV_END_OF_GENERATION: Spec("EndOfGeneration", ()),
    # Experimental AllocFree events (type numbers above 127).
    128: _t("Span", "id", "npages_value", "kindclass", exp=True),
    129: _t("SpanAlloc", "id", "npages_value", "kindclass", exp=True),
    130: _t("SpanFree", "id", exp=True),
    131: _t("HeapObject", "id", "type", exp=True),
    132: _t("HeapObjectAlloc", "id", "type", exp=True),
    133: _t("HeapObjectFree", "id", exp=True),
    134: _t("GoroutineStack", "id", "order", exp=True),
    135: _t("GoroutineStackAlloc", "id", "order", exp=True),
    136: _t("GoroutineStackFree", "id", exp=True),
}

#: Number of entries in Go's full spec table; type bytes at or above are invalid.
NUM_SPECS = 137

#: Spec per type byte (index 0..NUM_SPECS-1); unnamed slots are empty specs.
SPECS: tuple[Spec, ...] = tuple(_TABLE.get(i, _EMPTY) for i in range(NUM_SPECS))

#: Number of varint arguments (including dt) a timed event has, per type byte;
#: -1 for a type byte that is out of range, -2 for a type that has no timestamp.
TIMED_NARGS: tuple[int, ...] = tuple(
    (len(s.args) if (s.timed and s.args) else -2) for s in SPECS
) + (-1,) * (256 - NUM_SPECS)

#: Highest wire type each on-disk version defines (for names in messages).
_LAST_TYPE = {"1.22": EV_USER_LOG, "1.23": EV_EXPERIMENTAL_BATCH, "1.25": EV_CLOCK_SNAPSHOT}


def event_name(version: str, typ: int) -> str:
    """Name of a wire event type as the given on-disk version knows it."""
    last = _LAST_TYPE.get(version, NUM_SPECS - 1)
    if 0 <= typ <= last and SPECS[typ].name:
        return SPECS[typ].name
    return f"Invalid({typ})"


def start_type(typ: int) -> int:
    """The "begin" type a range event belongs to (itself for begin events)."""
    st = SPECS[typ].start
    return st if st != EV_NONE else typ
