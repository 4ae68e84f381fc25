"""What every diagnostic rule shares: the finding it returns, the context it
reads, and small exact-arithmetic helpers over the frames.

A rule is a class with an ``id``, a ``family``, the data ``requires`` it
needs (``"frames"`` for the execution trace; ``"poller"`` for an OS poller
recording joined to the trace) and ``check(ctx, cfg) -> list[Finding]``.
Rules return plain data; the runner orders, renders and serves it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, inspect, select

from ingest.derive.frames import TraceFrames
from ingest.store import models

I64 = npt.NDArray[np.int64]

SEVERITIES = ("critical", "warning", "info")
#: Interval rows read at a time where a rule scans them all.
PART_ROWS = 1 << 22
#: How many evidence items of each sort a finding carries at most.
MAX_EVIDENCE = 10


def timeline_link(trace_id: int, mode: str, t1: int, t2: int, g: int | None = None,
                  m: int | None = None, p: int | None = None) -> str:
    """The timeline deep link (/traces/<id>/timeline?mode=..&t1=..&t2=..[&g=][&m=][&p=])."""
    t2 = max(t2, t1 + 1)
    url = f"/traces/{trace_id}/timeline?mode={mode}&t1={int(t1)}&t2={int(t2)}"
    for key, val in (("g", g), ("m", m), ("p", p)):
        if val is not None and val >= 0:
            url += f"&{key}={int(val)}"
    return url


def goroutine_link(trace_id: int, goid: int) -> str:
    return f"/traces/{trace_id}/goroutines/{int(goid)}"


@dataclass
class Evidence:
    """One time range that proves a finding (a syscall, a wait, a pause...)."""

    label: str
    t1: int
    t2: int
    link: str
    g: int | None = None
    m: int | None = None
    p: int | None = None
    duration_ns: int = 0


@dataclass
class GoroutineRef:
    """A goroutine involved, with the figure that makes it relevant."""

    goid: int
    label: str
    link: str
    ns: int = 0


@dataclass
class StackRef:
    """A stack involved: its frames (innermost first), occurrences, total time."""

    stack_id: int
    count: int
    total_ns: int
    frames: list[dict[str, Any]]
    label: str = ""


@dataclass
class Finding:
    """One diagnosed problem with the evidence that proves it."""

    rule: str
    family: str
    severity: str
    title: str
    summary: str
    link: str
    measures: dict[str, Any]
    thresholds: dict[str, Any]
    ranges: list[Evidence] = field(default_factory=list)
    goroutines: list[GoroutineRef] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    stacks: list[StackRef] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Context:
    """What rules read: the engine, the frames, and lazily computed shared
    facts (stacks, GOMAXPROCS, available data sources)."""

    def __init__(self, engine: Engine, frames: TraceFrames) -> None:
        self.engine = engine
        self.frames = frames
        self.trace_id = frames.trace_id

    @property
    def span_ns(self) -> int:
        return max(1, self.frames.last_ts - self.frames.first_ts)

    @cached_property
    def sources(self) -> frozenset[str]:
        """Data available for this trace: "frames" always, "poller" when an
        OS poller recording is attached to it (rows in ``poller_events``),
        "sched" when the kernel's scheduling is (rows in ``os_sched_intervals``)."""
        have = {"frames"}
        if inspect(self.engine).has_table("poller_events"):
            tbl = models.metadata.tables.get("poller_events")
            if tbl is not None:
                with self.engine.connect() as conn:
                    if conn.execute(select(tbl.c.trace_id)
                                    .where(tbl.c.trace_id == self.trace_id).limit(1)).first():
                        have.add("poller")
        if inspect(self.engine).has_table("os_sched_intervals"):
            si = models.metadata.tables["os_sched_intervals"]
            with self.engine.connect() as conn:
                if conn.execute(select(si.c.trace_id)
                                .where(si.c.trace_id == self.trace_id).limit(1)).first():
                    have.add("sched")  # the kernel's scheduling (docs/offcpu.md)
        return frozenset(have)

    @cached_property
    def family(self) -> str:
        """The trace format's family: "v2" (Go 1.22+) or "v1" (Go 1.11 to 1.21),
        whose traces cannot show what a syscall already running when tracing
        began did with its P."""
        t = models.traces
        with self.engine.connect() as conn:
            fam = conn.execute(select(t.c.family).where(t.c.id == self.trace_id)).scalar()
        return str(fam or "v2")

    @cached_property
    def gomaxprocs(self) -> int | None:
        """The largest GOMAXPROCS the trace's metrics report, None if unknown
        (from the overview's counter columns: the loader stages them; reading
        the metrics table scans every sample)."""
        from ingest.derive.overview_counters import GOMAXPROCS_METRIC, trace_counters
        from ingest.views.quantiles import step_parts

        c = trace_counters(self.engine, self.frames, self.trace_id)
        if GOMAXPROCS_METRIC not in c.names:
            return None
        i = c.names.index(GOMAXPROCS_METRIC)
        a, b = int(c.off[i]), int(c.off[i + 1])
        # Its samples only, decoded a part at a time (every counter's whole
        # columns were 480 MB on the 1 GB trace).
        best: int | None = None
        for at, value in step_parts(c.value, PART_ROWS):
            lo, hi = max(a, at), min(b, at + len(value))
            if lo < hi:
                top = int(value[lo - at:hi - at].max())
                best = top if best is None else max(best, top)
            if at + len(value) >= b:
                break
        return best

    @cached_property
    def network_waits(self) -> dict[str, I64]:
        """ingest.views.syscalls.network_waits, once for the rules that read it."""
        from ingest.views.syscalls import network_waits

        return network_waits(self.frames)

    def stack_frames(self, stack_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        from ingest.views.goroutines import stack_frames

        return stack_frames(self.engine, self.trace_id, stack_ids)

    def stack_refs(self, stack_id: I64, dur: I64, top: int = MAX_EVIDENCE,
                   label: str = "") -> list[StackRef]:
        """The ``top`` stacks by total duration (ties: by id) with their frames."""
        if len(stack_id) == 0:
            return []
        uniq, inv = np.unique(stack_id, return_inverse=True)
        inv = inv.reshape(-1)
        cnt = np.bincount(inv, minlength=len(uniq))
        tot = np.zeros(len(uniq), np.int64)
        np.add.at(tot, inv, dur.astype(np.int64))
        order = np.lexsort((uniq, -tot))[:top]
        frames = self.stack_frames([int(uniq[i]) for i in order])
        return [StackRef(stack_id=int(uniq[i]), count=int(cnt[i]), total_ns=int(tot[i]),
                         frames=frames.get(int(uniq[i]), []), label=label)
                for i in order.tolist()]

    @cached_property
    def goroutine_rows(self) -> int:
        """Number of interval rows that belong to goroutines (they come first)."""
        lanes = self.frames.goroutines
        return int(lanes.off[-1]) if len(lanes.ids) else 0

    def goroutine_of_rows(self, rows: I64) -> I64:
        """Goroutine id of each goroutine interval row."""
        lanes = self.frames.goroutines
        lane = np.searchsorted(lanes.off, rows, side="right") - 1
        return lanes.ids[lane].astype(np.int64)

    def kind_codes(self, to_state: str, reasons: tuple[str, ...] | None = None,
                   resource: str = "goroutine") -> list[int]:
        """Kind codes of transitions into ``to_state`` (with one of ``reasons``)."""
        return [c for c, k in self.frames.kinds.items()
                if k.resource == resource and k.to_state == to_state
                and (reasons is None or k.reason in reasons)]

    @cached_property
    def runnable(self) -> TimeInside:
        """The goroutines' Runnable intervals (their rows: :meth:`runnable_rows`)."""
        runnable = models.STATE_CODE["Runnable"]
        state = self.frames.state[:self.goroutine_rows]
        count = sum(int(np.count_nonzero(state[a:a + PART_ROWS] == runnable))
                    for a in range(0, len(state), PART_ROWS))
        start, end = np.empty(count, np.int64), np.empty(count, np.int64)
        iv = self.frames.intervals
        at = 0
        # A part of the rows at a time, its mapped pages handed back after it:
        # the whole columns are 1.6 GB on the 1 GB trace.
        for a in range(0, len(state), PART_ROWS):
            idx = np.flatnonzero(state[a:a + PART_ROWS] == runnable)
            idx += a
            start[at:at + len(idx)] = iv.take("start_ts", idx)
            end[at:at + len(idx)] = iv.take("end_ts", idx)
            at += len(idx)
        return TimeInside(start, end)

    def runnable_rows(self, idx: I64) -> I64:
        """The interval rows of the Runnable intervals ``idx`` (indices into
        :attr:`runnable`), found again rather than kept (200 MB on the 1 GB trace)."""
        runnable = models.STATE_CODE["Runnable"]
        state = self.frames.state[:self.goroutine_rows]
        idx = np.asarray(idx, np.int64)
        order = np.argsort(idx, kind="stable")
        want = idx[order]
        out = np.empty(len(idx), np.int64)
        seen = 0
        for a in range(0, len(state), PART_ROWS):
            lo = int(np.searchsorted(want, seen))
            if lo == len(want):
                break
            rows = np.flatnonzero(state[a:a + PART_ROWS] == runnable)
            hi = int(np.searchsorted(want, seen + len(rows)))
            out[order[lo:hi]] = rows[want[lo:hi] - seen] + a
            seen += len(rows)
        return out

    def forget(self, *names: str) -> None:
        """Drop the shared facts ``names`` (cached properties), when no rule
        left reads them."""
        for name in names:
            self.__dict__.pop(name, None)


class _Before:
    """For any ascending times t: the sum over ``x`` of max(0, t[j] - x),
    exactly (int64), without sorting ``x``.

    Its values are counted and summed once per time bucket (a power of two
    wide, a few values each); at each t[j] the buckets before its own are
    taken whole by cumulative sums, and only the values sharing a bucket
    with some t[j], a small part, are sorted to split that bucket at t[j]."""

    def __init__(self, x: I64) -> None:
        self.x = x
        self.base = int(x.min()) if len(x) else 0
        span = int(x.max()) - self.base if len(x) else 0
        self.shift = (span // max(1, min(len(x) // 4, 1 << 22))).bit_length()
        self.nb = (span >> self.shift) + 1
        # A part at a time: whole-array temporaries were 3 x 8 bytes a value;
        # a value's bucket is not kept (100 MB a column on the 1 GB trace)
        # but found again where asked for, as cheap as reading it back.
        count = np.zeros(self.nb, np.int64)
        tot = np.zeros(self.nb, np.int64)
        for a in range(0, len(x), PART_ROWS):
            rel = x[a:a + PART_ROWS] - self.base
            bucket = rel >> self.shift
            count += np.bincount(bucket, minlength=self.nb)
            np.add.at(tot, bucket, rel)
        self.count = np.concatenate([[0], np.cumsum(count)])
        self.total = np.concatenate([[0], np.cumsum(tot)])

    def at(self, t: I64) -> I64:
        rt = t - self.base
        bt = np.clip(rt >> self.shift, 0, self.nb)  # nb: after every value
        queried = np.zeros(self.nb + 1, dtype=bool)
        queried[bt] = True
        parts = [np.zeros(0, np.int64)]
        for a in range(0, len(self.x), PART_ROWS):
            rel = self.x[a:a + PART_ROWS] - self.base
            parts.append(rel[queried[rel >> self.shift]])
        y = np.sort(np.concatenate(parts))
        del parts
        ycum = np.concatenate([[0], np.cumsum(y)])
        lo = np.searchsorted(y, np.maximum(bt << self.shift, 0), side="left")  # its bucket
        hi = np.searchsorted(y, rt, side="left")  # its values below t[j]
        hi = np.maximum(hi, lo)
        n = self.count[bt] + (hi - lo)
        below = self.total[bt] + (ycum[hi] - ycum[lo])
        return np.asarray(n * rt - below, dtype=np.int64)


class TimeInside:
    """Intervals [start, end), and the exact time they spend inside windows.

    ``integral(a, b)`` is, per window [a, b), the sum over intervals of
    their overlap with it (e.g. goroutine-ns spent Runnable), computed in
    int64 from F(t) = sum of max(0, t - start) - sum of max(0, t - end),
    the time spent before t, at the windows' ends only: linear in the
    intervals (no sort of them), and equal to the sum of the per-interval
    overlaps exactly.
    """

    def __init__(self, start: I64, end: I64) -> None:
        self.start = np.asarray(start, np.int64)
        self.end = np.asarray(end, np.int64)

    @cached_property
    def _starts(self) -> _Before:
        return _Before(self.start)

    @cached_property
    def _ends(self) -> _Before:
        return _Before(self.end)

    def integral(self, a: I64, b: I64) -> I64:
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        if not len(a) or not len(self.start):
            return np.zeros(len(a), np.int64)
        t = np.unique(np.concatenate([a, b]))
        f = self._starts.at(t) - self._ends.at(t)
        return np.asarray(f[np.searchsorted(t, b)] - f[np.searchsorted(t, a)], dtype=np.int64)

    def overlapping(self, a: int, b: int) -> I64:
        """Indices (into start/end) of the intervals overlapping [a, b)."""
        return np.flatnonzero((self.start < b) & (self.end > a))


class StepCount:
    """The number of open intervals over time, and its exact integral.

    ``integral(a, b)`` is the total time the intervals spent inside
    ``[a, b)``, summed over intervals (e.g. goroutine-ns spent Runnable),
    computed from the breakpoints in int64, so it equals the sum of the
    per-interval overlaps exactly.
    """

    def __init__(self, start: I64, end: I64, rows: I64) -> None:
        self.start = np.asarray(start, np.int64)
        self.end = np.asarray(end, np.int64)
        self.rows = rows
        ts = np.concatenate([self.start, self.end])
        delta = np.concatenate([np.ones(len(self.start), np.int64),
                                -np.ones(len(self.end), np.int64)])
        order = np.argsort(ts, kind="stable")
        ts, delta = ts[order], delta[order]
        # Already sorted: breakpoints are where the time changes (no second sort).
        first = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]]) if len(ts) else \
            np.zeros(0, np.int64)
        self.bp = ts[first]
        step = np.add.reduceat(delta, first) if len(ts) else np.zeros(0, np.int64)
        self.count = np.cumsum(step)  # open intervals on [bp[i], bp[i+1])
        widths = np.diff(self.bp)
        self.cum = np.concatenate([[0], np.cumsum(self.count[:-1] * widths)]).astype(np.int64)

    def at(self, t: I64) -> I64:
        """Integral from the first breakpoint up to each ``t``."""
        t = np.asarray(t, np.int64)
        if len(self.bp) == 0:
            return np.zeros(len(t), np.int64)
        i = np.searchsorted(self.bp, t, side="right") - 1
        ok = i >= 0
        ic = np.maximum(i, 0)
        return np.where(ok, self.cum[ic] + self.count[ic] * (t - self.bp[ic]), 0)

    def integral(self, a: I64, b: I64) -> I64:
        return self.at(b) - self.at(a)

    def overlapping(self, a: int, b: int) -> I64:
        """Indices (into start/end) of the intervals overlapping [a, b)."""
        return np.flatnonzero((self.start < b) & (self.end > a))


class Rule(Protocol):
    """A diagnostic rule (see the module docstring)."""

    id: ClassVar[str]
    family: ClassVar[str]
    title: ClassVar[str]
    requires: ClassVar[frozenset[str]]
    #: Threshold name -> default value (ns, counts, ratios); config overrides.
    defaults: ClassVar[dict[str, Any]]
    #: One line: what the rule measures (shown by --list-rules and the docs).
    doc: ClassVar[str]

    def check(self, ctx: Context, cfg: dict[str, Any]) -> list[Finding]: ...


def severity_for(value: float, threshold: float, critical_factor: float) -> str:
    """"critical" when ``value`` reaches ``critical_factor`` times the threshold."""
    return "critical" if threshold > 0 and value >= critical_factor * threshold else "warning"


def ms(ns: float | int | None) -> str:
    """A duration in ns as milliseconds for summaries (3 significant decimals)."""
    if ns is None:
        return "-"
    v = ns / 1e6
    return f"{v:.3f} ms" if v < 10 else f"{v:.1f} ms"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def nearest_rank(sorted_values: I64, q: float) -> int | None:
    from ingest.views.histo import nearest_rank as nr

    return nr(sorted_values, q)


def nearest_ranks(values: I64, qs: tuple[float, ...]) -> list[int]:
    """The nearest-rank ``qs`` quantiles of non-empty ``values``, then their
    maximum, as :func:`nearest_rank` of the sorted values gives them, in
    linear time."""
    n = len(values)
    ranks = [max(1, int(np.ceil(q * n))) - 1 for q in qs] + [n - 1]
    part = np.partition(np.asarray(values), sorted(set(ranks)))
    return [int(part[r]) for r in ranks]


def top_k(key: I64, tie: I64 | Callable[[I64], I64], k: int = MAX_EVIDENCE) -> I64:
    """Indices of the ``k`` largest ``key``, ties by ascending ``tie`` then
    index: ``np.lexsort((tie, -key))[:k]``, sorting only the candidates.
    ``tie`` may be a function giving the ties at some indices (ascending),
    read for the candidates only."""
    n = len(key)
    k = max(0, min(k, n))
    if 4 * k >= n:
        cand = np.arange(n, dtype=np.int64)
    else:
        cut = np.partition(key, n - k)[n - k]  # the k-th largest
        cand = np.flatnonzero(key >= cut).astype(np.int64)
    ties = tie(cand) if callable(tie) else tie[cand]
    return cand[np.lexsort((ties, -key[cand]))][:k].astype(np.int64)
