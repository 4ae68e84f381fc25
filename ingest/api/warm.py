"""Warming a trace's views right after the server stored it.

The timeline's lane sets are built by the loader itself; the analysis pages'
whole-trace reports (goroutine groups, scheduler latency, syscalls, netpoll)
take 0.1-1.6 s each on a 4-million-event trace, so the server builds them in
the background once an upload is stored, and they are kept with the frames
(:mod:`ingest.derive.cache`): by the time a user opens those pages they
answer in milliseconds.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from sqlalchemy import Engine

log = logging.getLogger("gmpscope.ingest.warm")


def warm_reports(engine: Engine, data_dir: Path, trace_id: int) -> None:
    """Build and keep every whole-trace report of ``trace_id`` (a cache: a
    failure is logged and the pages build them on first view)."""
    from ingest.derive.frames import FrameStore, TraceNotFound
    from ingest.views.goroutines import goroutine_groups
    from ingest.views.latency import latency_report
    from ingest.views.syscalls import netpoll_summary, syscall_summary

    try:
        frames = FrameStore(engine, data_dir, capacity=1).get(trace_id)
        goroutine_groups(engine, frames)
        latency_report(frames)
        syscall_summary(engine, frames)
        netpoll_summary(engine, frames)
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
