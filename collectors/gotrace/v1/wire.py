"""Wire format of the old trace family (on-disk versions 1.11, 1.19, 1.21).

After the 16-byte header the file is a flat sequence of events. Each event
starts with one byte: the low 6 bits are the event type, the top 2 bits the
number of inline arguments minus one (3 means the arguments are preceded by
their total byte length). Arguments are unsigned LEB128 varints; the first
one of a timed event is the time delta to the previous event of the batch.

This module holds the event-type table and the varint reader; ``scan.py``
reads the events.
"""

from __future__ import annotations

from typing import NamedTuple

MASK64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)

# Event types of the old runtime tracer.
EV_NONE = 0
EV_BATCH = 1
EV_FREQUENCY = 2
EV_STACK = 3
EV_GOMAXPROCS = 4
EV_PROC_START = 5
EV_PROC_STOP = 6
EV_GC_START = 7
EV_GC_DONE = 8
EV_STW_START = 9
EV_STW_DONE = 10
EV_GC_SWEEP_START = 11
EV_GC_SWEEP_DONE = 12
EV_GO_CREATE = 13
EV_GO_START = 14
EV_GO_END = 15
EV_GO_STOP = 16
EV_GO_SCHED = 17
EV_GO_PREEMPT = 18
EV_GO_SLEEP = 19
EV_GO_BLOCK = 20
EV_GO_UNBLOCK = 21
EV_GO_BLOCK_SEND = 22
EV_GO_BLOCK_RECV = 23
EV_GO_BLOCK_SELECT = 24
EV_GO_BLOCK_SYNC = 25
EV_GO_BLOCK_COND = 26
EV_GO_BLOCK_NET = 27
EV_GO_SYSCALL = 28
EV_GO_SYS_EXIT = 29
EV_GO_SYS_BLOCK = 30
EV_GO_WAITING = 31
EV_GO_IN_SYSCALL = 32
EV_HEAP_ALLOC = 33
EV_HEAP_GOAL = 34
EV_TIMER_GOROUTINE = 35
EV_FUTILE_WAKEUP = 36
EV_STRING = 37
EV_GO_START_LOCAL = 38
EV_GO_UNBLOCK_LOCAL = 39
EV_GO_SYS_EXIT_LOCAL = 40
EV_GO_START_LABEL = 41
EV_GO_BLOCK_GC = 42
EV_GC_MARK_ASSIST_START = 43
EV_GC_MARK_ASSIST_DONE = 44
EV_USER_TASK_CREATE = 45
EV_USER_TASK_END = 46
EV_USER_REGION = 47
EV_USER_LOG = 48
EV_CPU_SAMPLE = 49
EV_COUNT = 50


class EventDesc(NamedTuple):
    """What the reference parser knows about one event type."""

    name: str
    min_version: int  # minor Go version that introduced it
    stack: bool  # the last argument is a stack id
    nargs: int  # arguments besides the time delta and the stack


# name, min version, has stack, args (without timestamp and stack)
_TABLE: tuple[tuple[str, int, bool, int], ...] = (
    ("None", 5, False, 0),
    ("Batch", 5, False, 2),
    ("Frequency", 5, False, 1),
    ("Stack", 5, False, 2),
    ("Gomaxprocs", 5, True, 1),
    ("ProcStart", 5, False, 1),
    ("ProcStop", 5, False, 0),
    ("GCStart", 5, True, 1),
    ("GCDone", 5, False, 0),
    ("GCSTWStart", 5, False, 1),
    ("GCSTWDone", 5, False, 0),
    ("GCSweepStart", 5, True, 0),
    ("GCSweepDone", 5, False, 2),
    ("GoCreate", 5, True, 2),
    ("GoStart", 5, False, 2),
    ("GoEnd", 5, False, 0),
    ("GoStop", 5, True, 0),
    ("GoSched", 5, True, 0),
    ("GoPreempt", 5, True, 0),
    ("GoSleep", 5, True, 0),
    ("GoBlock", 5, True, 0),
    ("GoUnblock", 5, True, 2),
    ("GoBlockSend", 5, True, 0),
    ("GoBlockRecv", 5, True, 0),
    ("GoBlockSelect", 5, True, 0),
    ("GoBlockSync", 5, True, 0),
    ("GoBlockCond", 5, True, 0),
    ("GoBlockNet", 5, True, 0),
    ("GoSysCall", 5, True, 0),
    ("GoSysExit", 5, False, 3),
    ("GoSysBlock", 5, False, 0),
    ("GoWaiting", 5, False, 1),
    ("GoInSyscall", 5, False, 1),
    ("HeapAlloc", 5, False, 1),
    ("HeapGoal", 5, False, 1),
    ("TimerGoroutine", 5, False, 1),
    ("FutileWakeup", 5, False, 0),
    ("String", 7, False, 0),
    ("GoStartLocal", 7, False, 1),
    ("GoUnblockLocal", 7, True, 1),
    ("GoSysExitLocal", 7, False, 2),
    ("GoStartLabel", 8, False, 3),
    ("GoBlockGC", 8, True, 0),
    ("GCMarkAssistStart", 9, True, 0),
    ("GCMarkAssistDone", 9, False, 0),
    ("UserTaskCreate", 11, True, 3),
    ("UserTaskEnd", 11, True, 1),
    ("UserRegion", 11, True, 3),
    ("UserLog", 11, True, 2),
    ("CPUSample", 19, True, 3),
)

DESCS: tuple[EventDesc, ...] = tuple(EventDesc(*row) for row in _TABLE)
NAMES: tuple[str, ...] = tuple(d.name for d in DESCS)
HAS_STACK: tuple[bool, ...] = tuple(d.stack for d in DESCS)


def _arg_count(typ: int) -> int:
    d = DESCS[typ]
    n = d.nargs + (1 if d.stack else 0)
    # Batch, Frequency and TimerGoroutine carry no time delta.
    if typ not in (EV_BATCH, EV_FREQUENCY, EV_TIMER_GOROUTINE):
        n += 1
    return n


#: Number of values a well-formed event of each type carries (EvStack: variable).
ARG_COUNT: tuple[int, ...] = tuple(_arg_count(t) for t in range(EV_COUNT))

#: On-disk version string -> the minor version the event table is keyed by.
FORMAT_MINOR = {"1.11": 11, "1.19": 19, "1.21": 21}

#: Length-prefixed argument blocks longer than this are rejected (as Go does).
MAX_ARG_BLOCK = 2048
#: Strings longer than this are rejected (as Go does).
MAX_STRING = 1_000_000

MALFORMED_VARINT = "malformatted base-128 varint"


class Malformed(Exception):
    """Internal: a varint ran past the data or over 64 bits."""


def uvarint(data: bytes, off: int, end: int) -> tuple[int, int]:
    """Decode one unsigned LEB128 value at ``off`` (not past ``end``) the way
    Go's ``binary.Uvarint`` accepts it; return (value, next offset)."""
    x = 0
    shift = 0
    i = 0
    while True:
        if off >= end or i == 10:
            raise Malformed
        b = data[off]
        off += 1
        if b < 0x80:
            if i == 9 and b > 1:
                raise Malformed
            return x | (b << shift), off
        x |= (b & 0x7F) << shift
        shift += 7
        i += 1
