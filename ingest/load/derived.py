"""A trace's derived tables, computed one at a time.

:class:`DerivedTables` yields (table name, columns) for the loader
(:mod:`ingest.load.pipeline`), deriving each table only when it is reached so that
memory holds one at a time; :mod:`ingest.load.tables` stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ingest.columns import Nullable
from ingest.derive import intervals as derive
from ingest.derive.interval_order import Columns
from ingest.load import eventrows
from ingest.load.bucket_tables import BucketTables, FramePlan
from ingest.load.event_split import EventParts
from ingest.load.transition_spill import TransitionSpill
from ingest.memory import KEEP_FREE_BELOW, give_back_if_big
from ingest.timings import Timings

#: (table name, columns) of each table (or part of one), derived when reached.
Tables = Iterator[tuple[str, Columns]]


class DerivedTables:
    """Iterates (table name, columns), deriving each table when it is reached.

    ``bases`` (table name -> first row id) must be set before iterating: the
    id ranges stored in goroutines and procs point into intervals and
    proc_runs. ``intervals`` and ``syscalls`` come in parts, the next rows
    each time (:attr:`frame_plans` says how many in all); the other tables
    once.
    """

    def __init__(self, spill: TransitionSpill, meta: dict[str, Any], events: EventParts,
                 tstacks: Any, stacks: Any, timings: Timings | None = None) -> None:
        self.spill = spill
        self.last_ts = int(meta["last_ts"])
        self.events: EventParts | None = events
        self.tstacks = tstacks
        self.stacks = stacks
        self.timings = timings or Timings()
        self.bases: dict[str, int] = {}
        self._buckets: BucketTables | None = None
        self._thread_times: tuple[Any, Any] | None = None
        self._split: tuple[Tables, Tables, Tables] | None = None
        #: Resident bytes from which freed memory is handed back between
        #: buckets (ingest.memory).
        self.keep_free_below = KEEP_FREE_BELOW
        #: Rows per transitions bucket (None: transition_spill.BUCKET_ROWS).
        self.bucket_rows: int | None = None
        #: Called when a table made in parts has given its last part, before
        #: the next table is derived (the loader finishes its caches then).
        self.table_done: Callable[[], None] = _nothing

    def __iter__(self) -> Iterator[tuple[str, Columns]]:
        """Every table on one thread: the stacks' tables, the events' side,
        the transitions' side, then the threads."""
        stacks, events, transitions = self._sides()
        yield from stacks
        yield from events
        yield from transitions
        yield "threads", self.threads()

    def events_side(self) -> Tables:
        """The tables made from the events alone (regions, tasks, ranges,
        other events, logs, metrics): what a forked worker may derive
        (ingest.load.event_side); :attr:`thread_times` is set at its end."""
        return self._sides()[1]

    def without_events(self) -> Tables:
        """Every table but the events' side's and the threads': the stacks'
        tables, then the transitions' side."""
        stacks, _, transitions = self._sides()
        self.events = None  # the events' side derives them elsewhere
        yield from stacks
        yield from transitions

    @property
    def thread_times(self) -> tuple[Any, Any] | None:
        """What the threads' table needs of the events (the events' side's
        last step): each M's first and last event time."""
        return self._thread_times

    @thread_times.setter
    def thread_times(self, value: tuple[Any, Any]) -> None:
        self._thread_times = value

    def _sides(self) -> tuple[Tables, Tables, Tables]:
        """The stacks' tables, those made from the events, and those made from
        the transitions: independent of each other (made once, when first
        asked for); :meth:`threads` once the last two are done."""
        if self._split is not None:
            return self._split
        if self.events is None or self.stacks is None:
            raise RuntimeError("a trace's derived tables are iterated once")
        tstack_seq, tstack_id = transition_stacks(self.tstacks)
        sid = self.stacks.column("stack_id").to_numpy()
        depth = self.stacks.column("depth").to_numpy()
        top = np.flatnonzero(depth == 0)
        funcs = self.stacks.column("function").take(top).to_pylist()
        stack_functions = dict(zip(sid[top].tolist(), funcs, strict=True))
        self.tstacks = None
        self._split = (self._stack_tables(tstack_seq, tstack_id), self._event_tables(),
                       self._transition_tables(stack_functions, tstack_seq, tstack_id))
        return self._split

    def _stack_tables(self, tstack_seq: Any, tstack_id: Any) -> Iterator[tuple[str, Columns]]:
        stacks = self.stacks
        assert stacks is not None
        self.stacks = None
        yield "transition_stacks", {"seq": tstack_seq, "stack_id": tstack_id}
        del tstack_seq, tstack_id
        yield "stacks", {
            "stack_id": stacks.column("stack_id").to_numpy(),
            "depth": stacks.column("depth").to_numpy(),
            "function": stacks.column("function").to_pylist(),
            "file": stacks.column("file").to_pylist(),
            "line": stacks.column("line").to_numpy(),
            # PCs above 2**63 wrap to negative, like task ids.
            "pc": stacks.column("pc").to_numpy().astype(np.int64)}

    def _event_tables(self) -> Iterator[tuple[str, Columns]]:
        events = self.events
        assert events is not None
        self.events = None
        try:
            # The regions' millions are paired first, beside nothing but the
            # stacks (a big trace's events wait in their spill file; the
            # tables made in parts hold a part at a time after).
            for cols in eventrows.regions(events):
                yield "regions", cols
            del cols
            self.table_done()
            yield "tasks", eventrows.tasks(events)
            yield "ranges", eventrows.ranges(events)
            yield "other_events", eventrows.other_events(events)
            for cols in eventrows.logs(events):
                yield "logs", cols
            del cols
            self.table_done()
            for cols in eventrows.metrics(events):
                yield "metrics", cols
            del cols
            self.table_done()
            # What the threads' table needs of the events; the rest go.
            self._thread_times = events.thread_times()
        finally:
            events.close()

    def _transition_tables(self, stack_functions: dict[int, str], tstack_seq: Any,
                           tstack_id: Any) -> Iterator[tuple[str, Columns]]:
        ibase, rbase = self.bases["intervals"], self.bases["proc_runs"]
        buckets = self.buckets(stack_functions, tstack_seq, tstack_id)
        del stack_functions, tstack_seq, tstack_id
        yield "transition_counts", _cols(
            ("kind", "resource", "from_state", "to_state", "reason", "count"),
            buckets.kind_rows)
        for name, cols in buckets:
            if name in ("goroutines", "procs") and cols:
                cols["first_interval"] = cols["first_interval"] + ibase
                cols["last_interval"] = cols["last_interval"] + ibase
            if name == "procs" and cols:
                lo, hi = cols["first_run"], cols["last_run"]
                cols["first_run"] = Nullable(lo.values + rbase, lo.null)
                cols["last_run"] = Nullable(hi.values + rbase, hi.null)
            yield name, cols
            del cols
            give_back_if_big(self.keep_free_below)  # the bucket's temporaries

    def threads(self) -> Columns:
        """The threads' table: from both sides' summaries, once both are done."""
        if self._thread_times is None or self._buckets is None:
            raise RuntimeError("the threads' table needs both sides first")
        ev_m, ev_ts = self._thread_times
        out = derive.threads_of(self._buckets.thread_sums(), ev_m, ev_ts)
        self.spill.close()
        return out

    def buckets(self, stack_functions: dict[int, str], tstack_seq: Any,
                tstack_id: Any) -> BucketTables:
        """The transitions' tables (made once)."""
        if self._buckets is None:
            self._buckets = BucketTables(self.spill, self.last_ts, stack_functions, tstack_seq,
                                         tstack_id, self.timings)
            self._buckets.bucket_rows = self.bucket_rows
        return self._buckets

    def frame_plans(self) -> dict[str, FramePlan]:
        """The tables that come in parts: their rows in all and their bounds."""
        return BucketTables(self.spill, self.last_ts, {}, np.zeros(0, np.int64),
                            np.zeros(0, np.int64), self.timings).frame_plans()


def transition_stacks(tstacks: Any) -> tuple[Any, Any]:
    """(seq, stack_id) of transition_stacks as int64 arrays sorted by seq, one
    row per seq (the last one given wins)."""
    seq = tstacks.column("row").to_numpy().astype(np.int64)
    sid = tstacks.column("stack_id").to_numpy().astype(np.int64)
    if len(seq) > 1 and not bool((seq[1:] > seq[:-1]).all()):
        by_seq = np.argsort(seq, kind="stable")
        seq, sid = seq[by_seq], sid[by_seq]
        last = np.r_[seq[1:] != seq[:-1], True]
        seq, sid = seq[last], sid[last]
    return seq, sid



def derived_tables(spill: TransitionSpill, meta: dict[str, Any], events: EventParts,
                   tstacks: Any, stacks: Any, timings: Timings | None = None) -> DerivedTables:
    return DerivedTables(spill, meta, events, tstacks, stacks, timings)



def _nothing() -> None:
    pass


def _cols(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


