"""Flows: who woke a goroutine's span, and whom it woke (docs/causality.md).

For a selected goroutine interval (by the timeline shape's ``ref``, or a
goroutine and a time):

- ``woken_by``: the wake-up that let it run. For a Waiting span, the
  ``Waiting -> Runnable`` that ended it; for any other, the last wake-up
  before it since the goroutine last blocked (a Running span after a
  preemption still owes its run to that wake-up). With the waker (the
  transition's context goroutine, None when the runtime woke it from no
  goroutine: the netpoller, a timer), the waker's stack at that moment, the
  waker's own span then, and the wait it ended.
- ``woke``: the wake-ups the goroutine made during the span (the transitions
  whose context it was, between the span's transition and the next one of
  that goroutine, in Go's order), each with the woken goroutine and the
  waker's stack there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine

from ingest.codes import STATE_CODE
from ingest.derive.frames import TraceFrames
from ingest.views.wakes import (
    goroutine_rows,
    interval_row,
    next_row,
    row_at,
    row_before_seq,
    span,
    stacks,
    state_name,
    wake_kinds,
    wakes,
)

#: How far back (rows of one goroutine) the wake-up of a span is looked for.
LOOKBACK = 4096
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


def select_row(frames: TraceFrames, ref: int | None = None, goid: int | None = None,
               t: int | None = None) -> int:
    """The goroutine interval row a request names: a timeline ``ref``, or
    goroutine ``goid`` at time ``t`` (default its first row). LookupError if none."""
    if ref is not None:
        return interval_row(frames, ref)
    if goid is None:
        raise LookupError("name a span: ref, or g (and t)")
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        raise LookupError(f"no goroutine {goid} in this trace")
    row = rows.start if t is None else row_at(frames, goid, t)
    if row is None:
        raise LookupError(f"goroutine {goid} has no interval at {t}")
    return row


def wake_of(frames: TraceFrames, row: int) -> int | None:
    """The wake-up row the span ``row`` owes its (next) run to, or None."""
    kinds = wake_kinds(frames)
    if state_name(frames, row) == "Waiting":
        nxt = next_row(frames, row)
        if nxt is not None and int(frames.intervals["kind"][nxt]) in kinds:
            return nxt
        return None
    rows = goroutine_rows(frames, int(frames.intervals["rid"][row]))
    lo = max(int(rows.start), row - LOOKBACK)
    kind = np.asarray(frames.intervals["kind"][lo:row + 1])
    state = frames.state[lo:row + 1]
    waiting = np.nonzero(state == STATE_CODE["Waiting"])[0]
    woke = np.nonzero(np.isin(kind, kinds))[0]
    if not len(woke):
        return None
    last = int(woke[-1])
    if len(waiting) and int(waiting[-1]) > last:
        return None  # blocked again since, and that wait has not ended by this span
    return lo + last


def woken_by(engine: Engine, frames: TraceFrames, row: int) -> dict[str, Any] | None:
    """The wake-up behind span ``row`` (see the module), or None."""
    w = wake_of(frames, row)
    if w is None:
        return None
    iv = frames.intervals
    waker = int(iv["g"][w])
    seq = int(iv["seq"][w])
    prev = w - 1 if w > goroutine_rows(frames, int(iv["rid"][w])).start else None
    waker_row = row_before_seq(frames, waker, seq) if waker >= 0 else None
    stack_id = int(iv["stack_id"][w])
    return {
        "ts": int(iv["start_ts"][w]), "seq": seq,
        "goroutine": int(iv["rid"][w]),
        "waker": waker if waker >= 0 else None,
        "m": int(iv["m"][w]), "p": int(iv["p"][w]),
        "stack_id": stack_id,
        "stack": stacks(engine, frames.trace_id, [stack_id]).get(stack_id, []),
        "runnable": span(frames, w),
        "wait": span(frames, prev) if prev is not None
        and state_name(frames, prev) == "Waiting" else None,
        "waker_span": span(frames, waker_row) if waker_row is not None else None,
    }


def woke(engine: Engine, frames: TraceFrames, row: int, limit: int = DEFAULT_LIMIT
         ) -> tuple[list[dict[str, Any]], int]:
    """The wake-ups goroutine ``row``'s made during that span (first ``limit``),
    and how many there were."""
    iv = frames.intervals
    goid = int(iv["rid"][row])
    nxt = next_row(frames, row)
    seq_hi = int(iv["seq"][nxt]) if nxt is not None else np.iinfo(np.int64).max
    rows = wakes(frames).of_waker(goid, int(iv["seq"][row]), seq_hi)
    shown = [int(r) for r in rows[:limit]]
    ids = [int(iv["stack_id"][r]) for r in shown]
    st = stacks(engine, frames.trace_id, ids)
    out = []
    for r, sid in zip(shown, ids, strict=True):
        woken = int(iv["rid"][r])
        prev = r - 1 if r > goroutine_rows(frames, woken).start else None
        out.append({"ts": int(iv["start_ts"][r]), "seq": int(iv["seq"][r]),
                    "goroutine": woken, "stack_id": sid, "stack": st.get(sid, []),
                    "runnable": span(frames, r),
                    "wait": span(frames, prev) if prev is not None
                    and state_name(frames, prev) == "Waiting" else None})
    return out, len(rows)


def flows(engine: Engine, frames: TraceFrames, row: int,
          limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """The selected span, who woke it and whom it woke, with the arrows to
    draw (``from``/``to``: goroutine and time)."""
    sel = span(frames, row)
    sel["stack"] = stacks(engine, frames.trace_id, [sel["stack_id"]]).get(sel["stack_id"], [])
    by = woken_by(engine, frames, row)
    them, total = woke(engine, frames, row, limit)
    arrows = []
    if by is not None and by["waker"] is not None:
        arrows.append({"kind": "woken_by", "from": {"goroutine": by["waker"], "ts": by["ts"]},
                       "to": {"goroutine": by["goroutine"], "ts": by["ts"]}})
    for w in them:
        arrows.append({"kind": "woke", "from": {"goroutine": sel["goroutine"], "ts": w["ts"]},
                       "to": {"goroutine": w["goroutine"], "ts": w["ts"]}})
    return {"trace_id": frames.trace_id, "span": sel, "woken_by": by, "woke": them,
            "woke_total": total, "arrows": arrows}


def all_wakes(frames: TraceFrames) -> list[tuple[int, int, int | None]]:
    """Every wake-up as (seq, woken goroutine, waker or None), in Go's order."""
    w = wakes(frames)
    iv = frames.intervals
    order = np.argsort(w.seq, kind="stable")
    rid = np.asarray(iv["rid"][w.row[order]], np.int64)
    return [(int(s), int(g), int(k) if k >= 0 else None)
            for s, g, k in zip(w.seq[order], rid, w.waker[order], strict=True)]
