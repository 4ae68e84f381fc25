"""Scheduler latency: how long goroutines stayed Runnable before they ran.

Each spell of Runnable (one Runnable interval, or several in a row: Go
occasionally reports Runnable->Runnable) that is followed, in the same
goroutine, by a Running interval is one latency sample: the time from the
transition into Runnable to the transition to Running. The P and M are
those of the Running transition (where it got to run). Runnable intervals
entered from ``Undetermined`` (runnable when the trace began) have no known
start and are counted as ``censored``, not sampled; spells not followed by
Running (still runnable at the end, or gone) are counted as ``pending``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.cache import Steps, cached, cached_json
from ingest.derive.frames import TraceFrames
from ingest.store import models
from ingest.views.histo import (
    bin_index,
    group_percentiles,
    log_bins,
    log_counts,
    log_histogram,
    log_result,
    percentile_dict,
    percentile_ranks,
    released,
    summary,
    summary_of,
    time_bins,
)
from ingest.views.quantiles import GroupQuantiles, buckets_of, chunks, lane_chunks, step_parts

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

WORST = 50
RUNNABLE = models.STATE_CODE["Runnable"]
#: The "next state" of a goroutine's last row: no state's code (there are
#: seven, and a row's pair of states is packed in a byte as state * 8 + next).
NO_NEXT = len(models.STATE_NAMES)

#: Interval rows per chunk of the samples' build (its memory: a chunk's).
ROW_CHUNK = 1 << 21

#: The derived-value key the samples' rows are kept under.
SAMPLES_KEY = "latency_samples"

#: A sample's columns (:meth:`Samples.columns`) and their types.
COLUMN_TYPES: dict[str, type[np.integer[Any]]] = {
    "goid": np.int32, "runnable_ts": np.int64, "running_ts": np.int64, "p": np.int32,
    "m": np.int32, "cause": np.int8, "latency": np.int64}
COLUMNS = ("goid", "runnable_ts", "running_ts", "p", "m", "cause")
#: Samples read at a time by :meth:`Samples.read`.
READ_SAMPLES = 1 << 22

#: What made a goroutine Runnable, from the transition into it.
CAUSES = ("created", "unblocked", "preempted", "yielded", "syscall", "other")


@dataclass
class SampleRows:
    """The latency samples as kept on disk: rows of the frames' intervals, not
    copies of their columns (the samples' times, goroutine, P and M are the
    rows' own). ``ran`` is each sample's Running row (ascending: kept as
    steps); its spell's first Runnable row is the row before, except for the
    few spells of several Runnable rows: samples ``long_at``, from rows
    ``long_first``."""

    ran: Steps  # ascending, a few rows apart: a byte a sample
    long_at: I64
    long_first: I64
    censored: int
    pending: int


class Samples:
    """One latency sample per element, in (goroutine, time) order: each column
    (goid, p and m int32, cause int8, times int64) read from the frames
    through the kept rows (:class:`SampleRows`) when first asked for."""

    def __init__(self, rows: SampleRows, frames: TraceFrames) -> None:
        self.rows = rows
        self.frames = frames
        self.censored = rows.censored
        self.pending = rows.pending

    def __len__(self) -> int:
        return len(self.rows.ran)

    def columns(self, at: I64 | None = None, ran_rows: I64 | None = None,
                names: tuple[str, ...] = COLUMNS, base: int = 0) -> dict[str, Arr]:
        """Columns ``names`` (of :data:`COLUMNS`) of samples ``at``
        (ascending; all when None), read from the frames. ``ran_rows``: the
        Running rows of samples ``base`` on, when read already (``at`` then
        counts from ``base``)."""
        ran = self.rows.ran.values() if ran_rows is None else ran_rows
        long_at, long_first = self.rows.long_at, self.rows.long_first
        if base or len(ran) < len(self):
            inside = (long_at >= base) & (long_at < base + len(ran))
            long_at, long_first = long_at[inside] - base, long_first[inside]
        if at is not None:
            ran = ran[at]
        first = ran - 1
        if at is None:
            first[long_at] = long_first
        elif len(long_at):
            pos = np.searchsorted(at, long_at)
            hit = pos < len(at)
            hit[hit] = at[pos[hit]] == long_at[hit]
            first[pos[hit]] = long_first[hit]
        iv = self.frames.intervals
        read: dict[str, Callable[[], Arr]] = {
            "goid": lambda: iv.take("rid", first).astype(np.int32, copy=False),
            "runnable_ts": lambda: iv.take("start_ts", first).astype(np.int64, copy=False),
            "running_ts": lambda: iv.take("start_ts", ran).astype(np.int64, copy=False),
            "p": lambda: iv.take("p", ran).astype(np.int32, copy=False),
            "m": lambda: iv.take("m", ran).astype(np.int32, copy=False),
            "cause": lambda: _cause_of_kinds(self.frames).astype(np.int8)[iv.take("kind", first)],
            "latency": lambda: np.subtract(iv.take("start_ts", ran), iv.take("start_ts", first),
                                           dtype=np.int64),
        }
        return {name: read[name]() for name in names}

    def read(self, names: tuple[str, ...], at: I64 | None = None) -> dict[str, Arr]:
        """:meth:`columns` ``names`` of samples ``at`` (ascending; all when
        None), :data:`READ_SAMPLES` samples at a time: no whole-trace
        temporaries (the samples' rows and every column were 1.4 GB on the
        1 GB trace)."""
        n = len(self) if at is None else len(at)
        out = {name: np.empty(n, COLUMN_TYPES[name]) for name in names}
        done = 0
        for a, ran in step_parts(self.rows.ran, READ_SAMPLES):
            if at is None:
                part = None
                k = len(ran)
            else:
                k = int(np.searchsorted(at, a + len(ran))) - done
                if not k:
                    continue
                part = np.asarray(at[done:done + k], np.int64) - a
            for name, col in self.columns(part, ran, names, base=a).items():
                out[name][done:done + k] = col
            done += k
        return out

    @cached_property
    def _all(self) -> dict[str, Arr]:
        return self.columns()

    @property
    def goid(self) -> Arr:
        return self._all["goid"]

    @property
    def runnable_ts(self) -> I64:
        return self._all["runnable_ts"]

    @property
    def running_ts(self) -> I64:
        return self._all["running_ts"]

    @property
    def p(self) -> Arr:
        return self._all["p"]

    @property
    def m(self) -> Arr:
        return self._all["m"]

    @property
    def cause(self) -> Arr:
        """Index into CAUSES."""
        return self._all["cause"]

    @property
    def latency(self) -> I64:
        return self.running_ts - self.runnable_ts


def _cause_of_kinds(frames: TraceFrames) -> I64:
    top = max(frames.kinds, default=0) + 1
    out = np.full(top, CAUSES.index("other"), dtype=np.int64)
    for code, k in frames.kinds.items():
        if k.from_state == "NotExist":
            c = "created"
        elif k.from_state == "Waiting":
            c = "unblocked"
        elif k.from_state == "Syscall":
            c = "syscall"
        elif k.from_state == "Running":
            c = "yielded" if k.reason == "runtime.Gosched" else "preempted"
        else:
            c = "other"
        out[code] = CAUSES.index(c)
    return out


def latency_samples(frames: TraceFrames) -> Samples:
    """Every Runnable->Running latency of the trace (vectorised; its rows
    built once per trace and kept with its frames, ingest.derive.cache)."""
    kept = cached(frames, SAMPLES_KEY, lambda: _latency_samples(frames),
                  persist=(SampleRows, Steps))
    return Samples(kept, frames)


def _latency_samples(frames: TraceFrames) -> SampleRows:
    lanes = frames.goroutines
    n = int(lanes.off[-1]) if len(lanes.ids) else 0
    st = frames.state[:n]
    iv = frames.intervals
    top = max(frames.kinds, default=0) + 1
    undet = np.zeros(top, dtype=bool)
    for code, k in frames.kinds.items():
        undet[code] = k.from_state == "Undetermined"
    # At most one sample per Runnable row: room for them all, of which only
    # the part written is ever touched (and kept).
    runnable = int(np.count_nonzero(st == RUNNABLE))
    ran: npt.NDArray[np.integer[Any]] = np.empty(runnable, np.int32 if n < 2**31 else np.int64)
    long_at: list[I64] = []
    long_first: list[I64] = []
    filled = censored = ends_n = splits_n = 0
    for lo, hi in _lane_chunks(lanes.off, n):
        ends, splits = _ends_and_splits(st[lo:hi], lanes.off, lo, hi)
        ends_n, splits_n = ends_n + len(ends), splits_n + len(splits)
        first = _spell_starts(ends, splits) + lo
        kind = iv.take("kind", first)
        cens = undet[kind]
        if cens.any():
            censored += int(cens.sum())
            first, ends = first[~cens], ends[~cens]
        nxt = ends + (lo + 1)
        ran[filled:filled + len(first)] = nxt
        longer = np.flatnonzero(first != nxt - 1)
        long_at.append(longer + filled)
        long_first.append(first[longer])
        filled += len(first)
    # Runnable rows neither followed by Running nor by Runnable end a spell
    # that never ran: still runnable at the end, or gone.
    return SampleRows(Steps.of(ran[:filled]), np.concatenate([np.zeros(0, np.int64), *long_at]),
                      np.concatenate([np.zeros(0, np.int64), *long_first]),
                      censored=censored, pending=runnable - ends_n - splits_n)


def _lane_chunks(off: I64, n: int) -> list[tuple[int, int]]:
    """Rows 0..n in chunks of about ROW_CHUNK, cut between goroutines: no
    spell crosses a cut."""
    return lane_chunks(off, n, ROW_CHUNK)


def _ends_and_splits(st: Arr, off: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """In rows lo..hi (their states ``st``; cut between goroutines): the
    Runnable rows followed by Running, and those followed by Runnable, in the
    same goroutine (local indices)."""
    # Each row's state and its successor's in the same goroutine, as one
    # byte (state * 8 + next state; NO_NEXT after a goroutine's last row):
    # a few passes over bytes where masks per condition took many.
    pair = np.left_shift(st, 3, dtype=np.int8)
    pair[:-1] |= st[1:]
    a, b = np.searchsorted(off, [lo + 1, hi], side="left")
    last = off[a:b + 1] - 1 - lo  # goroutines' last rows in the chunk
    last = last[(last >= 0) & (last < hi - lo)]
    pair[last] = (st[last] << 3) | NO_NEXT
    # Go sometimes reports Runnable->Runnable: one wait split in two. A
    # sample spans the whole spell of consecutive Runnable intervals.
    return (np.flatnonzero(pair == RUNNABLE * 8 + models.RUNNING),
            np.flatnonzero(pair == RUNNABLE * 9))


def _spell_starts(ends: I64, splits: I64) -> I64:
    """The first row of the Runnable spell that ends at each row of ``ends``:
    ``splits`` (ascending) are the rare Runnable rows followed by another
    Runnable row of their goroutine, so only ends just after one step back."""
    first = ends.copy()
    if not len(splits) or not len(ends):
        return first
    def is_split(rows: I64) -> npt.NDArray[np.bool_]:
        at = np.minimum(np.searchsorted(splits, rows), len(splits) - 1)
        return np.asarray(splits[at] == rows)

    j = np.searchsorted(ends, splits + 1)  # ends just after a split
    j = j[(j < len(ends)) & (ends[np.minimum(j, len(ends) - 1)] == splits + 1)]
    back = first[j] - 1
    while len(j):
        first[j] = back
        more = (back > 0) & is_split(back - 1)
        j, back = j[more], back[more] - 1
    return first


def latency_report(frames: TraceFrames, t1: int | None = None, t2: int | None = None,
                   worst: int = WORST) -> dict[str, Any]:
    """:func:`_latency_report`; the whole trace's is built once and kept."""
    if t1 is None and t2 is None:
        return cached_json(frames, f"latency_report-worst{worst}",  # type: ignore[no-any-return]
                           lambda: released(frames, lambda: _latency_report(frames, None, None,
                                                                            worst)))
    return released(frames, lambda: _latency_report(frames, t1, t2, worst))


def _latency_report(frames: TraceFrames, t1: int | None = None, t2: int | None = None,
                    worst: int = WORST) -> dict[str, Any]:
    """Samples whose goroutine started running in [t1, t2): summary,
    histogram, percentiles over time and per P, by cause, worst cases.
    Linear time, in chunks: percentiles are picked from value buckets
    (:mod:`ingest.views.quantiles`), never by a sort, and no pass allocates
    more than a chunk's worth."""
    kept = latency_samples(frames)
    cols, at = _window(kept, t1, t2)

    def more(idx: I64) -> dict[str, Arr]:  # goroutine and M of a few (ascending)
        return kept.read(("goid", "m"), idx if at is None else at[idx])

    edges = time_bins(frames.first_ts if t1 is None else t1,
                      frames.last_ts if t2 is None else t2)
    body = _report_chunked(cols, edges, worst, more)
    if body is None:  # counters too many (a thousand Ps or more): whole arrays
        body = _report_arrays(cols, edges, worst, more)
    s = kept
    return {"trace_id": frames.trace_id, "t1": t1, "t2": t2, "samples": body.pop("samples"),
            "censored": s.censored, "pending": s.pending, **body}


def _window(s: Samples, t1: int | None, t2: int | None) -> tuple[dict[str, Arr], I64 | None]:
    """The samples' columns the report reads whole (ran: running_ts, rt:
    runnable_ts, p, cause), of those that started running in [t1, t2) when
    given (and their indices), else of all (and None)."""
    at = None
    if t1 is not None or t2 is not None:
        rows = s.rows.ran.values()
        ran = np.asarray(s.frames.intervals["start_ts"][rows])
        del rows
        keep = np.ones(len(ran), dtype=bool)
        if t1 is not None:
            keep &= ran >= t1
        if t2 is not None:
            keep &= ran < t2
        del ran
        at = np.flatnonzero(keep)
    c = s.read(("running_ts", "runnable_ts", "p", "cause"), at)
    return {"ran": c["running_ts"], "rt": c["runnable_ts"], "p": c["p"], "cause": c["cause"]}, at


def _p_codes(p: Arr) -> tuple[I64, I64]:
    """(P ids present, ascending, -1 for none; code of each p + 1): P ids
    are small, so a table rather than a sort."""
    present = np.zeros(1, bool)
    for sl in chunks(len(p)):  # a chunk at a time: no trace-length temporaries
        seen = np.bincount(np.asarray(p[sl], dtype=np.int64) + 1) > 0
        if len(seen) > len(present):
            present = np.concatenate([present, np.zeros(len(seen) - len(present), bool)])
        present[:len(seen)] |= seen
    return np.flatnonzero(present) - 1, np.cumsum(present) - 1


def _finish(over: dict[str, Any], per_p: dict[str, Any], by_cause: dict[str, Any],
            edges: I64, pids: I64) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    over["edges"] = edges.tolist()
    per_p["p"] = pids.tolist()
    if len(pids) and pids[0] < 0:  # no P known: not a P's sample
        per_p = {k: v[1:] for k, v in per_p.items()}
    by_cause["cause"] = list(CAUSES)
    return over, per_p, by_cause


def _worst_rows(cols: dict[str, Arr], cand: I64, worst: int,
                more: Callable[[I64], dict[str, Arr]]) -> list[dict[str, Any]]:
    """The top ``worst`` of rows ``cand`` by latency, ties by time of running
    (their goroutine and M from ``more``)."""
    ran, rt = cols["ran"][cand], cols["rt"][cand]
    lat = ran - rt
    order = np.lexsort((ran, -lat))[:worst]
    picked = cand[order]
    asc = np.argsort(picked, kind="stable")
    extra = more(picked[asc])
    goid, m = np.empty(len(picked), np.int64), np.empty(len(picked), np.int64)
    goid[asc], m[asc] = extra["goid"], extra["m"]
    return [{"goid": int(goid[j]), "runnable_ts": int(rt[i]),
             "running_ts": int(ran[i]), "latency_ns": int(lat[i]), "p": int(cols["p"][cand[i]]),
             "m": int(m[j]), "cause": CAUSES[int(cols["cause"][cand[i]])]}
            for j, i in enumerate(order.tolist())]


#: Log-histogram bins from 1 ns to past 2**63 ns, by absolute exponent.
_LOG_BINS = 80


def _report_chunked(cols: dict[str, Arr], edges: I64, worst: int,
                    more: Callable[[I64], dict[str, Arr]]) -> dict[str, Any] | None:
    """The report's body in two passes over chunks of the samples: counts per
    (group, value bucket), sums, extremes and the histogram by absolute
    exponent; then the values of the buckets holding the wanted ranks (and
    the worst's candidates). None when a latency is negative or the Ps are
    too many for the counters: then :func:`_report_arrays`."""
    ran, rt, p, cause = cols["ran"], cols["rt"], cols["p"], cols["cause"]
    n = len(ran)
    parts = chunks(n)
    top = np.iinfo(np.int64).max  # latencies are >= 0: buckets of the latency itself
    q = {"time": GroupQuantiles(len(edges) - 1, 0, top), "p": GroupQuantiles(1, 0, top),
         "cause": GroupQuantiles(len(CAUSES), 0, top), "all": GroupQuantiles(1, 0, top)}
    hist = np.zeros(_LOG_BINS, np.int64)
    total = np.int64(0)
    zero = 0
    pos_min = pos_max = None

    def codes(sl: slice) -> tuple[I64, dict[str, I64 | None]]:
        lat = ran[sl] - rt[sl]
        return lat, {"time": bin_index(ran[sl], edges),
                     "p": np.asarray(p[sl], dtype=np.int64) + 1,  # -1: no P
                     "cause": np.asarray(cause[sl], dtype=np.int64), "all": None}

    for sl in parts:
        lat, g = codes(sl)
        if not len(lat):
            continue
        if int(lat.min()) < 0 or int(g["p"].min()) < 0:  # type: ignore[union-attr]
            return None
        q["p"].grow(int(g["p"].max()) + 1)  # type: ignore[union-attr]
        if not GroupQuantiles.fits(q["p"].n, top):
            return None
        b = buckets_of(lat)
        f = lat.astype(np.float64)
        for name, qq in q.items():
            qq.count(g[name], lat, b, f)
        total += lat.sum()
        pos = lat[lat > 0]
        zero += len(lat) - len(pos)
        if len(pos):
            hist += log_counts(pos, 0, _LOG_BINS)
            pos_min = pos.min() if pos_min is None else min(pos_min, pos.min())
            pos_max = pos.max() if pos_max is None else max(pos_max, pos.max())
    k = min(n, worst * 4 + 64) if worst > 0 else 0
    for name, qq in q.items():
        ranks = percentile_ranks(qq.counts)
        qq.plan(ranks + [np.array([n - k])] if name == "all" and k else ranks)
    # The worst: every sample in or above the bucket of the k-th largest.
    cut_bucket = int(np.count_nonzero(np.cumsum(q["all"].cells) <= n - k)) if k else 0
    cand_parts = []
    for sl in parts:
        lat, g = codes(sl)
        b = buckets_of(lat)
        for name, qq in q.items():
            qq.collect(g[name], lat, b)
        if k:
            cand_parts.append(np.flatnonzero(b >= cut_bucket) + sl.start)
    picks = {name: qq.picks() for name, qq in q.items()}
    cand = np.zeros(0, np.int64)
    if k:
        cand = np.concatenate(cand_parts)
        cand = cand[ran[cand] - rt[cand] >= int(picks["all"][4][0])]
    present = q["p"].counts > 0
    pids = np.flatnonzero(present) - 1
    over, per_p, by_cause = _finish(
        percentile_dict(q["time"].counts, q["time"].sums, picks["time"]),
        percentile_dict(q["p"].counts[present], q["p"].sums[present],
                        [x[present] for x in picks["p"]]),
        percentile_dict(q["cause"].counts, q["cause"].sums, picks["cause"]), edges, pids)
    if n == 0:
        histogram: dict[str, Any] = {"edges": [], "counts": [], "zero": 0}
    elif pos_min is None:
        histogram = {"edges": [0.0, 1.0], "counts": [zero], "zero": zero}
    else:
        lo, hist_edges = log_bins(pos_min, pos_max)
        nbins = len(hist_edges) - 1
        # log_histogram clips to its bins: what lies outside joins the end bins.
        counts = hist[lo:lo + nbins].copy()
        counts[0] += hist[:lo].sum()
        counts[-1] += hist[lo + nbins:].sum()
        histogram = log_result(hist_edges, counts, zero)
    mean = float(q["all"].sums[0] / n) if n else 0.0
    return {"samples": n,
            "summary": summary_of(n, int(total), mean, [int(x[0]) for x in picks["all"][:4]]),
            "histogram": histogram, "over_time": over, "per_p": per_p, "by_cause": by_cause,
            "worst": _worst_rows(cols, cand, worst, more)}


def _report_arrays(cols: dict[str, Arr], edges: I64, worst: int,
                   more: Callable[[I64], dict[str, Arr]]) -> dict[str, Any]:
    """:func:`_report_chunked` over whole arrays: the straightforward form."""
    ran, rt = cols["ran"], cols["rt"]
    lat = ran - rt
    pids, code_of = _p_codes(cols["p"])
    p = np.asarray(cols["p"], dtype=np.int64)
    over, per_p, by_cause = _finish(
        group_percentiles(bin_index(ran, edges), lat, len(edges) - 1),
        group_percentiles(code_of[p + 1] if len(p) else p, lat, len(pids)),
        group_percentiles(np.asarray(cols["cause"], dtype=np.int64), lat, len(CAUSES)),
        edges, pids)
    k = min(len(lat), worst * 4 + 64) if worst > 0 else 0
    cand = np.zeros(0, np.int64)
    if k:
        cut = np.sort(lat)[len(lat) - k]
        cand = np.flatnonzero(lat >= cut)
    return {"samples": int(len(lat)), "summary": summary(lat), "histogram": log_histogram(lat),
            "over_time": over, "per_p": per_p, "by_cause": by_cause,
            "worst": _worst_rows(cols, cand, worst, more)}
