"""Netpoller rules from the execution trace: network waits with a long tail,
and goroutines piling up parked in the netpoller on connections never closed
(a descriptor leak). Waits come from ingest.views.syscalls.network_waits."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ingest.diagnose.base import (
    MAX_EVIDENCE,
    Context,
    Evidence,
    Finding,
    GoroutineRef,
    goroutine_link,
    ms,
    nearest_ranks,
    severity_for,
    timeline_link,
    top_k,
)


class NetpollTail:
    id: ClassVar[str] = "netpoll.long-tail"
    family: ClassVar[str] = "netpoll"
    title: ClassVar[str] = "Network waits with a long tail"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    reads: ClassVar[frozenset[str]] = frozenset({"network_waits"})
    doc: ClassVar[str] = ("Complete network (netpoller) waits: raised when there are at "
                          "least min_waits, the nearest-rank p99 reaches p99_ns and is at "
                          "least tail_ratio times the p50.")
    defaults: ClassVar[dict[str, Any]] = {
        "min_waits": 20, "p99_ns": 10_000_000, "tail_ratio": 20.0, "critical_factor": 10.0,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        w = ctx.network_waits
        ok = w["start_known"] & ~w["unfinished"]
        start, end, goid, stk = w["start"][ok], w["end"][ok], w["goid"][ok], w["stack_id"][ok]
        dur = end - start
        n = len(dur)
        if n < cfg["min_waits"]:
            return []
        p50, p99, mx = nearest_ranks(dur, (0.5, 0.99))
        if p99 < cfg["p99_ns"] or p99 < cfg["tail_ratio"] * max(p50, 1):
            return []
        tail = dur >= p99
        order = top_k(dur, start)
        ranges = [Evidence(label=f"G{int(goid[i])} parked in the netpoller {ms(int(dur[i]))}",
                           t1=int(start[i]), t2=int(end[i]), g=int(goid[i]),
                           duration_ns=int(dur[i]),
                           link=timeline_link(ctx.trace_id, "g", int(start[i]), int(end[i]),
                                              g=int(goid[i])))
                  for i in order.tolist()]
        who = [GoroutineRef(goid=r.g or 0, ns=r.duration_ns, label=r.label,
                            link=goroutine_link(ctx.trace_id, r.g or 0)) for r in ranges]
        measures = {"waits": n, "p50_ns": p50, "p99_ns": p99, "max_ns": mx,
                    "tail_ratio": round(p99 / max(p50, 1), 1), "tail_waits": int(tail.sum()),
                    "tail_ns": int(dur[tail].sum())}
        summary = (f"{n} network waits: p99 {ms(p99)} is {measures['tail_ratio']}x the p50 "
                   f"{ms(p50)} (max {ms(mx)}); the {measures['tail_waits']} waits at or above "
                   f"p99 took {ms(measures['tail_ns'])}")
        first = ranges[0]
        sev = "warning" if p99 >= cfg["critical_factor"] * cfg["p99_ns"] else "info"
        return [Finding(rule=self.id, family=self.family, title=self.title, severity=sev,
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=timeline_link(ctx.trace_id, "g", first.t1, first.t2, g=first.g),
                        ranges=ranges, goroutines=who,
                        stacks=ctx.stack_refs(stk[tail], dur[tail], label="network wait"))]


class ParkedLeak:
    id: ClassVar[str] = "netpoll.parked-leak"
    family: ClassVar[str] = "netpoll"
    title: ClassVar[str] = "Goroutines pile up parked in the netpoller (connections never closed)"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    reads: ClassVar[frozenset[str]] = frozenset({"network_waits"})
    doc: ClassVar[str] = ("Network waits begun during the trace and never ended: raised when "
                          "at least min_parked goroutines are still parked at the end, and "
                          "that is at least growth times the number parked when the trace "
                          "began (the count climbed during the trace).")
    defaults: ClassVar[dict[str, Any]] = {"min_parked": 20, "growth": 2.0,
                                          "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        w = ctx.network_waits
        left = w["unfinished"] & w["start_known"]
        n_end = int(left.sum())
        if n_end < cfg["min_parked"]:
            return []
        def parked_at(t: int) -> int:
            return int(((w["start"] <= t) & (w["end"] > t)).sum())

        parked_start = parked_at(ctx.frames.first_ts)
        parked_mid = parked_at(ctx.frames.first_ts + ctx.span_ns // 2)
        if n_end < cfg["growth"] * max(parked_start, 1):
            return []
        start, goid, stk = w["start"][left], w["goid"][left], w["stack_id"][left]
        span = ctx.frames.last_ts - start
        t_first, t_last = int(start.min()), int(start.max())
        order = np.lexsort((goid, start))[:MAX_EVIDENCE]
        end_ts = ctx.frames.last_ts
        who = [GoroutineRef(goid=int(goid[i]), ns=int(span[i]),
                            label=f"G{int(goid[i])} parked since "
                                  f"{ms(int(start[i]) - ctx.frames.first_ts)} "
                                  f"into the trace, {ms(int(span[i]))} until its end",
                            link=goroutine_link(ctx.trace_id, int(goid[i])))
               for i in order.tolist()]
        ranges = [Evidence(label=f"{n_end} network waits begun here never ended",
                           t1=t_first, t2=end_ts, duration_ns=end_ts - t_first,
                           link=timeline_link(ctx.trace_id, "g", t_first, end_ts))]
        ranges += [Evidence(label=f"G{int(goid[i])} parks and never wakes", t1=int(start[i]),
                            t2=end_ts, g=int(goid[i]), duration_ns=int(span[i]),
                            link=timeline_link(ctx.trace_id, "g", int(start[i]), end_ts,
                                               g=int(goid[i])))
                   for i in order[:MAX_EVIDENCE - 1].tolist()]
        stacks = ctx.stack_refs(stk, np.ones(len(stk), np.int64), label="parked at")
        rate = n_end / max(1e-9, (t_last - t_first) / 1e9) if t_last > t_first else None
        measures = {"parked_at_end": n_end, "parked_at_start": parked_start,
                    "parked_at_mid": parked_mid,
                    "first_parked_ts": t_first, "last_parked_ts": t_last,
                    "per_second": None if rate is None else round(rate, 1),
                    "stacks": len(np.unique(stk))}
        summary = (f"{n_end} goroutines parked in the netpoller during the trace and never "
                   f"woke (parked: {parked_start} at its start, {parked_mid} at mid-trace), "
                   f"across {measures['stacks']} stacks: connections opened and never closed"
                   + (f" (~{measures['per_second']}/s)" if rate is not None else ""))
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(n_end, cfg["min_parked"], cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges, goroutines=who,
                        stacks=stacks)]
