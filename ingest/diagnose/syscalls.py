"""Syscall rules: blocking syscalls that hold a thread while runnable
goroutines wait for a P, and Ps handed off late after a syscall began.

"Runnable goroutine time" inside a window is the sum over goroutine Runnable
intervals of their overlap with it (goroutine-ns waiting for a P), computed
exactly by :class:`ingest.diagnose.base.StepCount`; overlapping windows are
merged first, so no waiting is counted twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ingest.derive.frame_layout import parts
from ingest.diagnose.base import (
    I64,
    MAX_EVIDENCE,
    Context,
    Evidence,
    Finding,
    GoroutineRef,
    StepCount,
    goroutine_link,
    ms,
    severity_for,
    timeline_link,
)

Bools = npt.NDArray[np.bool_]


def merged_integral(ctx: Context, a: I64, b: I64) -> int:
    """Runnable goroutine-ns inside the union of the windows [a, b)."""
    if len(a) == 0:
        return 0
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    reach = np.maximum.accumulate(b)
    new = np.r_[True, a[1:] > reach[:-1]]
    starts = a[new]
    ends = np.maximum.reduceat(b, np.flatnonzero(new))
    return int(ctx.runnable.integral(starts, ends).sum())


def waiters(ctx: Context, windows: list[tuple[int, int]], top: int = MAX_EVIDENCE
            ) -> tuple[list[GoroutineRef], int]:
    """Goroutines that were Runnable inside the windows, by time waiting there."""
    rs = ctx.runnable
    acc: dict[int, int] = {}
    for a, b in windows:
        idx = rs.overlapping(a, b)
        if not len(idx):
            continue
        ov = np.minimum(rs.end[idx], b) - np.maximum(rs.start[idx], a)
        for g, v in zip(ctx.goroutine_of_rows(ctx.runnable_rows(idx)).tolist(), ov.tolist(),
                        strict=True):
            acc[g] = acc.get(g, 0) + int(v)
    best = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ([GoroutineRef(goid=g, label=f"G{g} runnable {ms(v)} while the P was held",
                          link=goroutine_link(ctx.trace_id, g), ns=v) for g, v in best],
            len(acc))


def _gmp(ctx: Context) -> str:
    return f"GOMAXPROCS={ctx.gomaxprocs}" if ctx.gomaxprocs is not None else "GOMAXPROCS unknown"


class BlockingSyscall:
    id: ClassVar[str] = "syscall.blocking"
    family: ClassVar[str] = "syscall"
    title: ClassVar[str] = "Blocking syscalls held threads while goroutines waited for a P"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    #: The shared facts of the Context it reads (the runner drops them after their last reader).
    reads: ClassVar[frozenset[str]] = frozenset({"runnable"})
    doc: ClassVar[str] = ("Syscalls lasting at least long_syscall_ns during which goroutines "
                          "were Runnable while the syscall still held its P (before another "
                          "M took it); raised when that runnable time, over the union of "
                          "those windows, reaches min_waiting_ns.")
    defaults: ClassVar[dict[str, Any]] = {
        "long_syscall_ns": 10_000_000, "min_waiting_ns": 5_000_000, "critical_factor": 10.0,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        long_syscall = cfg["long_syscall_ns"]

        def is_long(c: dict[str, I64], held_end: I64) -> Bools:
            return np.asarray((c["duration_ns"] >= long_syscall) & (held_end > c["start_ts"]))

        long = held_rows(ctx, is_long)
        if not len(long):
            return []
        sc = ctx.frames.syscalls
        # The columns at the long syscalls only: ``long`` is their index from here.
        c = {n: sc.take(n, long) for n in ("start_ts", "end_ts", "goid", "m", "p", "stack_id")}
        start, end = c["start_ts"], c["end_ts"]
        dur = end - start
        held_end = p_held_until(ctx, long)
        waited = ctx.runnable.integral(start, held_end)
        hit = np.flatnonzero(waited > 0)
        w_hit = waited[hit]
        if not len(hit):
            return []
        total_wait = merged_integral(ctx, start[hit], held_end[hit])
        if total_wait < cfg["min_waiting_ns"]:
            return []
        held = held_end - start
        order = np.lexsort((start[hit], -w_hit))[:MAX_EVIDENCE]
        goid, m, p = c["goid"], c["m"], c["p"]
        ranges = [Evidence(
            label=(f"syscall of G{int(goid[i])} on M{int(m[i])}: {ms(int(dur[i]))}, P{int(p[i])} "
                   f"held {ms(int(held[i]))}, {ms(int(w))} runnable goroutine time meanwhile"),
            t1=int(start[i]), t2=int(end[i]), g=int(goid[i]), m=int(m[i]), p=int(p[i]),
            duration_ns=int(dur[i]),
            link=timeline_link(ctx.trace_id, "m", int(start[i]), int(end[i]), g=int(goid[i]),
                               m=int(m[i])))
            for i, w in zip(hit[order].tolist(), w_hit[order].tolist(), strict=True)]
        who, n_who = waiters(ctx, [(int(start[i]), int(held_end[i])) for i in hit[order]])
        longest = int(hit[np.lexsort((start[hit], -dur[hit]))[0]])
        # Threads blocked at once in these syscalls (each holds its own M).
        at_once = StepCount(start[hit], end[hit], rows=hit).count
        measures = {
            "syscalls": int(len(hit)), "syscall_ns": int(dur[hit].sum()),
            "max_threads_blocked": int(at_once.max()) if len(at_once) else 0,
            "p_held_ns": int(held[hit].sum()),
            "longest_ns": int(dur[longest]), "longest_goid": int(goid[longest]),
            "longest_m": int(m[longest]), "runnable_waiting_ns": total_wait,
            "goroutines_waiting": n_who, "gomaxprocs": ctx.gomaxprocs,
        }
        summary = (f"{len(hit)} syscalls of >= {ms(cfg['long_syscall_ns'])} "
                   f"({ms(measures['syscall_ns'])} in total, longest {ms(measures['longest_ns'])} "
                   f"by G{measures['longest_goid']} on M{measures['longest_m']}; up to "
                   f"{measures['max_threads_blocked']} threads blocked at once) held their P "
                   f"for {ms(measures['p_held_ns'])} while goroutines "
                   f"spent {ms(total_wait)} Runnable waiting for a P ({_gmp(ctx)})")
        first = ranges[0]
        return [Finding(
            rule=self.id, family=self.family, title=self.title,
            severity=severity_for(total_wait, cfg["min_waiting_ns"], cfg["critical_factor"]),
            summary=summary, measures=measures, thresholds=dict(cfg),
            link=timeline_link(ctx.trace_id, "m", first.t1, first.t2, m=first.m),
            ranges=ranges, goroutines=who,
            threads=sorted({int(x) for x in m[hit].tolist() if x >= 0}),
            stacks=ctx.stack_refs(c["stack_id"][hit], dur[hit], label="syscall stack"))]


#: The syscalls' columns that say how long each held its P.
HELD_COLUMNS = ("start_ts", "end_ts", "duration_ns", "p_lost", "stolen_ts", "start_known")


def held_until(c: dict[str, I64], v1: bool) -> I64:
    """When each syscall's P left its blocked thread: the time another M took
    it (stolen_ts), the syscall's end when it kept it, or its start when it
    was lost at an unknown time (nothing is blamed on it then). Likewise its
    start for a syscall already running when a pre-1.22 trace (``v1``)
    began: such a trace does not say whether it held a P (Go 1.22+ traces
    record the P's status at the start). ``c``: :data:`HELD_COLUMNS`."""
    lost = c["p_lost"] == 1
    until = np.where(lost, c["stolen_ts"], c["end_ts"])
    unknown = lost & (c["stolen_ts"] < 0)
    if v1:
        unknown = unknown | (c["start_known"] == 0)
    return np.where(unknown, c["start_ts"], until)


def p_held_until(ctx: Context, rows: I64) -> I64:
    """:func:`held_until` of the syscalls ``rows``."""
    sc = ctx.frames.syscalls
    return held_until({n: sc.take(n, rows) for n in HELD_COLUMNS if n != "duration_ns"},
                      ctx.family == "v1")


def held_rows(ctx: Context, pick: Callable[[dict[str, I64], I64], Bools]) -> I64:
    """The syscalls for which ``pick(columns, held_until)`` holds, their
    columns (:data:`HELD_COLUMNS`) read a part at a time: the whole columns
    and their temporaries were a GB on the 1 GB trace."""
    v1 = ctx.family == "v1"
    found = [np.flatnonzero(pick(c, held_until(c, v1))) + a
             for a, c in parts(ctx.frames.syscalls, HELD_COLUMNS)]
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)


class SlowHandoff:
    id: ClassVar[str] = "syscall.slow-handoff"
    family: ClassVar[str] = "syscall"
    title: ClassVar[str] = "Ps handed off late after syscalls began"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    #: The shared facts of the Context it reads (the runner drops them after their last reader).
    reads: ClassVar[frozenset[str]] = frozenset({"runnable"})
    doc: ClassVar[str] = ("For each syscall, how long its P stayed with the blocked thread "
                          "(until another M took it, or the whole syscall when it kept it) "
                          "while goroutines were Runnable; raised when at least min_syscalls "
                          "held their P for handoff_ns or more with at least "
                          "min_waiting_each_ns of runnable time, and the total runnable "
                          "time reaches min_waiting_ns.")
    defaults: ClassVar[dict[str, Any]] = {
        "handoff_ns": 1_000_000, "min_waiting_each_ns": 100_000, "min_syscalls": 3,
        "min_waiting_ns": 5_000_000, "critical_factor": 10.0,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        handoff = cfg["handoff_ns"]

        def is_slow(c: dict[str, I64], held_end: I64) -> Bools:
            return np.asarray((c["start_known"] == 1) & (held_end - c["start_ts"] >= handoff))

        cand = held_rows(ctx, is_slow)
        if not len(cand):
            return []
        sc = ctx.frames.syscalls
        # The columns at the candidates only: ``cand`` is their index from here.
        start = sc.take("start_ts", cand)
        held_end = p_held_until(ctx, cand)
        waited = ctx.runnable.integral(start, held_end)
        hit = np.flatnonzero(waited >= cfg["min_waiting_each_ns"])
        if len(hit) < cfg["min_syscalls"]:
            return []
        total_wait = merged_integral(ctx, start[hit], held_end[hit])
        if total_wait < cfg["min_waiting_ns"]:
            return []
        held = held_end - start
        h = np.sort(held[hit])
        c = {n: sc.take(n, cand[hit]) for n in ("goid", "m", "p", "stack_id", "stolen_by_m")}
        lost = sc.take("p_lost", cand[hit]) == 1
        start, held_end, held = start[hit], held_end[hit], held[hit]
        goid, m, p = c["goid"], c["m"], c["p"]
        order = np.lexsort((start, -held))[:MAX_EVIDENCE]
        ranges = []
        for i in order.tolist():
            how = (f"taken by M{int(c['stolen_by_m'][i])}" if lost[i] and c["stolen_by_m"][i] >= 0
                   else "handed off" if lost[i] else "kept for the whole syscall")
            ranges.append(Evidence(
                label=(f"P{int(p[i])} held {ms(int(held[i]))} by the syscall of G{int(goid[i])} "
                       f"on M{int(m[i])} ({how})"),
                t1=int(start[i]), t2=int(held_end[i]), g=int(goid[i]), m=int(m[i]), p=int(p[i]),
                duration_ns=int(held[i]),
                link=timeline_link(ctx.trace_id, "p", int(start[i]), int(held_end[i]),
                                   p=int(p[i]))))
        who, n_who = waiters(ctx, [(r.t1, r.t2) for r in ranges])
        from ingest.views.histo import nearest_rank

        measures = {
            "syscalls": int(len(hit)), "handoff_p50_ns": nearest_rank(h, 0.5),
            "handoff_p99_ns": nearest_rank(h, 0.99), "handoff_max_ns": int(h[-1]),
            "kept_p": int((~lost).sum()), "runnable_waiting_ns": total_wait,
            "goroutines_waiting": n_who, "gomaxprocs": ctx.gomaxprocs,
        }
        summary = (f"{len(hit)} syscalls held their P for >= {ms(cfg['handoff_ns'])} while "
                   f"goroutines were Runnable (held p50 {ms(measures['handoff_p50_ns'])}, "
                   f"max {ms(measures['handoff_max_ns'])}; {measures['kept_p']} kept it to the "
                   f"end); {n_who} goroutines waited {ms(total_wait)} in total ({_gmp(ctx)})")
        first = ranges[0]
        return [Finding(
            rule=self.id, family=self.family, title=self.title,
            severity=severity_for(total_wait, cfg["min_waiting_ns"], cfg["critical_factor"]),
            summary=summary, measures=measures, thresholds=dict(cfg),
            link=timeline_link(ctx.trace_id, "p", first.t1, first.t2, p=first.p),
            ranges=ranges, goroutines=who,
            threads=sorted({int(x) for x in m.tolist() if x >= 0}),
            stacks=ctx.stack_refs(c["stack_id"], held, label="syscall stack"))]
