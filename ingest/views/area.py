"""Area selection statistics (docs/causality.md): for ``[t1, t2)`` and a set
of timeline lanes, the time per state, per goroutine group (start function)
and per function, with links into the analysis pages for that window.

Lanes are named as the timeline names them: ``p:<proc>`` (the proc's own
Running/Idle time, and the goroutine runs on it), ``m:<thread>`` (the
goroutine Running and Syscall intervals begun on it), ``g:<goid>`` (every
interval of one goroutine) and ``group:<start function>`` (every goroutine of
that group). Each row's time is clipped to the window; a row is counted once
even when two selected lanes hold it; a goroutine's NotExist time (before its
creation, after its end) is nobody's and is left out.

Time per function goes to the innermost function of the stack the goroutine
was at: for a Waiting, Syscall or preempted Runnable span the stack recorded
when it entered the state; for a Running span the stack where it stopped (Go
records none where it starts running); for a Runnable span after a wake-up,
the stack where it had blocked (the wake-up's own stack is the waker's). When
the trace has CPU samples (``StackSample`` events) the samples of the selected
goroutines in the window are counted by function too (``cpu_samples``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.codes import STATE_CODE
from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.store import models
from ingest.views.wakes import goroutine_row_count, leaf_functions

I64 = npt.NDArray[np.int64]
LANE_KINDS = ("p", "m", "g", "group")
MAX_LANES = 2000
#: Rows listed per table of the answer.
TOP = 50
NO_STACK = "(no stack)"
#: The group of goroutines whose start function the trace does not show.
UNKNOWN_GROUP = "(unknown)"
#: The flame graph kinds that each state's time belongs to (ingest.views.flame).
FLAME_KINDS = ("sched", "sync", "chan", "net", "syscall", "cpu")


class BadLanes(ValueError):
    """A lane that is not ``p:N``, ``m:N``, ``g:N`` or ``group:NAME`` (400)."""


@dataclass(frozen=True)
class Lane:
    kind: str
    key: str


_CANVAS_KEY = re.compile(r"([pmg])(\d+)")
#: The timeline's lanes that hold no goroutine or proc (GC, STW, sweep, assist bands).
RANGE_KEYS = ("gc", "stw", "sweep", "assist")


def parse_lanes(specs: list[str]) -> list[Lane]:
    """``["p:0", "g:17", "group:main.worker"]`` -> lanes; raises BadLanes. The
    timeline canvas's lane keys are taken too: ``p0``, ``m12``, ``g42`` and
    ``group:<n>`` (a group header: ``n`` indexes the goroutine table's
    start functions); its band lanes (``gc``, ``stw``, ``sweep``, ``assist``)
    hold no goroutine and are skipped."""
    out: list[Lane] = []
    for spec in specs:
        if spec in RANGE_KEYS:
            continue
        m = _CANVAS_KEY.fullmatch(spec)
        if m is not None:
            out.append(Lane(m.group(1), m.group(2)))
            continue
        kind, sep, key = spec.partition(":")
        if not sep or kind not in LANE_KINDS or not key:
            raise BadLanes(f"lane {spec!r}: expected p:N, m:N, g:N or group:NAME")
        if kind != "group":
            try:
                int(key)
            except ValueError:
                raise BadLanes(f"lane {spec!r}: {kind} takes an integer id") from None
        out.append(Lane(kind, key))
    if not out:
        raise BadLanes("name at least one lane of goroutines or procs "
                       "(lane=p:0, lane=g:17, lane=group:NAME)")
    if len(out) > MAX_LANES:
        raise BadLanes(f"at most {MAX_LANES} lanes")
    return out


def _group_codes(names: list[str], keys: set[str]) -> list[int]:
    """The goroutine table's group codes of ``group:`` keys: a start function's
    name, or (digits: the timeline's group lane key) the code itself."""
    codes = [i for i, name in enumerate(names) if name in keys]
    codes += [int(k) for k in keys if k.isdigit() and int(k) < len(names)]
    return codes


def _goroutine_rows(engine: Engine, frames: TraceFrames, lanes: list[Lane],
                    t1: int, t2: int) -> I64:
    """The goroutine rows the lanes hold that overlap the window."""
    iv = frames.intervals
    n = goroutine_row_count(frames)
    want = np.zeros(n, bool)
    goids = [int(x.key) for x in lanes if x.kind == "g"]
    groups = {x.key for x in lanes if x.kind == "group"}
    if groups:
        table = goroutine_table(engine, frames)
        codes = _group_codes(table.names, groups)
        goids += table.goid[np.isin(table.group, codes)].tolist()
    rid = iv["rid"][:n]
    if goids:
        want |= np.isin(rid, goids)
    ms = [int(x.key) for x in lanes if x.kind == "m"]
    if ms:
        on = ((frames.state[:n] == STATE_CODE["Running"])
              | (frames.state[:n] == STATE_CODE["Syscall"]))
        want |= on & np.isin(iv["m"][:n], ms)
    ps = [int(x.key) for x in lanes if x.kind == "p"]
    if ps:
        want |= (frames.state[:n] == STATE_CODE["Running"]) & np.isin(iv["p"][:n], ps)
    want &= (iv["start_ts"][:n] < t2) & (iv["end_ts"][:n] > t1)
    want &= frames.state[:n] != STATE_CODE["NotExist"]  # not alive: no one's time
    return np.nonzero(want)[0].astype(np.int64)


def _clipped(frames: TraceFrames, rows: I64, t1: int, t2: int) -> I64:
    iv = frames.intervals
    s = np.maximum(np.asarray(iv["start_ts"][rows], np.int64), t1)
    e = np.minimum(np.asarray(iv["end_ts"][rows], np.int64), t2)
    out: I64 = np.maximum(e - s, 0)
    return out


def own_stacks(frames: TraceFrames, rows: I64) -> I64:
    """The stack each row's goroutine was at (see the module)."""
    iv = frames.intervals
    n = goroutine_row_count(frames)
    rid = np.asarray(iv["rid"][:n])
    stack = np.asarray(iv["stack_id"][rows], np.int64)
    state = frames.state[rows]
    frm = np.zeros(max(frames.kinds, default=0) + 1, np.int8)
    for k, v in frames.kinds.items():
        frm[k] = STATE_CODE.get(v.from_state, -1)
    from_state = frm[np.asarray(iv["kind"][rows])]
    running = (state == STATE_CODE["Running"]) & (rows + 1 < n)
    nxt = rows[running] + 1
    same = rid[nxt] == rid[rows[running]]
    stack[np.nonzero(running)[0][same]] = np.asarray(iv["stack_id"][nxt[same]], np.int64)
    stack[np.nonzero(running)[0][~same]] = 0
    woken = (state == STATE_CODE["Runnable"]) & (from_state == STATE_CODE["Waiting"]) & (rows > 0)
    prv = rows[woken] - 1
    same = rid[prv] == rid[rows[woken]]
    stack[np.nonzero(woken)[0][same]] = np.asarray(iv["stack_id"][prv[same]], np.int64)
    return stack


def _dense_unique(values: I64) -> tuple[I64, I64]:
    """``np.unique(values, return_inverse=True)`` for ids of a small range
    (stack ids): a table lookup instead of a sort of every row."""
    if not len(values) or int(values.min()) < 0 or int(values.max()) > 4 * len(values) + 1024:
        uniq, inv = np.unique(values, return_inverse=True)
        return uniq, inv.astype(np.int64)
    present = np.nonzero(np.bincount(values))[0]
    code = np.zeros(int(values.max()) + 1, np.int64)
    code[present] = np.arange(len(present))
    return present.astype(np.int64), code[values]


def _by(keys: npt.NDArray[np.int64], ns: I64, state: npt.NDArray[np.int8],
        top: int | None = TOP) -> list[tuple[int, int, dict[str, int]]]:
    """(key, ns, ns per state) of the ``top`` keys with most time, most first.

    Keys are small integers (codes, goroutine ids): counted with bincount
    over their range, no sort of the rows."""
    if not len(keys):
        return []
    names = {c: s for s, c in STATE_CODE.items()}
    lo = int(keys.min())
    k = keys - lo
    size = int(k.max()) + 1
    total = np.bincount(k, weights=ns, minlength=size).astype(np.int64)
    present = np.nonzero(np.bincount(k, minlength=size))[0]
    chosen = present[np.argsort(-total[present], kind="stable")][:top]
    out = []
    per_state = {code: np.bincount(k[state == code], weights=ns[state == code],
                                   minlength=size).astype(np.int64)
                 for code in np.unique(state).tolist()}
    for i in chosen.tolist():
        per = {names[c]: int(v[i]) for c, v in per_state.items() if v[i]}
        out.append((i + lo, int(total[i]), per))
    return out


def _proc_states(frames: TraceFrames, ps: list[int], t1: int, t2: int) -> dict[str, int]:
    iv = frames.intervals
    out: dict[str, int] = {}
    for p in ps:
        sl = frames.procs.rows(p)
        rows = np.arange(sl.start, sl.stop, dtype=np.int64)
        rows = rows[(iv["start_ts"][sl] < t2) & (iv["end_ts"][sl] > t1)]
        ns = _clipped(frames, rows, t1, t2)
        for k, d in zip(np.asarray(iv["kind"][rows]).tolist(), ns.tolist(), strict=True):
            kd = frames.kinds.get(int(k))
            name = kd.to_state if kd else "?"
            out[name] = out.get(name, 0) + int(d)
    return out


def _cpu_samples(engine: Engine, trace_id: int, goids: set[int], t1: int, t2: int
                 ) -> list[dict[str, Any]]:
    oe = models.other_events
    with engine.connect() as conn:
        rows = conn.execute(select(oe.c.g, oe.c.stack_id).where(
            oe.c.trace_id == trace_id, oe.c.kind == "StackSample", oe.c.ts >= t1,
            oe.c.ts < t2)).all()
    ids = [r.stack_id for r in rows if r.g in goids]
    leaf = leaf_functions(engine, trace_id, ids)
    counts: dict[str, int] = {}
    for sid in ids:
        name = leaf.get(sid, NO_STACK)
        counts[name] = counts.get(name, 0) + 1
    return [{"function": k, "samples": v}
            for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:TOP]


def links(trace_id: int, t1: int, t2: int) -> dict[str, str]:
    """The analysis pages for the window (docs/analysis.md, docs/pprof.md)."""
    w = f"t1={t1}&t2={t2}"
    out = {"timeline": f"/traces/{trace_id}/timeline?{w}",
           "latency": f"/traces/{trace_id}/latency?{w}",
           "syscalls": f"/traces/{trace_id}/syscalls?{w}"}
    for kind in FLAME_KINDS:
        out[f"flame_{kind}"] = f"/traces/{trace_id}/flame?kind={kind}&{w}"
    return out


def area(engine: Engine, frames: TraceFrames, t1: int, t2: int,
         lanes: list[Lane]) -> dict[str, Any]:
    """Time per state, group and function of ``lanes`` over ``[t1, t2)``."""
    rows = _goroutine_rows(engine, frames, lanes, t1, t2)
    ns = _clipped(frames, rows, t1, t2)
    state = frames.state[rows]
    iv = frames.intervals
    rid = np.asarray(iv["rid"][rows], np.int64)
    table = goroutine_table(engine, frames)
    # Everything is grouped by integer codes (group, function, state), names
    # looked up once per distinct code: a million rows' strings would cost seconds.
    group = np.asarray(table.group, np.int64)[np.searchsorted(table.goid, rid)] \
        if len(rid) else np.zeros(0, np.int64)
    stack_ids, stack_inv = _dense_unique(own_stacks(frames, rows))
    leaf = leaf_functions(engine, frames.trace_id, stack_ids.tolist())
    fn_names, fn_of_stack = np.unique(
        np.asarray([leaf.get(int(x), NO_STACK) for x in stack_ids.tolist()], dtype=str),
        return_inverse=True)
    fn = np.asarray(fn_of_stack, np.int64)[stack_inv] if len(rows) else np.zeros(0, np.int64)
    goids = np.nonzero(np.bincount(rid - int(rid.min())))[0] + int(rid.min()) if len(rid) \
        else np.zeros(0, np.int64)
    groups = []
    for code, total, per in _by(group, ns, state):
        name = table.names[int(code)]
        groups.append({"start_function": name or UNKNOWN_GROUP,
                       "goroutines": int(np.count_nonzero(np.bincount(
                           rid[group == code] - int(rid.min())))), "ns": total,
                       "states": per, "href": f"/traces/{frames.trace_id}/goroutines?group="
                       + quote(name, safe="")})
    functions = [{"function": str(fn_names[int(code)]), "ns": total, "states": per}
                 for code, total, per in _by(fn, ns, state)]
    state_names = {c: n for n, c in STATE_CODE.items()}
    states = [{"state": state_names[int(code)], "ns": total}
              for code, total, _ in _by(state.astype(np.int64), ns, state, None)]
    ps = sorted({int(x.key) for x in lanes if x.kind == "p"})
    top_goroutines = [{"goroutine": int(g), "ns": total, "states": per,
                       "href": f"/traces/{frames.trace_id}/goroutines/{int(g)}"}
                      for g, total, per in _by(rid, ns, state)]
    return {"trace_id": frames.trace_id, "t1": t1, "t2": t2,
            "lanes": [f"{x.kind}:{x.key}" for x in lanes],
            "rows": len(rows), "total_ns": int(ns.sum()), "goroutine_count": len(goids),
            "states": states, "proc_states": _proc_states(frames, ps, t1, t2) if ps else {},
            "groups": groups, "goroutines": top_goroutines, "functions": functions,
            "cpu_samples": _cpu_samples(engine, frames.trace_id,
                                        set(goids.tolist()), t1, t2),
            "links": links(frames.trace_id, t1, t2)}
