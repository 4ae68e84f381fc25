"""The poller page's io_uring requests and epoll ready descriptors (eBPF recordings).

- :func:`uring_requests`: an eBPF recording's io_uring requests (``poller_uring``,
  from ``io_uring:io_uring_submit_req`` to ``io_uring:io_uring_complete``):
  per opcode the count, errors and latency percentiles, a latency histogram on
  log-spaced bins, and the queue depth (requests submitted and not yet completed)
  over time.
- :func:`ready_fds`: how often each descriptor was among those an epoll wait
  returned ready (``poller_events.ready_fds``), with what the descriptor is.

Both read plain columns and return plain data (docs/poller.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from ingest.store import poller_models

#: Latency histogram bin edges: 4 per decade from 1 us to 10 s (ns).
LATENCY_EDGES_NS = [int(round(10 ** (3 + k / 4))) for k in range(0, 29)]
#: Points of the queue-depth line at most (the deepest of each bucket kept).
MAX_DEPTH_POINTS = 2000
#: Descriptors listed by ready count at most.
TOP_READY = 30


def _pct(v: np.ndarray[Any, Any]) -> dict[str, int | None]:
    if not len(v):
        return {"p50": None, "p90": None, "p99": None, "max": None}
    s = np.sort(v)

    def rank(q: float) -> int:  # nearest rank
        return int(s[min(len(s) - 1, max(0, int(np.ceil(q * len(s))) - 1))])

    return {"p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99), "max": int(s[-1])}


def _depth(submit: np.ndarray[Any, Any], complete: np.ndarray[Any, Any], origin: int
           ) -> dict[str, Any]:
    """In-flight requests over time: +1 at each submission, -1 at each completion."""
    done = complete[complete >= 0]
    t = np.concatenate([submit, done])
    step = np.concatenate([np.ones(len(submit), np.int64), -np.ones(len(done), np.int64)])
    # At the same instant a completion counts before a submission: the depth
    # never shows a request that was already done.
    order = np.lexsort((step, t))
    t, depth = t[order], np.cumsum(step[order])
    max_depth = int(depth.max()) if len(depth) else 0
    if len(t) > MAX_DEPTH_POINTS:
        edges = np.linspace(t[0], t[-1], MAX_DEPTH_POINTS // 2 + 1)
        b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, MAX_DEPTH_POINTS // 2 - 1)
        starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        ends = np.r_[starts[1:], len(t)] - 1
        # Each bucket's deepest point and its last one (where the line goes on from).
        deepest = [s + int(np.argmax(depth[s:e + 1])) for s, e in zip(starts, ends, strict=True)]
        keep = np.unique(np.r_[np.asarray(deepest, np.int64), ends])
        t, depth = t[keep], depth[keep]
    return {"rel_ns": (t - origin).tolist(), "depth": depth.tolist(), "max": max_depth}


def uring_requests(engine: Engine, trace_id: int, origin: int) -> dict[str, Any]:
    """io_uring requests by opcode, their latencies and the queue depth over time
    (``origin``: the wall ns times are made relative to, the page's)."""
    pu = poller_models.poller_uring
    with engine.connect() as conn:
        rows = conn.execute(select(pu.c.tid, pu.c.submit_wall_ns, pu.c.complete_wall_ns,
                                   pu.c.latency_ns, pu.c.opcode, pu.c.result, pu.c.ts)
                            .where(pu.c.trace_id == trace_id).order_by(pu.c.seq)).all()
    if not rows:
        return {"requests": 0, "in_flight": 0, "by_opcode": [], "histogram": {},
                "edges_ns": LATENCY_EDGES_NS, "depth": {"rel_ns": [], "depth": [], "max": 0}}
    submit = np.array([r.submit_wall_ns for r in rows], np.int64)
    complete = np.array([-1 if r.complete_wall_ns is None else r.complete_wall_ns
                         for r in rows], np.int64)
    lat = np.array([-1 if r.latency_ns is None else r.latency_ns for r in rows], np.int64)
    ops = np.array([r.opcode for r in rows], dtype=object)
    res = np.array([0 if r.result is None else r.result for r in rows], np.int64)
    by_op, hist = [], {}
    for op in sorted(set(ops.tolist())):
        sel = ops == op
        done = sel & (lat >= 0)
        by_op.append({"opcode": op, "count": int(sel.sum()), "completed": int(done.sum()),
                      "errors": int((sel & (res < 0)).sum()), **_pct(lat[done])})
        counts, _ = np.histogram(lat[done], bins=np.asarray(LATENCY_EDGES_NS, np.int64))
        hist[op] = counts.tolist()
    by_op.sort(key=lambda d: -d["count"])
    return {"requests": len(rows), "in_flight": int((complete < 0).sum()), "by_opcode": by_op,
            "histogram": hist, "edges_ns": LATENCY_EDGES_NS,
            "depth": _depth(submit, complete, origin), "latency": _pct(lat[lat >= 0])}


def ready_fds(ev: Any) -> dict[str, Any]:
    """Descriptors by how often an epoll wait returned them ready (``ev``: the
    page's Events), with the description each was last seen with."""
    sel = [i for i, v in enumerate(ev["ready_fds"]) if v]
    counts: dict[str, int] = {}
    waits = unknown = 0
    for i in sel:
        waits += 1
        for fd in str(ev["ready_fds"][i]).split(","):
            counts[fd] = counts.get(fd, 0) + 1
            unknown += fd == "?"
    # What each descriptor was last described as (a socket's ends are known only
    # once it is connected, after its registration).
    what: dict[str, Any] = {}
    for j in range(len(ev["fd"])):
        fd, path = ev["fd"][j], ev["fd_path"][j]
        if fd is not None and path and ev["kind"][j] == "syscall":
            what[str(fd)] = (path, ev["fd_kind"][j])
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_READY]
    return {"waits": waits, "events": sum(counts.values()), "unknown": unknown,
            "distinct": len(counts),
            "top": [{"fd": fd, "count": c, "fd_path": what.get(fd, (None, None))[0],
                     "fd_kind": what.get(fd, (None, None))[1]} for fd, c in top]}
