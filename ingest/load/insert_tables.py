"""A trace's derived tables stored in the load's transaction.

Each table is derived here while the insert worker stores the ones before it
(numpy and SQLite release the GIL, so the two overlap on a second core), and
staged for the views on the way: its caches, the frames' columns, the
goroutine table. (Deriving the events' and the transitions' tables on two
threads as well was measured and not kept: bench/RESULTS.md.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from ingest.columns import Seq
from ingest.derive.frame_layout import TABLE_COLUMNS as FRAME_TABLES
from ingest.derive.frame_layout import Kind
from ingest.derive.frame_writer import FrameWriter
from ingest.derive.interval_order import Columns
from ingest.derive.lanesets import LaneSetKey
from ingest.load import transition_spill
from ingest.load.derived import DerivedTables
from ingest.load.event_side import EventSide
from ingest.load.insert_worker import InsertWorker
from ingest.load.staged_caches import StagedCaches
from ingest.load.tables import columns_nbytes, nrows, store_range, store_table
from ingest.memory import KEEP_FREE_BELOW, KEEP_FREE_BELOW_OF_TWO, give_back_if_big
from ingest.store import interval_files
from ingest.store.coded_files import CodedFiles
from ingest.store.coded_insert import PreparedCoded, store_prepared
from ingest.timings import Timings

log = logging.getLogger(__name__)

#: The tables whose files are their home when a trace keeps its intervals in
#: files: the intervals, proc_run_index as proc_runs', syscall_outcomes as
#: syscalls'.
IN_FILES = frozenset({"intervals", "proc_runs", "syscalls"})

#: How far the load may run ahead of the insert worker: bytes of derived
#: columns waiting to be stored (ingest.load.insert_worker). The events'
#: tables store slower than they are derived, the transitions' buckets the
#: other way round; running ahead, the worker stores the former while the
#: latter are derived. The 200 MB benchmark trace: 18.4-20.0 -> 15.9 s, the
#: worker wait 2.2-2.5 -> 0.0 s, peak +0-50 MB (bench/RESULTS.md).
AHEAD_BYTES = 256 << 20
#: Above this many transitions the load waits for each table as before: the
#: 1 GB trace (100.6 M transitions) would reach 1475 of its 1536 MiB with
#: AHEAD_BYTES (1436 without).
AHEAD_MAX_TRANSITIONS = 48_000_000

#: Fewer events than this and the load derives the events' side itself: a
#: fork costs a few milliseconds and a copy of the process's page tables.
FORK_MIN_EVENTS = 500_000

#: Columns of the goroutines table the timeline's goroutine table is made of.
_GOROUTINE_TABLE_COLUMNS = ("goid", "start_function")


@dataclass
class Staged:
    """What a load keeps for the views while it stores a trace: the frames
    being written (None: none asked for, or given up), the transition kinds,
    the goroutines' columns the goroutine table is made of, and which lane
    sets were staged with the frames before the commit."""

    frames: FrameWriter | None
    #: The intervals kept in files, not rows (ingest.store.interval_files).
    files: bool = False
    kinds: dict[int, Kind] = field(default_factory=dict)
    #: The goroutines table's parts' columns the goroutine table is made of.
    goroutine_cols: list[dict[str, Any]] = field(default_factory=list)
    early: set[LaneSetKey] = field(default_factory=set)
    #: Where the intervals' files were published (before the commit).
    home: Path | None = None
    #: The caches being made of the tables as they go by.
    caches: StagedCaches | None = None
    #: The coded rows kept in files with the intervals (ingest.store.coded_files).
    coded: CodedFiles | None = None
    #: The events' side derived by a forked child (:func:`fork_events`).
    events: EventSide | None = None

    def abandon(self) -> None:
        """The load failed: its events' child stops, its staged frames go, and
        its interval files."""
        if self.events is not None:
            self.events.stop()  # before its staging directories go
            self.events = None
        if self.frames is not None:
            self.frames.abort()
        if self.coded is not None:
            self.coded.remove()
        interval_files.remove_home(self.home)
        self.home = None


def insert_tables(conn: Connection, trace_id: int, tables: DerivedTables, staged: Staged,
                  trace_row: dict[str, Any], timings: Timings,
                  advance: Callable[[int], None], ahead_bytes: int = 0) -> dict[str, int]:
    """Derive the tables one at a time (intervals and syscalls part by part),
    each stored by the insert worker's thread while the next is derived here
    (the connection is the worker's until it is closed; ``ahead_bytes``: how
    many bytes of derived tables may wait for it), and staged for the views
    on the way; the rows per table."""
    counts: dict[str, int] = {}
    plans = tables.frame_plans()
    with InsertWorker(ahead_bytes) as worker:
        def store(table_name: str, cols: Columns) -> None:
            n = nrows(cols)
            done = counts.get(table_name, 0)
            counts[table_name] = done + n
            if not n:
                return
            first = tables.bases.get(table_name)
            if first is not None:
                cols = {"id": Seq(first + done), **cols}
            plan = plans.get(table_name)
            if plan is not None and not done and staged.frames is not None:
                staged.frames.begin(table_name, plan.rows, plan.bounds)
            stage_table(staged, table_name, cols, n, trace_row, timings)
            rows = not (staged.files and table_name in IN_FILES)
            if not rows:
                cols = {}  # kept in files: the job holds none of its columns
            with timings.phase("worker wait"):  # the worker still busy
                worker.submit(partial(timings.timed, f"insert {table_name}",
                                      store_table, conn, trace_id, table_name, cols,
                                      n, tables.bases["intervals"], advance, rows,
                                      staged.coded),
                              columns_nbytes(cols))

        def caches_done() -> None:
            # A table's caches made as soon as its last part is staged: what
            # they keep of its parts goes before the next table is derived.
            if staged.caches is not None and LaneSetKey.RANGES in staged.caches.finish():
                staged.early.add(LaneSetKey.RANGES)

        tables.table_done = caches_done
        child = staged.events
        if child is not None:
            # Beside the child: each process keeps half the freed memory, and
            # the buckets are half as big (the 200 MB trace's summed peak
            # 873-937 MiB with 2 M rows, 741-834 with 1 M; wall 1.025,
            # within this machine's noise: bench/RESULTS.md).
            tables.keep_free_below = KEEP_FREE_BELOW_OF_TWO
            tables.bucket_rows = transition_spill.BUCKET_ROWS // 2
        for table_name, cols in timings.each("derive", tables if child is None
                                             else tables.without_events()):
            store(table_name, cols)
            del cols
            give_back_if_big(tables.keep_free_below)  # the derivation's temporaries
        caches_done()
        tables.keep_free_below = KEEP_FREE_BELOW
        if child is not None:
            with timings.phase("events side wait"):
                got = child.result()
            staged.events = None
            for name, seconds in got.seconds.items():
                timings.add(name, seconds)
            if staged.coded is not None:
                staged.coded.parts.extend(got.parts)
            if LaneSetKey.RANGES in got.staged:
                staged.early.add(LaneSetKey.RANGES)
            for name, n in got.counts.items():
                counts[name] = counts.get(name, 0) + n
            for name, job in got.jobs:
                if isinstance(job, PreparedCoded):
                    worker.submit(partial(timings.timed, f"insert {name}", store_prepared,
                                          conn, trace_id, job, advance))
                else:
                    worker.submit(partial(timings.timed, f"insert {name}", store_table, conn,
                                          trace_id, name, job, nrows(job),
                                          tables.bases["intervals"], advance))
            if got.thread_times is not None:
                tables.thread_times = got.thread_times
            del got
            store("threads", tables.threads())
        for table_name, first in tables.bases.items():
            if counts.get(table_name):
                worker.submit(partial(store_range, conn, trace_id, table_name, first,
                                      counts[table_name]))
        stage_goroutine_lanes(staged, timings)
        with timings.phase("worker wait"):
            worker.close()
    return counts


def ahead_bytes(transitions: int) -> int:
    """How far a load of a trace with this many transitions runs ahead of its
    insert worker (AHEAD_BYTES, or 0: one table stored while the next is
    derived)."""
    return AHEAD_BYTES if transitions <= AHEAD_MAX_TRANSITIONS else 0


def fork_events(tables: DerivedTables, staged: Staged, trace_row: dict[str, Any]) -> None:
    """Have a forked child derive the events' side (ingest.load.event_side)
    where that pays and is safe: a trace of FORK_MIN_EVENTS events or more
    and at most AHEAD_MAX_TRANSITIONS transitions (above, the two sides'
    peaks would add up: the 1 GB trace's is in the regions' pairing), stored
    with its intervals and coded rows in files, this the process's only
    thread. Else the load derives both sides itself."""
    from ingest.forking import can_fork

    if (staged.frames is None or staged.coded is None or not staged.files
            or int(trace_row["events"]) < FORK_MIN_EVENTS
            or int(trace_row["transitions"]) > AHEAD_MAX_TRANSITIONS or not can_fork()):
        return
    try:
        staged.events = EventSide.start(tables, staged.frames, staged.coded, trace_row)
    except OSError as e:  # no fork (EAGAIN, ENOMEM): both sides here, as before
        log.warning("the events' side not forked (%s): derived by the load itself", e)


def stage_table(staged: Staged, table_name: str, cols: dict[str, Any], n: int,
                trace_row: dict[str, Any], timings: Timings) -> None:
    """Keep what the views need of one derived table: its frame columns, the
    transition kinds, the goroutines' columns, the range lanes."""
    if table_name == "goroutines":
        # It may come in parts (a big trace's goroutines, bucket by bucket).
        staged.goroutine_cols.append({k: cols[k] for k in _GOROUTINE_TABLE_COLUMNS})
    if table_name == "transition_counts":
        staged.kinds = {int(c): Kind(r, f, t, why) for c, r, f, t, why in zip(
            cols["kind"], cols["resource"], cols["from_state"], cols["to_state"],
            cols["reason"], strict=True)}
    frames = staged.frames
    if frames is None:
        return
    if staged.caches is None:
        staged.caches = StagedCaches(frames, trace_row, timings)
    if LaneSetKey.RANGES in staged.caches.add(table_name, cols):
        staged.early.add(LaneSetKey.RANGES)
    if table_name in FRAME_TABLES:
        try:
            frames.add(table_name, cols, n)
        except OSError:
            if staged.files:
                raise  # the intervals' home: the load fails
            # Only a cache: the views rebuild it from the database.
            frames.abort()
            staged.frames = staged.caches = None


def stage_goroutine_lanes(staged: Staged, timings: Timings) -> None:
    """While the worker stores the intervals: the timeline's goroutine table,
    from the columns at hand (not the database), staged with the frames."""
    if staged.frames is not None and staged.goroutine_cols:
        with timings.phase("goroutine table"):
            try:
                if stage_goroutine_table(staged.frames, staged.goroutine_cols):
                    staged.early.add(LaneSetKey.GOROUTINES)
            except Exception:  # noqa: BLE001 - a cache never fails a load
                log.exception("goroutine table not staged; built after the commit")
    staged.goroutine_cols = []


def stage_goroutine_table(frames: FrameWriter, parts: list[dict[str, Any]]) -> bool:
    """The timeline's goroutine table (timeline_lanes.goroutine_table) from the
    goroutines' derived columns (the table's parts in order), stored with the
    frames being written."""
    import numpy as np

    from ingest.derive.goroutine_lanes import goroutines_of, goroutines_of_codes
    from ingest.store.coded_insert import CodedText

    goids = np.concatenate([np.asarray(c["goid"], np.int64) for c in parts])
    texts = [c["start_function"] for c in parts]
    first = texts[0]
    if all(isinstance(t, CodedText) and t.codes is not None and t.values == first.values
           for t in texts):
        # Codes into one list of names (ingest.derive.intervals.start_functions):
        # no Python step per goroutine. Code 0 is NULL, -1 for goroutines_of_codes.
        codes = np.concatenate([np.asarray(t.codes, np.int64) for t in texts]) - 1
        names = [v or "" for v in first.values[1:]]
        table = goroutines_of_codes(goids, goids, codes, names)
    else:
        table = goroutines_of(goids, goids, [f for t in texts for f in t])
    return frames.add_derived(LaneSetKey.GOROUTINES, table)
