"""The SQL page's example queries computed without the database: from a trace's
decoded Parquet files (docs/schema.md), in plain Python.

An interval is a resource's transition to its next one (its last ends at the
trace's ``last_ts``), the definition docs/schema.md gives for ``intervals``;
nothing here reads what the loader stored.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]


@dataclass(frozen=True)
class Interval:
    resource: str
    rid: int
    state: str
    reason: str
    start_ts: int
    end_ts: int
    stack_id: int

    @property
    def duration_ns(self) -> int:
        return self.end_ts - self.start_ts


@dataclass
class Decoded:
    """A decoded trace's intervals and stacks."""

    intervals: list[Interval]
    stacks: dict[int, list[str]]  # stack id -> functions, innermost first

    def stack_text(self, stack_id: int) -> str | None:
        frames = self.stacks.get(stack_id)
        return " <- ".join(frames) if frames else None


def read_decoded(directory: Path) -> Decoded:
    """The intervals of ``directory``'s transitions.parquet and its stacks."""
    last_ts = json.loads((directory / "meta.json").read_text())["last_ts"]
    t = pq.read_table(directory / "transitions.parquet",
                      columns=["ts", "resource", "id", "to_state", "reason", "stack_id"])
    cols = {name: t.column(name).to_pylist() for name in t.column_names}
    by_resource: dict[tuple[str, int], list[int]] = defaultdict(list)
    for row, key in enumerate(zip(cols["resource"], cols["id"], strict=True)):
        by_resource[key].append(row)  # rows are in Go's order
    intervals = []
    for (resource, rid), rows in by_resource.items():
        for i, row in enumerate(rows):
            end = cols["ts"][rows[i + 1]] if i + 1 < len(rows) else last_ts
            intervals.append(Interval(resource, rid, cols["to_state"][row],
                                      cols["reason"][row] or "", cols["ts"][row], end,
                                      cols["stack_id"][row]))
    s = pq.read_table(directory / "stacks.parquet", columns=["stack_id", "depth", "function"])
    frames: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for sid, depth, fn in zip(s.column("stack_id").to_pylist(), s.column("depth").to_pylist(),
                              s.column("function").to_pylist(), strict=True):
        frames[sid].append((depth, fn))
    stacks = {sid: [fn for _, fn in sorted(fs)] for sid, fs in frames.items()}
    return Decoded(intervals, stacks)


def syscalls_longest(d: Decoded) -> list[Interval]:
    """Every goroutine Syscall interval, longest first."""
    out = [iv for iv in d.intervals if iv.resource == "goroutine" and iv.state == "Syscall"]
    return sorted(out, key=lambda iv: -iv.duration_ns)


def channel_blocked(d: Decoded, reasons: tuple[str, ...], more_than_ns: int) -> list[Interval]:
    """Goroutine waits on a channel operation longer than ``more_than_ns``."""
    return [iv for iv in d.intervals if iv.resource == "goroutine" and iv.state == "Waiting"
            and iv.reason in reasons and iv.duration_ns > more_than_ns]


def time_per_state_per_p(d: Decoded) -> dict[tuple[int, str], tuple[int, int]]:
    """(p, state) -> (intervals, total ns) over the procs' intervals."""
    out: dict[tuple[int, str], tuple[int, int]] = {}
    for iv in d.intervals:
        if iv.resource == "proc":
            n, total = out.get((iv.rid, iv.state), (0, 0))
            out[(iv.rid, iv.state)] = (n + 1, total + iv.duration_ns)
    return out
