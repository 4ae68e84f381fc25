"""Lock contention: time goroutines spent blocked in sync (mutexes, RWMutexes,
semaphores), by blocking stack. WaitGroup waits are coordination, not
contention: stacks through an ignored function are left out."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ingest.diagnose.base import (
    MAX_EVIDENCE,
    PART_ROWS,
    Context,
    Evidence,
    Finding,
    GoroutineRef,
    goroutine_link,
    ms,
    severity_for,
    timeline_link,
    top_k,
)


class LockContention:
    id: ClassVar[str] = "sync.contention"
    family: ClassVar[str] = "sync"
    title: ClassVar[str] = "Lock contention: goroutines blocked in sync"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    doc: ClassVar[str] = ("Goroutine Waiting intervals whose reason is one of reasons, minus "
                          "stacks through an ignore_functions function: raised when there "
                          "are at least min_blocks and the blocked goroutine-time divided "
                          "by the trace's duration reaches min_share.")
    defaults: ClassVar[dict[str, Any]] = {
        "reasons": ["sync"], "ignore_functions": ["sync.(*WaitGroup).Wait"],
        "min_blocks": 20, "min_share": 0.1, "critical_factor": 5.0,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        iv = ctx.frames.intervals
        codes = ctx.kind_codes("Waiting", tuple(cfg["reasons"]))
        n = ctx.goroutine_rows
        # The kinds a part at a time, the rest at the rows found: the whole
        # columns' pages were 1.8 GB on the 1 GB trace.
        idx = np.concatenate([np.zeros(0, np.int64)] + [
            np.flatnonzero(np.isin(iv.part(("kind",), a, min(n, a + PART_ROWS))["kind"], codes))
            + a for a in range(0, n, PART_ROWS)])
        if len(idx) < cfg["min_blocks"]:
            return []
        stk = iv.take("stack_id", idx)
        uniq = np.unique(stk)
        frames = ctx.stack_frames(uniq.tolist())
        ignore = set(cfg["ignore_functions"])
        bad = [int(s) for s in uniq.tolist()
               if any(fr["function"] in ignore for fr in frames.get(int(s), []))]
        kept = ~np.isin(stk, bad)
        idx, stk = idx[kept], stk[kept]
        if len(idx) < cfg["min_blocks"]:
            return []
        start, end = iv.take("start_ts", idx), iv.take("end_ts", idx)
        dur = end - start
        total = int(dur.sum())
        share = total / ctx.span_ns
        if share < cfg["min_share"]:
            return []
        goid = ctx.goroutine_of_rows(idx)
        stacks = ctx.stack_refs(stk, dur, label="blocked at")
        order = top_k(dur, start)
        ranges = [Evidence(label=f"G{int(goid[i])} blocked {ms(int(dur[i]))} in sync",
                           t1=int(start[i]), t2=int(end[i]), g=int(goid[i]),
                           duration_ns=int(dur[i]),
                           link=timeline_link(ctx.trace_id, "g", int(start[i]), int(end[i]),
                                              g=int(goid[i])))
                  for i in order.tolist()]
        ug, inv = np.unique(goid, return_inverse=True)
        tot = np.zeros(len(ug), np.int64)
        np.add.at(tot, inv.reshape(-1), dur)
        best = np.lexsort((ug, -tot))[:MAX_EVIDENCE]
        who = [GoroutineRef(goid=int(ug[i]), ns=int(tot[i]),
                            label=f"G{int(ug[i])} blocked {ms(int(tot[i]))} in sync",
                            link=goroutine_link(ctx.trace_id, int(ug[i]))) for i in best]
        top = stacks[0]
        top_fn = next((fr["function"] for fr in top.frames
                       if not fr["function"].startswith(("sync.", "internal/sync.", "runtime."))),
                      top.frames[0]["function"] if top.frames else f"stack {top.stack_id}")
        measures = {"blocks": int(len(idx)), "blocked_ns": total, "share": round(share, 4),
                    "goroutines": int(len(ug)), "stacks": int(len(np.unique(stk))),
                    "top_stack_id": top.stack_id, "top_stack_ns": top.total_ns,
                    "top_stack_count": top.count}
        summary = (f"{len(idx)} sync blocks by {len(ug)} goroutines took {ms(total)} "
                   f"(on average {share:.2f} goroutines blocked throughout the trace); the top "
                   f"stack ({top_fn}) accounts for {ms(top.total_ns)} in {top.count} blocks")
        first = ranges[0]
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(share, cfg["min_share"], cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=timeline_link(ctx.trace_id, "g", first.t1, first.t2, g=first.g),
                        ranges=ranges, goroutines=who, stacks=stacks)]
