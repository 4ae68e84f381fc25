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

from ingest.columns import Computed, Gather, Nullable, Seq, Transitions
from ingest.derive import intervals as derive
from ingest.derive.interval_order import Columns, Ordered
from ingest.load import eventrows
from ingest.load.event_split import EventParts
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
    proc_runs.
    """

    def __init__(self, tr: Transitions, meta: dict[str, Any], events: EventParts, tstacks: Any,
                 stacks: Any, timings: Timings | None = None) -> None:
        self.tr = tr
        self.last_ts = int(meta["last_ts"])
        self.events: EventParts | None = events
        self.tstacks = tstacks
        self.stacks = stacks
        self.timings = timings or Timings()
        self.bases: dict[str, int] = {}
        self._ordered: Ordered | None = None

    @property
    def ordered(self) -> Ordered:
        """The transitions sorted into intervals (made when first needed)."""
        if self._ordered is None:
            with self.timings.phase("order"):
                self._ordered = derive.order_intervals(self.tr, self.last_ts)
        return self._ordered

    def __iter__(self) -> Iterator[tuple[str, Columns]]:
        # The tables made from the events and stacks alone come first: the
        # insert worker stores them while the transitions are sorted and
        # summarised here, instead of waiting for the first summary.
        tr, events, stacks = self.tr, self.events, self.stacks
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
        del events, stacks
        self.events = self.stacks = self.tstacks = None
        o = self.ordered
        kinds, kind_of = derive.transition_kinds(tr)
        yield "transition_counts", _cols(
            ("kind", "resource", "from_state", "to_state", "reason", "count"), kinds)
        gor, prc = derive.resource_summaries(tr, o, stack_functions, tstack_seq, tstack_id)
        del stack_functions, tstack_seq, tstack_id
        for cols in (gor, prc):
            if cols:
                cols["first_interval"] = cols["first_interval"] + ibase
                cols["last_interval"] = cols["last_interval"] + ibase
        yield "goroutines", gor
        del gor
        # The state graph's edges next, while the worker stores the goroutines:
        # their temporaries (every dwell time) then meet no big table waiting
        # to be stored (measured: the load's peak 14 MB lower).
        yield "state_edges", _cols(
            ("resource", "from_state", "to_state", "count", "dwell_count", "dwell_mean_ns",
             "dwell_p50_ns", "dwell_p99_ns", "dwell_max_ns"), derive.state_edges(tr, o))
        runs = derive.proc_runs(tr, o)
        if prc:
            lo, hi = derive.run_ranges(runs["p"], prc["pid"])
            prc["first_run"] = Nullable(lo.values + rbase, lo.null)
            prc["last_run"] = Nullable(hi.values + rbase, hi.null)
        yield "procs", prc
        yield "proc_runs", runs
        del runs
        # A small one between the two big ones: the worker stores the proc
        # runs meanwhile, and their columns go before the syscalls' come.
        yield "threads", derive.thread_summaries(tr, o, ev_m, ev_ts)
        del ev_m, ev_ts
        # The intervals before the syscalls: the worker stores them (the
        # load's longest insert) while the syscalls are derived here, instead
        # of after (the load 0.13-0.14 s shorter, medians of 8 and 10
        # interleaved runs). What neither needs goes first (10 + 5 MB on the
        # benchmark trace), so the peak stays where it was.
        tr.release("reason")
        o.first = np.zeros(0, dtype=bool)
        give_back_free_memory()  # heap blocks: freed only when trimmed
        yield "intervals", interval_columns(tr, o, kind_of)
        yield "syscalls", derive.syscalls(tr, o)
        tr.release("res", "frm", "to")


def interval_columns(tr: Transitions, o: Ordered, kind_of: Any) -> Columns:
    """The intervals' columns: rows in (resource, id, time) order, each
    resource's rows consecutive. Gathered and computed part by part when
    stored and written: no reordered copy of the trace, and no array of the
    ends (8 bytes a row), is ever in memory."""
    order = o.order
    return {
        "rid": Gather(tr.rid, order), "start_ts": Gather(tr.ts, order), "seq": order,
        "end_ts": Computed(lambda a, b: o.ends_of(np.arange(a, b)), len(order)),
        "kind": Gather(kind_of, order), "m": Gather(tr.m, order), "p": Gather(tr.p, order),
        "g": Gather(tr.g, order), "stack_id": Gather(tr.stack, order)}


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


def store_table(conn: Connection, trace_id: int, table_name: str, cols: Columns,
                 n: int, first: int | None, interval_base: int,
                 advance: Callable[[int], None], rows: bool = True) -> None:
    """Insert one derived table (and, for the ranged ones, its id block);
    without ``rows`` only the id block (the intervals and proc runs kept in
    files: ingest.store.interval_files)."""
    if first is not None:
        conn.execute(models.row_ranges.insert().values(
            trace_id=trace_id, table_name=table_name, first_id=first, last_id=first + n - 1))
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


def derived_tables(tr: Transitions, meta: dict[str, Any], events: EventParts, tstacks: Any,
                    stacks: Any, timings: Timings | None = None) -> DerivedTables:
    return DerivedTables(tr, meta, events, tstacks, stacks, timings)



def _cols(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def nrows(cols: Columns) -> int:
    for col in cols.values():
        n = column_length(col)
        if n is not None:
            return n
    return 0
