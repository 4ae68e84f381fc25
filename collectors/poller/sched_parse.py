"""The scheduling recording: bpftrace's lines -> ``sched.parquet`` -> intervals per thread.

``sched.parquet`` (docs/schema.md) has one row per event of the target's threads:

| column | type | what |
| --- | --- | --- |
| ``ts_ns`` | int64 | wall clock (CLOCK_REALTIME ns) |
| ``tid`` | int64 | the thread |
| ``cpu`` | int32 | the CPU the event happened on |
| ``event`` | string | ``on`` (switched in), ``off`` (switched out), ``wakeup`` |
| ``state`` | string | for ``off``: ``runnable`` (still wants a CPU), ``sleep`` (S), |
| | | ``disk`` (D), else the kernel's letter; null otherwise |
| ``target_cpu`` | int32 | for ``wakeup``: the CPU whose run queue it joined; null otherwise |
| ``slices`` | int64 | for ``off``: the thread's timeslices so far (the kernel's |
| | | ``sched_info.pcount``); null otherwise and in recordings made before it |

The file's key-value metadata ``gmpscope_sched`` is a JSON object: the clock
mapping (``clock``), the window recorded (``started_ns``/``ended_ns``, wall),
``partial``, ``lost_events`` and how the recording ended.

bpftrace's ``nsecs`` is CLOCK_MONOTONIC. The recorder reads CLOCK_REALTIME and
CLOCK_MONOTONIC back to back when it starts and when it stops; an event's wall
time is its monotonic time plus the difference, interpolated linearly between
the two readings (they differ only by NTP's slewing, a few µs at most).

:func:`thread_intervals` turns the events back into each thread's states:
on-CPU ``[on, off)``, waiting for a CPU ``[wakeup or runnable off, on)``, asleep
``[sleep off, wakeup)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

SCHED_FILE = "sched.parquet"
#: The raw bpftrace output, kept until sched.parquet is written (a recorder
#: killed before that leaves it: :func:`read_sched` reads it as a partial recording).
RAW_FILE = "sched.bpftrace.txt"
#: The recorder's notes (clock, target) for a raw file left behind.
RAW_META_FILE = "sched.meta.json"
META_KEY = b"gmpscope_sched"
SCHEMA_VERSION = "1"

#: Columns a recording made by an older gmpscope lacks (read as all null).
OPTIONAL_COLUMNS = frozenset({"slices"})

SCHED_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("tid", pa.int64()),
        ("cpu", pa.int32()),
        ("event", pa.string()),
        ("state", pa.string()),
        ("target_cpu", pa.int32()),
        ("slices", pa.int64()),
    ],
    metadata={b"schema_version": SCHEMA_VERSION.encode(), b"producer": b"gmpscope sched"},
)

#: sched_switch's prev_state bits (include/linux/sched.h, the report mask), in
#: the letters ``ps`` and the tracepoint use.
_STATE_LETTERS = ((0x1, "S"), (0x2, "D"), (0x4, "T"), (0x8, "t"), (0x10, "X"), (0x20, "Z"),
                  (0x40, "P"), (0x80, "I"))
#: The report mask: 0x100 (TASK_REPORT_MAX) marks a preempted task, still runnable.
_REPORT_MASK = 0xFF
#: A thread that left the CPU in one of these is gone: no state after it.
DEAD_STATES = frozenset({"X", "Z"})

#: Interval kinds.
ON_CPU = "on_cpu"
WAITING = "waiting"
ASLEEP = "asleep"
#: Between two events that cannot follow each other (a switch-out while not on
#: a CPU, a switch-in while on one, or while asleep without a wakeup), or
#: between two switch-outs whose timeslice counts (``slices``) jump by more
#: than one (a whole switch in and out, or a sleep, wakeup and switch in, not
#: recorded, which the order of events alone cannot show): an event in between
#: was not recorded
#: (measured: about 1 in 2,500 switches, with another BPF tracer running: the
#: kernel skips a probe whose event comes while a BPF program runs on that CPU,
#: counted in the recording's ``skipped_runs``), so the time is neither on-CPU
#: nor off.
UNKNOWN = "unknown"
KINDS = (ON_CPU, WAITING, ASLEEP, UNKNOWN)


def state_name(prev_state: int) -> str:
    """``runnable``, ``sleep``, ``disk`` or the kernel's letter for a prev_state."""
    bits = prev_state & _REPORT_MASK
    if bits == 0:
        return "runnable"
    for bit, letter in _STATE_LETTERS:
        if bits & bit:
            return {"S": "sleep", "D": "disk"}.get(letter, letter)
    return "?"


@dataclass(frozen=True)
class Clock:
    """CLOCK_REALTIME - CLOCK_MONOTONIC at two monotonic times (start and stop)."""

    mono_start: int
    offset_start: int
    mono_end: int | None = None
    offset_end: int | None = None

    def wall(self, mono: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Wall ns of monotonic ns, interpolated between the two readings."""
        if self.mono_end is None or self.offset_end is None or self.mono_end <= self.mono_start:
            return mono + self.offset_start
        frac = (mono - self.mono_start).astype(np.float64) / (self.mono_end - self.mono_start)
        drift = np.rint(frac * (self.offset_end - self.offset_start)).astype(np.int64)
        return mono + self.offset_start + drift

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the method named."""
        return {"method": "realtime-monotonic pair at start and stop, interpolated",
                "mono_start_ns": self.mono_start, "offset_start_ns": self.offset_start,
                "mono_end_ns": self.mono_end, "offset_end_ns": self.offset_end,
                "drift_ns": None if self.offset_end is None
                else self.offset_end - self.offset_start}

    @staticmethod
    def of(d: Mapping[str, Any]) -> Clock:
        """From :meth:`as_dict`'s form."""
        end, off_end = d.get("mono_end_ns"), d.get("offset_end_ns")
        return Clock(int(d["mono_start_ns"]), int(d["offset_start_ns"]),
                     None if end is None else int(end), None if off_end is None else int(off_end))


@dataclass
class Parsed:
    """bpftrace's lines as columns (monotonic times), and what else they said."""

    mono: list[int] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    cpu: list[int] = field(default_factory=list)
    event: list[str] = field(default_factory=list)
    state: list[str | None] = field(default_factory=list)
    target_cpu: list[int | None] = field(default_factory=list)
    slices: list[int | None] = field(default_factory=list)
    ready_mono: int | None = None  # the probes were attached (BEGIN)
    new_threads: int = 0
    created: dict[int, int] = field(default_factory=dict)  # tid -> monotonic ns (task_newtask)
    lost_events: int = 0
    bad_lines: int = 0


def parse_lines(lines: Iterable[str]) -> Parsed:
    """Parse the program's output (:mod:`.sched_probes`); a torn last line counts as bad."""
    out = Parsed()
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        tag = parts[0]
        try:
            if tag == "R" and len(parts) == 2:
                out.ready_mono = int(parts[1])
            elif tag in ("O", "F", "W") and (len(parts) == {"O": 4, "W": 5}.get(tag)
                                             or (tag == "F" and len(parts) in (5, 6))):
                mono, cpu, tid = int(parts[1]), int(parts[2]), int(parts[3])
                out.mono.append(mono)
                out.cpu.append(cpu)
                out.tid.append(tid)
                if tag == "O":
                    out.event.append("on")
                    out.state.append(None)
                    out.target_cpu.append(None)
                    out.slices.append(None)
                elif tag == "F":
                    out.event.append("off")
                    out.state.append(state_name(int(parts[4])))
                    out.target_cpu.append(None)
                    # Five fields: written before the switches carried it.
                    out.slices.append(int(parts[5]) if len(parts) == 6 else None)
                else:
                    out.event.append("wakeup")
                    out.state.append(None)
                    out.target_cpu.append(int(parts[4]))
                    out.slices.append(None)
            elif tag == "N" and len(parts) == 4:
                out.new_threads += 1
                out.created[int(parts[3])] = int(parts[1])
            elif line.startswith("Lost "):
                # bpftrace: "Lost N events" when its perf buffers overflowed.
                out.lost_events += int(parts[1])
            elif tag == "Attaching":
                continue
            else:
                out.bad_lines += 1
        except ValueError:
            out.bad_lines += 1
    return out


def to_table(parsed: Parsed, clock: Clock, meta: Mapping[str, Any]) -> Any:
    """A pyarrow Table in SCHED_SCHEMA, sorted by time (stable), with ``meta``
    (plus ``created_ns``: the threads created while recording, tid -> wall ns)."""
    mono = np.asarray(parsed.mono, dtype=np.int64)
    if parsed.created:
        born = clock.wall(np.asarray(list(parsed.created.values()), np.int64)).tolist()
        meta = {**meta, "created_ns": {str(t): int(w) for t, w in
                                       zip(parsed.created, born, strict=True)}}
    order = np.argsort(mono, kind="stable")
    wall = clock.wall(mono)[order]

    def pick(values: list[Any]) -> list[Any]:
        return [values[i] for i in order]

    arrays = [
        pa.array(wall, pa.int64()),
        pa.array(np.asarray(parsed.tid, dtype=np.int64)[order], pa.int64()),
        pa.array(np.asarray(parsed.cpu, dtype=np.int32)[order], pa.int32()),
        pa.array(pick(parsed.event), pa.string()),
        pa.array(pick(parsed.state), pa.string()),
        pa.array(pick(parsed.target_cpu), pa.int32()),
        pa.array(pick(parsed.slices), pa.int64()),
    ]
    schema = SCHED_SCHEMA.with_metadata({**SCHED_SCHEMA.metadata,
                                         META_KEY: json.dumps(dict(meta), sort_keys=True)})
    return pa.Table.from_arrays(arrays, schema=schema)


def write_table(table: Any, directory: Path) -> Path:
    """Write ``sched.parquet`` under a temporary name, then rename it into place."""
    dest = directory / SCHED_FILE
    tmp = directory / f".{SCHED_FILE}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(dest)
    return dest


class BadSchedError(ValueError):
    """A sched.parquet (or raw recording) that cannot be read."""


def table_meta(table: Any) -> dict[str, Any]:
    """The ``gmpscope_sched`` metadata of a sched table ({} without it)."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    if not raw:
        return {}
    meta = json.loads(raw)
    return meta if isinstance(meta, dict) else {}


def read_sched(directory: Path) -> Any | None:
    """The recording's sched table (pyarrow), None when it has none.

    A raw bpftrace file without sched.parquet (the recorder was killed before
    writing it) is read as what it is: a partial recording.
    """
    pfile = directory / SCHED_FILE
    if pfile.is_file():
        try:
            table = pq.read_table(pfile)
        except Exception as e:  # noqa: BLE001 - pyarrow raises many types for bad files
            raise BadSchedError(f"{SCHED_FILE}: not a readable Parquet file: {e}") from None
        missing = [n for n in SCHED_SCHEMA.names
                   if n not in table.column_names and n not in OPTIONAL_COLUMNS]
        if missing:
            raise BadSchedError(f"{SCHED_FILE}: missing columns {', '.join(missing)}")
        return table
    raw, notes = directory / RAW_FILE, directory / RAW_META_FILE
    if not (raw.is_file() and notes.is_file()):
        return None
    try:
        meta = json.loads(notes.read_text(encoding="utf-8"))
        clock = Clock.of(meta["clock"])
    except (ValueError, KeyError, TypeError) as e:
        raise BadSchedError(f"{RAW_META_FILE}: unreadable: {e}") from None
    with open(raw, encoding="utf-8", errors="replace") as fh:
        parsed = parse_lines(fh)
    meta = {**meta, "partial": True, "stopped_by": "recorder killed",
            "lost_events": parsed.lost_events, "bad_lines": parsed.bad_lines}
    if parsed.mono and meta.get("ended_ns") is None:
        meta["ended_ns"] = int(clock.wall(np.asarray([max(parsed.mono)], np.int64))[0])
    return to_table(parsed, clock, meta)


# --------------------------------------------------------------------------
# intervals


@dataclass(frozen=True)
class Intervals:
    """Each thread's states as columns (same length): ``kind`` is ON_CPU,
    WAITING, ASLEEP or UNKNOWN; ``state`` the sleep's letter (``sleep``, ``disk``, ...)
    for ASLEEP, else ""."""

    tid: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    cpu: npt.NDArray[np.int32]
    kind: list[str]
    state: list[str]

    def __len__(self) -> int:
        return len(self.tid)


def thread_intervals(ts: Any, tid: Any, cpu: Any, event: list[str], state: list[str | None],
                     target_cpu: list[int | None], start_ns: int, end_ns: int,
                     created: Mapping[int, int] | None = None,
                     slices: Sequence[int | None] | None = None) -> Intervals:
    """Each thread's on-CPU, waiting and asleep intervals within [start_ns, end_ns].

    The state before a thread's first event is inferred from that event: an
    ``off`` was on-CPU, an ``on`` was waiting (a sleeping thread would have been
    woken first), a ``wakeup`` was asleep; each from ``start_ns``, except for a
    thread ``created`` while recording (tid -> ns), which has no state before
    its first wakeup. The last state lasts until ``end_ns``, except after a
    thread's exit (X, Z). With ``slices`` (each switch-out's timeslice count),
    everything between two switch-outs of a thread whose counts differ by more
    than one is UNKNOWN.
    """
    created = created or {}
    ts_a = np.asarray(ts, dtype=np.int64)
    tid_a = np.asarray(tid, dtype=np.int64)
    cpu_a = np.asarray(cpu, dtype=np.int64)
    order = np.lexsort((np.arange(len(ts_a)), ts_a, tid_a))
    out_t: list[int] = []
    out_s: list[int] = []
    out_e: list[int] = []
    out_c: list[int] = []
    out_k: list[str] = []
    out_st: list[str] = []

    def emit(t: int, s: int, e: int, c: int, k: str, st: str) -> None:
        s, e = max(s, start_ns), min(e, end_ns)
        if e > s:
            out_t.append(t)
            out_s.append(s)
            out_e.append(e)
            out_c.append(c)
            out_k.append(k)
            out_st.append(st)

    cur_tid: int | None = None
    born = False
    # The thread's last switch-out's timeslice count, and where its intervals
    # since then begin in the output.
    last_slices: int | None = None
    since_off = 0
    kind: str | None = None  # the state the thread is in since `since`
    since, where, why = start_ns, -1, ""
    for i in order:
        t, now, c, ev = int(tid_a[i]), int(ts_a[i]), int(cpu_a[i]), event[i]
        if t != cur_tid:
            if cur_tid is not None and kind is not None:
                emit(cur_tid, since, end_ns, where, kind, why)
            cur_tid, kind, since, where, why = t, None, start_ns, -1, ""
            born = t in created
            last_slices, since_off = None, len(out_t)
        if ev == "on":
            if kind is None:
                kind, where = WAITING, c
            if kind == ON_CPU:  # its switch-out was missed
                emit(t, since, now, c, UNKNOWN, "")
            elif kind == ASLEEP:  # its wakeup was missed: when it woke is not known
                emit(t, since, now, where if where >= 0 else c, UNKNOWN, "")
            else:
                emit(t, since, now, where if where >= 0 else c, kind, why)
            kind, since, where, why = ON_CPU, now, c, ""
        elif ev == "off":
            count = None if slices is None else slices[i]
            if count is not None and last_slices is not None and count > last_slices + 1:
                # Timeslices between the two switch-outs went unrecorded.
                for j in range(since_off, len(out_t)):
                    out_k[j], out_st[j] = UNKNOWN, ""
                emit(t, since, now, c, UNKNOWN, "")
            elif kind is None or kind == ON_CPU:
                emit(t, since, now, c, ON_CPU, "")
            else:  # its switch-in was missed
                emit(t, since, now, c, UNKNOWN, "")
            if count is not None:
                last_slices = count
            since_off = len(out_t)
            st = state[i] or "?"
            if st == "runnable":
                kind, why = WAITING, ""
            elif st in DEAD_STATES:
                kind, why = None, ""
            else:
                kind, why = ASLEEP, st
            since, where = now, c
        elif ev == "wakeup":
            if kind is None and born:  # its first wakeup: it did not exist before
                tc = target_cpu[i]
                kind, since, where = WAITING, now, c if tc is None else int(tc)
                continue
            if kind is None:
                kind, why = ASLEEP, "sleep"
            if kind == ASLEEP:
                emit(t, since, now, where if where >= 0 else c, ASLEEP, why)
                tc = target_cpu[i]
                kind, since, where, why = WAITING, now, c if tc is None else int(tc), ""
            # A wakeup of a thread still on a CPU or already runnable changes nothing.
    if cur_tid is not None and kind is not None:
        emit(cur_tid, since, end_ns, where, kind, why)
    return Intervals(np.asarray(out_t, np.int64), np.asarray(out_s, np.int64),
                     np.asarray(out_e, np.int64), np.asarray(out_c, np.int32), out_k, out_st)


def table_intervals(table: Any, start_ns: int | None = None,
                    end_ns: int | None = None) -> Intervals:
    """:func:`thread_intervals` of a sched table, over its recorded window by default."""
    meta = table_meta(table)
    ts = table.column("ts_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    lo = start_ns if start_ns is not None else meta.get("started_ns")
    hi = end_ns if end_ns is not None else meta.get("ended_ns")
    if lo is None:
        lo = int(ts.min()) if len(ts) else 0
    if hi is None:
        hi = int(ts.max()) if len(ts) else 0
    created = {int(t): int(w) for t, w in (meta.get("created_ns") or {}).items()}
    slices = table.column("slices").to_pylist() if "slices" in table.column_names else None
    return thread_intervals(ts, table.column("tid").to_numpy(zero_copy_only=False),
                            table.column("cpu").to_numpy(zero_copy_only=False),
                            table.column("event").to_pylist(), table.column("state").to_pylist(),
                            table.column("target_cpu").to_pylist(), int(lo), int(hi), created,
                            slices)
