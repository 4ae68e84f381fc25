"""One goroutine in detail: its intervals (a page of transitions with
stacks), its time breakdown (the categories of :mod:`ingest.views.goroutines`),
merged state segments for a small Gantt, creation stack, parent and children,
and, with a scheduling recording, its Running time while its thread was
off-CPU (:mod:`ingest.views.offcpu`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine

from ingest.derive.frames import TraceFrames
from ingest.store import models
from ingest.views.goroutines import (
    CAT,
    CATEGORIES,
    CATEGORY_LABELS,
    GONE,
    assist_ranges,
    category_of_kinds,
    stack_frames,
)
from ingest.views.histo import released
from ingest.views.intervals import goroutine
from ingest.views.offcpu import goroutine_offcpu
from ingest.views.running_time import running_in

#: Merged Gantt segments returned at most (the longest are kept beyond that).
MAX_SEGMENTS = 20_000
MAX_CHILDREN = 200


def goroutine_detail(engine: Engine, frames: TraceFrames, goid: int, offset: int = 0,
                     limit: int = 200, segments: int = MAX_SEGMENTS) -> dict[str, Any]:
    """Everything the goroutine page shows; raises LookupError for an unknown goid.
    A busy goroutine's rows are hundreds of MB of the frames: handed back after."""
    return released(frames, lambda: _goroutine_detail(engine, frames, goid, offset, limit,
                                                      segments))


def created_by(frames: TraceFrames, goid: int, limit: int) -> list[int]:
    """The goroutines goroutine ``goid`` created (``goroutines.parent_goid``),
    by id, at most ``limit``: those whose first interval begins with their
    creation (out of NotExist) and whose creating transition ran in ``goid``
    (that row's ``g``). From the frames: the SQL table has no index on the
    parent, and its scan took 66 ms of the busiest goroutine's page on the
    200 MB trace (118 ms on PostgreSQL's chunks)."""
    lanes = frames.goroutines
    if goid < 0 or not len(lanes.ids):  # -1: no goroutine (the table keeps NULL)
        return []
    first = np.asarray(lanes.off[:-1], np.int64)
    created = [code for code, k in frames.kinds.items() if k.from_state == "NotExist"]
    iv = frames.intervals
    mine = (iv.take("g", first) == goid) & np.isin(iv.take("kind", first), created)
    return [int(x) for x in np.asarray(lanes.ids)[mine][:limit]]


def _goroutine_detail(engine: Engine, frames: TraceFrames, goid: int, offset: int,
                      limit: int, segments: int) -> dict[str, Any]:
    rows = frames.goroutines.rows(goid)
    if rows.stop <= rows.start:
        raise LookupError(f"no goroutine {goid} in trace {frames.trace_id}")
    iv = frames.intervals
    start = np.asarray(iv["start_ts"][rows])
    end = np.asarray(iv["end_ts"][rows])
    kind = np.asarray(iv["kind"][rows])
    cat = category_of_kinds(frames)[kind]
    dur = end - start
    times = np.bincount(cat, weights=dur.astype(np.float64),
                        minlength=GONE + 1)[:GONE].round().astype(np.int64)
    assist = assist_ranges(engine, frames)
    mine = assist.of(goid)
    for s, e in zip(assist.start[mine].tolist(), assist.end[mine].tolist(), strict=True):
        moved = running_in(frames, rows, s, e)
        times[CAT["running"]] -= moved
        times[CAT["gc_assist"]] += moved
    gone = frames.state[rows.stop - 1] == models.STATE_CODE["NotExist"]
    first_ts = int(start[0])
    end_ts = int(start[-1]) if gone else frames.last_ts
    info = goroutine(engine, frames.trace_id, goid) or {}
    n = len(start)
    offset = max(0, min(offset, n))
    page = slice(offset, min(n, offset + max(0, limit)))
    kinds = frames.kinds
    at = slice(rows.start + page.start, rows.start + page.stop)
    cols = {name: iv[name][at].tolist() for name in ("m", "p", "g", "stack_id", "seq")}
    page_rows: list[dict[str, Any]] = []
    for j, k in enumerate(range(page.start, page.stop)):
        kd = kinds[int(kind[k])]
        c = int(cat[k])
        page_rows.append({
            "index": k, "from_state": kd.from_state, "state": kd.to_state,
            "reason": kd.reason, "category": None if c == GONE else CATEGORIES[c],
            "start_ts": int(start[k]), "end_ts": int(end[k]), "duration_ns": int(dur[k]),
            "m": cols["m"][j], "p": cols["p"][j], "g": cols["g"][j],
            "stack_id": cols["stack_id"][j], "seq": cols["seq"][j],
        })
    start_stack = int(info.get("start_stack_id") or 0)
    created_stack = 0
    if n and kinds[int(kind[0])].from_state == "NotExist":
        created_stack = int(iv["stack_id"][rows.start])
    wanted = [int(r["stack_id"]) for r in page_rows] + [start_stack, created_stack]
    stacks = stack_frames(engine, frames.trace_id, wanted)
    children = created_by(frames, goid, MAX_CHILDREN)
    return {
        "trace_id": frames.trace_id, "goid": goid,
        "start_function": info.get("start_function"),
        "parent_goid": info.get("parent_goid"), "created_ts": info.get("created_ts"),
        "ended_ts": info.get("ended_ts"), "final_state": models.STATE_NAMES[
            int(frames.state[rows.stop - 1])],
        "first_ts": first_ts, "end_ts": end_ts, "lifetime_ns": end_ts - first_ts,
        "categories": list(CATEGORIES), "category_labels": CATEGORY_LABELS,
        "times": {c: int(v) for c, v in zip(CATEGORIES, times.tolist(), strict=True)},
        "intervals_total": n, "offset": page.start, "limit": limit,
        "transitions": page_rows,
        "start_stack": stacks.get(start_stack, []),
        "created_at_stack": stacks.get(created_stack, []),
        "stacks": {str(k): v for k, v in stacks.items()},
        "children": children,
        "segments": merged_segments(start, end, cat, segments),
        "timeline": {"mode": "g", "g": goid, "t1": first_ts, "t2": max(end_ts, first_ts + 1)},
        # Running while its thread was off-CPU (a scheduling recording; None without one).
        "offcpu": goroutine_offcpu(engine, frames.trace_id, goid),
    }


def merged_segments(start: Any, end: Any, cat: Any, cap: int) -> dict[str, Any]:
    """Consecutive intervals of one category merged: (start, end, category)
    lists; NotExist time dropped; at most ``cap`` segments (the longest)."""
    gone = np.flatnonzero(cat == GONE)
    if len(gone) == 0 or (len(gone) == 1 and gone[0] == len(cat) - 1):
        n = len(cat) - len(gone)  # a goroutine's only NotExist row is its last: no copies
        s, e, c = start[:n], end[:n], cat[:n]
    else:
        keep = cat != GONE
        s, e, c = start[keep], end[keep], cat[keep]
    if len(s) == 0:
        return {"start": [], "end": [], "category": [], "truncated": False}
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.not_equal(c[1:], c[:-1], out=new[1:])
    new[1:] |= s[1:] != e[:-1]
    idx = np.flatnonzero(new)
    ms, mc = s[idx], c[idx]
    me = e[np.r_[idx[1:] - 1, len(s) - 1]]
    truncated = len(ms) > cap
    if truncated:
        top = _longest(me - ms, cap)
        ms, me, mc = ms[top], me[top], mc[top]
    return {"start": ms.tolist(), "end": me.tolist(),
            "category": [CATEGORIES[int(x)] for x in mc.tolist()], "truncated": bool(truncated)}


def _longest(d: Any, cap: int) -> Any:
    """Indices (ascending) of the ``cap`` largest of ``d``, ties to the later
    ones: ``np.sort(np.argsort(d, kind="stable")[-cap:])`` without a sort."""
    n = len(d)
    if cap <= 0 or cap >= n:
        return np.sort(np.argsort(d, kind="stable")[-cap:])
    cut = np.partition(d, n - cap)[n - cap]  # the cap-th largest
    above = np.flatnonzero(d > cut)
    ties = np.flatnonzero(d == cut)
    return np.sort(np.concatenate([above, ties[len(ties) - (cap - len(above)):]]))
