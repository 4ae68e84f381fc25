"""Scheduler latency: Runnable-to-Running delays above a threshold, and
which goroutines waited. Samples come from ingest.views.latency."""

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


class SchedLatency:
    id: ClassVar[str] = "sched.latency"
    family: ClassVar[str] = "scheduler"
    title: ClassVar[str] = "Goroutines waited long for a P (scheduler latency)"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    doc: ClassVar[str] = ("Runnable-to-Running delays (ingest.views.latency samples); raised "
                          "when, over at least min_samples samples, the nearest-rank p99 "
                          "reaches p99_ns, or the maximum reaches max_ns.")
    defaults: ClassVar[dict[str, Any]] = {
        "p99_ns": 5_000_000, "max_ns": 50_000_000, "min_samples": 20, "critical_factor": 4.0,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        from ingest.views.latency import CAUSES, latency_samples

        s = latency_samples(ctx.frames)
        lat = s.latency
        n = len(lat)
        if n == 0:
            return []
        p50, p99, mx = nearest_ranks(lat, (0.5, 0.99))
        by_p99 = n >= cfg["min_samples"] and p99 >= cfg["p99_ns"]
        by_max = mx >= cfg["max_ns"]
        if not (by_p99 or by_max):
            return []
        over = lat >= min(cfg["p99_ns"], p99) if by_p99 else lat >= cfg["max_ns"]
        order = top_k(lat, np.asarray(s.running_ts))
        ranges = [Evidence(
            label=(f"G{int(s.goid[i])} runnable {ms(int(lat[i]))} ({CAUSES[int(s.cause[i])]}), "
                   f"then ran on P{int(s.p[i])}/M{int(s.m[i])}"),
            t1=int(s.runnable_ts[i]), t2=int(s.running_ts[i]), g=int(s.goid[i]),
            m=int(s.m[i]), p=int(s.p[i]), duration_ns=int(lat[i]),
            link=timeline_link(ctx.trace_id, "g", int(s.runnable_ts[i]), int(s.running_ts[i]),
                               g=int(s.goid[i])))
            for i in order.tolist()]
        # Who waited: goroutines by their time in the slow samples.
        g_over, l_over = s.goid[over], lat[over]
        uniq, inv = np.unique(g_over, return_inverse=True)
        tot = np.zeros(len(uniq), np.int64)
        np.add.at(tot, inv.reshape(-1), l_over)
        cnt = np.bincount(inv.reshape(-1), minlength=len(uniq))
        best = np.lexsort((uniq, -tot))[:MAX_EVIDENCE]
        who = [GoroutineRef(goid=int(uniq[i]), ns=int(tot[i]),
                            label=f"G{int(uniq[i])}: {int(cnt[i])} waits, {ms(int(tot[i]))}",
                            link=goroutine_link(ctx.trace_id, int(uniq[i]))) for i in best]
        cause_n = np.bincount(s.cause[over], minlength=len(CAUSES))
        causes = {CAUSES[c]: int(k) for c, k in enumerate(cause_n.tolist()) if k}
        # The stack each slow wait began with (the Runnable transition's stack).
        rows = []
        for i in order.tolist():
            sl = ctx.frames.goroutines.rows(int(s.goid[i]))
            st = ctx.frames.intervals["start_ts"][sl]
            j = int(np.searchsorted(st, s.runnable_ts[i], side="left"))
            rows.append(sl.start + j)
        stk = ctx.frames.intervals["stack_id"][np.array(rows, np.int64)] if rows else \
            np.zeros(0, np.int64)
        keep = stk > 0
        measures: dict[str, Any] = {"samples": n, "p50_ns": p50, "p99_ns": p99, "max_ns": mx,
                    "over_threshold": int(over.sum()), "over_ns": int(lat[over].sum()),
                    "goroutines_waiting": int(len(uniq)), "causes": causes,
                    "worst_goid": int(s.goid[order[0]]), "gomaxprocs": ctx.gomaxprocs}
        what = (f"p99 {ms(p99)} >= {ms(cfg['p99_ns'])}" if by_p99
                else f"max {ms(mx)} >= {ms(cfg['max_ns'])}")
        summary = (f"Runnable-to-Running latency {what} over {n} waits (p50 {ms(p50)}, max "
                   f"{ms(mx)}, worst G{measures['worst_goid']}); {measures['over_threshold']} "
                   f"waits by {len(uniq)} goroutines took {ms(measures['over_ns'])} in total")
        first = ranges[0]
        sev = severity_for(p99, cfg["p99_ns"], cfg["critical_factor"]) if by_p99 else "warning"
        return [Finding(
            rule=self.id, family=self.family, title=self.title, severity=sev,
            summary=summary, measures=measures, thresholds=dict(cfg),
            link=timeline_link(ctx.trace_id, "g", first.t1, first.t2, g=first.g),
            ranges=ranges, goroutines=who,
            threads=sorted({r.m for r in ranges if r.m is not None and r.m >= 0}),
            stacks=ctx.stack_refs(stk[keep], lat[order][keep],
                                  label="where the goroutine became runnable"))]
