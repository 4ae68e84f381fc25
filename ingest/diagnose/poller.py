"""Rules that read the OS poller recording attached to a trace (``poller_events``):
readiness waits returning late against their timeout and wakeups that return
nothing, descriptors only climbing and EMFILE, io_uring submissions refused.

They declare ``requires = {"poller"}``, so the runner skips them for traces
without a recording. The numbers come from ingest.views.poller (the poller
page's own functions), so a finding and the page agree; these rules only pick
the evidence rows. Times: the recording's events carry ``ts`` (trace ns, set
at attach; the wall clock for a recording stored on its own) and ``m`` (the
thread id in Go 1.22+), which the evidence and the timeline links use.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ingest.diagnose.base import (
    MAX_EVIDENCE,
    Context,
    Evidence,
    Finding,
    ms,
    pct,
    severity_for,
    timeline_link,
)
from ingest.views.poller import (
    SOCKET_KINDS,
    Events,
    errors,
    io_uring,
    load_events,
    open_fds,
    wait_rows,
    waits,
)

#: A link's window reaches this far (at least) on each side of its evidence, so
#: a call of a few us opens the timeline with its neighbourhood visible.
PAD_NS = 1_000_000
#: At most this many descriptors listed in ``measures["fds"]``.
MAX_FDS = 50


class Recorded:
    """One trace's poller events with the mapping of their wall clock to trace ns."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.ev: Events = load_events(ctx.engine, ctx.trace_id)
        wall = self.ev.ints("wall_ns")
        ts = self.ev.ints("ts", missing=-1)
        have = np.flatnonzero(ts >= 0)
        # One offset per recording (ts = wall_ns - offset); None when the trace has
        # no clock to align with (pre-1.22): links then cover the whole trace.
        self.offset: int | None = int(wall[have[0]] - ts[have[0]]) if len(have) else None
        dur = self.ev.ints("duration_ns", missing=0)
        self.span_ns = max(1, int((wall + dur).max() - self.ev.origin)) if len(wall) else 1
        self.m = self.ev.ints("m", missing=-1)
        self.tid = self.ev.ints("tid")

    def trace_ns(self, rel_ns: int) -> int | None:
        """Trace ns of a time given as ns since the recording's first event."""
        return None if self.offset is None else self.ev.origin + rel_ns - self.offset

    def rel(self, i: int) -> int:
        return int(self.ev["wall_ns"][i]) - self.ev.origin

    def thread(self, i: int) -> int:
        """The M of a row (its thread id), or the tid when the trace has no Ms for it."""
        return int(self.m[i]) if self.m[i] >= 0 else int(self.tid[i])

    def link(self, rel1: int, rel2: int, m: int | None = None) -> str:
        """The timeline (mode m) around [rel1, rel2] (recording ns), padded each side."""
        a, b = self.trace_ns(rel1), self.trace_ns(rel2)
        if a is None or b is None:
            return timeline_link(self.ctx.trace_id, "m", self.ctx.frames.first_ts,
                                 self.ctx.frames.last_ts, m=m)
        pad = max(PAD_NS, (b - a) // 10)
        return timeline_link(self.ctx.trace_id, "m", a - pad, b + pad, m=m)

    def evidence(self, label: str, rel1: int, rel2: int, m: int | None = None) -> Evidence:
        a, b = self.trace_ns(rel1), self.trace_ns(rel2)
        return Evidence(label=label, t1=rel1 if a is None else a, t2=rel2 if b is None else b,
                        m=m, duration_ns=rel2 - rel1, link=self.link(rel1, rel2, m))

    def call_evidence(self, i: int, label: str) -> Evidence:
        rel = self.rel(i)
        d = self.ev["duration_ns"][i]
        return self.evidence(label, rel, rel + int(d or 0), self.thread(i))


def recorded(ctx: Context) -> Recorded:
    """The trace's poller events, loaded once per diagnosis (kept on the context)."""
    rec = getattr(ctx, "_poller_recorded", None)
    if not isinstance(rec, Recorded):
        rec = Recorded(ctx)
        ctx._poller_recorded = rec  # type: ignore[attr-defined]
    return rec


def _threads(rec: Recorded, idx: list[int]) -> list[int]:
    return sorted({rec.thread(i) for i in idx})


def _wait_label(rec: Recorded, i: int, what: str) -> str:
    ev = rec.ev
    epfd = ev["epfd"][i] if ev["epfd"][i] is not None else ev["fd"][i]
    on = f" on epfd {epfd}" if epfd is not None else ""
    return f"{ev['syscall'][i]}{on} (thread {rec.thread(i)}) {what}"


class EpollJitter:
    id: ClassVar[str] = "poller.epoll-jitter"
    family: ClassVar[str] = "netpoll"
    title: ClassVar[str] = "epoll waits returned late against their timeout"
    requires: ClassVar[frozenset[str]] = frozenset({"poller"})
    doc: ClassVar[str] = ("Readiness waits (epoll_pwait, poll, ...) that timed out (0 events "
                          "after a finite timeout): jitter = duration - timeout. Raised when "
                          "at least min_late waits were late_ns or more past their timeout.")
    defaults: ClassVar[dict[str, Any]] = {"late_ns": 1_000_000, "min_late": 3,
                                          "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        rec = recorded(ctx)
        w = waits(rec.ev)
        r = wait_rows(rec.ev)
        timed_out = (r["res"] == 0) & (r["tmo"] > 0)
        jitter = r["dur"] - r["tmo"]
        late = timed_out & (jitter >= cfg["late_ns"])
        n_late = int(late.sum())
        if n_late == 0 or n_late < cfg["min_late"]:
            return []
        li = r["i"][late]
        lj = jitter[late]
        order = np.lexsort((li, -lj))
        ranges = [rec.call_evidence(int(li[k]), _wait_label(
            rec, int(li[k]), f"asked {ms(int(r['tmo'][late][k]))}, returned nothing after "
                             f"{ms(int(r['dur'][late][k]))} ({ms(int(lj[k]))} late)"))
                  for k in order[:MAX_EVIDENCE].tolist()]
        epfds = sorted({int(rec.ev["epfd"][i]) for i in li.tolist()
                        if rec.ev["epfd"][i] is not None})
        mx = int(lj.max())
        measures = {"waits": w["count"], "timed_out": w["timed_out"], "late": n_late,
                    "late_jitter_ns": int(lj.sum()), "max_jitter_ns": mx,
                    "jitter_p50_ns": w["jitter"]["p50_ns"], "jitter_p99_ns": w["jitter"]["p99_ns"],
                    "late_share": round(n_late / max(1, w["timed_out"]), 4),
                    "fds": epfds[:MAX_FDS], "by_call": w["by_call"]}
        summary = (f"{n_late} of {w['timed_out']} readiness waits that timed out returned "
                   f"{ms(cfg['late_ns'])} or more past their timeout (worst {ms(mx)} late; "
                   f"jitter p50 {ms(w['jitter']['p50_ns'])}, p99 {ms(w['jitter']['p99_ns'])}): "
                   "the thread was not run on time after its timer fired")
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(mx, cfg["late_ns"], cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges,
                        threads=_threads(rec, li.tolist()))]


class EmptyWakeups:
    id: ClassVar[str] = "poller.empty-wakeups"
    family: ClassVar[str] = "netpoll"
    title: ClassVar[str] = "Blocking waits woke up with nothing to do"
    requires: ClassVar[frozenset[str]] = frozenset({"poller"})
    doc: ClassVar[str] = ("Blocking readiness waits (timeout not 0) that returned no events "
                          "(timed out, or woke early with nothing): raised when there are at "
                          "least min_empty, they are at least min_share of the blocking waits "
                          "and at least min_per_second over the recording.")
    defaults: ClassVar[dict[str, Any]] = {"min_empty": 20, "min_share": 0.5,
                                          "min_per_second": 100.0, "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        rec = recorded(ctx)
        w = waits(rec.ev)
        r = wait_rows(rec.ev)
        blocking = (r["res"] >= 0) & (r["tmo"] != 0) & (r["tmo"] != -2)
        empty = blocking & (r["res"] == 0)
        n_block, n_empty = int(blocking.sum()), int(empty.sum())
        if n_empty == 0:
            return []
        share = n_empty / n_block
        rate = n_empty / (rec.span_ns / 1e9)
        if (n_empty < cfg["min_empty"] or share < cfg["min_share"]
                or rate < cfg["min_per_second"]):
            return []
        ei = r["i"][empty]
        timed = empty & (r["tmo"] > 0) & (r["dur"] >= r["tmo"])
        first, last = rec.rel(int(ei[0])), rec.rel(int(ei[-1]))
        per_thread: dict[int, int] = {}
        for i in ei.tolist():
            per_thread[rec.thread(i)] = per_thread.get(rec.thread(i), 0) + 1
        ranges = [rec.evidence(f"{n_empty} empty wakeups of {n_block} blocking waits",
                               first, last)]
        ranges += [rec.call_evidence(i, _wait_label(
            rec, i, f"asked {ms(int(rec.ev['timeout_ns'][i]))}, returned 0 events after "
                    f"{ms(int(rec.ev['duration_ns'][i]))}"))
                   for i in ei[:MAX_EVIDENCE - 1].tolist()]
        measures = {"blocking_waits": n_block, "empty": n_empty,
                    "timed_out": int(timed.sum()), "before_timeout": n_empty - int(timed.sum()),
                    "share": round(share, 4), "per_second": round(rate, 1),
                    "span_ns": rec.span_ns, "nonblocking_empty": w["empty_nonblocking"],
                    "by_thread": {str(k): v for k, v in sorted(per_thread.items())},
                    "fds": sorted({int(rec.ev["epfd"][i]) for i in ei.tolist()
                                   if rec.ev["epfd"][i] is not None})[:MAX_FDS]}
        summary = (f"{n_empty} of {n_block} blocking readiness waits ({pct(share)}) woke with no "
                   f"events, {measures['per_second']}/s over {ms(rec.span_ns)} "
                   f"({measures['timed_out']} at their timeout: a timer, not I/O, woke the "
                   f"thread; {measures['before_timeout']} before it); "
                   f"{w['empty_nonblocking']} non-blocking polls also found nothing")
        sev = "warning" if rate >= cfg["critical_factor"] * cfg["min_per_second"] else "info"
        return [Finding(rule=self.id, family=self.family, title=self.title, severity=sev,
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges, threads=sorted(per_thread))]


def _socket_opens(rec: Recorded, rel1: int, rel2: int) -> list[int]:
    """Rows in [rel1, rel2] that brought a socket into use: an accepted connection
    (new_fd) or a connect (its socket comes from the untraced socket(2))."""
    ev = rec.ev
    out = []
    for i in range(len(ev)):
        rel = rec.rel(i)
        if rel < rel1 or rel > rel2:
            continue
        name = ev["syscall"][i]
        if name in ("accept", "accept4") and (ev["new_fd"][i] or -1) >= 0:
            out.append(i)
        elif name == "connect" and ev["fd_kind"][i] in SOCKET_KINDS:
            out.append(i)
    return out


class FdLeak:
    id: ClassVar[str] = "fd.leak"
    family: ClassVar[str] = "fd"
    title: ClassVar[str] = "Open sockets only climb (descriptor leak)"
    requires: ClassVar[frozenset[str]] = frozenset({"poller"})
    doc: ClassVar[str] = ("The open-sockets line of the OS recording: its longest stretch "
                          "without a close. Raised when that stretch covers at least "
                          "min_span_share of the recording and the sockets grew by at least "
                          "min_growth in it.")
    defaults: ClassVar[dict[str, Any]] = {"min_growth": 10, "min_span_share": 0.8,
                                          "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        rec = recorded(ctx)
        o = open_fds(rec.ev)
        t = np.asarray(o["t"], np.int64)
        s = np.asarray(o["sockets"], np.int64)
        if len(s) == 0:
            return []
        # Stretches between socket closes: [previous close, next close) or the ends.
        drops = np.flatnonzero(np.diff(s) < 0) + 1
        starts = np.r_[0, drops]
        ends = np.r_[drops, len(s)]
        t_start = np.r_[0, t[drops]]
        t_end = np.r_[t[drops], rec.span_ns]
        length = t_end - t_start
        base = s[starts]
        peak = np.array([int(s[a:b].max()) for a, b in zip(starts, ends, strict=True)])
        growth = peak - base
        k = int(np.lexsort((-growth, -length))[0])
        share = int(length[k]) / rec.span_ns
        if growth[k] < cfg["min_growth"] or share < cfg["min_span_share"]:
            return []
        rel1, rel2 = int(t_start[k]), int(t_end[k])
        opens = _socket_opens(rec, rel1, rel2)
        accepted = [i for i in opens if rec.ev["syscall"][i] != "connect"]
        dialed = [i for i in opens if rec.ev["syscall"][i] == "connect"]
        fds = [int(rec.ev["new_fd"][i] if rec.ev["syscall"][i] != "connect" else rec.ev["fd"][i])
               for i in opens]
        closes_after = int(len(drops) - k) if k < len(drops) else 0
        ranges = [rec.evidence(f"sockets climb from {int(base[k])} to {int(peak[k])} with no "
                               f"close for {ms(int(length[k]))}", rel1, rel2)]
        ranges += [rec.call_evidence(i, f"{rec.ev['syscall'][i]} fd {fd} "
                                        f"(thread {rec.thread(i)}), never closed meanwhile")
                   for i, fd in list(zip(opens, fds, strict=True))[:MAX_EVIDENCE - 1]]
        measures = {"sockets_start": int(base[k]), "sockets_peak": int(peak[k]),
                    "growth": int(growth[k]), "stretch_ns": int(length[k]),
                    "span_ns": rec.span_ns, "span_share": round(share, 4),
                    "accepted": len(accepted), "dialed": len(dialed),
                    "close_steps_after": closes_after,
                    "sockets_only_climb": o["sockets_only_climb"],
                    "open_max": o["max"], "open_final": o["final"],
                    "by_kind_at_end": o["by_kind_at_end"], "fds": fds[:MAX_FDS]}
        tail = (f"; the sockets closed only in the last {ms(rec.span_ns - rel2)}"
                if closes_after else "; none was ever closed")
        summary = (f"open sockets only climbed from {int(base[k])} to {int(peak[k])} over "
                   f"{ms(int(length[k]))} ({pct(share)} of the recording; {len(accepted)} "
                   f"accepted, {len(dialed)} dialed){tail}: connections opened and never "
                   "closed")
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(int(growth[k]), cfg["min_growth"],
                                              cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges, threads=_threads(rec, opens))]


class FdExhausted:
    id: ClassVar[str] = "fd.emfile"
    family: ClassVar[str] = "fd"
    title: ClassVar[str] = "Calls failed for lack of descriptors (EMFILE)"
    requires: ClassVar[frozenset[str]] = frozenset({"poller"})
    doc: ClassVar[str] = ("Calls that failed with an errno in errnos (EMFILE: the process's "
                          "descriptor limit; ENFILE: the system's): raised at min_count.")
    defaults: ClassVar[dict[str, Any]] = {"errnos": ["EMFILE", "ENFILE"], "min_count": 1,
                                          "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        rec = recorded(ctx)
        by_call = [e for e in errors(rec.ev) if e["errno"] in cfg["errnos"]]
        n = sum(e["count"] for e in by_call)
        if n == 0 or n < cfg["min_count"]:
            return []
        idx = [i for i in range(len(rec.ev)) if rec.ev["errno"][i] in cfg["errnos"]]
        o = open_fds(rec.ev)
        t = np.asarray(o["t"], np.int64)

        def open_at(rel: int) -> tuple[int, int]:
            j = int(np.searchsorted(t, rel, side="right")) - 1
            return (0, 0) if j < 0 else (int(o["open"][j]), int(o["sockets"][j]))

        ev = rec.ev
        ranges = []
        for i in idx[:MAX_EVIDENCE]:
            total, socks = open_at(rec.rel(i))
            fd = ev["fd"][i]
            on = f" on fd {fd}" if fd is not None else ""
            ranges.append(rec.call_evidence(
                i, f"{ev['syscall'][i]}{on} failed {ev['errno'][i]} (thread {rec.thread(i)}; "
                   f"{total} descriptors, {socks} sockets known open)"))
        first_total, first_socks = open_at(rec.rel(idx[0]))
        measures = {"count": n, "by_call": by_call,
                    "open_at_first": first_total, "sockets_at_first": first_socks,
                    "open_max": o["max"],
                    "first_ts": ranges[0].t1, "last_ts": rec.call_evidence(idx[-1], "").t1,
                    "fds": sorted({int(ev["fd"][i]) for i in idx if ev["fd"][i] is not None}),
                    "calls": [f"{e['syscall']} {e['errno']} x{e['count']}" for e in by_call]}
        summary = (f"{n} calls failed for lack of descriptors ("
                   + ", ".join(measures["calls"]) + f"); {first_total} descriptors "
                   f"({first_socks} sockets) were known open at the first failure, at most "
                   f"{o['max']}: connections refused or files not opened")
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(n, max(cfg["min_count"], 1),
                                              cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges, threads=_threads(rec, idx))]


class IouringRefused:
    id: ClassVar[str] = "iouring.refused"
    family: ClassVar[str] = "io_uring"
    title: ClassVar[str] = "io_uring submissions refused or the submission queue full"
    requires: ClassVar[frozenset[str]] = frozenset({"poller"})
    doc: ClassVar[str] = ("io_uring_enter calls that submitted fewer entries than asked "
                          "(to_submit) or failed (EBUSY, EAGAIN, ...), enters that waited "
                          "for submission-queue space (IORING_ENTER_SQ_WAIT) and failed "
                          "io_uring_setup calls: raised at min_refused.")
    defaults: ClassVar[dict[str, Any]] = {"min_refused": 1, "critical_factor": 10.0}

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
        rec = recorded(ctx)
        u = io_uring(rec.ev)
        ev = rec.ev
        setup_failed = [i for i in range(len(ev))
                        if ev["syscall"][i] == "io_uring_setup" and ev["errno"][i] is not None]
        enters = [i for i in range(len(ev)) if ev["syscall"][i] == "io_uring_enter"]
        refused, sq_wait = [], []
        for i in enters:
            ask, res = ev["to_submit"][i], ev["result"][i]
            if ev["errno"][i] is not None or (ask and res is not None and res < ask):
                refused.append(i)
            if "SQ_WAIT" in str(ev["flags"][i] or ""):
                sq_wait.append(i)
        bad = sorted(set(refused) | set(sq_wait) | set(setup_failed))
        if not bad or len(bad) < cfg["min_refused"]:
            return []
        left = sum(int(ev["to_submit"][i] or 0) - max(0, int(ev["result"][i] or 0))
                   for i in refused)
        errs: dict[str, int] = {}
        for i in refused + setup_failed:
            if ev["errno"][i] is not None:
                key = f"{ev['syscall'][i]} {ev['errno'][i]}"
                errs[key] = errs.get(key, 0) + 1
        ranges = []
        for i in bad[:MAX_EVIDENCE]:
            what = (f"failed {ev['errno'][i]}" if ev["errno"][i] is not None
                    else f"submitted {ev['result'][i]} of {ev['to_submit'][i]}"
                    if i in refused else f"waited for queue space ({ev['flags'][i]})")
            ranges.append(rec.call_evidence(i, f"{ev['syscall'][i]} fd {ev['fd'][i]} "
                                               f"(thread {rec.thread(i)}) {what}"))
        measures = {"enters": u["enters"], "setups": u["setups"],
                    "setup_failed": len(setup_failed), "to_submit": u["to_submit"],
                    "submitted": u["submitted"], "short_submits": u["short_submits"],
                    "refused_enters": len(refused), "refused_entries": left,
                    "sq_wait": len(sq_wait), "errors": errs,
                    "fds": sorted({int(ev["fd"][i]) for i in bad if ev["fd"][i] is not None})}
        summary = (f"{len(refused)} of {u['enters']} io_uring_enter calls submitted less than "
                   f"asked or failed ({left} entries not submitted of {u['to_submit']}), "
                   f"{len(sq_wait)} waited for submission-queue space, "
                   f"{len(setup_failed)} io_uring_setup failed"
                   + (f" ({', '.join(f'{k} x{v}' for k, v in errs.items())})" if errs else ""))
        return [Finding(rule=self.id, family=self.family, title=self.title,
                        severity=severity_for(len(bad), max(cfg["min_refused"], 1),
                                              cfg["critical_factor"]),
                        summary=summary, measures=measures, thresholds=dict(cfg),
                        link=ranges[0].link, ranges=ranges, threads=_threads(rec, bad))]


#: The poller rules, in report order (runner.RULES appends them).
POLLER_RULES = (EpollJitter(), EmptyWakeups(), FdLeak(), FdExhausted(), IouringRefused())
