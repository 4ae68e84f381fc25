"""Per-second aggregates of one live window (a trace), computed from its frames.

A window is cut into bins of ``bin_ns`` (one second) from the trace's first
timestamp; the last bin ends at the trace's end and may be shorter
(``duration_ns``). Each bin gets (docs/live.md says what each number means):

- ``g_running`` ... ``g_syscall``: goroutines in that state, averaged over the
  bin's time (the sum of the state's interval overlap with the bin / its length);
  ``g_peak``: most goroutines alive (Running, Runnable, Waiting or Syscall) at
  one instant, ``g_waiting_peak`` the same for Waiting; ``g_created``:
  goroutines created (NotExist -> anything) in the bin.
- ``sched_*``: Runnable -> Running latency of the goroutines that started
  running in the bin (a Runnable interval followed by a Running one in the same
  goroutine, with a known start: not Undetermined), nearest-rank p50/p99, max.
- ``netpoll_waits`` / ``netpoll_p99_ns``: Waiting intervals with reason
  ``network`` that ended in the bin (the goroutine moved on: the next interval
  of the same goroutine exists), count and nearest-rank p99 duration.
- ``syscalls``: syscalls that began in the bin (start known);
  ``p_handoffs``: syscalls whose P was taken (``p_lost``) at a time in the bin
  (``stolen_ts``, else the syscall's end).
- ``gc_ns`` / ``stw_ns``: time covered by GC / stop-the-world ranges in the bin
  (the STW of starting the trace included: every window starts with one).
- ``heap_bytes``: the last ``/memory/classes/heap/objects:bytes`` sample at or
  before the bin's end (None before the first).
- ``threads``: Ms seen running a goroutine or in a syscall in the bin;
  ``procs_running``: Ps running, averaged over the bin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.frames import TraceFrames
from ingest.store import models

I64 = npt.NDArray[np.int64]
BIN_NS = 1_000_000_000
HEAP_METRIC = "/memory/classes/heap/objects:bytes"
#: Goroutine states counted as alive for g_peak.
ALIVE = tuple(models.STATE_CODE[s] for s in ("Running", "Runnable", "Waiting", "Syscall"))
STATE_COLUMNS = {"g_running": "Running", "g_runnable": "Runnable", "g_waiting": "Waiting",
                 "g_syscall": "Syscall"}


@dataclass(frozen=True)
class Span:
    """A GC or STW range; None ends are open (clipped to the trace)."""

    kind: str  # "gc" or "stw"
    start_ts: int | None
    end_ts: int | None


def nearest_rank(values: npt.NDArray[Any], q: float) -> int | None:
    """The nearest-rank q-quantile (the ceil(q*n)-th smallest), None when empty."""
    n = len(values)
    if n == 0:
        return None
    k = max(1, int(np.ceil(q * n)))
    return int(np.partition(values, k - 1)[k - 1])


def bin_edges(first_ts: int, last_ts: int, bin_ns: int = BIN_NS) -> I64:
    """Edges first_ts, first_ts+bin, ..., last_ts (at least one bin; a last bin
    shorter than half a bin is merged into the one before)."""
    n = max(1, -(-(last_ts - first_ts) // bin_ns))
    edges = first_ts + np.arange(n + 1, dtype=np.int64) * bin_ns
    edges[-1] = max(last_ts, first_ts + 1) if n == 1 else last_ts
    if n > 1 and edges[-1] - edges[-2] < bin_ns // 2:
        # A 1 s window lasts a little over 1 s: its last ms joins the previous bin.
        edges = np.delete(edges, -2)
    return edges


def time_in(starts: I64, ends: I64, edges: I64) -> npt.NDArray[np.float64]:
    """Sum over intervals of their overlap with each bin [edges[k], edges[k+1]).

    G(t) = sum of clip(t - start, 0, end - start) is piecewise linear; the
    overlap with a bin is G(b) - G(a), each G from sorted starts and ends.
    """
    if len(starts) == 0:
        return np.zeros(len(edges) - 1)
    s = np.sort(starts).astype(np.float64)
    e = np.sort(ends).astype(np.float64)
    cs = np.concatenate(([0.0], np.cumsum(s)))
    ce = np.concatenate(([0.0], np.cumsum(e)))
    t = edges.astype(np.float64)
    ns = np.searchsorted(s, t, side="left")
    ne = np.searchsorted(e, t, side="left")
    g = (ns * t - cs[ns]) - (ne * t - ce[ne])
    return np.diff(g)


def peaks(starts: I64, ends: I64, edges: I64) -> I64:
    """Most intervals open at one instant, per bin (ends before starts at equal times)."""
    nb = len(edges) - 1
    out = np.zeros(nb, dtype=np.int64)
    if len(starts) == 0:
        return out
    times = np.concatenate((starts, ends))
    delta = np.concatenate((np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)))
    order = np.lexsort((delta, times))
    times, level = times[order], np.cumsum(delta[order])
    lo = np.searchsorted(times, edges[:-1], side="left")
    hi = np.searchsorted(times, edges[1:], side="left")
    for k in range(nb):
        before = int(level[lo[k] - 1]) if lo[k] > 0 else 0
        inside = int(level[lo[k]:hi[k]].max()) if hi[k] > lo[k] else before
        out[k] = max(before, inside)
    return out


def _bin_of(ts: I64, edges: I64) -> I64:
    """Bin index of each time; -1 outside [edges[0], edges[-1]] (the end belongs to the last)."""
    k = np.searchsorted(edges, ts, side="right") - 1
    k = np.where(ts == edges[-1], len(edges) - 2, k)
    return np.where((ts < edges[0]) | (ts > edges[-1]), -1, k).astype(np.int64)


def _kind_table(frames: TraceFrames) -> tuple[I64, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per kind code: from-state code, 'reason is network', 'from NotExist'."""
    top = max(frames.kinds, default=0) + 1
    from_state = np.zeros(top, dtype=np.int64)
    network = np.zeros(top, dtype=bool)
    created = np.zeros(top, dtype=bool)
    for code, k in frames.kinds.items():
        from_state[code] = models.STATE_CODE.get(k.from_state, 0)
        network[code] = k.reason == "network"
        created[code] = k.from_state == "NotExist"
    return from_state, network, created


def window_seconds(frames: TraceFrames, spans: Sequence[Span], heap: Sequence[tuple[int, int]],
                   bin_ns: int = BIN_NS) -> list[dict[str, Any]]:
    """One dict per bin: ``bin``, ``start_ts`` (trace ns), ``duration_ns`` and the
    aggregates named in the module docstring."""
    t0, t1 = frames.first_ts, frames.last_ts
    edges = bin_edges(t0, t1, bin_ns)
    nb = len(edges) - 1
    iv = frames.intervals
    n_g = int(frames.goroutines.off[-1]) if len(frames.goroutines.off) else 0
    start = np.clip(iv["start_ts"], t0, t1)
    end = np.clip(iv["end_ts"], t0, t1)
    state, kind, rid = frames.state, iv["kind"], iv["rid"]
    is_g = np.zeros(len(state), dtype=bool)
    is_g[:n_g] = True
    from_state, network, created = _kind_table(frames)
    kcodes = kind.astype(np.int64)
    # A goroutine first seen through a status event (from Undetermined) had that
    # state since the window began: nothing happened to it before (v2 traces
    # emit the status right before a goroutine's first event, or at the end).
    first = frames.goroutines.off[:-1].astype(np.int64)
    first = first[from_state[kcodes[first]] == models.STATE_CODE["Undetermined"]]
    start[first] = t0
    # The next row belongs to the same goroutine: this interval ended in a transition.
    followed = np.zeros(len(state), dtype=bool)
    if n_g > 1:
        followed[:n_g - 1] = rid[1:n_g] == rid[:n_g - 1]
    nxt = np.zeros(len(state), dtype=np.int8)
    nxt[:-1] = state[1:]

    rows: list[dict[str, Any]] = [
        {"bin": k, "start_ts": int(edges[k]), "duration_ns": int(edges[k + 1] - edges[k])}
        for k in range(nb)]
    dur = np.diff(edges).astype(np.float64)
    for col, name in STATE_COLUMNS.items():
        m = is_g & (state == models.STATE_CODE[name])
        avg = time_in(start[m], end[m], edges) / dur
        for k in range(nb):
            rows[k][col] = float(avg[k])
    alive = is_g & np.isin(state, ALIVE)
    waiting = is_g & (state == models.STATE_CODE["Waiting"])
    for col, m in (("g_peak", alive), ("g_waiting_peak", waiting)):
        pk = peaks(start[m], end[m], edges)
        for k in range(nb):
            rows[k][col] = int(pk[k])
    _count_into(rows, "g_created", _bin_of(start[is_g & created[kcodes]], edges))

    runnable = (is_g & followed & (state == models.STATE_CODE["Runnable"])
                & (nxt == models.RUNNING)
                & (from_state[kcodes] != models.STATE_CODE["Undetermined"]))
    _quantiles_into(rows, "sched", end[runnable] - start[runnable],
                    _bin_of(end[runnable], edges))
    net = (waiting & followed & network[kcodes]
           & (from_state[kcodes] != models.STATE_CODE["Undetermined"]))
    _quantiles_into(rows, "netpoll", end[net] - start[net], _bin_of(end[net], edges))

    sc = frames.syscalls
    known = sc["start_known"] == 1
    _count_into(rows, "syscalls", _bin_of(sc["start_ts"][known], edges))
    lost = sc["p_lost"] == 1
    when = np.where(sc["stolen_ts"] >= 0, sc["stolen_ts"], sc["end_ts"])[lost]
    _count_into(rows, "p_handoffs", _bin_of(when, edges))

    for col, kind_name in (("gc_ns", "gc"), ("stw_ns", "stw")):
        ss = np.array([t0 if s.start_ts is None else s.start_ts
                       for s in spans if s.kind == kind_name], dtype=np.int64)
        ee = np.array([t1 if s.end_ts is None else s.end_ts
                       for s in spans if s.kind == kind_name], dtype=np.int64)
        tot = time_in(np.clip(ss, t0, t1), np.clip(ee, t0, t1), edges)
        for k in range(nb):
            rows[k][col] = int(round(tot[k]))

    hts = np.array([h[0] for h in heap], dtype=np.int64)
    hval = [h[1] for h in heap]
    order = np.argsort(hts, kind="stable")
    hts = hts[order]
    for k in range(nb):
        i = int(np.searchsorted(hts, edges[k + 1], side="right")) - 1
        rows[k]["heap_bytes"] = int(hval[int(order[i])]) if i >= 0 else None

    on_m = is_g & ((state == models.RUNNING) | (state == models.SYSCALL)) & (iv["m"] >= 0)
    ms, ms_s, ms_e = iv["m"][on_m], start[on_m], end[on_m]
    for k in range(nb):
        a, b = edges[k], edges[k + 1]
        sel = (ms_s < b) & (ms_e > a) | ((ms_s == ms_e) & (ms_s >= a) & (ms_s < b))
        rows[k]["threads"] = int(len(np.unique(ms[sel])))
    p_run = ~is_g & (state == models.RUNNING)
    avg = time_in(start[p_run], end[p_run], edges) / dur
    for k in range(nb):
        rows[k]["procs_running"] = float(avg[k])
    return rows


def _count_into(rows: list[dict[str, Any]], col: str, bins: I64) -> None:
    counts = np.bincount(bins[bins >= 0], minlength=len(rows))
    for k, row in enumerate(rows):
        row[col] = int(counts[k])


def _quantiles_into(rows: list[dict[str, Any]], prefix: str, values: I64, bins: I64) -> None:
    for k, row in enumerate(rows):
        v = values[bins == k]
        if prefix == "sched":
            row["sched_n"] = int(len(v))
            row["sched_p50_ns"] = nearest_rank(v, 0.5)
            row["sched_p99_ns"] = nearest_rank(v, 0.99)
            row["sched_max_ns"] = int(v.max()) if len(v) else None
        else:
            row["netpoll_waits"] = int(len(v))
            row["netpoll_p99_ns"] = nearest_rank(v, 0.99)
