"""The events' side of a load, derived in a forked process beside the transitions' side.

A trace's derived tables fall in two sides that need nothing of each other
(ingest.load.derived): those made from the events (the regions paired, the
tasks, ranges, logs and metrics, with their caches) and those made from the
transitions. On one thread the load derives them one after the other; on two
threads of one process they take turns at the GIL (measured and not kept,
bench/RESULTS.md). A forked copy of the process shares nothing with it but the
cores: it derives the events' side while the process derives the
transitions' side.

The child (:meth:`EventSide.start`, forked before the load starts a thread of
its own, only where this is the process's only thread) derives each events'
table, makes its caches into the frames' staging directory
(:class:`ingest.load.staged_caches.StagedCaches`), codes its rows and writes
those the coded files can hold into the load's coded staging directory
(:func:`ingest.store.coded_insert.prepare_coded`). It touches no database: it
writes one pickled :class:`EventSideResult` (or the exception it failed with)
into a pipe and ends with ``os._exit``. The parent (:meth:`EventSide.result`)
stores what is left in its own transaction: the strings rows, the rows the
files could not hold, the files' listing. A child that dies fails the load as
the same failure in the process would; a parent that dies takes the child
with it (ingest.forking).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import signal
from dataclasses import dataclass, field
from typing import Any

from ingest.derive.frame_writer import FrameWriter
from ingest.derive.interval_order import Columns
from ingest.forking import die_with_parent, exit_child
from ingest.load.derived import DerivedTables
from ingest.load.staged_caches import StagedCaches
from ingest.load.tables import nrows
from ingest.memory import KEEP_FREE_BELOW_OF_TWO, give_back_if_big
from ingest.store.coded_files import CodedFiles, Part
from ingest.store.coded_insert import PreparedCoded, prepare_coded
from ingest.store.coded_models import CODED
from ingest.timings import Timings

log = logging.getLogger(__name__)


@dataclass
class EventSideResult:
    """What the child derived that the parent stores in its transaction."""

    #: Rows per table (tables made in parts: all their parts).
    counts: dict[str, int] = field(default_factory=dict)
    #: In the order derived: (table, a coded part prepared) or (table, columns
    #: to insert as they are).
    jobs: list[tuple[str, PreparedCoded | Columns]] = field(default_factory=list)
    #: The coded parts written to the load's coded staging directory.
    parts: list[Part] = field(default_factory=list)
    #: The caches staged with the frames (ingest.derive.cache keys).
    staged: set[str] = field(default_factory=set)
    #: What the threads' table needs of the events (DerivedTables.thread_times).
    thread_times: tuple[Any, Any] | None = None
    #: The child's phases, in seconds (ingest.timings).
    seconds: dict[str, float] = field(default_factory=dict)


class EventSide:
    """A forked child deriving a load's events' side: its pid, and the pipe
    its result comes through."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self._pipe: int | None = pipe

    @classmethod
    def start(cls, tables: DerivedTables, frames: FrameWriter, coded: CodedFiles,
              trace_row: dict[str, Any]) -> EventSide:
        """Fork the child (the caller checks that this is the process's
        only thread: ingest.forking.can_fork); the parent derives every
        other table (DerivedTables.without_events), then takes the
        :meth:`result`."""
        events = tables.events_side()  # made here, so that both processes share it
        if tables.events is not None:
            tables.events.flush()  # buffered in both processes, written by both
        r, w = os.pipe()
        parent = os.getpid()
        # What exists now is never collected in the child (nor touched by
        # the collector: pages the two processes share stay shared).
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # the child: never returns
            os.close(r)
            _child_main(parent, w, tables, events, frames, coded, trace_row)
        gc.unfreeze()
        os.close(w)
        return cls(pid, r)

    def result(self) -> EventSideResult:
        """Wait for the child's result; raise what it failed with."""
        if self._pipe is None:
            raise RuntimeError("the events' side was stopped")
        chunks = []
        try:
            while chunk := os.read(self._pipe, 1 << 20):
                chunks.append(chunk)
        except BaseException:
            self.stop()  # interrupted: the child is killed and reaped
            raise
        os.close(self._pipe)
        self._pipe = None
        _, status = os.waitpid(self.pid, 0)
        if not chunks:
            raise OSError(f"the events' worker (pid {self.pid}) ended with status "
                          f"{status:#x} before its result")
        try:
            got = pickle.loads(b"".join(chunks))
        except Exception as e:  # an exception whose class does not unpickle
            raise OSError(f"the events' worker's result could not be read: {e!r}") from None
        if isinstance(got, BaseException):
            raise got
        if not isinstance(got, EventSideResult):
            raise TypeError(f"the events' worker sent {type(got).__name__}")
        return got

    def stop(self) -> None:
        """End the child (the load failed or found its trace stored)."""
        if self._pipe is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        os.close(self._pipe)
        self._pipe = None


def derive_events(tables: DerivedTables, events: Any, frames: FrameWriter,
                  coded: CodedFiles, trace_row: dict[str, Any],
                  timings: Timings) -> EventSideResult:
    """The events' side derived, its caches staged and its coded rows
    prepared (``events``: ``tables.events_side()``); no database."""
    out = EventSideResult()
    caches = StagedCaches(frames, trace_row, timings)
    first_part = len(coded.parts)

    def table_done() -> None:
        out.staged.update(caches.finish())

    tables.table_done = table_done
    for name, cols in timings.each("derive events", events):
        n = nrows(cols)
        out.counts[name] = out.counts.get(name, 0) + n
        if not n:
            continue
        out.staged.update(caches.add(name, cols))
        if name in CODED:
            with timings.phase(f"insert {name}"):
                prepared = prepare_coded(name, cols, coded)
            if prepared is not None:
                out.jobs.append((name, prepared))
        else:
            out.jobs.append((name, cols))
        del cols
        give_back_if_big(KEEP_FREE_BELOW_OF_TWO)  # the derivation's temporaries
    table_done()
    out.parts = coded.parts[first_part:]
    out.thread_times = tables.thread_times
    return out


def _child_main(parent: int, pipe: int, tables: DerivedTables, events: Any,
                frames: FrameWriter, coded: CodedFiles, trace_row: dict[str, Any]) -> None:
    code = 1
    try:
        if not die_with_parent(parent):
            return  # the parent died before the child could ask to follow it
        timings = Timings()
        got: EventSideResult | BaseException
        try:
            with timings.phase("events side"):
                got = derive_events(tables, events, frames, coded, trace_row, timings)
            got.seconds = timings.as_dict()
        except Exception as e:  # noqa: BLE001 - raised in the parent
            got = e
        try:
            data = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - an exception that does not pickle
            data = pickle.dumps(RuntimeError(f"the events' worker failed: {got!r} ({e})"))
        view = memoryview(data)
        while view:
            view = view[os.write(pipe, view):]
        code = 0
    except BaseException:  # noqa: BLE001 - the parent sees no result and fails the load
        with contextlib.suppress(BaseException):
            log.exception("the events' worker failed")
    finally:
        exit_child(code)
