"""Search the timeline (docs/causality.md): a goroutine id, a start function
or any stack function, to the goroutine spans that match, in time order.

- ``123`` or ``g123``: goroutine 123's intervals;
- any other text, case-insensitive, as a substring: the intervals of every
  goroutine whose start function contains it, and every goroutine interval
  whose stack (the one recorded where the goroutine entered the state: where
  it blocked, stopped, or, for a Runnable span, the waker's) has a frame whose
  function contains it.

Matches are goroutine intervals overlapping ``[t1, t2)``, sorted by start time
(then row), paged; ``at`` starts the page at the first match that begins at or
after a time (the timeline steps through matches from its view).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, func, select

from ingest.codes import STATE_CODE
from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.store import models
from ingest.views.wakes import goroutine_row_count, span

DEFAULT_LIMIT = 100
MAX_LIMIT = 5000
#: How many matched function names the answer lists.
MAX_NAMES = 20
_GOID = re.compile(r"[gG]?(\d+)")


class BadQuery(ValueError):
    """An empty or unusable query (the API answers 400)."""


def _like(q: str) -> str:
    """``q`` as a LIKE pattern matching it anywhere, its wildcards escaped."""
    esc = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{esc}%"


def stack_ids_with(engine: Engine, trace_id: int, q: str) -> tuple[list[int], list[str]]:
    """Stack ids with a frame whose function contains ``q`` (any case), and
    the distinct functions that matched (at most MAX_NAMES)."""
    st = models.stacks
    cond = (st.c.trace_id == trace_id,
            func.lower(st.c.function).like(_like(q), escape="\\"))
    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(select(st.c.stack_id).where(*cond).distinct())]
        names = [r[0] for r in conn.execute(select(st.c.function).where(*cond).distinct()
                                            .order_by(st.c.function).limit(MAX_NAMES))]
    return ids, names


def matches(engine: Engine, frames: TraceFrames, q: str, t1: int, t2: int,
            state: str | None = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8],
                                                dict[str, Any]]:
    """Rows matching ``q`` in ``[t1, t2)`` in row order (not by time: see
    :func:`page_of`), what each matched by (0 goroutine id, 1 start function,
    2 stack function; the lowest that applies), and what the query was taken as."""
    q = q.strip()
    if not q:
        raise BadQuery("q must not be empty: a goroutine id, a start function or a function")
    iv = frames.intervals
    n = goroutine_row_count(frames)
    rid = iv["rid"][:n]
    by = np.full(n, -1, np.int8)
    about: dict[str, Any] = {"q": q}
    m = _GOID.fullmatch(q)
    if m is not None:
        about["as"] = "goroutine"
        by[np.asarray(rid == int(m.group(1)))] = 0
    else:
        about["as"] = "function"
        table = goroutine_table(engine, frames)
        low = q.lower()
        groups = [i for i, name in enumerate(table.names) if low in name.lower()]
        about["start_functions"] = [table.names[i] for i in groups][:MAX_NAMES]
        goids = table.goid[np.isin(table.group, groups)]
        ids, names = stack_ids_with(engine, frames.trace_id, q)
        about["stack_functions"] = names
        stack_hit = np.isin(iv["stack_id"][:n], ids) if ids else np.zeros(n, bool)
        by[stack_hit] = 2
        by[np.isin(rid, goids)] = 1
    hit = by >= 0
    hit &= (iv["start_ts"][:n] < t2) & (iv["end_ts"][:n] > t1)
    if state is not None:
        if state not in STATE_CODE:
            raise BadQuery(f"state must be one of {', '.join(STATE_CODE)}")
        hit &= frames.state[:n] == STATE_CODE[state]
    rows = np.nonzero(hit)[0].astype(np.int64)
    return rows, by[rows], about


def page_of(start: npt.NDArray[np.int64], offset: int, limit: int) -> npt.NDArray[np.int64]:
    """Positions ``offset .. offset + limit`` of ``start`` sorted by (value,
    position), without sorting it all: the page's bounding values are found
    by partition (linear), and only the rows between them are sorted (a
    million matches sorted whole took most of a search)."""
    n = len(start)
    a, b = min(offset, n), min(offset + limit, n)
    if a >= b:
        return np.zeros(0, np.int64)
    if n <= 4 * (b - a) + 1024:
        return np.argsort(start, kind="stable")[a:b].astype(np.int64)
    kth = np.partition(start, [a, b - 1])
    lo, hi = kth[a], kth[b - 1]
    cand = np.nonzero((start >= lo) & (start <= hi))[0]
    cand = cand[np.argsort(start[cand], kind="stable")]
    before = int(np.count_nonzero(start < lo))
    return cand[a - before:b - before].astype(np.int64)


BY_NAMES = ("goroutine", "start_function", "stack")


def search(engine: Engine, frames: TraceFrames, q: str, t1: int | None = None,
           t2: int | None = None, offset: int | None = None, limit: int = DEFAULT_LIMIT,
           at: int | None = None, state: str | None = None) -> dict[str, Any]:
    """A page of the spans matching ``q`` (see the module), with the total,
    the goroutines they belong to, and the page's place in the whole list."""
    lo = frames.first_ts if t1 is None else t1
    hi = frames.last_ts + 1 if t2 is None else t2
    rows, by, about = matches(engine, frames, q, lo, hi, state)
    start_ts = np.asarray(frames.intervals["start_ts"][rows], np.int64)
    if offset is None:
        offset = int(np.count_nonzero(start_ts < at)) if at is not None else 0
    at_page = page_of(start_ts, offset, limit)
    spans = []
    for r, b in zip(rows[at_page].tolist(), by[at_page].tolist(), strict=True):
        s = span(frames, int(r))
        s["matched_by"] = BY_NAMES[b]
        spans.append(s)
    rid = np.asarray(frames.intervals["rid"][rows], np.int64)
    goroutines = np.nonzero(np.bincount(rid - int(rid.min())))[0] + int(rid.min()) \
        if len(rid) else np.zeros(0, np.int64)
    return {"trace_id": frames.trace_id, **about, "t1": lo, "t2": hi, "state": state,
            "total": len(rows), "goroutines": len(goroutines),
            "goroutine_ids": goroutines[:MAX_LIMIT].tolist(),
            "offset": offset, "limit": limit, "spans": spans}
