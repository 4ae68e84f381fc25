"""The interval order and what its two forms share: the C reductions
(ingest.derive.intervals) and their numpy counterparts (ingest.derive.fallback).

:class:`Ordered` is the transitions sorted by resource (goroutine, proc) and
id, keeping Go's order within one resource; here too are the array types,
the state codes the reductions compare against, and the ends of the
intervals (in C where it applies, else in numpy). Nothing here imports
either form: both import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.codes import STATE_CODE
from ingest.extensions import optional_extension

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]
#: Table columns by name: numpy arrays, Nullable or Gather columns, or lists.
Columns = dict[str, Any]

NOT_EXIST = STATE_CODE["NotExist"]
UNDETERMINED = STATE_CODE["Undetermined"]
RUNNABLE = STATE_CODE["Runnable"]
RUNNING = STATE_CODE["Running"]
WAITING = STATE_CODE["Waiting"]
SYSCALL = STATE_CODE["Syscall"]
IDLE = STATE_CODE["Idle"]

#: States whose time is summed per goroutine and proc.
SUMMED_STATES = (RUNNING, RUNNABLE, WAITING, SYSCALL, IDLE)


@dataclass
class Ordered:
    """Transitions in interval order (resource, id, Go's order).

    ``order[k]`` is the seq (row in transitions.parquet) of sorted row k;
    ``first``/``last`` (bool) mark the first and last row of each resource
    id; ``starts`` the indexes of group starts (one group per resource id).
    ``end[k]``, the end of the interval row k begins (the next row's ts in
    the same resource, else ``last_ts``; never before its own ts), is made
    when first asked for: the C reductions compute the ends they need, so a
    load holds no array of them (8 bytes a transition) while it derives.
    """

    order: Arr  # int32 below 2**31 transitions, else int64
    first: Arr
    last: Arr
    starts: I64
    ts: I64  # the transitions' ts (the trace's own array, not a copy)
    last_ts: int
    _end: I64 | None = field(default=None, repr=False)

    @property
    def end(self) -> I64:
        if self._end is None:
            self._end = _interval_ends(self)
        return self._end

    def ends_of(self, rows: Arr) -> I64:
        """``end[rows]``, without making ``end`` when it is not made yet."""
        if self._end is not None:
            return self._end[rows]
        return _interval_ends(self, rows)


def _interval_ends(o: Ordered, rows: Arr | None = None) -> I64:
    """The ends of every row (or of ``rows``): in C where it applies."""
    c = optional_extension("ingest.derive._intervalorder")
    if c is not None and o.order.dtype == np.int32 and o.ts.dtype == np.int64:
        end: I64 = np.empty(len(o.order) if rows is None else len(rows), dtype=np.int64)
        c.interval_ends(o.order, o.ts, o.last, int(o.last_ts), end,
                        *(() if rows is None else (rows,)))
        return end
    return interval_ends_numpy(o.order, o.ts, o.last, o.last_ts, rows)


def interval_ends_numpy(order: Arr, ts: I64, last: Arr, last_ts: int,
                        rows: Arr | None = None) -> I64:
    """:attr:`Ordered.end` (or its ``rows``) in numpy: the next row's ts
    within the same resource, else ``last_ts``; an interval never ends
    before it starts, even at the trace's end."""
    if rows is None:
        ts_s = ts[order]
        end: I64 = np.empty(len(order), dtype=np.int64)
        if len(order):
            end[:-1] = ts_s[1:]
        end[last] = last_ts
        np.maximum(end, ts_s, out=end)
        return end
    after = ts[order[np.minimum(rows + 1, max(len(order) - 1, 0))]]
    end = np.where(last[rows], np.int64(last_ts), after)
    np.maximum(end, ts[order[rows]], out=end)
    return end


def nearest_rank(sorted_values: Arr, q: float) -> int:
    """The nearest-rank q-quantile (0 < q <= 1) of sorted values."""
    k = max(1, int(np.ceil(q * len(sorted_values))))
    return int(sorted_values[k - 1])
