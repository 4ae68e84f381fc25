"""Off-CPU time under the Go runtime (issue 26, docs/offcpu.md): the kernel's
scheduling of each M (``os_sched_intervals``, from a recording's sched.parquet)
against the goroutines the runtime ran on it (the ``thread_intervals`` view,
state Running, column ``m``).

A goroutine Running on M while M was *waiting* (runnable, not running: CPU
quota throttling, more runnable threads than CPUs) or *asleep* is time the
runtime cannot see: the trace calls it running, the CPU did not run it.

- :func:`thread_states`: each M's on-CPU / waiting / asleep spans in a window;
- :func:`offcpu_lanes`: the same per M lane for the timeline, at ``px`` columns;
- :func:`goroutine_offcpu`: one goroutine's Running time while its M was off-CPU;
- :func:`offcpu_summary`: the whole recording, per M and per goroutine (the
  diagnosis rule's measures).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, inspect, select, text

from ingest.store import os_sched_models, pg_chunks

I64 = npt.NDArray[np.int64]
#: The kernel's states of a thread, as os_sched_intervals.kind names them.
KINDS = ("on_cpu", "waiting", "asleep", "unknown")
#: The states in which a thread is not on a CPU (unknown is neither).
OFF = ("waiting", "asleep")
#: Spans returned per lane at most by offcpu_lanes and thread_states (beyond it
#: the lanes give per-column totals only).
MAX_SPANS = 20_000
MAX_OVERLAPS = 500


def recording(engine: Engine, trace_id: int) -> dict[str, Any] | None:
    """The trace's scheduling recording (os_sched_recordings row), or None."""
    from ingest.load.os_sched import sched_recording_of

    if not inspect(engine).has_table(os_sched_models.os_sched_recordings.name):
        return None
    return sched_recording_of(engine, trace_id)


@dataclass(frozen=True)
class States:
    """Threads' spans as columns, sorted by (m, start)."""

    m: I64
    start: I64
    end: I64
    kind: npt.NDArray[np.int8]  # index into KINDS
    cpu: npt.NDArray[np.int32]
    state: list[str | None]


def states(engine: Engine, trace_id: int, t1: int | None = None, t2: int | None = None,
           m: int | None = None) -> States:
    """The spans overlapping [t1, t2) (all without bounds), of one M or all."""
    si = os_sched_models.os_sched_intervals
    stmt = select(si.c.m, si.c.start_ts, si.c.end_ts, si.c.kind, si.c.cpu, si.c.state).where(
        si.c.trace_id == trace_id, si.c.m.is_not(None))
    if t1 is not None:
        stmt = stmt.where(si.c.end_ts > t1)
    if t2 is not None:
        stmt = stmt.where(si.c.start_ts < t2)
    if m is not None:
        stmt = stmt.where(si.c.m == m)
    with engine.connect() as conn:
        rows = conn.execute(stmt.order_by(si.c.m, si.c.start_ts)).all()
    code = {k: i for i, k in enumerate(KINDS)}
    return States(np.array([r.m for r in rows], np.int64),
                  np.array([r.start_ts for r in rows], np.int64),
                  np.array([r.end_ts for r in rows], np.int64),
                  np.array([code[r.kind] for r in rows], np.int8),
                  np.array([r.cpu for r in rows], np.int32), [r.state for r in rows])


def running(engine: Engine, trace_id: int, t1: int | None = None, t2: int | None = None,
            m: int | None = None, g: int | None = None) -> tuple[I64, I64, I64, I64]:
    """(g, m, start, end) of the goroutines' Running intervals with an M, in
    id order."""
    args: dict[str, Any] = {"t": trace_id}
    given = {k: v for k, v in (("t1", t1), ("t2", t2), ("m", m), ("g", g)) if v is not None}
    args.update(given)
    if engine.dialect.name == "postgresql":
        # The chunks' arrays filtered before any row is made (the view makes
        # every interval's row first: 12-18 s on the 200 MB trace).
        sql = pg_chunks.thread_rows_sql(["rid", "m", "start_ts", "end_ts"], m="m" in given,
                                        t1="t1" in given, t2="t2" in given, g="g" in given,
                                        running=True)
    else:
        sql = ("SELECT 0, g, m, start_ts, end_ts FROM thread_intervals WHERE trace_id = :t "
               "AND state = 'Running'")
        for cond, key in (("end_ts > :t1", "t1"), ("start_ts < :t2", "t2"), ("m = :m", "m"),
                          ("g = :g", "g")):
            if key in given:
                sql += f" AND {cond}"
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            arr = _pg_rows(conn, sql, args)
            arr = arr[np.argsort(arr[:, 0], kind="stable")]
        else:
            rows = conn.execute(text(sql), args).all()
            arr = np.array([tuple(r) for r in rows], dtype=np.int64).reshape(-1, 5)
    return arr[:, 1].copy(), arr[:, 2].copy(), arr[:, 3].copy(), arr[:, 4].copy()


def _pg_rows(conn: Connection, sql: str, args: dict[str, Any]) -> I64:
    """The integer rows of ``sql`` (``:name`` binds) as an array, through the
    DB-API cursor in binary (a million Running intervals of one M: SQLAlchemy's
    rows and a tuple each cost as much as the query)."""
    named = re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(named, args, binary=True)
        return np.array(cur.fetchall(), dtype=np.int64).reshape(-1, 5)
    finally:
        cur.close()


def _covered(x: I64, s: I64, e: I64, cum: I64) -> I64:
    """Total length of the sorted, disjoint spans [s, e) before each time x."""
    i = np.searchsorted(s, x, side="right") - 1
    safe = np.maximum(i, 0)
    before = np.where(i > 0, cum[np.maximum(i - 1, 0)], 0)
    part = np.clip(x - s[safe], 0, e[safe] - s[safe])
    return np.where(i >= 0, before + part, 0).astype(np.int64)


def overlap(run_m: I64, run_s: I64, run_e: I64, st: States, kind: str) -> I64:
    """Per Running interval, the ns its M spent in state ``kind`` during it."""
    out = np.zeros(len(run_m), np.int64)
    want = st.kind == KINDS.index(kind)
    for mm in np.unique(run_m):
        sel = want & (st.m == mm)
        if not sel.any():
            continue
        s, e = st.start[sel], st.end[sel]
        cum = np.cumsum(e - s)
        rows = np.flatnonzero(run_m == mm)
        out[rows] = _covered(run_e[rows], s, e, cum) - _covered(run_s[rows], s, e, cum)
    return out


def _window(rec: dict[str, Any] | None) -> tuple[int, int] | None:
    if rec is None or rec.get("first_ts") is None or rec.get("last_ts") is None:
        return None
    return int(rec["first_ts"]), int(rec["last_ts"])


def offcpu_summary(engine: Engine, trace_id: int, top: int = 10) -> dict[str, Any] | None:
    """The recorded window's Running time on recorded Ms, how much of it was
    off-CPU (waiting, asleep) or unknown, per M and for the top goroutines; None
    without a scheduling recording."""
    rec = recording(engine, trace_id)
    win = _window(rec)
    if rec is None or win is None:
        return None
    lo, hi = win
    st = states(engine, trace_id, lo, hi)
    g, m, s, e = running(engine, trace_id, lo, hi)
    s, e = np.maximum(s, lo), np.minimum(e, hi)
    recorded = np.isin(m, np.unique(st.m))
    g, m, s, e = g[recorded], m[recorded], s[recorded], e[recorded]
    per = {k: overlap(m, s, e, st, k) for k in KINDS}
    dur = e - s
    off = per["waiting"] + per["asleep"]
    ms_ = []
    for mm in np.unique(m).tolist():
        sel = m == mm
        ms_.append({"m": int(mm), "running_ns": int(dur[sel].sum()),
                    "waiting_ns": int(per["waiting"][sel].sum()),
                    "asleep_ns": int(per["asleep"][sel].sum()),
                    "unknown_ns": int(per["unknown"][sel].sum()),
                    "on_cpu_ns": int(per["on_cpu"][sel].sum())})
    ms_.sort(key=lambda r: (-(r["waiting_ns"] + r["asleep_ns"]), r["m"]))
    gs = []
    if len(g):
        uniq, inv = np.unique(g, return_inverse=True)
        inv = inv.reshape(-1)
        g_off = np.bincount(inv, weights=off.astype(np.float64), minlength=len(uniq))
        g_run = np.bincount(inv, weights=dur.astype(np.float64), minlength=len(uniq))
        for i in np.lexsort((uniq, -g_off))[:top].tolist():
            gs.append({"goid": int(uniq[i]), "running_ns": int(g_run[i]),
                       "offcpu_ns": int(g_off[i])})
    total_run = int(dur.sum())
    total_off = int(off.sum())
    worst = int(np.argmax(off)) if len(off) else -1
    return {
        "trace_id": trace_id, "first_ts": lo, "last_ts": hi, "partial": bool(rec["partial"]),
        "method": rec["method"], "threads": int(len(np.unique(st.m))),
        "running_ns": total_run, "offcpu_ns": total_off,
        "waiting_ns": int(per["waiting"].sum()), "asleep_ns": int(per["asleep"].sum()),
        "unknown_ns": int(per["unknown"].sum()),
        "share": (total_off / total_run) if total_run else 0.0,
        "ms": ms_, "goroutines": gs,
        "worst": None if worst < 0 or off[worst] == 0 else {
            "goid": int(g[worst]), "m": int(m[worst]), "start_ts": int(s[worst]),
            "end_ts": int(e[worst]), "offcpu_ns": int(off[worst])},
    }


def thread_states(engine: Engine, trace_id: int, t1: int, t2: int,
                  m: int | None = None) -> dict[str, Any]:
    """Each M's spans in [t1, t2), clipped: on a CPU (which), waiting for one
    (on which run queue), asleep (how), unknown."""
    st = states(engine, trace_id, t1, t2, m)
    s, e = np.maximum(st.start, t1), np.minimum(st.end, t2)
    lanes = []
    for mm in np.unique(st.m).tolist():
        sel = np.flatnonzero(st.m == mm)
        truncated = len(sel) > MAX_SPANS
        sel = sel[:MAX_SPANS]
        lanes.append({"m": int(mm), "start": s[sel].tolist(), "end": e[sel].tolist(),
                      "kind": [KINDS[int(k)] for k in st.kind[sel]],
                      "cpu": st.cpu[sel].tolist(), "state": [st.state[i] for i in sel],
                      "truncated": truncated})
    return {"trace_id": trace_id, "t1": t1, "t2": t2, "kinds": list(KINDS), "lanes": lanes,
            "recording": _public(recording(engine, trace_id))}


def _public(rec: dict[str, Any] | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {k: rec[k] for k in ("method", "offset_ns", "partial", "stopped_by", "lost_events",
                                "events", "intervals", "threads", "first_ts", "last_ts")}


def offcpu_lanes(engine: Engine, trace_id: int, t1: int, t2: int, px: int) -> dict[str, Any]:
    """Per M lane, for the timeline's M lanes: ns per column in each state
    (``columns``: ``px`` columns of ``(t2 - t1) / px`` ns, one list per kind),
    the ns the runtime ran a goroutine there while the thread was off-CPU
    (``running_offcpu``, per column), and, when there are at most MAX_SPANS,
    the spans themselves (``spans``, as :func:`thread_states`). docs/offcpu.md."""
    px = max(1, min(int(px), 10_000))
    t2 = max(t2, t1 + 1)
    st = states(engine, trace_id, t1, t2)
    edges = t1 + (np.arange(px + 1, dtype=np.float64) * ((t2 - t1) / px)).astype(np.int64)
    edges[-1] = t2
    lanes = []
    for mm in np.unique(st.m).tolist():
        lane_sel = st.m == mm
        cols: dict[str, list[int]] = {}
        for k in KINDS:
            sel = lane_sel & (st.kind == KINDS.index(k))
            s, e = np.maximum(st.start[sel], t1), np.minimum(st.end[sel], t2)
            cum = np.cumsum(e - s)
            cov = _covered(edges, s, e, cum) if len(s) else np.zeros(px + 1, np.int64)
            cols[k] = np.diff(cov).tolist()
        g, rm, rs, re_ = running(engine, trace_id, t1, t2, m=int(mm))
        rs, re_ = np.maximum(rs, t1), np.minimum(re_, t2)
        run_off = np.zeros(px, np.int64)
        for k in OFF:
            sel = lane_sel & (st.kind == KINDS.index(k))
            if not sel.any() or not len(rs):
                continue
            # Off-CPU spans intersected with Running intervals (both disjoint
            # on one M): the intersections, then binned like the states.
            inter_s, inter_e = _intersections(rs, re_, st.start[sel], st.end[sel])
            if len(inter_s):
                cum = np.cumsum(inter_e - inter_s)
                run_off += np.diff(_covered(edges, inter_s, inter_e, cum))
        idx = np.flatnonzero(lane_sel)
        spans = None
        if len(idx) <= MAX_SPANS:
            spans = {"start": np.maximum(st.start[idx], t1).tolist(),
                     "end": np.minimum(st.end[idx], t2).tolist(),
                     "kind": [KINDS[int(k)] for k in st.kind[idx]],
                     "cpu": st.cpu[idx].tolist()}
        lanes.append({"m": int(mm), "columns": cols, "running_offcpu": run_off.tolist(),
                      "spans": spans})
    return {"trace_id": trace_id, "t1": t1, "t2": t2, "px": px,
            "column_ns": (t2 - t1) / px, "kinds": list(KINDS), "lanes": lanes}


def _intersections(a_s: I64, a_e: I64, b_s: I64, b_e: I64) -> tuple[I64, I64]:
    """The pairwise intersections of two sets of sorted, disjoint spans."""
    oa = np.argsort(a_s, kind="stable")
    a_s, a_e = a_s[oa], a_e[oa]
    first = np.searchsorted(b_e, a_s, side="right")
    last = np.searchsorted(b_s, a_e, side="left")
    counts = np.maximum(last - first, 0)
    if not counts.sum():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ai = np.repeat(np.arange(len(a_s)), counts)
    bi = np.concatenate([np.arange(f, f + c) for f, c in zip(first, counts, strict=True)
                         if c > 0])
    s = np.maximum(a_s[ai], b_s[bi])
    e = np.minimum(a_e[ai], b_e[bi])
    keep = e > s
    return s[keep], e[keep]


def goroutine_offcpu(engine: Engine, trace_id: int, goid: int) -> dict[str, Any] | None:
    """One goroutine's Running time while its M was off-CPU: totals, and the
    longest stretches (start, end, m, kind, cpu); None without a recording."""
    rec = recording(engine, trace_id)
    win = _window(rec)
    if rec is None or win is None:
        return None
    lo, hi = win
    g, m, s, e = running(engine, trace_id, lo, hi, g=goid)
    s, e = np.maximum(s, lo), np.minimum(e, hi)
    st = states(engine, trace_id, lo, hi)
    recorded = np.isin(m, np.unique(st.m))
    m, s, e = m[recorded], s[recorded], e[recorded]
    totals = {k: int(overlap(m, s, e, st, k).sum()) for k in KINDS}
    parts: list[tuple[int, int, int, str, int]] = []
    for mm in np.unique(m).tolist():
        on_m = m == mm
        for k in OFF:
            sel = (st.m == mm) & (st.kind == KINDS.index(k))
            if not sel.any():
                continue
            idx = np.flatnonzero(sel)
            is_, ie = _intersections(s[on_m], e[on_m], st.start[idx], st.end[idx])
            # Each intersection's CPU: the off-CPU span it lies in.
            pos = np.searchsorted(st.start[idx], is_, side="right") - 1
            parts += [(int(a), int(b), int(mm), k, int(st.cpu[idx][p]))
                      for a, b, p in zip(is_.tolist(), ie.tolist(), pos.tolist(), strict=True)]
    parts.sort(key=lambda x: (-(x[1] - x[0]), x[0]))
    running_ns = int((e - s).sum())
    off = totals["waiting"] + totals["asleep"]
    return {
        "trace_id": trace_id, "goid": goid, "first_ts": lo, "last_ts": hi,
        "running_ns": running_ns, "offcpu_ns": off, "waiting_ns": totals["waiting"],
        "asleep_ns": totals["asleep"], "unknown_ns": totals["unknown"],
        "on_cpu_ns": totals["on_cpu"], "share": off / running_ns if running_ns else 0.0,
        "stretches": [{"start_ts": a, "end_ts": b, "duration_ns": b - a, "m": mm, "kind": k,
                       "cpu": c} for a, b, mm, k, c in parts[:MAX_OVERLAPS]],
        "stretches_total": len(parts), "partial": bool(rec["partial"]),
    }
