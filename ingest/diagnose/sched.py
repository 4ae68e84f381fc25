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
        from ingest.views.latency import CAUSES, COLUMNS, latency_samples

        s = latency_samples(ctx.frames)
        # The latencies whole, the other columns only of the samples shown
        # (every column whole was 1.4 GB on the 1 GB trace).
        lat = s.read(("latency",))["latency"]
        n = len(lat)
        if n == 0:
            return []
        p50, p99, mx = nearest_ranks(lat, (0.5, 0.99))
        by_p99 = n >= cfg["min_samples"] and p99 >= cfg["p99_ns"]
        by_max = mx >= cfg["max_ns"]
        if not (by_p99 or by_max):
            return []
        over = lat >= min(cfg["p99_ns"], p99) if by_p99 else lat >= cfg["max_ns"]
        order = top_k(lat, lambda i: s.read(("running_ts",), i)["running_ts"])
        asc = np.argsort(order, kind="stable")
        got = s.read(COLUMNS, order[asc])  # read in ascending order
        shown = {k: np.empty_like(v) for k, v in got.items()}
        for k, v in got.items():
            shown[k][asc] = v
        ranges = [Evidence(
            label=(f"G{int(shown['goid'][j])} runnable {ms(int(lat[i]))} "
                   f"({CAUSES[int(shown['cause'][j])]}), "
                   f"then ran on P{int(shown['p'][j])}/M{int(shown['m'][j])}"),
            t1=int(shown["runnable_ts"][j]), t2=int(shown["running_ts"][j]),
            g=int(shown["goid"][j]), m=int(shown["m"][j]), p=int(shown["p"][j]),
            duration_ns=int(lat[i]),
            link=timeline_link(ctx.trace_id, "g", int(shown["runnable_ts"][j]),
                               int(shown["running_ts"][j]), g=int(shown["goid"][j])))
            for j, i in enumerate(order.tolist())]
        # Who waited: goroutines by their time in the slow samples.
        over_at = np.flatnonzero(over)
        slow = s.read(("goid", "cause"), over_at)
        g_over, l_over = slow["goid"], lat[over_at]
        uniq, inv = np.unique(g_over, return_inverse=True)
        tot = np.zeros(len(uniq), np.int64)
        np.add.at(tot, inv.reshape(-1), l_over)
        cnt = np.bincount(inv.reshape(-1), minlength=len(uniq))
        best = np.lexsort((uniq, -tot))[:MAX_EVIDENCE]
        who = [GoroutineRef(goid=int(uniq[i]), ns=int(tot[i]),
                            label=f"G{int(uniq[i])}: {int(cnt[i])} waits, {ms(int(tot[i]))}",
                            link=goroutine_link(ctx.trace_id, int(uniq[i]))) for i in best]
        cause_n = np.bincount(slow["cause"], minlength=len(CAUSES))
        causes = {CAUSES[c]: int(k) for c, k in enumerate(cause_n.tolist()) if k}
        # The stack each slow wait began with (the Runnable transition's stack).
        rows = []
        for j in range(len(order)):
            sl = ctx.frames.goroutines.rows(int(shown["goid"][j]))
            st = ctx.frames.intervals["start_ts"][sl]
            at = int(np.searchsorted(st, shown["runnable_ts"][j], side="left"))
            rows.append(sl.start + at)
        stk = ctx.frames.intervals["stack_id"][np.array(rows, np.int64)] if rows else \
            np.zeros(0, np.int64)
        keep = stk > 0
        measures: dict[str, Any] = {"samples": n, "p50_ns": p50, "p99_ns": p99, "max_ns": mx,
                    "over_threshold": int(over.sum()), "over_ns": int(lat[over].sum()),
                    "goroutines_waiting": int(len(uniq)), "causes": causes,
                    "worst_goid": int(shown["goid"][0]), "gomaxprocs": ctx.gomaxprocs}
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
