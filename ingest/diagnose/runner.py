"""Run every rule over one trace and return plain data (the CLI, the API and
the overview page all show this same report)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from ingest.derive.frames import TraceFrames
from ingest.diagnose.base import SEVERITIES, Context, Rule
from ingest.diagnose.config import DiagnoseConfig
from ingest.diagnose.contention import LockContention
from ingest.diagnose.gc import GCPressure
from ingest.diagnose.goroutines import GoroutineLeak
from ingest.diagnose.netpoll import NetpollTail, ParkedLeak
from ingest.diagnose.poller import POLLER_RULES
from ingest.diagnose.sched import SchedLatency
from ingest.diagnose.syscalls import BlockingSyscall, SlowHandoff

#: Every rule, in report order. Rules that need an OS poller recording
#: (requires={"poller"}) join this list the same way; the runner skips them
#: for traces without one.
RULES: tuple[Rule, ...] = (
    BlockingSyscall(), SlowHandoff(), SchedLatency(), NetpollTail(), ParkedLeak(),
    GoroutineLeak(), LockContention(), GCPressure(), *POLLER_RULES,
)

#: Version of the report's shape (bumped when fields are renamed).
REPORT_VERSION = 1


def rule_defaults(rules: tuple[Rule, ...] = RULES) -> dict[str, dict[str, Any]]:
    """Rule id -> its default thresholds (for config validation and docs)."""
    return {r.id: dict(r.defaults) for r in rules}


def diagnose(engine: Engine, frames: TraceFrames, config: DiagnoseConfig | None = None,
             rules: tuple[Rule, ...] = RULES) -> dict[str, Any]:
    """Findings of one trace, most severe first, and what each rule did."""
    config = config or DiagnoseConfig()
    ctx = Context(engine, frames)
    findings: list[dict[str, Any]] = []
    status: list[dict[str, Any]] = []
    for rule in rules:
        entry: dict[str, Any] = {"rule": rule.id, "family": rule.family, "title": rule.title}
        missing = sorted(rule.requires - ctx.sources)
        if rule.id in config.disabled:
            entry.update(status="disabled", findings=0)
        elif missing:
            entry.update(status="skipped", findings=0,
                         reason=f"needs {', '.join(missing)} data, not recorded for this trace")
        else:
            found = rule.check(ctx, config.for_rule(rule.id, rule.defaults))
            findings += [f.to_dict() for f in found]
            entry.update(status="raised" if found else "clear", findings=len(found))
        status.append(entry)
    order = {r.id: i for i, r in enumerate(rules)}
    findings.sort(key=lambda f: (SEVERITIES.index(f["severity"]), order[f["rule"]]))
    return {"version": REPORT_VERSION, "trace_id": frames.trace_id,
            "first_ts": frames.first_ts, "last_ts": frames.last_ts,
            "config": config.source, "findings": findings, "rules": status}
