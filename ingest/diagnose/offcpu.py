"""Threads off-CPU while the runtime ran goroutines on them (issue 26,
docs/offcpu.md): with the kernel's scheduling recorded (sched.parquet), the
share of the goroutines' Running time during which their M was not on a CPU:
waiting for one (CPU quota throttling, GOMAXPROCS above the CPUs the process
gets, noisy neighbours) or asleep. The Go trace calls that time running; the
scheduler latency rule cannot see it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ingest.diagnose.base import (
    Context,
    Evidence,
    Finding,
    GoroutineRef,
    goroutine_link,
    ms,
    severity_for,
    timeline_link,
)


class OffCpuRunning:
    id: ClassVar[str] = "sched.offcpu"
    family: ClassVar[str] = "scheduler"
    title: ClassVar[str] = "Threads off-CPU while the runtime ran goroutines on them"
    requires: ClassVar[frozenset[str]] = frozenset({"frames", "sched"})
    doc: ClassVar[str] = ("Goroutines' Running time whose M the kernel had off the CPU "
                          "(waiting for one, or asleep), from a scheduling recording "
                          "(ingest.views.offcpu); raised when it reaches min_offcpu_ns and "
                          "min_share of the Running time recorded.")
    defaults: ClassVar[dict[str, Any]] = {
        "min_offcpu_ns": 20_000_000, "min_share": 0.2, "critical_factor": 2.5,
    }

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        from ingest.views.offcpu import offcpu_summary

        s = offcpu_summary(ctx.engine, ctx.trace_id)
        if s is None or s["running_ns"] == 0:
            return []
        off, share = int(s["offcpu_ns"]), float(s["share"])
        if off < cfg["min_offcpu_ns"] or share < cfg["min_share"]:
            return []
        tid = ctx.trace_id
        ranges = []
        worst = s["worst"]
        if worst is not None:
            ranges.append(Evidence(
                label=(f"G{worst['goid']} Running on M{worst['m']} for "
                       f"{ms(worst['end_ts'] - worst['start_ts'])}, of which the thread was "
                       f"off-CPU {ms(worst['offcpu_ns'])}"),
                t1=worst["start_ts"], t2=worst["end_ts"], g=worst["goid"], m=worst["m"],
                duration_ns=worst["offcpu_ns"],
                link=timeline_link(tid, "m", worst["start_ts"], worst["end_ts"],
                                   m=worst["m"])))
        for r in s["ms"]:
            if r["waiting_ns"] + r["asleep_ns"] == 0:
                continue
            ranges.append(Evidence(
                label=(f"M{r['m']}: {ms(r['running_ns'])} running goroutines, off-CPU "
                       f"{ms(r['waiting_ns'] + r['asleep_ns'])} (waiting for a CPU "
                       f"{ms(r['waiting_ns'])}, asleep {ms(r['asleep_ns'])})"),
                t1=s["first_ts"], t2=s["last_ts"], m=r["m"],
                duration_ns=r["waiting_ns"] + r["asleep_ns"],
                link=timeline_link(tid, "m", s["first_ts"], s["last_ts"], m=r["m"])))
        who = [GoroutineRef(goid=g["goid"], ns=g["offcpu_ns"],
                            label=(f"G{g['goid']}: Running {ms(g['running_ns'])}, its thread "
                                   f"off-CPU {ms(g['offcpu_ns'])}"),
                            link=goroutine_link(tid, g["goid"]))
               for g in s["goroutines"] if g["offcpu_ns"] > 0]
        measures = {k: s[k] for k in ("running_ns", "offcpu_ns", "waiting_ns", "asleep_ns",
                                      "unknown_ns", "threads", "partial", "method")}
        measures["share"] = round(share, 4)
        measures["gomaxprocs"] = ctx.gomaxprocs
        summary = (f"Goroutines ran {ms(s['running_ns'])} on {len(s['ms'])} recorded threads, "
                   f"and for {ms(off)} of it ({share:.0%}) the kernel had the thread off the "
                   f"CPU: waiting for a CPU {ms(s['waiting_ns'])}, asleep {ms(s['asleep_ns'])}."
                   " The trace shows this time as Running (a CPU quota below GOMAXPROCS, or "
                   "other programs on the same CPUs)")
        if s["partial"]:
            summary += "; the scheduling recording is partial"
        return [Finding(
            rule=self.id, family=self.family, title=self.title,
            severity=severity_for(share, cfg["min_share"], cfg["critical_factor"]),
            summary=summary, measures=measures, thresholds=dict(cfg),
            link=timeline_link(tid, "m", s["first_ts"], s["last_ts"]),
            ranges=ranges, goroutines=who,
            threads=[r["m"] for r in s["ms"] if r["waiting_ns"] + r["asleep_ns"] > 0])]
