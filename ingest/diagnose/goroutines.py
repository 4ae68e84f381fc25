"""Goroutine leak: goroutines created during the trace that never ended and
sit blocked at its end, grouped by the stack they blocked on."""

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
    severity_for,
    timeline_link,
)
from ingest.store import models
from ingest.store.coded_models import rows_by_key


class GoroutineLeak:
    id: ClassVar[str] = "goroutine.leak"
    family: ClassVar[str] = "goroutine"
    title: ClassVar[str] = "Goroutines created and never ending (leak)"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    doc: ClassVar[str] = ("Goroutines created during the trace whose last state is Waiting, "
                          "grouped by (wait reason, blocking stack); raised for each group "
                          "of at least min_goroutines.")
    defaults: ClassVar[dict[str, Any]] = {"min_goroutines": 20, "critical_factor": 10.0,
                                          "max_findings": 5}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        f = ctx.frames
        lanes = f.goroutines
        if not len(lanes.ids):
            return []
        first_rows, last_rows = lanes.off[:-1], lanes.off[1:] - 1
        top = max(f.kinds, default=0) + 1
        from_notexist = np.zeros(top, dtype=bool)
        for code, k in f.kinds.items():
            from_notexist[code] = k.from_state == "NotExist"
        created = from_notexist[f.intervals["kind"][first_rows]]
        blocked = f.state[last_rows] == models.STATE_CODE["Waiting"]
        idx = np.flatnonzero(created & blocked)
        if not len(idx):
            return []
        rows = last_rows[idx]
        stk = f.intervals["stack_id"][rows]
        kind = f.intervals["kind"][rows]
        key = stk.astype(np.int64) * 4096 + kind  # kinds are small codes; stack ids int32 in frames
        groups, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        cnt = np.bincount(inv, minlength=len(groups))
        big = [int(gi) for gi in np.lexsort((groups, -cnt)) if cnt[gi] >= cfg["min_goroutines"]]
        out: list[Finding] = []
        if not big:
            return out
        members = np.flatnonzero(np.isin(inv, big[:int(cfg["max_findings"])]))
        names = _start_functions(ctx, lanes.ids[idx][members])
        for gi in big[:int(cfg["max_findings"])]:
            mem = np.flatnonzero(inv == gi)
            goids = lanes.ids[idx][mem]
            since = f.intervals["start_ts"][rows][mem]
            born = f.intervals["start_ts"][first_rows[idx]][mem]
            sid = int(stk[mem[0]])
            reason = f.kinds[int(kind[mem[0]])].reason or "(no reason)"
            starts = sorted({names.get(int(g), "?") for g in goids.tolist()})
            order = np.lexsort((goids, born))[:MAX_EVIDENCE]
            t1, t2 = int(born.min()), f.last_ts
            who = [GoroutineRef(goid=int(goids[i]), ns=f.last_ts - int(since[i]),
                                label=(f"G{int(goids[i])} ({names.get(int(goids[i]), '?')}) "
                                       f"blocked {ms(f.last_ts - int(since[i]))} at the end"),
                                link=goroutine_link(ctx.trace_id, int(goids[i])))
                   for i in order.tolist()]
            ranges = [Evidence(label=f"{len(mem)} goroutines created here, none ended",
                               t1=t1, t2=t2, duration_ns=t2 - t1,
                               link=timeline_link(ctx.trace_id, "g", t1, t2))]
            ranges += [Evidence(label=f"G{int(goids[i])} blocks on {reason} and never ends",
                                t1=int(born[i]), t2=t2, g=int(goids[i]),
                                duration_ns=t2 - int(born[i]),
                                link=timeline_link(ctx.trace_id, "g", int(born[i]), t2,
                                                   g=int(goids[i])))
                       for i in order[:MAX_EVIDENCE - 1].tolist()]
            frames = ctx.stack_frames([sid]).get(sid, [])
            where = frames[0]["function"] if frames else f"stack {sid}"
            measures: dict[str, Any] = {
                "goroutines": int(len(mem)), "reason": reason, "stack_id": sid,
                        "start_functions": starts, "first_created_ts": t1,
                        "last_created_ts": int(born.max()),
                        "blocked_ns": int((f.last_ts - since).sum())}
            summary = (f"{len(mem)} goroutines created during the trace ({', '.join(starts[:3])}"
                       f"{', ...' if len(starts) > 3 else ''}) never ended: blocked on "
                       f"'{reason}' at {where}, {ms(measures['blocked_ns'])} blocked in total")
            from ingest.diagnose.base import StackRef

            out.append(Finding(
                rule=self.id, family=self.family, title=self.title,
                severity=severity_for(len(mem), cfg["min_goroutines"], cfg["critical_factor"]),
                summary=summary, measures=measures, thresholds=dict(cfg),
                link=ranges[0].link, ranges=ranges, goroutines=who,
                stacks=[StackRef(stack_id=sid, count=int(len(mem)),
                                 total_ns=measures["blocked_ns"], frames=frames,
                                 label="blocked at")]))
        return out


def _start_functions(ctx: Context, goids: Any) -> dict[int, str]:
    """Goroutine id -> start function, for the given goroutines only."""

    ids = sorted(int(x) for x in goids.tolist())
    out: dict[int, str] = {}
    with ctx.engine.connect() as conn:
        for k in range(0, len(ids), 500):
            for r in rows_by_key(conn, "goroutines", ctx.trace_id, ids[k:k + 500],
                                 ("goid", "start_function")):
                out[int(r.goid)] = r.start_function or "?"
    return out
