"""Derived rows from decoded transitions: pure numpy functions, no database.

The central step is :func:`order_intervals`: the transitions sorted by
resource (goroutine, proc) and id, keeping Go's order within one resource.
Row k of that order is the interval that the k-th transition of its resource
begins: the state it entered, until the resource's next transition (or the
end of the trace, ``last_ts``, for its last one). Everything else here
(per-goroutine/proc/thread summaries, syscalls, transition counts, the state
graph's dwell times) is a vectorised reduction over those sorted rows.

Each runs in C where the extension is built and the columns are the compact
types, else in numpy (ingest.derive.fallback). :class:`Ordered`, the array
types and the state codes both forms use live in ingest.derive.interval_order,
which neither form's module is imported by: intervals -> fallback ->
interval_order, no way back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.codes import GOROUTINE, PROC, RESOURCE_NAMES, STATE_NAMES
from ingest.columns import Computed, Diff, Gather, Nullable, Transitions, narrow_ids
from ingest.derive import fallback
from ingest.derive.frame_layout import SYSCALL_OUTCOMES as FRAME_SYSCALL_OUTCOMES
from ingest.derive.interval_order import (
    I64,
    IDLE,
    NOT_EXIST,
    RUNNABLE,
    RUNNING,
    SUMMED_STATES,
    SYSCALL,
    UNDETERMINED,
    WAITING,
    Arr,
    Columns,
    Ordered,
)
from ingest.extensions import optional_extension
from ingest.store.coded_insert import CodedText, coded_text


def order_intervals(tr: Transitions, last_ts: int) -> Ordered:
    """Sort transitions into intervals; see :class:`Ordered`.

    By counting sort in C (ingest/csrc/intervalorder.c) where it applies, else
    by numpy's sort (``ingest.derive.fallback.order_intervals_numpy``): the same result.
    """
    fast = _counting_order(tr, last_ts)
    if fast is not None:
        return fast
    return fallback.order_intervals_numpy(tr, last_ts)


def _counting_order(tr: Transitions, last_ts: int) -> Ordered | None:
    c = optional_extension("ingest.derive._intervalorder")
    if c is None or tr.rid.dtype != np.int32 or tr.ts.dtype != np.int64:
        return None
    n = len(tr)
    order = np.empty(n, dtype=np.int32)
    first = np.empty(n, dtype=bool)
    last = np.empty(n, dtype=bool)
    if not c.order_intervals(tr.res, tr.rid, order, first, last):
        return None
    starts = np.flatnonzero(first).astype(np.int64)
    return Ordered(order=order, first=first, last=last, starts=starts, ts=tr.ts,
                   last_ts=int(last_ts))


def _c_summaries(tr: Transitions, o: Ordered) -> Any:
    """The C reductions (ingest/csrc/summaries.c) when they apply, else None."""
    c = optional_extension("ingest.derive._summaries")
    if c is None or (o.order.dtype != np.int32 or tr.ts.dtype != np.int64 or tr.m.dtype != np.int32
            or tr.res.dtype != np.int8 or tr.frm.dtype != np.int8 or tr.to.dtype != np.int8):
        return None
    return c


def run_sums(tr: Transitions, o: Ordered) -> tuple[dict[int, I64], I64, I64]:
    """Per resource run (``o.starts``): ns in each of SUMMED_STATES, the row
    (of the interval order) that created it (int64 max: none), and when it
    last ended (-1: never)."""
    c = _c_summaries(tr, o)
    if c is None:
        return fallback.run_sums_numpy(tr, o)
    groups = len(o.starts)
    sums = np.empty((groups, len(SUMMED_STATES)), np.int64)
    created = np.empty(groups, np.int64)
    ended = np.empty(groups, np.int64)
    c.resource_sums(o.order, o.last_ts, o.starts, tr.ts, tr.frm, tr.to, bytes(SUMMED_STATES),
                    NOT_EXIST, sums, created, ended)
    created[created < 0] = np.iinfo(np.int64).max
    return {st: sums[:, j] for j, st in enumerate(SUMMED_STATES)}, created, ended


@dataclass(frozen=True)
class FunctionCodes:
    """Stacks' top functions for lookups by stack id: the ids sorted, each
    one's code into ``names`` (``names[0]`` is None: no function)."""

    keys: Arr
    codes: Arr
    names: list[str | None]

    @staticmethod
    def of(stack_functions: Mapping[int, str]) -> FunctionCodes:
        """From stack id -> function (made once per trace: a big trace's
        buckets share it)."""
        keys = np.fromiter(stack_functions.keys(), np.int64, len(stack_functions))
        code_of: dict[str, int] = {}
        codes = np.fromiter((code_of.setdefault(f, len(code_of) + 1)
                             for f in stack_functions.values()), np.int64, len(stack_functions))
        by_key = np.argsort(keys, kind="stable")
        return FunctionCodes(keys[by_key], codes[by_key], [None, *code_of])


def start_functions(stack: Arr, found: Arr,
                    stack_functions: FunctionCodes | Mapping[int, str]) -> CodedText:
    """Each row's function of ``stack_functions[stack]`` (None where not
    ``found`` or not known), as codes into the functions' names: no Python
    step per goroutine (hundreds of thousands on a big trace)."""
    fc = stack_functions if isinstance(stack_functions, FunctionCodes) else \
        FunctionCodes.of(stack_functions)
    keys, codes = fc.keys, fc.codes
    stack = np.asarray(stack, np.int64)
    at = np.minimum(np.searchsorted(keys, stack), max(len(keys) - 1, 0))
    hit = np.asarray(found, bool) & (keys[at] == stack) if len(keys) else \
        np.zeros(len(stack), bool)
    row_codes = np.where(hit, codes[at], 0) if len(keys) else np.zeros(len(stack), np.int64)
    return coded_text(row_codes, fc.names)


def resource_summaries(tr: Transitions, o: Ordered,
                       stack_functions: FunctionCodes | Mapping[int, str],
                       tstack_seq: Arr, tstack_id: Arr, seq: Arr | None = None,
                       runs_on: dict[int, int] | None = None) -> tuple[Columns, Columns]:
    """Columns of ``goroutines`` and ``procs`` (without trace_id).

    ``seq``: each row's transition number when ``tr`` is a part of the trace
    (ingest.load.bucket_tables; None: row i is transition i); ``runs_on``:
    the goroutine runs per proc id counted over the whole trace (None:
    counted in ``tr``).

    A goroutine's creation is its first transition out of NotExist: its time
    is ``created_ts``, the goroutine in whose context it happened is the
    parent, and its transition stack (transition_stacks.parquet) names the
    start function (innermost frame). ``ended_ts`` is its last transition
    to NotExist. Time in each state sums the goroutine's intervals.
    """
    order, starts = o.order, o.starts
    n = len(order)
    if n == 0:
        return {}, {}
    lasts = np.append(starts[1:], n) - 1
    res = tr.res[order[starts]]
    sums, created_idx, ended = run_sums(tr, o)
    big = np.iinfo(np.int64).max
    base = {
        "rid": tr.rid[order[starts]].astype(np.int64),
        "first_ts": tr.ts[order[starts]],
        "last_ts": tr.ts[order[lasts]],
        "final": tr.to[order[lasts]],
        "transitions": lasts - starts + 1,
    }
    names = np.array(STATE_NAMES, dtype=object)

    def pick(mask: Arr) -> dict[str, Arr]:
        return {k: v[mask] for k, v in base.items()}

    g = res == GOROUTINE
    gb = pick(g)
    cidx = created_idx[g]
    has_c = cidx != big
    crow = np.where(has_c, order[np.minimum(cidx, n - 1)], 0)
    created = np.where(has_c, tr.ts[crow], -1)
    parent = np.where(has_c, tr.g[crow].astype(np.int64), -1)
    cseq = crow if seq is None else seq[crow].astype(np.int64)
    # The creation's stack: the transition stack of the creating transition
    # (tstack_seq is sorted), NULL when it has none.
    at = np.minimum(np.searchsorted(tstack_seq, cseq), max(len(tstack_seq) - 1, 0))
    found = has_c & (tstack_seq[at] == cseq) if len(tstack_seq) else np.zeros_like(has_c)
    start_stack = np.where(found, tstack_id[at] if len(tstack_id) else 0, -1)
    gor: Columns = {
        "goid": gb["rid"],
        "start_function": start_functions(start_stack, found, stack_functions),
        "start_stack_id": Nullable(start_stack, ~found),
        "created_ts": _nullable(created),
        "ended_ts": _nullable(ended[g]),
        "parent_goid": _nullable(parent),
        "first_ts": gb["first_ts"],
        "last_ts": gb["last_ts"],
        "final_state": names[gb["final"]],
        "transitions": gb["transitions"],
        "running_ns": sums[RUNNING][g],
        "runnable_ns": sums[RUNNABLE][g],
        "waiting_ns": sums[WAITING][g],
        "syscall_ns": sums[SYSCALL][g],
        # Positions in interval order; the loader adds the first row id.
        "first_interval": starts[g],
        "last_interval": lasts[g],
    }
    pm = res == PROC
    pb = pick(pm)
    if runs_on is None:
        runs_on = runs_per_proc(tr)
    prc: Columns = {
        "pid": pb["rid"],
        "first_ts": pb["first_ts"],
        "last_ts": pb["last_ts"],
        "final_state": names[pb["final"]],
        "transitions": pb["transitions"],
        "running_ns": sums[RUNNING][pm],
        "idle_ns": sums[IDLE][pm],
        "goroutines_run": np.array([runs_on.get(p, 0) for p in pb["rid"].tolist()],
                                   dtype=np.int64),
        "first_interval": starts[pm],
        "last_interval": lasts[pm],
    }
    return gor, prc


def runs_per_proc(tr: Transitions) -> dict[int, int]:
    """Goroutine runs per proc id: Running intervals by the P of their transition."""
    gmask = (tr.res == GOROUTINE) & (tr.to == RUNNING) & (tr.p >= 0)
    pvals, pcounts = np.unique(tr.p[gmask], return_counts=True)
    return dict(zip(pvals.tolist(), pcounts.tolist(), strict=True))


def thread_summaries(tr: Transitions, o: Ordered, ev_m: Arr, ev_ts: Arr) -> Columns:
    """Columns of ``threads``, from the M context of transitions and other
    events: the time an M ran a goroutine or sat in a syscall with one sums
    the goroutine intervals that its transitions began."""
    return threads_of(thread_sums(tr, o), ev_m, ev_ts)


def threads_of(sums: tuple[I64, ...], ev_m: Arr, ev_ts: Arr) -> Columns:
    """:func:`thread_summaries` from :func:`thread_sums`' answer (or several
    parts' merged: ingest.load.bucket_tables)."""
    uniq, first, last, ntrans, run_u, sys_u, nsys_u = sums
    # Other events' threads (few rows): merge their times in.
    ev_has = ev_m >= 0
    extra_m = ev_m[ev_has].astype(np.int64)
    extra_ts = ev_ts[ev_has].astype(np.int64)
    all_m = np.union1d(uniq, extra_m)
    k = len(all_m)
    pos = np.searchsorted(all_m, uniq)
    f = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    la = np.full(k, np.iinfo(np.int64).min, dtype=np.int64)
    f[pos], la[pos] = first, last
    cnt = np.zeros(k, dtype=np.int64)
    cnt[pos] = ntrans
    if len(extra_m):
        epos = np.searchsorted(all_m, extra_m)
        np.minimum.at(f, epos, extra_ts)
        np.maximum.at(la, epos, extra_ts)
    run = np.zeros(k, dtype=np.int64)
    sys_ = np.zeros(k, dtype=np.int64)
    nsys = np.zeros(k, dtype=np.int64)
    run[pos], sys_[pos], nsys[pos] = run_u, sys_u, nsys_u
    return {"m": all_m, "first_ts": f, "last_ts": la, "transitions": cnt,
            "running_ns": run, "syscall_ns": sys_, "syscalls": nsys}


def thread_sums(tr: Transitions, o: Ordered) -> tuple[I64, ...]:
    """Per thread that made transitions, by id: (m, first ts, last ts,
    transitions, Running ns, Syscall ns, syscalls), the sums over the
    goroutine intervals whose transition the thread made."""
    c = _c_summaries(tr, o)
    if c is None:
        return fallback.thread_sums_numpy(tr, o)
    cols = c.thread_sums(tr.m, tr.ts, tr.res, tr.to, o.order, o.last, o.last_ts, GOROUTINE,
                         RUNNING, SYSCALL)
    return tuple(np.frombuffer(col, dtype=np.int64) for col in cols)


#: What became of a syscall (``syscalls.outcome``), by code.
SYSCALL_OUTCOMES = FRAME_SYSCALL_OUTCOMES


def syscalls(tr: Transitions, o: Ordered) -> Columns:
    """Columns of ``syscalls`` (without trace_id); ``interval_row`` is the
    syscall's interval as a row of the interval order (``o.order``).

    A goroutine's Syscall interval is one syscall. What follows it says what
    happened to its P: Syscall->Running on the same P is a fast return with
    the P kept; Syscall->Runnable means the P was taken meanwhile (handed off
    by sysmon or stolen: the proc's Running->Idle by another M, whose time
    and M are reported when found within the syscall).
    """
    rows = syscall_rows(tr, o)
    if rows is None:
        return {}
    sel, next_state, p_entry, p_lost, stolen_ts, stolen_m = rows
    del rows
    # Rows, Ps and Ms in 32 bits (the C reduction makes them so), the
    # outcome as a code into SYSCALL_OUTCOMES (1 byte a row, not an object).
    sel = sel.astype(o.order.dtype, copy=False)
    p_entry, stolen_m = narrow_ids(p_entry), narrow_ids(stolen_m)
    seq = o.order[sel]
    outcome = np.full(len(sel), SYSCALL_OUTCOMES.index("other"), dtype=np.int8)
    for st, name in ((RUNNING, "returned"), (RUNNABLE, "blocked"), (WAITING, "blocked"),
                     (NOT_EXIST, "exited"), (-1, "unfinished")):
        outcome[next_state == st] = SYSCALL_OUTCOMES.index(name)
    del next_state
    return {
        "goid": Gather(tr.rid, seq),
        # Times gathered when stored (only the frames keep them: in SQL a
        # syscall is its interval's row), the duration made chunk by chunk.
        "start_ts": Gather(tr.ts, seq),
        "seq": seq,
        "end_ts": (end := ends_column(o, sel)),
        "duration_ns": Diff(end, Gather(tr.ts, seq)),
        "m": Gather(tr.m, seq),
        "p": p_entry,
        "start_known": tr.frm[seq] != UNDETERMINED,
        "outcome": Gather(np.array(SYSCALL_OUTCOMES, dtype=object), outcome),
        "outcome_code": outcome,  # the frames' (ingest.derive.frame_layout)
        "p_lost": p_lost,
        "stolen_ts": _nullable(stolen_ts),
        "stolen_by_m": _nullable(stolen_m),
        "stack_id": Gather(tr.stack, seq),
        "interval_row": sel,
    }


def syscall_rows(tr: Transitions, o: Ordered) -> tuple[Arr, ...] | None:
    """The goroutine Syscall intervals (None: there are none) as (interval
    rows, next state entered (-1: none), P at entry, whether the P was lost,
    when and by which M it was stolen (-1: not found)); see :func:`syscalls`."""
    c = _c_summaries(tr, o)
    if c is None or tr.p.dtype not in (np.int16, np.int32) or tr.rid.dtype != np.int32:
        return fallback.syscall_rows_numpy(tr, o)
    sel, nxt, p_entry, p_lost, stolen_ts, stolen_m = c.syscall_rows(
        o.order, o.last_ts, o.last, tr.ts, tr.res, tr.frm, tr.to, tr.rid, tr.p, tr.m,
        bytes((GOROUTINE, PROC, SYSCALL, RUNNING, IDLE)))
    if not len(sel):
        return None
    return (np.frombuffer(sel, np.int32), np.frombuffer(nxt, np.int8),
            np.frombuffer(p_entry, np.int32), np.frombuffer(p_lost, np.bool_),
            np.frombuffer(stolen_ts, np.int64), np.frombuffer(stolen_m, np.int32))


def _nullable(a: Arr, none: int = -1) -> Nullable:
    """NULL where the value is ``none``."""
    return Nullable(a, a == none)


def proc_runs(tr: Transitions, o: Ordered) -> Columns:
    """Columns of ``proc_runs``: every goroutine Running interval by the P it
    ran on (the P of the transition that made it Running), in (p, start)
    order: the answer to "which G ran on P3 at t". ``interval_row`` is the
    run's interval as a row of the interval order (``o.order``)."""
    order = o.order
    # Which transitions start a run, marked in Go's order (one mask, built in
    # place).
    run = tr.res == GOROUTINE
    run &= tr.to == RUNNING
    run &= tr.p >= 0
    if _strictly_increasing(tr.ts):
        # Every transition later than the one before it (the C decoder's
        # traces, all seen so far): Go's order is the time order, so the runs
        # taken in it and sorted stably by P (a radix sort of small ids) are
        # in (P, time) order; their interval rows come from the order's
        # inverse. 0.2 -> 0.09 s on the benchmark trace, the same rows.
        seq = np.flatnonzero(run).astype(order.dtype)
        del run
        seq = seq[np.argsort(tr.p[seq], kind="stable")]
        # The order's inverse, a part at a time (no arange of its length).
        inverse = np.empty(len(order), order.dtype)
        part = 1 << 20
        for a in range(0, len(order), part):
            b = min(len(order), a + part)
            inverse[order[a:b]] = np.arange(a, b, dtype=order.dtype)
        sel = inverse[seq]
        del inverse
    else:
        # By (P, time), from the runs in the interval order. Row numbers in
        # the type of the order's (int32 below 2**31 rows): half the bytes
        # of flatnonzero's int64 for every run held until stored.
        sel = np.flatnonzero(run[order]).astype(order.dtype)
        del run
        seq = order[sel]
        by_p = np.lexsort((tr.ts[seq], tr.p[seq]))
        del seq
        sel = sel[by_p]
        del by_p
        seq = order[sel]
    # Gathered, and the ends computed, chunk by chunk when stored or written:
    # 2M-row traces hold no reordered copies of the transitions' columns.
    return {"p": tr.p[seq], "start_ts": Gather(tr.ts, seq), "end_ts": ends_column(o, sel),
            "g": Gather(tr.rid, seq), "m": Gather(tr.m, seq), "seq": seq,
            "interval_row": sel}


def _strictly_increasing(ts: I64, chunk: int = 1 << 20) -> bool:
    """Whether every value is above the one before it (a chunk at a time:
    no temporary of the trace's length)."""
    for a in range(0, len(ts) - 1, chunk):
        b = min(len(ts) - 1, a + chunk)
        if not bool((ts[a + 1:b + 1] > ts[a:b]).all()):
            return False
    return True


def ends_column(o: Ordered, rows: Arr) -> Computed:
    """The ends of interval rows ``rows`` as a column computed chunk by chunk
    (ingest.columns.Computed): never held whole."""
    return Computed(lambda a, b: o.ends_of(rows[a:b]), len(rows))


def run_ranges(run_p: Arr, pids: Arr) -> tuple[Nullable, Nullable]:
    """Positions of each proc's first and last row in proc_runs (p-sorted),
    NULL for a proc on which no goroutine ran."""
    lo = np.searchsorted(run_p, pids, side="left").astype(np.int64)
    hi = np.searchsorted(run_p, pids, side="right").astype(np.int64) - 1
    none = hi < lo
    return Nullable(lo, none), Nullable(hi, none)


def transition_kinds(tr: Transitions) -> tuple[list[tuple[Any, ...]], Arr]:
    """Every distinct (resource, from_state, to_state, reason) of the trace,
    numbered: rows (kind, resource, from_state, to_state, reason, count), and
    each transition's kind (int8 up to 127 kinds, else int16). Every decoded
    transition is counted once."""
    if len(tr) == 0:
        return [], np.zeros(0, dtype=np.int16)
    nr = max(len(tr.reasons), 1)
    top = 2 * 8 * 8 * nr
    fast = _kinds_c(tr, nr, top)
    if fast is not None:
        return _kind_rows(tr, nr, *fast)
    wide = np.int64 if top >= 2**31 else np.int32
    # In place: one temporary array of the trace's length, not two.
    code: npt.NDArray[np.signedinteger[Any]] = tr.res.astype(wide)
    code *= 8
    code += tr.frm
    code *= 8
    code += tr.to
    code *= nr
    code += tr.reason
    if top <= 1 << 22:
        # The codes' range is small (a few thousand kinds at most in practice):
        # count them in one pass and number them through a lookup table, rather
        # than sorting millions of codes (np.unique: ~1 s and 150 MB here).
        all_counts = np.bincount(code, minlength=top)
        vals = np.flatnonzero(all_counts)
        counts = all_counts[vals]
        if len(vals) > 32767:
            raise ValueError(f"too many distinct transition kinds ({len(vals)})")
        lut = np.zeros(top, dtype=np.int16)
        lut[vals] = np.arange(len(vals), dtype=np.int16)
        inverse = lut[code]
    else:
        vals, inverse, counts = np.unique(code, return_inverse=True, return_counts=True)
    del code
    if len(vals) > 32767:
        raise ValueError(f"too many distinct transition kinds ({len(vals)})")
    # int8 while the kinds fit (a byte a transition, held until the intervals
    # are stored), else int16; never a copy of an array of that type.
    return _kind_rows(tr, nr, vals, counts,
                      inverse.astype(np.int8 if len(vals) <= 127 else np.int16,
                                     copy=False).reshape(-1))


def _kinds_c(tr: Transitions, nr: int, top: int) -> tuple[Arr, Arr, Arr] | None:
    """(kind codes present, their counts, each transition's kind number) in
    two passes in C (ingest/csrc/summaries.c) instead of numpy's nine; None
    where that does not apply."""
    c = optional_extension("ingest.derive._summaries")
    if (c is None or top > 1 << 22 or tr.res.dtype != np.int8 or tr.frm.dtype != np.int8
            or tr.to.dtype != np.int8 or tr.reason.dtype not in (np.int8, np.int16)):
        return None
    all_counts = np.zeros(top, np.int64)
    if not c.kind_counts(tr.res, tr.frm, tr.to, tr.reason, nr, all_counts):
        return None
    vals = np.flatnonzero(all_counts)
    if len(vals) > 32767:
        raise ValueError(f"too many distinct transition kinds ({len(vals)})")
    lut = np.zeros(top, dtype=np.int16)
    lut[vals] = np.arange(len(vals), dtype=np.int16)
    kinds = np.empty(len(tr), np.int8 if len(vals) <= 127 else np.int16)
    c.kind_numbers(tr.res, tr.frm, tr.to, tr.reason, nr, lut, kinds)
    return vals, all_counts[vals], kinds


def _kind_rows(tr: Transitions, nr: int, vals: Arr, counts: Arr,
               kinds: Arr) -> tuple[list[tuple[Any, ...]], Arr]:
    """transition_kinds' answer from the kind codes present, their counts and
    each transition's kind number."""
    out = []
    for kind, (v, c) in enumerate(zip(vals.tolist(), counts.tolist(), strict=True)):
        rest, reason = divmod(v, nr)
        rest, to = divmod(rest, 8)
        res, frm = divmod(rest, 8)
        out.append((kind, RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to],
                    tr.reasons[reason] if tr.reasons else "", int(c)))
    return out, kinds


def state_edges(tr: Transitions, o: Ordered) -> list[tuple[Any, ...]]:
    """Rows for ``state_edges``: (resource, from_state, to_state, count,
    dwell_count, dwell_mean_ns, dwell_p50_ns, dwell_p99_ns, dwell_max_ns).

    Every transition is one edge from its from_state to its to_state. Its
    dwell time is how long the resource had been in the source state: the
    time since the resource's previous transition; the first transition of a
    resource in the trace has no known dwell (counted, not measured).
    """
    c = _c_summaries(tr, o)
    if c is None:
        return fallback.state_edges_numpy(tr, o)
    out: list[tuple[Any, ...]] = []
    for code, cnt, measured, total, p50, p99, top in c.state_edges(
            o.order, o.first, tr.ts, tr.res, tr.frm, tr.to):
        rest, to = divmod(code, 8)
        res, frm = divmod(rest, 8)
        mean = total / measured if measured else None
        out.append((RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to], cnt, measured,
                    mean, p50, p99, top))
    return out

