"""pprof profiles of a trace: where goroutines waited (network, sync,
syscall, scheduler) and where the CPU samples fell, as plain data.

The waiting profiles are those of ``go tool trace -pprof=TYPE`` (Go 1.27's
``cmd/trace/pprof.go``), computed from the frames' goroutine intervals:

- a wait starts at a goroutine's transition *into* the profile's state
  (``Waiting`` for net and sync, ``Syscall``, ``Runnable`` for sched) whose
  reason the profile takes (net: ``network``; sync: any reason containing
  ``chan``, ``sync`` or ``select``; syscall and sched: every reason), and
  lasts until the goroutine's next transition to another state; further
  transitions into the same state do not restart it. A wait still going on
  at the trace's end is not counted (Go records a wait when it ends);
- the wait is clipped to the goroutine's life as Go's summary knows it:
  from its first transition to ``Running`` (from the trace's start when it
  never ran) to its end (``NotExist``, or ``Waiting`` for ``forever``; the
  trace's end otherwise), and to the window when one is asked for; a wait
  with nothing left is dropped;
- its stack is the stack of the transition that began it; stacks are merged
  by their first 128 program counters, as Go merges them;
- each stack's sample values are the number of waits (``contentions``) and
  their clipped time (``delay``, ns).

The CPU profile counts the trace's ``StackSample`` events (the CPU
profiler's samples the tracer copies into a trace, Go 1.19+ when a CPU
profile runs with the trace) per stack: ``samples`` and ``cpu`` ns at the
profiler's default 100 Hz (the trace does not record the rate).

:mod:`ingest.views.pprof_proto` encodes a :class:`Profile` as profile.proto.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.derive.frames import TraceFrames, trim_heap
from ingest.extensions import optional_extension
from ingest.store import models
from ingest.views.histo import dense_codes
from ingest.views.quantiles import lane_chunks

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

#: Go's cut-off of a stack when merging and writing it (cmd/trace pprofMaxStack).
MAX_STACK = 128
#: The runtime CPU profiler's default rate; a StackSample stands for one period.
CPU_PERIOD_NS = 10_000_000


def _is_sync(reason: str) -> bool:
    return "chan" in reason or "sync" in reason or "select" in reason


def _is_chan(reason: str) -> bool:
    return "chan" in reason or "select" in reason


@dataclass(frozen=True)
class WaitKind:
    """One waiting profile: the goroutine state it counts and which reasons."""

    name: str
    title: str
    state: str
    reason: Callable[[str], bool]


#: The waiting profiles: Go's four (net, sync, syscall, sched) and the two
#: halves of sync the flame graphs show apart (chan: channels and select;
#: lock: the other sync reasons, mutexes, conditions, wait groups).
WAIT_KINDS: dict[str, WaitKind] = {k.name: k for k in (
    WaitKind("net", "network waits", "Waiting", lambda r: r == "network"),
    WaitKind("sync", "synchronization waits", "Waiting", _is_sync),
    WaitKind("chan", "channel and select waits", "Waiting", _is_chan),
    WaitKind("lock", "mutex, condition and wait group waits", "Waiting",
             lambda r: _is_sync(r) and not _is_chan(r)),
    WaitKind("syscall", "syscalls", "Syscall", lambda r: True),
    WaitKind("sched", "scheduler waits (runnable, waiting for a P)", "Runnable", lambda r: True),
)}
#: Every profile type: the waiting ones and ``cpu``.
TYPES: tuple[str, ...] = (*WAIT_KINDS, "cpu")
#: What each profile's values are (pprof sample types, then the period type and period).
CONTENTION_TYPES = (("contentions", "count"), ("delay", "nanoseconds"))
CPU_TYPES = (("samples", "count"), ("cpu", "nanoseconds"))


@dataclass
class Waits:
    """The profile's events, one per wait (or CPU sample): the goroutine,
    the stack id (``stacks`` table), the time (ns) and the seq of the event
    that ended the wait (of the sample), which orders them as Go meets them."""

    goid: I64
    stack_id: I64
    value_ns: I64
    seq: I64


@dataclass
class Profile:
    """A profile as plain data: ``samples`` (each a stack, innermost first,
    of indexes into ``locations``, and one value per sample type),
    ``locations`` (one per program counter: pc, function, file, line)."""

    type: str
    trace_id: int
    t1: int | None
    t2: int | None
    sample_types: tuple[tuple[str, str], ...]
    period_type: tuple[str, str]
    period: int
    locations: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def totals(self) -> list[int]:
        """The sum of each sample type's values."""
        return [sum(s["values"][i] for s in self.samples) for i in range(len(self.sample_types))]

    def as_json(self) -> dict[str, Any]:
        """The profile as JSON values (stacks written out as function names)."""
        return {"type": self.type, "trace_id": self.trace_id, "t1": self.t1, "t2": self.t2,
                "sample_types": [list(t) for t in self.sample_types],
                "period_type": list(self.period_type), "period": self.period,
                "totals": self.totals(), "locations": self.locations,
                "samples": self.samples}


class UnknownType(ValueError):
    """A profile type that is not one of :data:`TYPES`."""


def check_type(kind: str) -> str:
    """``kind`` when it is a profile type; raises UnknownType."""
    if kind not in TYPES:
        raise UnknownType(f"profile type must be one of {', '.join(TYPES)}, not {kind!r}")
    return kind


# --------------------------------------------------------------------------
# the events of a profile


def waits(engine: Engine, frames: TraceFrames, kind: str, t1: int | None = None,
          t2: int | None = None) -> Waits:
    """The profile's events in the window [t1, t2] (the whole trace without one)."""
    check_type(kind)
    if kind == "cpu":
        return cpu_samples(engine, frames.trace_id, t1, t2)
    return _state_waits(frames, WAIT_KINDS[kind], t1, t2)


def _kind_table(frames: TraceFrames, test: Callable[[Any], bool]) -> npt.NDArray[np.bool_]:
    out = np.zeros(max(frames.kinds, default=0) + 1, dtype=bool)
    for code, k in frames.kinds.items():
        out[code] = k.resource == "goroutine" and test(k)
    return out


#: Goroutine rows read at a time by :func:`_state_waits` (whole goroutines).
WAIT_ROWS = 1 << 22


def _state_waits(frames: TraceFrames, wk: WaitKind, t1: int | None,
                 t2: int | None) -> Waits:
    lanes = frames.goroutines
    n = int(lanes.off[-1]) if len(lanes.ids) else 0
    tables = (_kind_table(frames, lambda k: k.to_state == wk.state),
              _kind_table(frames, lambda k: k.to_state == wk.state and wk.reason(k.reason)),
              _kind_table(frames, lambda k: k.to_state == "Running"),
              _kind_table(frames, lambda k: k.to_state == "NotExist"
                          or (k.to_state == "Waiting" and k.reason == "forever")))
    off = np.asarray(lanes.off, np.int64)
    # A part of whole goroutines at a time (no wait crosses a part), its
    # mapped pages handed back after it: whole-trace masks and row numbers
    # were 2.5 GB on the 1 GB trace.
    cols: list[list[I64]] = [[np.zeros(0, np.int64)] for _ in range(4)]
    for lo, hi in lane_chunks(off, n, WAIT_ROWS):
        for col, part in zip(cols, _part_waits(frames, tables, off, lo, hi, t1, t2),
                             strict=True):
            col.append(part)
        # The part's temporaries go back to the system: in the C heap between
        # the parts kept, they would stay this process's (300 MB on the 1 GB trace).
        trim_heap()
    whole = []
    for i in range(4):  # each column joined, its parts let go
        whole.append(np.concatenate(cols[i]))
        cols[i] = []
    return Waits(*whole)


def _part_waits(frames: TraceFrames, tables: tuple[npt.NDArray[np.bool_], ...], off: I64,
                lo: int, hi: int, t1: int | None, t2: int | None) -> tuple[I64, ...]:
    """(goid, stack_id, value_ns, seq) of the waits of rows lo..hi (whole
    goroutines): see the module docstring."""
    iv = frames.intervals
    a, b = np.searchsorted(off, [lo, hi])
    loff = off[a:b + 1] - lo  # the part's lanes, rows counted from lo
    c = optional_extension("ingest.views._waits")
    if c is not None:
        return _part_waits_c(c, frames, tables, loff, int(a), lo, hi, t1, t2)
    part = iv.part(("kind", "start_ts"), lo, hi)
    kind, start_ts = part["kind"], part["start_ts"]
    in_state, takes, starts_run, ends_life = (t[kind] for t in tables)
    del kind
    m = hi - lo
    first_row = np.zeros(m, dtype=bool)
    first_row[loff[:-1]] = True
    last_row = np.zeros(m, dtype=bool)
    last_row[loff[1:] - 1] = True
    # A run: consecutive rows of one goroutine in the state (Go ignores a
    # transition into the state it is already tracking). Runs and lanes are
    # found by binary search from the rows that need them: no per-row run or
    # lane number.
    run_starts = np.flatnonzero(in_state & (first_row | ~np.r_[False, in_state[:-1]]))
    run_lasts = np.flatnonzero(in_state & (last_row | ~np.r_[in_state[1:], False]))
    cand = np.flatnonzero(takes)
    run = np.searchsorted(run_starts, cand, side="right") - 1
    # The first row of its run that the profile takes begins the wait.
    firsts = np.r_[True, run[1:] != run[:-1]] if len(cand) else np.zeros(0, bool)
    begin, last = cand[firsts], run_lasts[run[firsts]]
    ended = ~last_row[last]  # the next transition leaves the state: the wait ends
    begin, last = begin[ended], last[ended]
    lane = _lane_of(loff, begin)
    # Go's goroutine summary: StartTime is the first transition to Running
    # (0 when it never ran), EndTime the last end of its life (the trace's end when none).
    life_start = _per_lane(starts_run, loff, start_ts, first=True,
                           missing=np.iinfo(np.int64).min)
    life_end = _per_lane(ends_life, loff, start_ts, first=False, missing=frames.last_ts)
    start = np.maximum(np.asarray(start_ts[begin], np.int64), life_start[lane])
    end = np.minimum(np.asarray(iv.take("end_ts", last + lo), np.int64), life_end[lane])
    if t1 is not None:
        start = np.maximum(start, t1)
    if t2 is not None:
        end = np.minimum(end, t2)
    keep = end > start
    return (frames.goroutines.ids[lane[keep] + a].astype(np.int64),
            iv.take("stack_id", begin[keep] + lo).astype(np.int64),
            (end - start)[keep].astype(np.int64),
            iv.take("seq", last[keep] + lo + 1).astype(np.int64))


def _part_waits_c(c: Any, frames: TraceFrames, tables: tuple[npt.NDArray[np.bool_], ...],
                  loff: I64, a: int, lo: int, hi: int, t1: int | None, t2: int | None
                  ) -> tuple[I64, ...]:
    """:func:`_part_waits` in one pass in C (ingest/csrc/waits.c)."""
    iv = frames.intervals
    part = iv.part(("kind", "start_ts", "end_ts"), lo, hi)
    flags = np.zeros(len(tables[0]), np.uint8)
    for bit, table in enumerate(tables):
        flags |= table.astype(np.uint8) << bit
    m = hi - lo
    lane, begin, last, value = (np.empty(m, np.int64) for _ in range(4))
    big = np.iinfo(np.int64)
    n = c.lane_waits(np.asarray(part["kind"], np.int16), np.asarray(part["start_ts"], np.int64),
                     np.asarray(part["end_ts"], np.int64), np.ascontiguousarray(loff, np.int64),
                     flags, big.min if t1 is None else t1, big.max if t2 is None else t2,
                     frames.last_ts, lane, begin, last, value)
    del part
    lane, begin, last = lane[:n], begin[:n], last[:n]
    return (frames.goroutines.ids[lane + a].astype(np.int64),
            iv.take("stack_id", begin + lo).astype(np.int64),
            value[:n].copy(),
            iv.take("seq", last + lo + 1).astype(np.int64))


def _lane_of(off: I64, rows: Arr) -> I64:
    """The lane of each of ``rows``, lanes being the row ranges ``off[i]:off[i+1]``."""
    lane: I64 = np.searchsorted(off, rows, side="right") - 1
    return lane


def _per_lane(mask: npt.NDArray[np.bool_], off: I64, ts: Arr, first: bool,
              missing: int) -> I64:
    """Per goroutine lane (rows ``off[i]:off[i+1]``), the time of its first
    (or last) row in ``mask``."""
    out = np.full(len(off) - 1, missing, dtype=np.int64)
    rows = np.flatnonzero(mask)
    if not len(rows):
        return out
    # A search per lane among the rows (fewer lanes than rows).
    if first:
        at = np.searchsorted(rows, off[:-1], side="left")
        has = at < len(rows)
        has[has] = rows[at[has]] < off[1:][has]
    else:
        at = np.searchsorted(rows, off[1:], side="left") - 1
        has = at >= 0
        has[has] = rows[at[has]] >= off[:-1][has]
    out[has] = ts[rows[at[has]]]
    return out


def cpu_samples(engine: Engine, trace_id: int, t1: int | None = None,
                t2: int | None = None) -> Waits:
    """The trace's CPU samples (``StackSample`` events) with ts in [t1, t2]."""
    o = models.other_events
    q = select(o.c.g, o.c.stack_id, o.c.seq).where(o.c.trace_id == trace_id,
                                                   o.c.kind == "StackSample")
    if t1 is not None:
        q = q.where(o.c.ts >= t1)
    if t2 is not None:
        q = q.where(o.c.ts <= t2)
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    a = np.array(rows, dtype=np.int64).reshape(len(rows), 3)
    return Waits(goid=a[:, 0].copy(), stack_id=a[:, 1].copy(),
                 value_ns=np.full(len(rows), CPU_PERIOD_NS, dtype=np.int64), seq=a[:, 2].copy())


# --------------------------------------------------------------------------
# stacks


def stack_pcs(engine: Engine, trace_id: int, stack_ids: list[int]
              ) -> dict[int, list[tuple[int, str, str, int]]]:
    """Stack id -> its first :data:`MAX_STACK` frames (pc as unsigned, function,
    file, line), innermost first; stack 0 has none."""
    s = models.stacks
    ids = sorted(set(stack_ids) - {0, -1})
    out: dict[int, list[tuple[int, str, str, int]]] = {i: [] for i in ids}
    out[0] = []
    with engine.connect() as conn:
        for k in range(0, len(ids), 500):
            for r in conn.execute(select(s.c.stack_id, s.c.depth, s.c.pc, s.c.function,
                                         s.c.file, s.c.line)
                                  .where(s.c.trace_id == trace_id,
                                         s.c.stack_id.in_(ids[k:k + 500]),
                                         s.c.depth < MAX_STACK)
                                  .order_by(s.c.stack_id, s.c.depth)):
                out[int(r.stack_id)].append((int(r.pc) & 0xFFFF_FFFF_FFFF_FFFF,
                                             r.function or "", r.file or "", int(r.line or 0)))
    return out


@dataclass
class StackGroups:
    """Stack ids merged by their program counters, as Go merges them:
    ``group[i]`` is the group of ``ids[i]``; ``frames[id]`` each id's frames."""

    ids: I64
    group: I64
    n_groups: int
    frames: dict[int, list[tuple[int, str, str, int]]]

    def of(self, stack_id: Arr) -> I64:
        """The group of each stack id of ``stack_id``."""
        return self.group[np.searchsorted(self.ids, stack_id)]


def stack_groups(engine: Engine, trace_id: int, stack_id: Arr) -> StackGroups:
    """The groups of the distinct stack ids of ``stack_id``. Go's key is a
    fixed array of the first 128 pcs, zero-padded: a stack whose last pcs
    are 0 falls in one group with the same stack without them (a lone
    unknown frame with the empty stack)."""
    ids = np.unique(np.asarray(stack_id, dtype=np.int64))
    frames = stack_pcs(engine, trace_id, ids.tolist())
    by_pcs: dict[tuple[int, ...], int] = {}
    group = np.zeros(len(ids), dtype=np.int64)
    for i, sid in enumerate(ids.tolist()):
        key = [f[0] for f in frames.get(sid, [])]
        while key and key[-1] == 0:
            key.pop()
        group[i] = by_pcs.setdefault(tuple(key), len(by_pcs))
    return StackGroups(ids, group, len(by_pcs), frames)


def last_of_each(key: I64, order: I64) -> I64:
    """For each distinct value of ``key``, sorted, the index of its row of
    greatest ``order``."""
    if not len(key):
        return np.zeros(0, np.int64)
    # Linear, no sort of the rows (a lexsort of the 1 GB trace's waits was
    # its flame tree's peak): each key's greatest order, then its last row
    # that has it, as the last of a stable sort by (key, order) is.
    _, code = dense_codes(key)
    order = np.asarray(order, np.int64)
    best = np.full(int(code.max()) + 1, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(best, code, order)
    hit = np.flatnonzero(order == best[code])
    last = np.full(len(best), -1, np.int64)
    np.maximum.at(last, code[hit], hit)
    return last


# --------------------------------------------------------------------------
# the profile


def profile(engine: Engine, frames: TraceFrames, kind: str, t1: int | None = None,
            t2: int | None = None) -> Profile:
    """The profile ``kind`` (one of :data:`TYPES`) of the window [t1, t2]."""
    w = waits(engine, frames, kind, t1, t2)
    cpu = kind == "cpu"
    prof = Profile(type=kind, trace_id=frames.trace_id, t1=t1, t2=t2,
                   sample_types=CPU_TYPES if cpu else CONTENTION_TYPES,
                   period_type=CPU_TYPES[1] if cpu else ("trace", "count"),
                   period=CPU_PERIOD_NS if cpu else 1)
    if not len(w.goid):
        return prof
    groups = stack_groups(engine, frames.trace_id, w.stack_id)
    g = groups.of(w.stack_id)
    count = np.bincount(g, minlength=groups.n_groups)
    total = np.zeros(groups.n_groups, dtype=np.int64)  # exact: no float sums of ns
    np.add.at(total, g, w.value_ns)
    # A group is written with the frames of its last wait's stack, as Go
    # keeps the newest stack of a group.
    shown = w.stack_id[last_of_each(g, w.seq)]
    loc_of_pc: dict[int, int] = {}
    # Samples by time, most first: a stable order (Go's is a map's).
    for gi in np.lexsort((np.arange(len(count)), -total)).tolist():
        stack = []
        for pc, fn, file, line in groups.frames[int(shown[gi])]:
            loc = loc_of_pc.get(pc)
            if loc is None:  # one location per pc, as Go's BuildProfile keeps them
                loc = loc_of_pc[pc] = len(prof.locations)
                prof.locations.append({"pc": pc, "function": fn, "file": file, "line": line})
            stack.append(loc)
        values = [int(count[gi]), int(total[gi])]
        prof.samples.append({"stack": stack, "values": values})
    return prof
