"""Run every rule over one trace and return plain data (the CLI, the API and
the overview page all show this same report)."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, inspect, select

from ingest.derive.cache import cached_json, derived_dir
from ingest.derive.frames import TraceFrames
from ingest.diagnose.base import SEVERITIES, Context, Rule
from ingest.diagnose.config import DiagnoseConfig
from ingest.diagnose.contention import LockContention
from ingest.diagnose.gc import GCPressure
from ingest.diagnose.goroutines import GoroutineLeak
from ingest.diagnose.netpoll import NetpollTail, ParkedLeak
from ingest.diagnose.offcpu import OffCpuRunning
from ingest.diagnose.poller import POLLER_RULES
from ingest.diagnose.sched import SchedLatency
from ingest.diagnose.syscalls import BlockingSyscall, SlowHandoff

#: Every rule, in report order. Rules that need an OS poller recording
#: (requires={"poller"}) join this list the same way; the runner skips them
#: for traces without one.
RULES: tuple[Rule, ...] = (
    BlockingSyscall(), SlowHandoff(), SchedLatency(), OffCpuRunning(), NetpollTail(), ParkedLeak(),
    GoroutineLeak(), LockContention(), GCPressure(), *POLLER_RULES,
)

#: The Context's facts shared by rules (``reads``: the ones a rule reads).
SHARED_FACTS = frozenset({"runnable", "network_waits"})

#: Version of the report's shape (bumped when fields are renamed).
REPORT_VERSION = 1


def rule_defaults(rules: tuple[Rule, ...] = RULES) -> dict[str, dict[str, Any]]:
    """Rule id -> its default thresholds (for config validation and docs)."""
    return {r.id: dict(r.defaults) for r in rules}


@cache
def _code_digest() -> str:
    """A digest of this package's source: a report kept by other code is not
    read back (the rules' logic changes without their thresholds)."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _recording(engine: Engine, trace_id: int) -> str | None:
    """The sha256 of the OS recordings attached to the trace, if any (one can
    be attached, or replaced, after the trace was stored): the poller's, and
    the kernel scheduling's (sched.parquet)."""
    from ingest.store.os_sched_models import os_sched_recordings as sr
    from ingest.store.poller_models import poller_recordings as pr

    shas = []
    for table in (pr, sr):
        if not inspect(engine).has_table(table.name):
            continue
        with engine.connect() as conn:
            sha = conn.execute(select(table.c.sha256).where(table.c.trace_id == trace_id)
                               ).scalar()
        if sha is not None:
            shas.append(str(sha))
    return "+".join(shas) if shas else None


def report_key(engine: Engine, frames: TraceFrames, config: DiagnoseConfig,
               rules: tuple[Rule, ...] = RULES) -> str:
    """The name a report is kept under: a digest of what it depends on besides
    the trace itself (every rule's thresholds, the disabled ones, the config's
    file, the attached recording, the rules' code)."""
    what = {"version": REPORT_VERSION, "code": _code_digest(), "source": config.source,
            "recording": _recording(engine, frames.trace_id),
            "rules": [[r.id, r.id in config.disabled, config.for_rule(r.id, r.defaults)]
                      for r in rules]}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode())
    return f"findings-{digest.hexdigest()[:16]}"


def diagnose(engine: Engine, frames: TraceFrames, config: DiagnoseConfig | None = None,
             rules: tuple[Rule, ...] = RULES) -> dict[str, Any]:
    """Findings of one trace, most severe first, and what each rule did.

    Kept with the trace's frames (:func:`ingest.derive.cache.cached_json`)
    under :func:`report_key`: the rules read millions of rows, the report is
    a few tens of KB, and it changes only with what the key names."""
    config = config or DiagnoseConfig()
    return cached_json(frames, report_key(engine, frames, config, rules),  # type: ignore[no-any-return]
                       lambda: run_rules(engine, frames, config, rules))


def kept_report(engine: Engine, frames: TraceFrames,
                config: DiagnoseConfig | None = None) -> dict[str, Any] | None:
    """:func:`diagnose`'s report when it is already kept with the frames (built
    at ingest or by an earlier request), else None: nothing is computed (a
    page can show it at once, or ask for it behind a loading indicator)."""
    config = config or DiagnoseConfig()
    root = derived_dir(frames)
    if root is None or not (root / f"{report_key(engine, frames, config)}.json").is_file():
        return None
    return diagnose(engine, frames, config)


def run_rules(engine: Engine, frames: TraceFrames, config: DiagnoseConfig,
              rules: tuple[Rule, ...] = RULES) -> dict[str, Any]:
    """:func:`diagnose`'s report, computed (not kept)."""
    ctx = Context(engine, frames)
    findings: list[dict[str, Any]] = []
    status: list[dict[str, Any]] = []
    try:
        for i, rule in enumerate(rules):
            entry: dict[str, Any] = {"rule": rule.id, "family": rule.family,
                                     "title": rule.title}
            missing = sorted(rule.requires - ctx.sources)
            if rule.id in config.disabled:
                entry.update(status="disabled", findings=0)
            elif missing:
                entry.update(status="skipped", findings=0, reason=f"needs {', '.join(missing)} "
                             "data, not recorded for this trace")
            else:
                found = rule.check(ctx, config.for_rule(rule.id, rule.defaults))
                findings += [f.to_dict() for f in found]
                entry.update(status="raised" if found else "clear", findings=len(found))
                # The rules read whole mapped columns (a GB on a 200 MB
                # trace): their pages go back after each rule, or the process
                # keeps them as its own memory and the peak is all rules'.
                frames.release()
            # A shared fact (the Runnable intervals: 1 GB on the 1 GB trace)
            # is kept only while a rule still to run reads it.
            later: set[str] = set().union(*(getattr(r, "reads", ()) for r in rules[i + 1:]))
            ctx.forget(*(SHARED_FACTS - later))
            status.append(entry)
    finally:
        frames.release()
    order = {r.id: i for i, r in enumerate(rules)}
    findings.sort(key=lambda f: (SEVERITIES.index(f["severity"]), order[f["rule"]]))
    return {"version": REPORT_VERSION, "trace_id": frames.trace_id,
            "first_ts": frames.first_ts, "last_ts": frames.last_ts,
            "config": config.source, "findings": findings, "rules": status}
