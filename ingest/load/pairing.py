"""Begin and end events paired last-opened-first-closed, vectorised.

Regions (per goroutine and name) and ranges (per name and scope) arrive as
begin/end events that nest. An end closes the latest begin still open under
its key; an end with nothing open began before the trace did. Walking the
events with a stack per key is a Python loop over millions of events; here
the same pairing is a few sorts:

- per key, the nesting depth after each event is the walk +1 (begin) / -1
  (end) reflected at zero: ``D[i] = S[i] - min(0, min(S[0..i]))`` for the
  plain running sum ``S`` (an end at depth 0 is unmatched and leaves it at 0);
- a begin opens level ``D[i]``, a matched end closes level ``D[i-1]``; within
  one key and level, opens and closes alternate in time, so after sorting by
  (key, level, time) each matched end follows the begin it closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.extensions import optional_extension

Arr = npt.NDArray[Any]


@dataclass(frozen=True)
class Pairs:
    """The rows that pairing makes, in event order: ``row_event[r]`` is the
    event that opened row r (a begin, or an end with nothing open),
    ``end_event[r]`` the end that closed it (-1: still open at the end)."""

    row_event: Arr  # int64 (pair_nested_in_parts: int32 where it fits)
    end_event: Arr  # likewise
    #: True for the rows opened by a begin (False: an end with nothing open).
    begun: Arr


def pair_nested(keys: list[Arr], begin: Arr) -> Pairs:
    """Pair ``begin`` (True) and end (False) events, given in time order, per
    key (the tuple of ``keys`` at the same position), each end closing the
    latest open begin of its key."""
    n = len(begin)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return Pairs(empty, empty, np.zeros(0, bool))
    # 32-bit positions and depths where they fit: a 200 MB trace pairs 6 M
    # region events, and every temporary here is one of them.
    it = np.int32 if 2 * n + 2 < 2**31 else np.int64
    # Sorted by key, then time (lexsort's last key is the primary one; the
    # sort is stable, so time order holds within a key).
    order = np.lexsort(tuple(reversed(keys))).astype(it)
    new = np.zeros(n, dtype=bool)
    for k in keys:
        ks = k[order]
        new[1:] |= ks[1:] != ks[:-1]
        del ks
    new[0] = True
    b = begin[order]
    step = np.where(b, 1, -1).astype(it)
    gid = (np.cumsum(new, dtype=it) - 1).astype(it)
    walk = np.cumsum(step, dtype=np.int64)
    start: Arr = (walk - step.astype(np.int64))[new]
    walk -= start[gid]  # per key, from 0
    # The running minimum within each key: shifting every later key far down
    # keeps earlier keys' values out of its minimum.
    shift = gid.astype(np.int64) * (2 * n + 2)
    walk -= shift
    low = np.minimum.accumulate(walk)
    low += shift
    walk += shift
    del shift
    np.minimum(low, 0, out=low)
    depth = (walk - low).astype(it)  # depth after each event
    del walk, low
    before = np.empty_like(depth)
    before[0] = 0
    before[1:] = depth[:-1]
    before[new] = 0
    del new
    unmatched = ~b & (before == 0)
    matched = ~b & ~unmatched
    level = np.where(b, depth, before)
    del depth, before, step
    sel = np.flatnonzero(b | matched).astype(it)
    s = sel[np.lexsort((level[sel], gid[sel]))]  # stable: time order within a level
    del sel, level, gid
    closes = np.flatnonzero(matched[s])
    opener = s[closes - 1]
    if not bool(b[opener].all()):
        raise AssertionError("pairing: an end does not follow its begin")
    # Back to event positions; rows are made by begins and unmatched ends.
    makes = np.zeros(n, dtype=bool)
    makes[order[b | unmatched]] = True
    row_event = np.flatnonzero(makes)
    row_of = np.cumsum(makes, dtype=np.int64) - 1
    end_event = np.full(len(row_event), -1, dtype=np.int64)
    end_event[row_of[order[opener]]] = order[s[closes]]
    return Pairs(row_event.astype(np.int64), end_event, begin[row_event])


#: Events paired at once at most by :func:`pair_nested_in_parts`: each of
#: pair_nested's temporaries is one of them (4-8 bytes).
PART_EVENTS = 4 << 20


def pair_nested_in_parts(part_key: Arr, keys: list[Arr], begin: Arr,
                         part_events: int = PART_EVENTS) -> Pairs:
    """:func:`pair_nested` of ``keys`` (``part_key``, small non-negative ids
    such as goroutines, among them), made for ranges of ``part_key`` of at
    most about ``part_events`` events at a time: no pair spans two values of
    it, so the rows are those of pairing every event at once (as 32-bit
    positions when they fit: a 1 GB trace's 17 M regions)."""
    n = len(begin)
    top = int(part_key.max()) if n else 0
    if n <= part_events or int(part_key.min()) < 0 or top > 4 * n + (1 << 20):
        return pair_nested(keys, begin)
    # Boundaries between key values where the running count of events
    # crosses a multiple of part_events (a value is never split).
    per_value = np.bincount(part_key, minlength=top + 1)
    ends = np.cumsum(per_value)
    del per_value
    cuts = np.unique(np.searchsorted(ends, np.arange(part_events, n, part_events),
                                     side="left") + 1)
    bounds = [0, *cuts.tolist(), top + 1]
    del ends, cuts
    # Each part's rows marked at their events, so that they come out in
    # event order without a sort of them all.
    makes = np.zeros(n, dtype=bool)
    it = np.int32 if n < 2**31 else np.int64
    closed_by = np.full(n, -1, dtype=it)  # the end that closes each row's event
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        if hi <= lo:
            continue
        sel = np.flatnonzero((part_key >= lo) & (part_key < hi))
        if not len(sel):
            continue
        got = pair_nested([k[sel] for k in keys], begin[sel])
        at = sel[got.row_event]
        makes[at] = True
        closes = got.end_event >= 0
        closed_by[at[closes]] = sel[got.end_event[closes]]
        del sel, got, at, closes
    row_event = np.flatnonzero(makes).astype(it)
    del makes
    end_event = closed_by[row_event]
    del closed_by
    return Pairs(row_event, end_event, begin[row_event])


def pair_by_goroutine(g: Arr, key: Arr, begin: Arr) -> Pairs:
    """:func:`pair_nested` of the keys ``(g, key)`` (``g`` goroutine ids, 0 or
    more): in one pass with a stack per goroutine in C (ingest/csrc/pairing.c),
    else :func:`pair_nested_in_parts`. The same rows either way, as 32-bit
    positions where they fit."""
    c = optional_extension("ingest.load._pairing")
    n = len(begin)
    if c is not None and n and int(g.min()) >= 0:
        it = np.int32 if n < 2**31 - 1 else np.int64
        row_event = np.empty(n, it)
        end_event = np.empty(n, it)
        rows = c.pair_by_goroutine(g, key, begin, row_event, end_event)
        if rows >= 0:
            # Cut to the rows in place (no view of them exists yet).
            row_event.resize(rows, refcheck=False)
            end_event.resize(rows, refcheck=False)
            return Pairs(row_event, end_event, begin[row_event])
    return pair_nested_in_parts(g, [g, key], begin)
