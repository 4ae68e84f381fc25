"""Every whole-trace report of a new trace, built right after it is stored.

The pages open on the whole trace: the overview, goroutine groups, scheduler
latency, syscalls, netpoll, the state graphs and the findings each reduce
millions of rows, so each is built once and kept with the frames
(:mod:`ingest.derive.cache`); by the time a user opens a page it answers in
milliseconds. ``gmpscope ingest`` (and ``gmpscope view``) build them before
they return, the server after an upload's job; ``gmpscope ingest`` builds the
timeline's lane sets here too, beside the reports. Here, above the views and
the diagnosis, because it reaches both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from ingest.timings import Timings

if TYPE_CHECKING:
    from ingest.derive.frames import TraceFrames

log = logging.getLogger("gmpscope.ingest.warm")


#: progress(stage, done, total), as the load reports it (ingest.load.pipeline.Progress).
Progress = Callable[[str, int, int], None]


def warm_reports(engine: Engine, data_dir: Path, trace_id: int,
                 timings: Timings | None = None, progress: Progress | None = None,
                 threads: int = 1, lanes: bool = False, reports: bool = True,
                 fork: bool = False) -> None:
    """Build and keep every whole-trace report of ``trace_id`` (a cache: a
    failure is logged and the pages build them on first view); ``progress``
    hears of each step done (stage "reports").

    ``threads``: how many steps run at once, each thread on its own mapping
    of the frames (the reports are numpy between short stretches of Python:
    two threads nearly halve the time on two cores, and add one report's
    memory to the peak); with ``fork``, one of them a forked process where
    that is safe (ingest.api.warm_workers: no GIL shared with it).
    ``lanes``: the timeline's lane sets too, for a load told to leave them to
    its caller (ingest.load.pipeline's ``lanes``), so that they are built
    beside the reports; ``reports=False``: only those.
    """
    from ingest.api.warm_workers import run_steps
    from ingest.derive.frames import FrameStore
    from ingest.derive.precompute import precompute_steps
    from ingest.diagnose.config import config_from_env
    from ingest.diagnose.runner import diagnose, rule_defaults
    from ingest.memory import give_back_if_big
    from ingest.store.db import checkpoint_meanwhile
    from ingest.views.flame import DEFAULT_KIND, flame_tree
    from ingest.views.goroutines import goroutine_groups
    from ingest.views.latency import latency_report
    from ingest.views.overview import overview
    from ingest.views.states_frames import whole_trace_graph
    from ingest.views.syscalls import netpoll_summary, syscall_summary

    t = timings if timings is not None else Timings()
    give_back_if_big()  # what a load just freed, before the reports' peaks
    steps: list[tuple[str, Callable[[TraceFrames], object]]] = []
    if reports:
        # Longest first (seconds of each on the 200 MB trace, two at a time,
        # one worker forked: findings 2.1, the M and P lane sets 0.6 and 0.5,
        # syscalls 0.6, flame 0.5, latency 0.5, overview 0.45, states 0.3,
        # goroutine groups 0.1), so that the two workers end together.
        steps += [
            ("warm findings", lambda f: diagnose(engine, f, config_from_env(rule_defaults()))),
            ("warm overview", lambda f: overview(engine, f, trace_id)),
            # The flame page's first tab (the other kinds are built when
            # first asked for: 0.1-0.8 s each on the 200 MB trace).
            ("warm flame", lambda f: flame_tree(engine, f, DEFAULT_KIND)),
            ("warm syscalls", lambda f: (syscall_summary(engine, f),
                                         netpoll_summary(engine, f))),
            ("warm latency", lambda f: latency_report(f)),
            ("warm states", lambda f: whole_trace_graph(engine, f, "goroutine", True)),
            ("warm goroutine groups", lambda f: goroutine_groups(engine, f)),
        ]
    if lanes:
        # Each lane set a step (a set staged before the commit is only read
        # back: its builder finds it kept). Two at a time: beside the findings,
        # after the longest three reports. One at a time (a big trace): first,
        # before the reports' values kept with the frames add to the P and M
        # lanes' peak (the 1 GB trace's lane sets and reports in a fresh
        # process: 1198 MiB this way, 1244 after the longest two).
        sets = [("lanes", step) for step in precompute_steps(engine).values()]
        at = 4 if threads > 1 else 0
        steps[at:at] = sets[:2]
        steps += sets[2:]
    count = [0]

    def done(i: int, seconds: float) -> None:
        t.add(steps[i][0], seconds)
        count[0] += 1
        if progress:
            progress("reports", count[0], len(steps))

    if progress:
        progress("reports", 0, len(steps))
    # SQLite: the load's write-ahead log copied into the database meanwhile
    # (from the start: beside the frames' first opening, one thread's work).
    run_steps(steps, lambda: FrameStore(engine, data_dir, capacity=1).get(trace_id),
              workers=max(1, threads), fork=fork, done=done,
              after_fork=lambda: engine.dispose(close=False),
              beside=lambda: checkpoint_meanwhile(engine), what=f"trace {trace_id}")


def warm_in_background(engine: Engine, data_dir: Path, trace_id: int) -> threading.Thread:
    """:func:`warm_reports` on a daemon thread (returned, for tests to join)."""
    t = threading.Thread(target=warm_reports, args=(engine, data_dir, trace_id),
                         name=f"gmpscope-warm-{trace_id}", daemon=True)
    t.start()
    return t
