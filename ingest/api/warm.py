"""Every whole-trace report of a new trace, built right after it is stored.

The pages open on the whole trace: the overview, goroutine groups, scheduler
latency, syscalls, netpoll, the state graphs and the findings each reduce
millions of rows, so each is built once and kept with the frames
(:mod:`ingest.derive.cache`); by the time a user opens a page it answers in
milliseconds. ``gmpscope ingest`` (and ``gmpscope view``) build them before
they return, the server after an upload's job. Here, above the views and the
diagnosis, because it reaches both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from ingest.timings import Timings

log = logging.getLogger("gmpscope.ingest.warm")


#: progress(stage, done, total), as the load reports it (ingest.load.pipeline.Progress).
Progress = Callable[[str, int, int], None]


def warm_reports(engine: Engine, data_dir: Path, trace_id: int,
                 timings: Timings | None = None, progress: Progress | None = None) -> None:
    """Build and keep every whole-trace report of ``trace_id`` (a cache: a
    failure is logged and the pages build them on first view); ``progress``
    hears of each report done (stage "reports")."""
    from ingest.derive.frames import FrameStore, TraceNotFound
    from ingest.diagnose.config import config_from_env
    from ingest.diagnose.runner import diagnose, rule_defaults
    from ingest.memory import give_back_free_memory
    from ingest.views.flame import DEFAULT_KIND, flame_tree
    from ingest.views.goroutines import goroutine_groups
    from ingest.views.latency import latency_report
    from ingest.views.overview import overview
    from ingest.views.states_frames import whole_trace_graph
    from ingest.views.syscalls import netpoll_summary, syscall_summary

    t = timings if timings is not None else Timings()
    give_back_free_memory()  # what a load just freed, before the reports' peaks
    try:
        store = FrameStore(engine, data_dir, capacity=1)
        frames = store.get(trace_id)
        steps: list[tuple[str, Callable[[], object]]] = [
            ("overview", lambda: overview(engine, frames, trace_id)),
            ("goroutine groups", lambda: goroutine_groups(engine, frames)),
            ("latency", lambda: latency_report(frames)),
            ("syscalls", lambda: (syscall_summary(engine, frames),
                                  netpoll_summary(engine, frames))),
            ("states", lambda: whole_trace_graph(engine, frames, "goroutine", True)),
            ("findings", lambda: diagnose(engine, frames, config_from_env(rule_defaults()))),
            # The flame page's first tab (the other kinds are built when
            # first asked for: 0.2-1.7 s each on the 200 MB trace).
            ("flame", lambda: flame_tree(engine, frames, DEFAULT_KIND)),
        ]
        for i, (name, step) in enumerate(steps):
            if progress:
                progress("reports", i, len(steps))
            with t.phase(f"warm {name}"):
                step()
            # What a step mapped of the frames goes back to the page cache
            # before the next one maps its own: the peak is one step's.
            frames.release()
        if progress:
            progress("reports", len(steps), len(steps))
    except TraceNotFound:
        pass  # deleted meanwhile
    except Exception:  # a bug: the pages will say so; keep the traceback in the log
        log.exception("warming the reports of trace %s failed", trace_id)


def warm_in_background(engine: Engine, data_dir: Path, trace_id: int) -> threading.Thread:
    """:func:`warm_reports` on a daemon thread (returned, for tests to join)."""
    t = threading.Thread(target=warm_reports, args=(engine, data_dir, trace_id),
                         name=f"gmpscope-warm-{trace_id}", daemon=True)
    t.start()
    return t
