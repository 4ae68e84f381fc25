"""The decoded event model shared by both trace families.

Every decoder (old family: Go 1.11-1.21 on-disk formats; new family: Go 1.22+)
yields :class:`Event` objects that mean exactly what Go's reference parser
(``internal/trace``, printed by ``go tool trace -d=parsed``) means by its
``trace.Event``. Field names follow Go's ``Event.String()`` output so that a
test can compare ours with Go's line for line.

Stacks are interned into one :class:`StackTable` per decoded trace, so a stack
id is global to the trace (Go's own stack ids restart every generation).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

#: Event kinds, spelled as Go's ``EventKind.String()``.
KINDS = (
    "Sync",
    "Metric",
    "Label",
    "StackSample",
    "RangeBegin",
    "RangeActive",
    "RangeEnd",
    "TaskBegin",
    "TaskEnd",
    "RegionBegin",
    "RegionEnd",
    "Log",
    "StateTransition",
    "Experimental",
)

#: Goroutine states, spelled as Go's ``GoState.String()``.
GO_STATES = ("Bad", "NotExist", "Runnable", "Running", "Waiting", "Syscall")
#: Proc states, spelled as Go's ``ProcState.String()``.
PROC_STATES = ("Bad", "NotExist", "Running", "Idle")
#: Go prints ``Undetermined`` for state 0 of both resources in ``-d=parsed``.
UNDETERMINED = "Undetermined"

#: Go's ``NoTask`` (``^uint64(0)``) as it prints.
NO_TASK = (1 << 64) - 1
#: -1 stands for Go's NoThread / NoProc / NoGoroutine in m, p and g.
NONE = -1


class Frame(NamedTuple):
    """One stack frame, as Go's ``StackFrame``."""

    pc: int
    func: str
    file: str
    line: int


class ClockSnapshot(NamedTuple):
    """Go 1.25+ per-generation clock snapshot carried by Sync events."""

    trace_ns: int  # trace timestamp of the snapshot, in ns (Go's ``Trace``)
    mono_ns: int  # CLOCK_MONOTONIC reading (Go's ``Mono``)
    wall_ns: int  # wall clock, ns since the Unix epoch (Go's ``Wall``)


class StackTable:
    """Interns stacks by content; ids start at 1, 0 means no stack."""

    __slots__ = ("_ids", "_frames")

    def __init__(self) -> None:
        self._ids: dict[tuple[Frame, ...], int] = {}
        self._frames: list[tuple[Frame, ...]] = [()]

    def intern(self, frames: tuple[Frame, ...]) -> int:
        """Global id of a stack with these frames (0 for an empty stack)."""
        if not frames:
            return 0
        sid = self._ids.get(frames)
        if sid is None:
            sid = len(self._frames)
            self._ids[frames] = sid
            self._frames.append(frames)
        return sid

    def frames(self, stack_id: int) -> tuple[Frame, ...]:
        return self._frames[stack_id]

    def __len__(self) -> int:
        return len(self._frames) - 1

    def items(self) -> Iterator[tuple[int, tuple[Frame, ...]]]:
        for sid in range(1, len(self._frames)):
            yield sid, self._frames[sid]


@dataclass(slots=True)
class Event:
    """One event as Go's reference parser reports it.

    Common fields: ``kind``, ``ts`` (ns, Go's ``Time``), ``m``, ``p``, ``g``
    (execution context, -1 for none) and ``stack`` (global stack id, 0 none).

    Kind-specific fields (unused ones keep their defaults):

    - StateTransition: ``resource`` ("goroutine" or "proc"), ``rid``,
      ``from_state``, ``to_state`` (Go's state names, "Undetermined" for 0),
      ``reason``, ``tstack`` (the transition stack Go prints as
      ``TransitionStack``).
    - Metric: ``name``, ``value`` (int, or str for string values).
    - Label: ``name`` (the label), ``scope``/``scope_id`` (its resource).
    - RangeBegin/RangeActive/RangeEnd: ``name``, ``scope`` ("goroutine",
      "proc", "thread" or "global"), ``scope_id`` (-1 for global), ``attrs``
      (RangeEnd only: list of (name, value)).
    - TaskBegin/TaskEnd: ``task``, ``parent``, ``name`` (the task type).
    - RegionBegin/RegionEnd: ``task``, ``name`` (the region type).
    - Log: ``task``, ``category``, ``message``.
    - Sync: ``n`` and ``clock`` (Go 1.25+).
    - StackSample: only the common fields.
    - Experimental: ``name`` and ``attrs`` (argument name, value).
    """

    kind: str
    ts: int
    m: int = NONE
    p: int = NONE
    g: int = NONE
    stack: int = 0
    resource: str = ""
    rid: int = NONE
    from_state: str = ""
    to_state: str = ""
    reason: str = ""
    tstack: int = 0
    name: str = ""
    value: int | str | None = None
    scope: str = ""
    scope_id: int = NONE
    attrs: list[tuple[str, int | str]] = field(default_factory=list)
    task: int = 0
    parent: int = 0
    category: str = ""
    message: str = ""
    n: int = 0
    clock: ClockSnapshot | None = None


@dataclass(slots=True)
class Loss:
    """What a damaged or truncated trace cost us."""

    bytes_lost: int = 0
    generations_lost: int = 0
    error: str = ""  # the plain reason, "" when nothing was lost
    offset: int = -1  # byte offset of the damage, -1 when nothing was lost


@dataclass(slots=True)
class TraceInfo:
    """Facts about the trace as a whole, known once decoding has finished."""

    go_version: str  # the on-disk format version from the header, e.g. "1.22"
    family: str  # "v1" (Go 1.11-1.21) or "v2" (Go 1.22+)
    ticks_per_sec: int = 0  # 0 where the format has no frequency event
    generations: int = 0
    loss: Loss = field(default_factory=Loss)
