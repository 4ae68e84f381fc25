"""What the OS saw, from a trace's ``poller_events``: plain data for the poller
page, the OS syscalls section, the timeline's OS marks and the JSON API.

Times on the poller page are ns since the recording's first event (wall clock),
so they need no alignment; the timeline marks and the join with the Go
``syscalls`` table use ``poller_events.ts`` (trace ns, aligned at ingest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, Integer, and_, cast, func, select

from collectors.poller.collect_meta import recorder_name
from ingest.load.poller import recording_of
from ingest.store import models, pg_chunks, poller_models
from ingest.views.histo import log_histogram

#: Calls that wait for readiness (their timeout is asked for, their result is events).
WAIT_CALLS = ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select",
              "pselect6")
#: Calls whose successful result (new_fd) is a new descriptor.
OPENING_CALLS = ("openat", "accept", "accept4", "epoll_create1", "io_uring_setup", "socket")
#: fd kinds counted as sockets on the open-descriptor chart.
SOCKET_KINDS = ("tcp", "udp", "unix", "netlink", "socket")
SLOWEST = 50
TIME_BINS = 80
MAX_EPOLL_WAITS = 5000
MAX_MARKS = 4000

_COLS = ("seq", "ts", "wall_ns", "tid", "m", "kind", "syscall", "fd", "fd_kind", "fd_path",
         "new_fd", "new_fd_path", "epfd", "op", "timeout_ns", "maxevents", "to_submit",
         "min_complete", "flags", "result", "errno", "duration_ns", "ready_fds")


class NoRecording(LookupError):
    """The trace has no OS recording attached."""


@dataclass(frozen=True)
class Events:
    """One trace's poller_events as columns (object arrays keep NULL as None)."""

    cols: dict[str, np.ndarray[Any, Any]]
    origin: int  # wall ns of the recording's first event

    def __len__(self) -> int:
        return len(self.cols["seq"])

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        return self.cols[name]

    def ints(self, name: str, missing: int = -1) -> np.ndarray[Any, Any]:
        """An integer column with NULL as ``missing``."""
        return np.array([missing if v is None else v for v in self.cols[name]], dtype=np.int64)


def has_recording(engine: Engine, trace_id: int) -> bool:
    """True when the trace has poller data."""
    pr = poller_models.poller_recordings
    with engine.connect() as conn:
        return conn.execute(select(pr.c.trace_id).where(pr.c.trace_id == trace_id)).first() \
            is not None


def load_events(engine: Engine, trace_id: int, columns: Sequence[str] = _COLS) -> Events:
    """Every poller event of a trace, in entry-time order; NoRecording when none."""
    pe = poller_models.poller_events
    with engine.connect() as conn:
        rows = conn.execute(select(*(pe.c[c] for c in columns))
                            .where(pe.c.trace_id == trace_id).order_by(pe.c.seq)).all()
    if not rows:
        if not has_recording(engine, trace_id):
            raise NoRecording(f"trace {trace_id} has no OS recording")
    cols: dict[str, np.ndarray[Any, Any]] = {}
    for i, c in enumerate(columns):
        arr = np.empty(len(rows), dtype=object)
        arr[:] = [r[i] for r in rows]
        cols[c] = arr
    origin = int(min(cols["wall_ns"])) if rows else 0
    return Events(cols, origin)


def _pct(values: np.ndarray[Any, Any]) -> dict[str, int | None]:
    if len(values) == 0:
        return {"p50_ns": None, "p99_ns": None, "max_ns": None}
    s = np.sort(values)

    def rank(q: float) -> int:  # nearest rank
        return int(s[min(len(s) - 1, max(0, int(np.ceil(q * len(s))) - 1))])

    return {"p50_ns": rank(0.5), "p99_ns": rank(0.99), "max_ns": int(s[-1])}


def alignment(engine: Engine, trace_id: int) -> dict[str, Any]:
    """The recording's facts: how the clocks were aligned and how well, counts, overhead."""
    rec = recording_of(engine, trace_id)
    if rec is None:
        raise NoRecording(f"trace {trace_id} has no OS recording")
    meta = rec.pop("meta")
    rec["parse"] = meta.get("parse")
    rec["overhead"] = meta.get("overhead")
    rec["recorded_alignment"] = meta.get("alignment")
    rec["backend"] = meta.get("backend") or "strace"
    rec["recorder"] = recorder_name(meta)
    rec["partial"] = bool(meta.get("partial"))
    return rec


# --------------------------------------------------------------------------
# the poller page


def wait_rows(ev: Events) -> dict[str, Any]:
    """The readiness waits with a duration: row index ``i``, ``dur``, ``tmo``
    (timeout ns; -1: none asked, -2: not decoded) and ``res`` (-1: failed)."""
    sel = np.flatnonzero(np.isin(ev["syscall"], WAIT_CALLS)
                         & np.array([d is not None for d in ev["duration_ns"]], dtype=bool))
    return {"i": sel, "dur": ev.ints("duration_ns")[sel],
            "tmo": ev.ints("timeout_ns", missing=-2)[sel],
            "res": ev.ints("result", missing=-1)[sel]}


def waits(ev: Events) -> dict[str, Any]:
    """Readiness waits: durations, timeout jitter, events per wakeup, empty wakeups."""
    r = wait_rows(ev)
    dur, tmo, res = r["dur"], r["tmo"], r["res"]
    names = ev["syscall"][r["i"]]
    ok = res >= 0
    timed_out = ok & (res == 0) & (tmo > 0)
    nonblocking = tmo == 0
    early = ok & (res > 0) & (tmo != 0)
    jitter = dur[timed_out] - tmo[timed_out]
    ret = res[ok]
    per_wakeup = np.bincount(ret).tolist() if len(ret) else []
    by_call = {str(c): int(n) for c, n in zip(*np.unique(names.astype(str),
                                                           return_counts=True), strict=True)}
    return {
        "count": int(len(r["i"])), "by_call": by_call,
        "duration": _pct(dur), "duration_histogram": log_histogram(dur),
        "blocking_duration_histogram": log_histogram(dur[~nonblocking]),
        "timed_out": int(timed_out.sum()), "jitter": _pct(jitter),
        "jitter_histogram": log_histogram(np.maximum(jitter, 0)),
        "jitter_negative": int((jitter < 0).sum()),
        "returned_early": int(early.sum()),
        "early_fraction_histogram": _early_fractions(dur[early & (tmo > 0)],
                                                     tmo[early & (tmo > 0)]),
        "nonblocking": int(nonblocking.sum()),
        "errors": int((~ok).sum()),
        "events_per_wakeup": per_wakeup,
        "empty": int((ok & (res == 0)).sum()),
        "empty_blocking_not_timed_out": int((ok & (res == 0) & (tmo < 0)).sum()),
        "empty_nonblocking": int((ok & (res == 0) & nonblocking).sum()),
    }


def _early_fractions(dur: np.ndarray[Any, Any], tmo: np.ndarray[Any, Any]) -> dict[str, Any]:
    """How far into its timeout a wait that returned events got (tenths)."""
    if len(dur) == 0:
        return {"edges": [], "counts": []}
    frac = np.clip(dur / tmo, 0, 0.9999)
    counts = np.bincount((frac * 10).astype(np.int64), minlength=10)
    return {"edges": [i / 10 for i in range(11)], "counts": counts.tolist()}


def _bins(ev: Events) -> tuple[int, int]:
    """(bin width ns, number of bins) over the recording's span."""
    from ingest.views.histo import nice_width

    wall = ev.ints("wall_ns")
    span = int(wall.max() - ev.origin) + 1 if len(wall) else 1
    width = nice_width(span, TIME_BINS)
    return width, span // width + 1


def epoll_ctl_over_time(ev: Events) -> dict[str, Any]:
    """epoll_ctl ADD / MOD / DEL per time bin (ns since the recording's start)."""
    width, n = _bins(ev)
    sel = ev["syscall"] == "epoll_ctl"
    rel = (ev.ints("wall_ns")[sel] - ev.origin) // width
    ops = ev["op"][sel]
    out: dict[str, Any] = {"bin_ns": width, "t": [i * width for i in range(n)]}
    for op in ("ADD", "MOD", "DEL"):
        m = np.array([o == f"EPOLL_CTL_{op}" for o in ops], dtype=bool)
        out[op.lower()] = np.bincount(rel[m], minlength=n).tolist() if len(rel) else [0] * n
    out["total"] = {op: int(sum(out[op])) for op in ("add", "mod", "del")}
    return out


def open_fds(ev: Events) -> dict[str, Any]:
    """Descriptors known open over time, total and sockets: +1 when a call creates
    one (openat, accept*, epoll_create1, io_uring_setup) or a descriptor is first
    seen in use (created by an untraced call such as socket), -1 at a successful
    close. A leak is a line that only climbs."""
    name, kinds = ev["syscall"], ev["fd_kind"]
    new_fd, fd, res = ev["new_fd"], ev["fd"], ev["result"]
    new_kind = ev["new_fd_path"]
    from ingest.load.poller import fd_kind

    open_kind: dict[int, str | None] = {}
    t: list[int] = []
    total: list[int] = []
    sockets: list[int] = []
    n_sock = 0
    wall = ev.ints("wall_ns")
    for i in range(len(ev)):
        changed = False
        if name[i] == "close":
            if fd[i] is not None and res[i] == 0 and fd[i] in open_kind:
                k = open_kind.pop(fd[i])
                n_sock -= k in SOCKET_KINDS
                changed = True
        elif fd[i] is not None and fd[i] >= 0 and fd[i] not in open_kind and kinds[i]:
            open_kind[fd[i]] = kinds[i]
            n_sock += kinds[i] in SOCKET_KINDS
            changed = True
        if new_fd[i] is not None and new_fd[i] >= 0:
            k = fd_kind(new_kind[i])
            prev = open_kind.get(new_fd[i], "")
            if prev != "":
                n_sock -= prev in SOCKET_KINDS
            open_kind[new_fd[i]] = k
            n_sock += k in SOCKET_KINDS
            changed = True
        if changed:
            t.append(int(wall[i] - ev.origin))
            total.append(len(open_kind))
            sockets.append(n_sock)
    return {"t": t, "open": total, "sockets": sockets, "max": max(total, default=0),
            "final": total[-1] if total else 0,
            "only_climbs": bool(np.all(np.diff(total) >= 0)) if total else True,
            "sockets_only_climb": bool(np.all(np.diff(sockets) >= 0)) if sockets else True,
            "by_kind_at_end": _count_values(open_kind.values())}


def _count_values(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def errors(ev: Events) -> list[dict[str, Any]]:
    """Failed calls by syscall and errno (EAGAIN, EMFILE, ...), most first."""
    counts: dict[tuple[str, str], int] = {}
    for n, e in zip(ev["syscall"], ev["errno"], strict=True):
        if e is not None:
            counts[(n, e)] = counts.get((n, e), 0) + 1
    return [{"syscall": n, "errno": e, "count": c}
            for (n, e), c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def io_uring(ev: Events) -> dict[str, Any]:
    """io_uring_enter calls: submitted (to_submit) vs accepted (result), min_complete."""
    sel = np.nonzero(ev["syscall"] == "io_uring_enter")[0]
    calls = [{"rel_ns": int(ev["wall_ns"][i] - ev.origin), "tid": int(ev["tid"][i]),
              "fd": ev["fd"][i], "to_submit": ev["to_submit"][i],
              "min_complete": ev["min_complete"][i], "flags": ev["flags"][i],
              "result": ev["result"][i], "errno": ev["errno"][i],
              "duration_ns": ev["duration_ns"][i]} for i in sel]
    sub = sum(c["to_submit"] or 0 for c in calls)
    acc = sum(c["result"] for c in calls if c["result"] is not None and c["result"] > 0)
    setups = int((ev["syscall"] == "io_uring_setup").sum())
    return {"enters": len(calls), "setups": setups, "to_submit": sub, "submitted": acc,
            "short_submits": sum(1 for c in calls if c["to_submit"] and c["result"] is not None
                                 and 0 <= c["result"] < c["to_submit"]),
            "calls": calls}


def epoll_lanes(ev: Events, limit: int = MAX_EPOLL_WAITS) -> dict[str, Any]:
    """A lane per epoll instance (epfd): each wait with its asked timeout, actual
    duration and events returned (the longest ``limit`` when there are more)."""
    sel = np.nonzero(np.isin(ev["syscall"], ("epoll_wait", "epoll_pwait", "epoll_pwait2"))
                     & np.array([e is not None for e in ev["epfd"]], dtype=bool))[0]
    dur = np.array([ev["duration_ns"][i] or 0 for i in sel], dtype=np.int64)
    dropped = 0
    if len(sel) > limit:
        keep = np.sort(np.argsort(-dur, kind="stable")[:limit])
        dropped = len(sel) - limit
        sel, dur = sel[keep], dur[keep]
    lanes: dict[int, list[dict[str, Any]]] = {}
    for i, d in zip(sel, dur, strict=True):
        lanes.setdefault(int(ev["epfd"][i]), []).append({
            "rel_ns": int(ev["wall_ns"][i] - ev.origin), "ts": ev["ts"][i],
            "duration_ns": None if ev["duration_ns"][i] is None else int(d),
            "timeout_ns": ev["timeout_ns"][i], "result": ev["result"][i],
            "errno": ev["errno"][i], "tid": int(ev["tid"][i]), "syscall": ev["syscall"][i],
            "maxevents": ev["maxevents"][i], "ready_fds": ev["ready_fds"][i]})
    return {"lanes": [{"epfd": k, "waits": v} for k, v in sorted(lanes.items())],
            "dropped": dropped}


def poller_page(engine: Engine, trace_id: int) -> dict[str, Any]:
    """Everything the poller page shows."""
    from ingest.views.poller_uring import ready_fds, uring_requests

    al = alignment(engine, trace_id)
    ev = load_events(engine, trace_id)
    by_name = _count_values(ev["syscall"])
    return {"trace_id": trace_id, "alignment": al, "rows": len(ev), "origin_wall_ns": ev.origin,
            "by_syscall": by_name, "waits": waits(ev), "epoll_ctl": epoll_ctl_over_time(ev),
            "open_fds": open_fds(ev), "errors": errors(ev), "io_uring": io_uring(ev),
            "epoll": epoll_lanes(ev), "ready": ready_fds(ev),
            "uring_requests": uring_requests(engine, trace_id, ev.origin)}


# --------------------------------------------------------------------------
# OS syscalls and the P handoffs they caused


def _go_syscalls(engine: Engine, trace_id: int) -> dict[str, np.ndarray[Any, Any]]:
    sc, rr = models.syscalls, models.row_ranges
    names = ("m", "start", "end", "p_lost", "goid", "stolen_ts", "p", "start_known")
    with engine.connect() as conn:
        rng = conn.execute(select(rr.c.first_id, rr.c.last_id).where(
            rr.c.trace_id == trace_id, rr.c.table_name == "syscalls")).first()
        if rng is None:
            return {n: np.zeros(0, np.int64) for n in names}
        if conn.dialect.name == "postgresql":  # the range through the chunks' key
            sc = pg_chunks.range_source(sc, rng.first_id, rng.last_id)
        stmt = select(
            sc.c.m, sc.c.start_ts, sc.c.end_ts, cast(sc.c.p_lost, Integer), sc.c.goid,
            func.coalesce(sc.c.stolen_ts, -1), sc.c.p, cast(sc.c.start_known, Integer)
        ).where(and_(sc.c.id.between(rng.first_id, rng.last_id), sc.c.trace_id == trace_id,
                     sc.c.m >= 0))
        # Millions of rows: straight through the DB-API cursor as tuples of
        # integers (SQLAlchemy's rows and a conversion per value cost 3x the
        # query); only integers are bound, so literal binds are safe.
        cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            if conn.dialect.name == "postgresql":
                cur.execute(sql, binary=True)  # integers sent as such, not as text
            else:
                cur.execute(sql)
            arr = np.array(cur.fetchall(), dtype=np.int64).reshape(-1, len(names))
        finally:
            cur.close()
    return {n: arr[:, i].copy() for i, n in enumerate(names)}


def go_syscall_of(ev: Events, go: dict[str, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Per OS call: the index of the Go syscall interval on its M that contains it
    (start <= ts and ts + duration <= end), else -1."""
    out = np.full(len(ev), -1, dtype=np.int64)
    if len(go["m"]) == 0:
        return out
    ts = ev.ints("ts", missing=-1)
    dur = ev.ints("duration_ns", missing=0)
    m = ev.ints("m", missing=-1)
    order = np.lexsort((go["start"], go["m"]))
    gm, gs, ge = go["m"][order], go["start"][order], go["end"][order]
    for mm in np.unique(m[(m >= 0) & (ts >= 0)]):
        rows = np.nonzero((m == mm) & (ts >= 0))[0]
        lo, hi = np.searchsorted(gm, mm, "left"), np.searchsorted(gm, mm, "right")
        if lo == hi:
            continue
        # Go syscalls of one M never overlap: the candidate is the last one
        # starting at or before the OS call.
        k = np.searchsorted(gs[lo:hi], ts[rows], "right") - 1
        ok = k >= 0
        kk = np.where(ok, k, 0) + lo
        inside = ok & (ts[rows] + dur[rows] <= ge[kk])
        out[rows[inside]] = order[kk[inside]]
    return out


def os_syscalls(engine: Engine, trace_id: int, limit: int = SLOWEST) -> dict[str, Any]:
    """The slowest OS calls by name and fd kind, the slowest calls, and which of them
    ran inside a Go syscall that lost its P (joined by M = tid and time)."""
    ev = load_events(engine, trace_id)
    is_call = ev["kind"] == "syscall"
    has_dur = np.array([d is not None for d in ev["duration_ns"]], dtype=bool) & is_call
    dur = ev.ints("duration_ns", missing=0)
    groups: dict[tuple[str, str], list[int]] = {}
    for i in np.nonzero(has_dur)[0].tolist():
        groups.setdefault((str(ev["syscall"][i]), str(ev["fd_kind"][i] or "–")), []).append(i)
    by_name = []
    for (n, k), idx in groups.items():
        d = dur[idx]
        by_name.append({"syscall": n, "fd_kind": k, "count": len(idx), "total_ns": int(d.sum()),
                        **_pct(d)})
    by_name.sort(key=lambda r: -int(r["total_ns"] or 0))
    joined = bool(len(ev)) and ev["ts"][0] is not None and ev["m"][0] is not None
    go = _go_syscalls(engine, trace_id) if joined else None
    owner = go_syscall_of(ev, go) if go is not None else np.full(len(ev), -1)
    slow_idx = np.nonzero(has_dur)[0]
    slow_idx = slow_idx[np.argsort(-dur[slow_idx], kind="stable")][:limit]
    slowest = [_call(ev, i, go, int(owner[i])) for i in slow_idx.tolist()]
    lost_idx = (np.nonzero(has_dur & (owner >= 0))[0] if go is not None
                else np.array([], dtype=np.int64))
    if go is not None:
        lost_idx = lost_idx[go["p_lost"][owner[lost_idx]] == 1]
    lost_idx = lost_idx[np.argsort(-dur[lost_idx], kind="stable")]
    handoffs = _count_values(ev["syscall"][lost_idx])
    return {
        "trace_id": trace_id, "joined": go is not None, "calls": int(has_dur.sum()),
        "by_name": by_name, "slowest": slowest,
        "inside_go_syscall": int((owner >= 0).sum()),
        "go_syscalls": 0 if go is None else len(go["m"]),
        "p_handoffs": {"calls": int(len(lost_idx)), "by_syscall": handoffs,
                       "go_syscalls": len({int(owner[i]) for i in lost_idx}),
                       "slowest": [_call(ev, i, go, int(owner[i]))
                                   for i in lost_idx[:limit].tolist()]},
    }


def _call(ev: Events, i: int, go: dict[str, np.ndarray[Any, Any]] | None,
          owner: int) -> dict[str, Any]:
    out = {"seq": int(ev["seq"][i]), "rel_ns": int(ev["wall_ns"][i] - ev.origin),
           "ts": ev["ts"][i], "tid": int(ev["tid"][i]), "m": ev["m"][i],
           "syscall": ev["syscall"][i], "fd": ev["fd"][i], "fd_kind": ev["fd_kind"][i],
           "fd_path": ev["fd_path"][i], "result": ev["result"][i], "errno": ev["errno"][i],
           "duration_ns": ev["duration_ns"][i], "timeout_ns": ev["timeout_ns"][i],
           "go_syscall": None}
    if go is not None and owner >= 0:
        out["go_syscall"] = {"goid": int(go["goid"][owner]), "start_ts": int(go["start"][owner]),
                             "end_ts": int(go["end"][owner]), "p": int(go["p"][owner]),
                             "p_lost": bool(go["p_lost"][owner]),
                             "stolen_ts": (None if go["stolen_ts"][owner] < 0
                                           else int(go["stolen_ts"][owner]))}
    return out


# --------------------------------------------------------------------------
# the timeline's OS marks


def poller_marks(engine: Engine, trace_id: int, t1: int, t2: int,
                 max_marks: int = MAX_MARKS) -> dict[str, Any]:
    """OS events on M lanes in [t1, t2) (trace ns): ts, duration, m, syscall, fd,
    result. With more than ``max_marks``, calls of one M in one time bucket of
    (t2 - t1) / max_marks merge into one mark (count, syscalls, summed duration)."""
    pe = poller_models.poller_events
    with engine.connect() as conn:
        rows = conn.execute(select(pe.c.ts, pe.c.duration_ns, pe.c.m, pe.c.syscall, pe.c.fd,
                                   pe.c.result, pe.c.errno).where(and_(
            pe.c.trace_id == trace_id, pe.c.m.is_not(None), pe.c.ts.is_not(None),
            pe.c.ts < t2, pe.c.ts >= t1 - _longest(engine, trace_id))).order_by(pe.c.seq)).all()
    marks = [{"ts": int(r.ts), "duration_ns": r.duration_ns, "m": int(r.m), "syscall": r.syscall,
              "fd": r.fd, "result": r.result, "errno": r.errno, "count": 1}
             for r in rows if r.ts + (r.duration_ns or 0) >= t1]
    if len(marks) <= max_marks:
        return {"marks": marks, "merged": False, "total": len(marks)}
    bucket = max(1, (t2 - t1) // max(1, max_marks // 4))
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for mk in marks:
        key = (mk["m"], (mk["ts"] - t1) // bucket)
        cur = merged.get(key)
        if cur is None:
            merged[key] = {**mk, "syscalls": {mk["syscall"]: 1}}
            continue
        cur["count"] += 1
        cur["duration_ns"] = (cur["duration_ns"] or 0) + (mk["duration_ns"] or 0)
        cur["syscalls"][mk["syscall"]] = cur["syscalls"].get(mk["syscall"], 0) + 1
    out = []
    for mk in merged.values():
        if mk["count"] > 1:
            mk["syscall"] = ", ".join(f"{k}×{v}" for k, v in
                                      sorted(mk["syscalls"].items(), key=lambda kv: -kv[1]))
            mk["fd"] = mk["result"] = mk["errno"] = None
        del mk["syscalls"]
        out.append(mk)
    out.sort(key=lambda mk: (mk["ts"], mk["m"]))
    return {"marks": out, "merged": True, "total": len(marks), "bucket_ns": bucket}


def _longest(engine: Engine, trace_id: int) -> int:
    """The longest call's duration: calls that began before t1 may still cover it."""
    from sqlalchemy import func

    pe = poller_models.poller_events
    with engine.connect() as conn:
        v = conn.execute(select(func.max(pe.c.duration_ns))
                         .where(pe.c.trace_id == trace_id)).scalar()
    return int(v or 0)


def timeline_marks(engine: Engine, trace_id: int, t1: int, t2: int,
                   max_marks: int = MAX_MARKS) -> dict[str, Any] | None:
    """poller_marks for the timeline's M mode; None when the trace has no recording."""
    if not has_recording(engine, trace_id):
        return None
    return poller_marks(engine, trace_id, t1, t2, max_marks)
