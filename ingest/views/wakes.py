"""Wake-ups: every goroutine's ``Waiting -> Runnable`` transition and the
goroutine that made it, shared by the flows, the critical path and the
timeline's causality panels (docs/causality.md).

A wake-up is an interval row of ``frames.intervals`` whose kind is a goroutine
``Waiting -> Runnable``. Its ``g`` column is the transition's context: the
goroutine running on the M when Go recorded it (the waker; -1 when none was,
as for the netpoller or a timer run by the scheduler), and its ``stack_id``
is that context's stack (Go records the unblock with the waker's stack).
Rows of one goroutine are contiguous and in Go's order, so a goroutine's row
"at" a time or a sequence number is a binary search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames
from ingest.derive.lanesets import REF_SOURCES, SRC_INTERVAL, SRC_RUN
from ingest.store import models

I64 = npt.NDArray[np.int64]


@dataclass
class Wakes:
    """Every wake-up's interval row, sorted by (waker, seq): the wake-ups one
    goroutine made are a contiguous slice (``of_waker``)."""

    row: I64
    waker: I64
    seq: I64

    def of_waker(self, goid: int, seq_lo: int, seq_hi: int) -> I64:
        """Rows of the wake-ups ``goid`` made with ``seq_lo < seq < seq_hi``."""
        lo = int(np.searchsorted(self.waker, goid, side="left"))
        hi = int(np.searchsorted(self.waker, goid, side="right"))
        s = self.seq[lo:hi]
        a = lo + int(np.searchsorted(s, seq_lo, side="right"))
        b = lo + int(np.searchsorted(s, seq_hi, side="left"))
        return self.row[a:b] if b > a else self.row[:0]


def wake_kinds(frames: TraceFrames) -> list[int]:
    """The kind codes of a goroutine's ``Waiting -> Runnable``."""
    return [k for k, v in frames.kinds.items()
            if v.resource == "goroutine" and v.from_state == "Waiting"
            and v.to_state == "Runnable"]


def goroutine_row_count(frames: TraceFrames) -> int:
    """Goroutine rows come first in the intervals: rows below this are theirs."""
    return int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0


def wakes(frames: TraceFrames) -> Wakes:
    """The trace's wake-ups (built once per trace, kept in memory)."""
    def build() -> Wakes:
        iv = frames.intervals
        n_g = goroutine_row_count(frames)
        kind = np.asarray(iv["kind"][:n_g])
        rows = np.nonzero(np.isin(kind, wake_kinds(frames)))[0].astype(np.int64)
        waker = np.asarray(iv["g"][rows], np.int64)
        seq = np.asarray(iv["seq"][rows], np.int64)
        order = np.lexsort((seq, waker))
        return Wakes(rows[order], waker[order], seq[order])
    return cached(frames, "causality:wakes", build)


def goroutine_rows(frames: TraceFrames, goid: int) -> slice:
    """The rows of goroutine ``goid`` (empty when the trace has none)."""
    return frames.goroutines.rows(goid)


def row_at(frames: TraceFrames, goid: int, t: int) -> int | None:
    """The row of ``goid`` in progress at ``t``: the last one that began at or
    before ``t`` (None before its first)."""
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        return None
    i = int(np.searchsorted(frames.intervals["start_ts"][rows], t, side="right")) - 1
    return None if i < 0 else rows.start + i


def row_before_seq(frames: TraceFrames, goid: int, seq: int) -> int | None:
    """The row of ``goid`` in progress when the transition ``seq`` happened:
    its last row with a smaller seq (exact where timestamps tie)."""
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        return None
    i = int(np.searchsorted(frames.intervals["seq"][rows], seq, side="left")) - 1
    return None if i < 0 else rows.start + i


def next_row(frames: TraceFrames, row: int) -> int | None:
    """The same goroutine's row after ``row``, if any."""
    nxt = row + 1
    iv = frames.intervals
    if nxt < goroutine_row_count(frames) and int(iv["rid"][nxt]) == int(iv["rid"][row]):
        return nxt
    return None


def interval_row(frames: TraceFrames, ref: int) -> int:
    """The goroutine interval row a timeline shape's ``ref`` stands for: an
    interval's own row, or a proc run's Running interval. Raises LookupError."""
    if ref < 0:
        raise LookupError(f"ref {ref}: a merged shape has no single span")
    src, row = ref % REF_SOURCES, ref // REF_SOURCES
    if src == SRC_INTERVAL:
        if row >= goroutine_row_count(frames):
            raise LookupError(f"ref {ref} is not a goroutine's interval")
        return row
    if src == SRC_RUN:
        runs = frames.proc_runs
        if row >= len(runs):
            raise LookupError(f"no proc run row {row}")
        at = runs.columns.get("row")
        if at is not None:
            return int(at[row])
        found = row_at(frames, int(runs["g"][row]), int(runs["start_ts"][row]))
        if found is None:
            raise LookupError(f"no interval for proc run {row}")
        return found
    raise LookupError(f"ref {ref} is not a goroutine's span")


def span(frames: TraceFrames, row: int) -> dict[str, Any]:
    """One goroutine interval as plain data (with its timeline ``ref``)."""
    iv = frames.intervals
    k = frames.kinds.get(int(iv["kind"][row]))
    return {"row": row, "ref": row * REF_SOURCES + SRC_INTERVAL,
            "goroutine": int(iv["rid"][row]), "state": k.to_state if k else "",
            "from_state": k.from_state if k else "", "reason": k.reason if k else "",
            "start_ts": int(iv["start_ts"][row]), "end_ts": int(iv["end_ts"][row]),
            "duration_ns": int(iv["end_ts"][row]) - int(iv["start_ts"][row]),
            "m": int(iv["m"][row]), "p": int(iv["p"][row]),
            "stack_id": int(iv["stack_id"][row])}


def state_name(frames: TraceFrames, row: int) -> str:
    """The state interval ``row`` is in."""
    k = frames.kinds.get(int(frames.intervals["kind"][row]))
    return k.to_state if k else ""


def stacks(engine: Engine, trace_id: int, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Frames (innermost first: function, file, line) of each stack id."""
    want = sorted({i for i in ids if i > 0})
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in want}
    st = models.stacks
    with engine.connect() as conn:
        for k in range(0, len(want), 500):
            chunk = want[k:k + 500]
            rows = conn.execute(select(st.c.stack_id, st.c.function, st.c.file, st.c.line)
                                .where(st.c.trace_id == trace_id, st.c.stack_id.in_(chunk))
                                .order_by(st.c.stack_id, st.c.depth)).all()
            for r in rows:
                out[r.stack_id].append({"function": r.function, "file": r.file,
                                        "line": r.line})
    return out


def leaf_functions(engine: Engine, trace_id: int, ids: list[int]) -> dict[int, str]:
    """The innermost frame's function of each stack id (those that have one)."""
    want = sorted({i for i in ids if i > 0})
    out: dict[int, str] = {}
    st = models.stacks
    with engine.connect() as conn:
        for k in range(0, len(want), 500):
            chunk = want[k:k + 500]
            rows = conn.execute(select(st.c.stack_id, st.c.function)
                                .where(st.c.trace_id == trace_id, st.c.depth == 0,
                                       st.c.stack_id.in_(chunk))).all()
            out.update({r.stack_id: r.function for r in rows})
    return out
