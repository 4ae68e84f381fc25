"""Goroutines and threads by state over time: the exact time in each state per
bin, in one pass over the goroutine intervals.

Each goroutine interval row gets one *series code*: Running and Syscall split
by whether the row ran on a thread (``m != -1``: those are the threads'
Running and Syscall too, as :func:`ingest.views.states_frames.thread_stays`
counts them), Runnable, and Waiting by wait category
(:func:`ingest.views.states_frames.goroutine_wait_categories`, a chunk at a time). For the
intervals ``[s, e)`` (clipped to the edges' span) the time inside bin ``j`` =
``[x_j, x_j+1)`` is

    width_j * (intervals in progress at x_j)
    + sum over starts s in bin j of (x_j+1 - s) - sum over ends e in bin j of (x_j+1 - e)

so per (code, bin) a count and a sum of offsets under one bin width are all
it takes (``np.bincount`` over ``code * bins + bin``, rows in chunks; no
sort). Sums are exact integers: the offsets' float sums stay below 2**53 (a
chunk's offsets are split in high and low bits when they could not). A bin's
average count is its time over its width.

About 1 s for the 19.5 M goroutine intervals of a 200 MB trace: the
overview keeps the whole trace's default view (:func:`ingest.views.overview.overview`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.frames import TraceFrames, release_columns
from ingest.extensions import optional_extension
from ingest.store import models
from ingest.views.states_frames import wait_categories
from ingest.views.wait_reasons import WAIT_CATEGORIES, node_name, wait_category

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: Goroutine series of the stacked area, bottom to top.
STATE_SERIES = ("Running", "Runnable", "Syscall",
                *(node_name("Waiting", c) for c in WAIT_CATEGORIES))
#: Decimals of the time-weighted averages in the JSON.
AVG_DECIMALS = 6

_RUNNING, _RUNNABLE, _SYSCALL, _WAITING = (
    models.STATE_CODE[s] for s in ("Running", "Runnable", "Syscall", "Waiting"))
# Series codes: (Running, on a thread), (Running, none), Runnable, (Syscall,
# on a thread), (Syscall, none), then one per wait category.
_RUN_M, _RUN_NO_M, _RUNNABLE_C, _SYS_M, _SYS_NO_M, _WAIT0 = range(6)
_CODES = _WAIT0 + len(WAIT_CATEGORIES)
#: Interval rows per chunk (a few tens of MB of temporaries at a time).
_CHUNK = 1 << 21
_EXACT = 1 << 53


def _bin_sums(p: I64, code: npt.NDArray[np.int8], edges: I64
              ) -> tuple[I64, I64]:
    """Per (code, bin) of the points ``p`` (inside the edges' span): their
    count and the exact sum of ``x_j+1 - p``; a point on the last edge lands in
    a dummy last bin, dropped by the caller."""
    nb = len(edges)
    j = np.searchsorted(edges, p, "right") - 1
    idx = code.astype(np.int64) * nb + j
    size = _CODES * nb
    count = np.bincount(idx, minlength=size)
    off = edges[np.minimum(j + 1, nb - 1)] - p
    top = int(off.max()) if len(off) else 0
    if top * len(off) < _EXACT:
        total = np.bincount(idx, weights=off.astype(np.float64), minlength=size)
        return count, total.astype(np.int64)
    # Offsets whose float sums could round: high and low 26 bits apart.
    hi = np.bincount(idx, weights=(off >> 26).astype(np.float64), minlength=size)
    lo = np.bincount(idx, weights=(off & ((1 << 26) - 1)).astype(np.float64),
                     minlength=size)
    return count, (hi.astype(np.int64) << 26) + lo.astype(np.int64)


def _state_codes() -> npt.NDArray[np.int8]:
    """State code -> series code (Running and Syscall: on a thread; -1: none)."""
    lut = np.full(len(models.STATE_NAMES), -1, np.int8)
    lut[_RUNNING], lut[_RUNNABLE], lut[_SYSCALL] = _RUN_M, _RUNNABLE_C, _SYS_M
    return lut


_STATE_CODES = _state_codes()


def _row_codes(frames: TraceFrames, cats: npt.NDArray[np.int8], a: int, b: int
               ) -> npt.NDArray[np.int8]:
    """The series code of goroutine interval rows ``a:b`` (-1: in none;
    ``cats``: their wait categories)."""
    st = frames.state[a:b]
    code = _STATE_CODES[st]
    # Running and Syscall on no thread are the next code up.
    code += ((np.asarray(frames.intervals["m"][a:b]) == -1)
             & ((st == _RUNNING) | (st == _SYSCALL))).astype(np.int8)
    waiting = st == _WAITING
    code[waiting] = _WAIT0 + cats[waiting]
    return code


def _code_tables(frames: TraceFrames) -> npt.NDArray[np.int8]:
    """ingest/csrc/binsums.c's series_codes tables: by state its series code
    and what a row on no thread adds; by kind its wait category and whether it
    inherits the category of the row before it (as :func:`wait_categories`)."""
    top = max(len(models.STATE_NAMES), max(frames.kinds, default=0) + 1)
    lut, no_m = np.full(top, -1, np.int8), np.zeros(top, np.int8)
    lut[:len(_STATE_CODES)] = _STATE_CODES
    no_m[_RUNNING] = no_m[_SYSCALL] = 1
    cat_of, inherit = np.full(top, -1, np.int8), np.zeros(top, np.int8)
    for code, k in frames.kinds.items():
        if k.to_state == "Waiting":
            cat_of[code] = WAIT_CATEGORIES.index(wait_category(k.reason))
            inherit[code] = k.from_state == "Waiting" and not k.reason
    return np.concatenate([lut, no_m, cat_of, inherit])


def _ids(a: Any) -> npt.NDArray[Any]:
    """An id column as 4- or 8-byte integers (as stored, or widened)."""
    return np.asarray(a) if np.asarray(a).dtype.itemsize in (4, 8) else np.asarray(a, np.int32)


def _release(iv: Any) -> None:
    release_columns(iv, "start_ts", "end_ts", "m", "kind", "rid")


def state_ns(frames: TraceFrames, edges: I64) -> tuple[dict[str, I64], dict[str, I64]]:
    """Exact ns per bin of ``edges``: for each of STATE_SERIES, the goroutines'
    time in it; and the threads' time Running and in Syscall (goroutine
    intervals begun on a thread), intervals clipped to the edges' span."""
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    nb = len(edges)
    lo, hi = int(edges[0]), int(edges[-1])
    count = np.zeros(_CODES * nb, np.int64)
    total = np.zeros(_CODES * nb, np.int64)
    iv = frames.intervals
    # One pass per chunk in C (ingest/csrc/binsums.c); numpy's the same sums.
    ext = optional_extension("ingest.views._binsums")
    edges = np.ascontiguousarray(edges, np.int64)
    tables = _code_tables(frames) if ext is not None else None
    carry = -1  # the wait category of the row before the chunk
    for a in range(0, n_g, _CHUNK):
        b = min(n_g, a + _CHUNK)
        if ext is not None:
            r = max(a - 1, 0)  # each lane's first row read with the row before
            code = np.empty(b - a, np.int8)
            carry = ext.series_codes(np.asarray(iv["kind"][r:b], np.int16), _ids(iv["rid"][r:b]),
                                     _ids(iv["m"][r:b]), np.asarray(frames.state[r:b], np.int8),
                                     a - r, tables, _WAITING, _WAIT0, carry, code)
            ext.bin_sums(iv["start_ts"][a:b], iv["end_ts"][a:b], code, edges, count, total)
        else:
            cats = wait_categories(frames, a, b, carry)
            carry = int(cats[-1])
            code = _row_codes(frames, cats, a, b)
            s = np.clip(iv["start_ts"][a:b], lo, hi)
            e = np.clip(iv["end_ts"][a:b], lo, hi)
            keep = (e > s) & (code >= 0)
            s, e, code = s[keep], e[keep], code[keep]
            c_s, t_s = _bin_sums(s, code, edges)
            c_e, t_e = _bin_sums(e, code, edges)
            count += c_s - c_e
            total += t_s - t_e
        # Each chunk's pages go back to the page cache before the next is
        # read, rather than count as this process's memory (all of them by
        # the end: the peak of an ingest that warms this view).
        _release(iv)
    _release(iv)
    c = count.reshape(_CODES, nb)[:, :-1]
    t = total.reshape(_CODES, nb)[:, :-1]
    in_progress = np.cumsum(c, axis=1) - c
    ns = np.diff(edges) * in_progress + t
    goroutines = {"Running": ns[_RUN_M] + ns[_RUN_NO_M], "Runnable": ns[_RUNNABLE_C],
                  "Syscall": ns[_SYS_M] + ns[_SYS_NO_M]}
    for i, cat in enumerate(WAIT_CATEGORIES):
        goroutines[node_name("Waiting", cat)] = ns[_WAIT0 + i]
    return goroutines, {"Running": ns[_RUN_M], "Syscall": ns[_SYS_M]}


def averages(ns: dict[str, I64], edges: I64) -> dict[str, list[float]]:
    """Average counts per bin (time over width), rounded to AVG_DECIMALS: far
    below a pixel, and about 9 characters a number in the JSON (17 unrounded)."""
    width = np.diff(edges).astype(np.float64)
    return {k: np.round(v / width, AVG_DECIMALS).tolist() for k, v in ns.items()}


def series(frames: TraceFrames, edges: I64) -> dict[str, dict[str, list[float]]]:
    """``goroutine_states`` (each of STATE_SERIES) and ``threads`` (Running,
    Syscall): average counts per bin of ``edges``."""
    goroutines, threads = state_ns(frames, edges)
    return {"goroutine_states": averages(goroutines, edges),
            "threads": averages(threads, edges)}
