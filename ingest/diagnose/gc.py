"""GC pressure: the share of goroutine execution time spent in mark assist,
and the share of wall time stopped (STW) or in GC mark, from the ``ranges``
table and ingest.views.goroutines' time categories."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sqlalchemy import func, select

from ingest.diagnose.base import (
    MAX_EVIDENCE,
    Context,
    Evidence,
    Finding,
    GoroutineRef,
    goroutine_link,
    ms,
    pct,
    severity_for,
    timeline_link,
)
from ingest.store import models
from ingest.store.coded_models import CodedQuery


def union_ns(spans: list[tuple[int, int]]) -> int:
    """Total length of the union of [a, b) spans."""
    total, cur_a, cur_b = 0, None, None
    for a, b in sorted(spans):
        if cur_b is None or a > cur_b:
            if cur_a is not None and cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None and cur_b is not None:
        total += cur_b - cur_a
    return total


class GCPressure:
    id: ClassVar[str] = "gc.pressure"
    family: ClassVar[str] = "gc"
    title: ClassVar[str] = "GC pressure: mark assists and stop-the-world pauses"
    requires: ClassVar[frozenset[str]] = frozenset({"frames"})
    doc: ClassVar[str] = ("Mark assist share = goroutine time in GC mark assist / (that + "
                          "Running time); STW share = union of stop-the-world ranges (the "
                          "tracer's own excluded) / trace duration. Raised when either "
                          "reaches its threshold, with at least min_gcs GC cycles.")
    defaults: ClassVar[dict[str, Any]] = {
        "assist_share": 0.05, "stw_share": 0.02, "min_gcs": 2, "critical_factor": 4.0,
        "ignore_stw": ["stop-the-world (start trace)", "stop-the-world (stop trace)"],
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        f = ctx.frames
        # From the ranges' coded table: the kinds matched once, not per row.
        q = CodedQuery("ranges", ctx.trace_id)
        with ctx.engine.connect() as conn:
            rows = conn.execute(q.select(("kind", "name", "start_ts", "end_ts", "scope_id",
                                          "scope"))
                                .where(q.codes("kind", ["gc", "stw", "assist"]))
                                .order_by(q.col("id"))).all()
        # Columns (tens of thousands of assists on a busy trace), in the rows' order;
        # a range without a start began with the trace, one without an end ran to it.
        kind = np.array([r[0] for r in rows], dtype=object)
        start = np.array([f.first_ts if r[2] is None else r[2] for r in rows], dtype=np.int64)
        end = np.array([f.last_ts if r[3] is None else r[3] for r in rows], dtype=np.int64)
        is_gc, is_assist = kind == "gc", kind == "assist"
        gcs = list(zip(start[is_gc].tolist(), end[is_gc].tolist(), strict=True))
        stw = sorted(((int(start[i]), int(end[i]), rows[i][1])
                      for i in np.flatnonzero(kind == "stw").tolist()
                      if rows[i][1] not in cfg["ignore_stw"]),
                     key=lambda s: (s[0] - s[1], s[0]))
        if len(gcs) < cfg["min_gcs"]:
            return []
        stw_ns = union_ns([(a, b) for a, b, _ in stw])
        stw_share = stw_ns / ctx.span_ns
        # Assist time is at most the assist ranges' total length, and the
        # share's denominator at least the Running time the threads made (the
        # threads table's sums: the goroutines' Running intervals that have an
        # M; reading the proc runs' durations took 0.25 s of the 200 MB trace):
        # when even that bound is under the threshold, skip the per-goroutine
        # breakdown, which would find nothing either.
        assist_span = int((end[is_assist] - start[is_assist]).sum())
        t = models.threads
        with ctx.engine.connect() as conn:
            all_running = int(conn.execute(select(func.coalesce(func.sum(t.c.running_ns), 0))
                                           .where(t.c.trace_id == ctx.trace_id)).scalar_one())
        if (stw_share < cfg["stw_share"]
                and assist_span < cfg["assist_share"] * max(1, all_running)):
            return []
        from ingest.views.goroutines import CAT, goroutine_times

        gt = goroutine_times(ctx.engine, f)
        assist = gt.times[:, CAT["gc_assist"]]
        running = gt.times[:, CAT["running"]]
        assist_ns, running_ns = int(assist.sum()), int(running.sum())
        assist_share = assist_ns / max(1, assist_ns + running_ns)
        gc_ns = union_ns(gcs)
        by_assist = assist_share >= cfg["assist_share"]
        by_stw = stw_share >= cfg["stw_share"]
        if not (by_assist or by_stw):
            return []
        ranges = [Evidence(label=f"{name}: {ms(b - a)}", t1=a, t2=b, duration_ns=b - a,
                           link=timeline_link(ctx.trace_id, "p", a, b))
                  for a, b, name in stw[:MAX_EVIDENCE // 2]]
        mine = np.flatnonzero(is_assist & (np.array([r[5] for r in rows], dtype=object)
                                           == "goroutine"))
        # Longest first, ties by start, then in the rows' order (a stable sort).
        longest = mine[np.lexsort((start[mine], start[mine] - end[mine]))]
        for i in longest[:MAX_EVIDENCE - len(ranges)].tolist():
            a, b, g = int(start[i]), int(end[i]), int(rows[i][4])
            ranges.append(Evidence(label=f"G{g} in GC mark assist {ms(b - a)}", t1=a, t2=b, g=g,
                                   duration_ns=b - a,
                                   link=timeline_link(ctx.trace_id, "g", a, b, g=g)))
        best = np.lexsort((gt.goid, -assist))[:MAX_EVIDENCE]
        who = [GoroutineRef(goid=int(gt.goid[i]), ns=int(assist[i]),
                            label=f"G{int(gt.goid[i])}: {ms(int(assist[i]))} in mark assist",
                            link=goroutine_link(ctx.trace_id, int(gt.goid[i])))
               for i in best.tolist() if assist[i] > 0]
        measures = {"gcs": len(gcs), "gc_ns": gc_ns, "gc_share": round(gc_ns / ctx.span_ns, 4),
                    "assist_ns": assist_ns, "running_ns": running_ns,
                    "assist_share": round(assist_share, 4), "stw_pauses": len(stw),
                    "stw_ns": stw_ns, "stw_share": round(stw_share, 4),
                    "duration_ns": ctx.span_ns,
                    "gcs_per_second": round(len(gcs) / (ctx.span_ns / 1e9), 1)}
        summary = (f"{len(gcs)} GC cycles in {ms(ctx.span_ns)} "
                   f"(GC marking {pct(gc_ns / ctx.span_ns)}"
                   f" of the time): goroutines spent {ms(assist_ns)} in mark assist, "
                   f"{pct(assist_share)} of their execution time; {len(stw)} stop-the-world "
                   f"pauses took {ms(stw_ns)}, {pct(stw_share)} of wall time")
        sev = "critical" if "critical" in (
            severity_for(assist_share, cfg["assist_share"], cfg["critical_factor"]),
            severity_for(stw_share, cfg["stw_share"], cfg["critical_factor"])) else "warning"
        first = ranges[0] if ranges else None
        link = first.link if first else timeline_link(ctx.trace_id, "p", f.first_ts, f.last_ts)
        return [Finding(rule=self.id, family=self.family, title=self.title, severity=sev,
                        summary=summary, measures=measures, thresholds=dict(cfg), link=link,
                        ranges=ranges, goroutines=who)]
