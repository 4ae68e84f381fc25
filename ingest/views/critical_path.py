"""The critical path of a goroutine or a task (docs/causality.md): the chain
of wake-ups its time depended on, with the time spent on each link.

Walking backwards from the end of the window on the goroutine:

- a span where it ran, was runnable or in a system call is its own time: a
  link on the path;
- a wait that a goroutine ended (the ``Waiting -> Runnable`` whose context it
  was, :mod:`ingest.views.wakes`) hands the path to that waker: its history
  from the wake-up back to when the wait began is on the path instead (and
  recursively, where the waker itself waited on another), then the walk goes
  on from the wait's start;
- a wait nobody ended (the runtime woke it from no goroutine: a timer, the
  netpoller) or that had not ended by the window's end stays a link of its own;
- a goroutine created inside the window hands the path to its creator at its
  creation.

The links tile the window: their durations add up to ``t2 - t1`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine

from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.store.coded_models import rows_by_key
from ingest.views.area import own_stacks
from ingest.views.wakes import (
    goroutine_rows,
    leaf_functions,
    next_row,
    span,
    state_name,
    wake_kinds,
)

#: Most links one answer walks (a long-lived goroutine's whole life can be
#: millions of spans); past it the path is cut at its earliest link.
MAX_LINKS = 5000


@dataclass
class _Link:
    goroutine: int
    row: int
    start: int
    end: int
    depth: int


def _row_before(frames: TraceFrames, goid: int, t: int) -> int | None:
    """The last row of ``goid`` that began before ``t``."""
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        return None
    i = int(np.searchsorted(frames.intervals["start_ts"][rows], t, side="left")) - 1
    return None if i < 0 else int(rows.start) + i


def _handoff(frames: TraceFrames, row: int, t: int, wakes: set[int]) -> tuple[int, str] | None:
    """Who the path goes to from span ``row`` at its end ``t``: the waker of a
    wait that ended at ``t``, or the creator of a goroutine created at ``t``."""
    iv = frames.intervals
    goid = int(iv["rid"][row])
    state = state_name(frames, row)
    if state == "Waiting" and int(iv["end_ts"][row]) == t:
        nxt = next_row(frames, row)
        if nxt is not None and int(iv["kind"][nxt]) in wakes:
            waker = int(iv["g"][nxt])
            if waker >= 0 and waker != goid:
                return waker, "wake"
    return None


def _creator(frames: TraceFrames, goid: int, t: int) -> int | None:
    """The goroutine that created ``goid`` at ``t`` (its first row's context)."""
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        return None
    first = int(rows.start)
    iv = frames.intervals
    k = frames.kinds.get(int(iv["kind"][first]))
    if k is None or k.from_state != "NotExist" or int(iv["start_ts"][first]) != t:
        return None
    g = int(iv["g"][first])
    return g if g >= 0 and g != goid else None


def walk(frames: TraceFrames, goid: int, t1: int, t2: int,
         max_links: int = MAX_LINKS) -> tuple[list[_Link], list[dict[str, Any]], bool]:
    """(links latest first, hand-offs, cut short) of ``goid``'s path over [t1, t2)."""
    wakes = set(wake_kinds(frames))
    iv = frames.intervals
    links: list[_Link] = []
    hops: list[dict[str, Any]] = []
    work = [(goid, t2, t1, 0)]
    while work:
        x, t, lo, depth = work.pop()
        while t > lo:
            if len(links) >= max_links:
                return links, hops, True
            row = _row_before(frames, x, t)
            if row is None:
                creator = _creator(frames, x, t)
                if creator is None:
                    break  # nothing known before: the gap shows in the total
                hops.append({"kind": "create", "ts": t, "from": creator, "to": x})
                x, depth = creator, depth + 1
                continue
            s = max(int(iv["start_ts"][row]), lo)
            to = _handoff(frames, row, t, wakes)
            if to is not None:
                waker, kind = to
                hops.append({"kind": kind, "ts": t, "from": waker, "to": x,
                             "wait": span(frames, row)})
                work.append((x, s, lo, depth))
                work.append((waker, t, s, depth + 1))
                break
            links.append(_Link(x, row, s, t, depth))
            t = s
    return links, hops, False


def _task(engine: Engine, trace_id: int, task_id: int) -> Any:
    with engine.connect() as conn:
        rows = rows_by_key(conn, "tasks", trace_id, [task_id])
    if not rows:
        raise LookupError(f"no task {task_id} in this trace")
    return rows[0]


def goroutine_window(frames: TraceFrames, goid: int) -> tuple[int, int]:
    """A goroutine's lifetime: its first row's start to its last live row's end."""
    rows = goroutine_rows(frames, goid)
    if rows.stop <= rows.start:
        raise LookupError(f"no goroutine {goid} in this trace")
    iv = frames.intervals
    last = int(rows.stop) - 1
    if state_name(frames, last) == "NotExist" and last > int(rows.start):
        last -= 1
    return int(iv["start_ts"][rows.start]), int(iv["end_ts"][last])


def critical_path(engine: Engine, frames: TraceFrames, goid: int | None = None,
                  t1: int | None = None, t2: int | None = None,
                  task: int | None = None, max_links: int = MAX_LINKS) -> dict[str, Any]:
    """The critical path of goroutine ``goid`` over ``[t1, t2)`` (default its
    lifetime), or of task ``task`` (its span, walked from the goroutine that
    ended it). Raises LookupError for an unknown goroutine or task."""
    about: dict[str, Any] = {}
    if task is not None:
        tk = _task(engine, frames.trace_id, task)
        goid = tk.end_g if tk.end_g is not None and tk.end_ts is not None else tk.start_g
        lo = frames.first_ts if tk.start_ts is None else int(tk.start_ts)
        hi = frames.last_ts if tk.end_ts is None else int(tk.end_ts)
        about["task"] = {"id": task, "name": tk.name, "start_ts": tk.start_ts,
                         "end_ts": tk.end_ts, "start_g": tk.start_g, "end_g": tk.end_g}
    elif goid is not None:
        lo, hi = goroutine_window(frames, goid)
    else:
        raise LookupError("name a goroutine (g) or a task")
    assert goid is not None
    if goroutine_rows(frames, goid).stop <= goroutine_rows(frames, goid).start:
        raise LookupError(f"no goroutine {goid} in this trace")
    lo = lo if t1 is None else max(lo, t1) if task is not None else t1
    hi = hi if t2 is None else min(hi, t2) if task is not None else t2
    if hi <= lo:
        raise LookupError("the window is empty")
    found, hops, cut = walk(frames, goid, lo, hi, max_links)
    found.reverse()
    hops.reverse()
    rows = np.asarray([x.row for x in found], np.int64)
    own = own_stacks(frames, rows) if len(rows) else np.zeros(0, np.int64)
    leaf = leaf_functions(engine, frames.trace_id, own.tolist())
    table = goroutine_table(engine, frames)
    links = []
    per: dict[int, int] = {}
    for x, sid in zip(found, own.tolist(), strict=True):
        d = span(frames, x.row)
        d.update({"start_ts": x.start, "end_ts": x.end, "duration_ns": x.end - x.start,
                  "depth": x.depth, "own_stack_id": sid,
                  "function": leaf.get(sid, "")})
        links.append(d)
        per[x.goroutine] = per.get(x.goroutine, 0) + x.end - x.start
    chain: list[int] = []
    for x in reversed(found):
        if x.goroutine not in chain:
            chain.append(x.goroutine)
    names = dict(zip(table.goid.tolist(), [table.names[int(c)] for c in table.group],
                     strict=True))
    covered = sum(x.end - x.start for x in found)
    return {"trace_id": frames.trace_id, "goroutine": goid, **about, "t1": lo, "t2": hi,
            "total_ns": hi - lo, "covered_ns": covered, "cut": cut,
            "chain": chain,
            "goroutines": [{"goroutine": g, "ns": ns, "start_function": names.get(g, "")}
                           for g, ns in sorted(per.items(), key=lambda kv: -kv[1])],
            "links": links, "hops": hops}
