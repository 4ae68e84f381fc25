"""A trace's derived tables, computed one at a time, and how each is stored.

:class:`DerivedTables` yields (table name, columns) for the loader
(:mod:`ingest.load.pipeline`), deriving each table only when it is reached so that
memory holds one at a time; :func:`store_table` inserts one of them in the
loader's transaction (on the insert worker's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select

from ingest.columns import Computed, Gather, Nullable, Seq
from ingest.derive import intervals as derive
from ingest.derive.interval_order import Columns
from ingest.load import eventrows
from ingest.load.bucket_tables import BucketTables, FramePlan
from ingest.load.event_split import EventParts
from ingest.load.transition_spill import TransitionSpill
from ingest.memory import give_back_free_memory
from ingest.store import models
from ingest.store.bulk import column_length, insert_columns, insert_int_arrays
from ingest.store.coded_insert import store_coded
from ingest.store.coded_models import CODED
from ingest.timings import Timings


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

    def __iter__(self) -> Iterator[tuple[str, Columns]]:
        # The tables made from the events and stacks alone come first: the
        # insert worker stores them while the transitions are sorted and
        # summarised here, instead of waiting for the first summary.
        events, stacks = self.events, self.stacks
        if events is None:
            raise RuntimeError("a trace's derived tables are iterated once")
        ibase, rbase = self.bases["intervals"], self.bases["proc_runs"]
        tstack_seq, tstack_id = transition_stacks(self.tstacks)
        yield "transition_stacks", {"seq": tstack_seq, "stack_id": tstack_id}
        sid = stacks.column("stack_id").to_numpy()
        depth = stacks.column("depth").to_numpy()
        top = np.flatnonzero(depth == 0)
        funcs = stacks.column("function").take(top).to_pylist()
        stack_functions = dict(zip(sid[top].tolist(), funcs, strict=True))
        yield "stacks", {
            "stack_id": sid, "depth": depth,
            "function": stacks.column("function").to_pylist(),
            "file": stacks.column("file").to_pylist(),
            "line": stacks.column("line").to_numpy(),
            # PCs above 2**63 wrap to negative, like task ids.
            "pc": stacks.column("pc").to_numpy().astype(np.int64)}
        del sid, depth, top, funcs
        # The events' tables that need no pairing first: their events are
        # gone (stored) by the time the regions' millions are paired, the
        # load's peak.
        yield "metrics", eventrows.metrics(events)
        yield "logs", eventrows.logs(events)
        yield "other_events", eventrows.other_events(events)
        yield "ranges", eventrows.ranges(events)
        yield "tasks", eventrows.tasks(events)
        yield "regions", eventrows.regions(events)
        # What the threads' table needs of the events; the rest go.
        ev_m, ev_ts = events.thread_times()
        events.close()
        del events, stacks
        self.events = self.stacks = self.tstacks = None
        buckets = self.buckets(stack_functions, tstack_seq, tstack_id)
        yield "transition_counts", _cols(
            ("kind", "resource", "from_state", "to_state", "reason", "count"),
            buckets.kind_rows)
        del stack_functions, tstack_seq, tstack_id
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
            give_back_free_memory()  # the bucket's temporaries
        yield "threads", derive.threads_of(buckets.thread_sums(), ev_m, ev_ts)
        self.spill.close()

    def buckets(self, stack_functions: dict[int, str], tstack_seq: Any,
                tstack_id: Any) -> BucketTables:
        """The transitions' tables (made once)."""
        if self._buckets is None:
            self._buckets = BucketTables(self.spill, self.last_ts, stack_functions, tstack_seq,
                                         tstack_id, self.timings)
        return self._buckets

    def frame_plans(self) -> dict[str, FramePlan]:
        """The tables that come in parts: their rows in all and their bounds."""
        return BucketTables(self.spill, self.last_ts, {}, np.zeros(0, np.int64),
                            np.zeros(0, np.int64), self.timings).frame_plans()


#: Interval rows per insert statement run: what the computed columns of one
#: part take (8 bytes a row each).
INTERVAL_PART = 1 << 20


def interval_parts(cols: Columns, n: int,
                   part: int = INTERVAL_PART) -> Iterator[tuple[int, Columns]]:
    """``cols`` (an ``id`` Seq among them) as consecutive parts of ``part``
    rows: (rows, columns) each, made only when reached."""
    for a in range(0, n, part):
        b = min(n, a + part)
        yield b - a, {name: _rows(col, a, b) for name, col in cols.items()}


def _rows(col: Any, a: int, b: int) -> Any:
    if isinstance(col, Seq):
        return Seq(col.start + a)
    if isinstance(col, Gather):
        return Gather(col.values, col.index[a:b])
    if isinstance(col, Computed):
        return col.chunk(a, b)
    return col[a:b]


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


def store_range(conn: Connection, trace_id: int, table_name: str, first: int,
                n: int) -> None:
    """A ranged table's id block (row_ranges), once its rows are all stored."""
    conn.execute(models.row_ranges.insert().values(
        trace_id=trace_id, table_name=table_name, first_id=first, last_id=first + n - 1))


def store_table(conn: Connection, trace_id: int, table_name: str, cols: Columns,
                n: int, interval_base: int, advance: Callable[[int], None],
                rows: bool = True) -> None:
    """Insert one derived table, or the next part of one; without ``rows``
    nothing (the intervals and proc runs kept in files:
    ingest.store.interval_files)."""
    if not rows:
        advance(n)
        return
    if table_name == "intervals":
        for rows_in, part in interval_parts(cols, n):
            insert_int_arrays(conn, models.interval_rows, ["trace_id", *part],
                              [trace_id, *part.values()], rows_in, advance)
            del part
        return
    if table_name in _INTERVAL_VIEWS:
        # Stored as the interval each row is, plus what only this table has.
        table, keep = _INTERVAL_VIEWS[table_name]
        cols = {"id": cols["id"],
                "interval_id": np.asarray(cols["interval_row"], np.int64) + interval_base,
                **{c: cols[c] for c in keep}}
        insert_columns(conn, table, cols, {"trace_id": trace_id}, advance)
        return
    if table_name in CODED:  # kept coded, behind a view of these columns
        store_coded(conn, trace_id, table_name, cols, advance)
        return
    insert_columns(conn, models.metadata.tables[table_name], cols, {"trace_id": trace_id},
                   advance)


#: Derived tables stored as views over intervals: the table that holds their
#: rows and the columns it keeps besides the interval's id.
_INTERVAL_VIEWS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "proc_runs": (models.proc_run_index, ()),
    "syscalls": (models.syscall_outcomes,
                 ("start_known", "outcome", "p_lost", "stolen_ts", "stolen_by_m")),
}


def next_id(conn: Connection, table: Any) -> int:
    """The first free row id of a ranged table (ids run in per-trace blocks)."""
    top = int(conn.execute(select(func.max(table.c.id))).scalar() or 0)
    # And the ids of the rows kept in files.
    files = {models.interval_rows.name: models.interval_files,
             models.proc_run_index.name: models.proc_run_files,
             models.syscall_outcomes.name: models.syscall_files}.get(table.name)
    if files is not None:
        top = max(top, int(conn.execute(select(func.max(files.c.last_id))).scalar() or 0))
    return top + 1


def derived_tables(spill: TransitionSpill, meta: dict[str, Any], events: EventParts,
                   tstacks: Any, stacks: Any, timings: Timings | None = None) -> DerivedTables:
    return DerivedTables(spill, meta, events, tstacks, stacks, timings)



def _cols(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def nrows(cols: Columns) -> int:
    for col in cols.values():
        n = column_length(col)
        if n is not None:
            return n
    return 0
