"""Per-second numbers of a live window's OS side (``gmpscope live --os``, docs/live.md).

Once the collector has attached a window's OS recording to its trace
(``POST /api/traces/<id>/poller``: ``poller_events`` and, from sched.parquet,
``os_sched_intervals``), :func:`add_os_seconds` cuts the same bins as
:mod:`ingest.live.stats` (same edges, same ``t_ns``) and stores, per bin, in
``live_os_seconds``:

- ``running_ns``: goroutine Running time on the Ms the kernel's scheduling
  was recorded for; ``offcpu_waiting_ns`` / ``offcpu_asleep_ns``: the part of
  it during which that M was waiting for a CPU (runnable, not running) or
  asleep (:func:`ingest.views.offcpu.overlap`);
- ``threads_oncpu_ns`` / ``threads_waiting_ns``: the target's threads on a CPU /
  waiting for one, summed over threads (divided by the bin's length: how many
  threads on average);
- ``epoll_waits``: epoll waits (``epoll_wait``, ``epoll_pwait``,
  ``epoll_pwait2``) that returned in the bin; ``epoll_ready``: the descriptors
  they returned ready (the entries of ``ready_fds``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, delete, select, update

from ingest.live.stats import bin_edges
from ingest.store import live_models, poller_models
from ingest.store.db import write_tx
from ingest.views import offcpu

SS = live_models.live_sessions
SG = live_models.live_segments
SEC = live_models.live_seconds
OS = live_models.live_os_seconds
EPOLL_WAITS = ("epoll_wait", "epoll_pwait", "epoll_pwait2")
#: The columns of live_os_seconds the series and the page read.
OS_COLUMNS = ("running_ns", "offcpu_waiting_ns", "offcpu_asleep_ns", "threads_oncpu_ns",
              "threads_waiting_ns", "epoll_waits", "epoll_ready")


def os_seconds(engine: Engine, trace_id: int, first_ts: int, last_ts: int) -> list[dict[str, Any]]:
    """One dict per bin (``bin``, ``start_ts``, ``duration_ns`` and OS_COLUMNS) of a trace
    with an OS recording attached."""
    edges = bin_edges(first_ts, last_ts)
    nb = len(edges) - 1
    rows: list[dict[str, Any]] = [
        {"bin": k, "start_ts": int(edges[k]), "duration_ns": int(edges[k + 1] - edges[k])}
        for k in range(nb)]
    st = offcpu.states(engine, trace_id, first_ts, last_ts + 1)
    _, run_m, run_s, run_e = offcpu.running(engine, trace_id, first_ts, last_ts + 1)
    recorded = np.isin(run_m, np.unique(st.m))
    run_m, run_s, run_e = run_m[recorded], run_s[recorded], run_e[recorded]
    for k in range(nb):
        a, b = int(edges[k]), int(edges[k + 1])
        s, e = np.maximum(run_s, a), np.minimum(run_e, b)
        keep = e > s
        m, s, e = run_m[keep], s[keep], e[keep]
        rows[k]["running_ns"] = int((e - s).sum())
        rows[k]["offcpu_waiting_ns"] = int(offcpu.overlap(m, s, e, st, "waiting").sum())
        rows[k]["offcpu_asleep_ns"] = int(offcpu.overlap(m, s, e, st, "asleep").sum())
    for col, kind in (("threads_oncpu_ns", "on_cpu"), ("threads_waiting_ns", "waiting")):
        sel = st.kind == offcpu.KINDS.index(kind)
        s0, e0 = st.start[sel], st.end[sel]
        for k in range(nb):
            # In integers: exact (a float cumulative sum would drift by hundreds of ns).
            part = np.minimum(e0, edges[k + 1]) - np.maximum(s0, edges[k])
            rows[k][col] = int(part[part > 0].sum())
    pe = poller_models.poller_events
    with engine.connect() as conn:
        waits = conn.execute(select(pe.c.ts, pe.c.duration_ns, pe.c.ready_fds).where(
            pe.c.trace_id == trace_id, pe.c.kind == "syscall",
            pe.c.syscall.in_(EPOLL_WAITS), pe.c.ts.is_not(None))).all()
    ret = np.array([int(w.ts) + int(w.duration_ns or 0) for w in waits], np.int64)
    ready = np.array([len(w.ready_fds.split(",")) if w.ready_fds else 0 for w in waits],
                     np.int64)
    # A wait belongs to the bin it returned in; the last bin includes the window's end.
    k_of = np.searchsorted(edges, ret, side="right") - 1
    k_of = np.where(ret == edges[-1], nb - 1, k_of)
    inside = (ret >= edges[0]) & (ret <= edges[-1])
    for k in range(nb):
        sel = inside & (k_of == k)
        rows[k]["epoll_waits"] = int(sel.sum())
        rows[k]["epoll_ready"] = int(ready[sel].sum())
    return rows


def add_os_seconds(engine: Engine, name: str, segment_id: int) -> dict[str, Any]:
    """(Re)compute and store the OS seconds of one segment of session ``name``;
    LookupError for an unknown session or segment, ValueError when its trace has no
    OS recording (or was deleted by retention)."""
    with engine.connect() as conn:
        sid = conn.execute(select(SS.c.id).where(SS.c.name == name)).scalar()
        if sid is None:
            raise LookupError(f"no live session {name!r}")
        seg = conn.execute(select(SG.c.trace_id, SG.c.first_ts, SG.c.last_ts).where(
            SG.c.id == segment_id, SG.c.session_id == sid)).first()
        if seg is None:
            raise LookupError(f"no segment {segment_id} in live session {name!r}")
        bins = {int(r.bin): int(r.t_ns) for r in conn.execute(
            select(SEC.c.bin, SEC.c.t_ns).where(SEC.c.session_id == sid,
                                                SEC.c.segment_id == segment_id))}
    if seg.trace_id is None or seg.first_ts is None or seg.last_ts is None:
        raise ValueError(f"segment {segment_id}'s trace is gone (retention)")
    if offcpu.recording(engine, int(seg.trace_id)) is None:
        raise ValueError(f"trace {seg.trace_id} has no OS recording attached: "
                         f"POST /api/traces/{seg.trace_id}/poller first")
    rows = os_seconds(engine, int(seg.trace_id), int(seg.first_ts), int(seg.last_ts))
    out = [{**{k: v for k, v in r.items() if k != "start_ts"}, "session_id": sid,
            "segment_id": segment_id,
            "t_ns": bins.get(r["bin"], 0)} for r in rows if r["bin"] in bins]
    with write_tx(engine) as conn:
        conn.execute(delete(OS).where(OS.c.session_id == sid, OS.c.segment_id == segment_id))
        if out:
            conn.execute(OS.insert(), out)
        # The page's "anything new?" question (sessions.version) sees it.
        conn.execute(update(SS).where(SS.c.id == sid).values(updated_at=datetime.now(UTC)))
    return {"session": name, "segment": segment_id, "trace_id": int(seg.trace_id),
            "seconds": len(out),
            "totals": {c: sum(int(r[c]) for r in out) for c in OS_COLUMNS}}
