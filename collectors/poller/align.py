"""Align a poller recording (wall clock, OS thread ids) with a Go trace (trace ns, Ms).

Pure functions over arrays; the caller supplies the Go trace's syscall intervals
(goroutine ``Syscall`` state, with the M it entered on) and the recording's calls.

In Go 1.22+ traces on Linux the M id is the OS thread id, and trace time is
the monotonic clock (``nanotime()``, in 64 ns ticks), so one constant maps it to
the wall clock: ``wall = trace + offset``. Two ways to find ``offset``:

- ``clock-snapshot``: Go 1.25+ traces carry a clock snapshot (``meta.json``
  ``wall_clock``: ``wall_ns`` read with ``trace_ns``): ``offset = wall_ns - trace_ns``.
- ``monotonic-clock`` / ``syscall-matching``: the recorder's own
  ``CLOCK_REALTIME - CLOCK_MONOTONIC``, read when recording, checked against the
  syscalls: a goroutine's ``Syscall`` interval on thread T must contain the OS call
  strace saw on T, so each (Go interval, OS call) pair near each other bounds the
  offset to ``[os_end - go_end, os_start - go_start]``. If the clock reading lies in
  the range most pairs allow it is kept (``monotonic-clock``), else the middle of
  that range is used (``syscall-matching``).

Either way, :func:`containment` says how good the result is: the share of Go
syscall intervals that contain an OS call of the same thread once aligned (Go
intervals of calls strace did not trace, such as ``socket`` or ``setsockopt``,
contain none, so it is rarely 100%).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Calls:
    """Intervals per thread: ``thread``, ``start``, ``end`` (int64 arrays, same length)."""

    thread: I64
    start: I64
    end: I64

    @staticmethod
    def of(thread: Any, start: Any, end: Any) -> Calls:
        """From sequences of ints; rows with an unknown (None) value are dropped."""
        rows = [
            (int(t), int(s), int(e))
            for t, s, e in zip(thread, start, end, strict=True)
            if t is not None and s is not None and e is not None
        ]
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return Calls(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())


@dataclass(frozen=True)
class Alignment:
    """How trace time maps to the recording's wall clock, and how well."""

    method: str  # "clock-snapshot", "monotonic-clock", "syscall-matching" or "none"
    offset_ns: int | None  # wall_ns = trace_ns + offset_ns
    go_syscalls: int  # Go syscall intervals on threads the recording saw
    matched: int  # of those, how many contain an OS call of their thread once aligned
    slack_ns: int | None  # width of the offset range the syscall pairs allow
    note: str

    @property
    def quality(self) -> float | None:
        """matched / go_syscalls."""
        return self.matched / self.go_syscalls if self.go_syscalls else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "method": self.method,
            "offset_ns": self.offset_ns,
            "go_syscalls": self.go_syscalls,
            "matched": self.matched,
            "quality": None if self.quality is None else round(self.quality, 4),
            "slack_ns": self.slack_ns,
            "note": self.note,
        }


def offset_from_snapshot(wall_clock: Mapping[str, int]) -> int:
    """``wall - trace`` from a Go 1.25+ clock snapshot (decoder meta ``wall_clock``)."""
    return int(wall_clock["wall_ns"]) - int(wall_clock["trace_ns"])


def _by_thread(calls: Calls) -> dict[int, tuple[I64, I64]]:
    out: dict[int, tuple[I64, I64]] = {}
    if not len(calls.thread):
        return out
    order = np.lexsort((calls.start, calls.thread))
    t, s, e = calls.thread[order], calls.start[order], calls.end[order]
    cuts = np.flatnonzero(np.diff(t)) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(t)], strict=True):
        out[int(t[lo])] = (s[lo:hi], e[lo:hi])
    return out


def containment(go: Calls, os_calls: Calls, offset_ns: int) -> tuple[int, int]:
    """(Go intervals on recorded threads, how many contain an OS call of that thread)."""
    os_by = _by_thread(os_calls)
    total = matched = 0
    for tid, (gs, ge) in _by_thread(go).items():
        if tid not in os_by:
            continue
        ws, we = os_by[tid]
        lo = gs + offset_ns
        hi = ge + offset_ns
        # Calls on one thread do not overlap: the first one starting after the
        # Go interval's start is the only candidate to end before its end.
        idx = np.searchsorted(ws, lo, side="left")
        ok = idx < len(ws)
        inside = np.zeros(len(gs), dtype=bool)
        inside[ok] = we[idx[ok]] <= hi[ok]
        total += len(gs)
        matched += int(inside.sum())
    return total, matched


def match_offset(
    go: Calls, os_calls: Calls, coarse_ns: int, window_ns: int = 2_000_000
) -> tuple[int, int, int] | None:
    """Offsets consistent with the most syscall pairs near ``coarse_ns``:
    (low, high, pairs agreeing), or None without pairs.

    Every OS call on a Go interval's thread starting within ``window_ns`` of the
    interval (mapped with ``coarse_ns``) proposes the offsets that would put it
    inside; the answer is the range most proposals share.
    """
    os_by = _by_thread(os_calls)
    lows: list[I64] = []
    highs: list[I64] = []
    for tid, (gs, ge) in _by_thread(go).items():
        if tid not in os_by:
            continue
        ws, we = os_by[tid]
        first = np.searchsorted(ws, gs + coarse_ns - window_ns, side="left")
        last = np.searchsorted(ws, ge + coarse_ns + window_ns, side="right")
        counts = last - first
        if not counts.sum():
            continue
        gi = np.repeat(np.arange(len(gs)), counts)
        oi = np.concatenate([np.arange(a, b) for a, b in zip(first, last, strict=True)])
        lo = we[oi] - ge[gi]
        hi = ws[oi] - gs[gi]
        ok = lo <= hi  # the OS call fits inside the Go interval
        lows.append(lo[ok])
        highs.append(hi[ok])
    if not lows or not sum(len(x) for x in lows):
        return None
    lo_all = np.concatenate(lows)
    hi_all = np.concatenate(highs)
    # Sweep: +1 at each range's start, -1 just after its end; ties: starts first.
    points = np.concatenate([lo_all, hi_all])
    deltas = np.concatenate([np.ones(len(lo_all), np.int64), -np.ones(len(hi_all), np.int64)])
    order = np.lexsort((-deltas, points))
    depth = np.cumsum(deltas[order])
    best = int(np.argmax(depth))
    start = int(points[order][best])
    end = int(points[order][best + 1]) if best + 1 < len(points) else start
    return start, end, int(depth[best])


def align(
    go: Calls,
    os_calls: Calls,
    wall_clock: Mapping[str, int] | None = None,
    coarse_offset_ns: int | None = None,
) -> Alignment:
    """Choose the best available method and measure the result."""
    if wall_clock:
        offset = offset_from_snapshot(wall_clock)
        total, matched = containment(go, os_calls, offset)
        return Alignment("clock-snapshot", offset, total, matched, None,
                         "Go 1.25+ clock snapshot: wall_ns - trace_ns")
    if coarse_offset_ns is None:
        return Alignment("none", None, 0, 0, None,
                         "no clock snapshot in the trace and no clock pair in the recording")
    found = match_offset(go, os_calls, coarse_offset_ns)
    if found is None:
        total, matched = containment(go, os_calls, coarse_offset_ns)
        return Alignment("none", coarse_offset_ns, total, matched, None,
                         "no Go syscall has an OS call of its thread nearby: the offset is "
                         "the recorder's realtime-monotonic difference, unverified")
    low, high, pairs = found
    if low <= coarse_offset_ns <= high:
        # The clock reading is exact when trace time is CLOCK_MONOTONIC, and
        # the syscalls agree with it: keep it.
        total, matched = containment(go, os_calls, coarse_offset_ns)
        return Alignment("monotonic-clock", coarse_offset_ns, total, matched, high - low,
                         f"the recorder's realtime-monotonic difference, inside the range "
                         f"{pairs} syscall pairs allow")
    offset = (low + high) // 2
    total, matched = containment(go, os_calls, offset)
    return Alignment("syscall-matching", offset, total, matched, high - low,
                     f"the middle of the offsets {pairs} syscall pairs allow (the "
                     f"realtime-monotonic difference was {coarse_offset_ns - offset:+} ns off)")
