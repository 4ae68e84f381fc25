"""State graphs computed from a trace's frames: filtered, split by wait reason,
and for threads.

Same definitions as :mod:`ingest.views.states` (the precomputed whole-trace
graphs): one edge per decoded transition, dwell time = time since the
resource's previous transition (unknown for its first one), nearest-rank
percentiles. Here the graph can be restricted to

- a goroutine group (goroutines whose start function is ``group``),
- a time window: the transitions with ``t1 <= ts < t2`` (their dwell time is
  still measured from the previous transition, which may lie before ``t1``),

and the Waiting state can be split by reason category (``Waiting: network``,
``Waiting: sync``, ...). The category of a Waiting interval is that of the
reason of the transition that entered it; a Waiting -> Waiting transition
(Go re-reporting the state at a generation boundary, no reason) keeps the
category of the wait it continues.

Threads have no transitions of their own in a Go trace. A thread's state is
derived from the goroutine intervals begun on it (``m`` of the goroutine's
Running and Syscall intervals, as the ``thread_intervals`` view): Running
while it runs a goroutine, Syscall while a goroutine is in a syscall on it,
Idle in between. Back-to-back intervals in the same state (the thread
switching goroutines) are one stay; the first interval of each thread is
entered from Undetermined. A thread's last stay is left for Idle when it
ends before the trace does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.interval_order import nearest_rank
from ingest.store import models
from ingest.store.traces import get_trace
from ingest.views.states import (
    ALL_RESOURCES,
    RESOURCES,
    Edge,
    StateGraph,
    group_goids,
    state_graph,
)

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

#: Wait reason categories, in display order.
WAIT_CATEGORIES = ("network", "sync", "chan", "select", "sleep", "GC assist", "other")
WAITING = models.STATE_CODE["Waiting"]
RUNNING = models.STATE_CODE["Running"]
SYSCALL = models.STATE_CODE["Syscall"]
IDLE = models.STATE_CODE["Idle"]
UNDETERMINED = models.STATE_CODE["Undetermined"]


def wait_category(reason: str) -> str:
    """The category of one of Go's wait reasons (see WAIT_CATEGORIES)."""
    r = reason.strip()
    if r == "network":
        return "network"
    if r.startswith("sync") or r.startswith("semacquire"):
        return "sync"
    if r.startswith("chan"):
        return "chan"
    if r.startswith("select"):
        return "select"
    if r == "sleep":
        return "sleep"
    if "assist" in r or r == "wait until GC ends":
        return "GC assist"
    return "other"


def node_name(state: str, category: str | None) -> str:
    """``Waiting: <category>`` for a split Waiting node, else the state."""
    return f"Waiting: {category}" if state == "Waiting" and category else state


def node_sort_key(name: str) -> tuple[int, int, str]:
    """Graph nodes in state order, split Waiting nodes in category order."""
    base, _, cat = name.partition(": ")
    order = {n: i for i, n in enumerate(models.STATE_NAMES)}
    sub = WAIT_CATEGORIES.index(cat) if cat in WAIT_CATEGORIES else len(WAIT_CATEGORIES)
    return (order.get(base, 99), sub if cat else -1, name)


def goroutine_wait_categories(frames: TraceFrames) -> tuple[Arr, list[str]]:
    """Per goroutine interval row, the index into WAIT_CATEGORIES of its wait
    (-1 where the interval is not Waiting), and the category names.

    A Waiting -> Waiting row without a reason inherits the previous row's
    category (same goroutine); a Waiting row with none left is ``other``.
    """
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    kinds = frames.kinds
    top = max(kinds, default=0) + 1
    cat_of = np.full(top, -1, dtype=np.int8)
    inherit = np.zeros(top, dtype=bool)
    for code, k in kinds.items():
        if k.to_state == "Waiting":
            cat_of[code] = WAIT_CATEGORIES.index(wait_category(k.reason))
            inherit[code] = k.from_state == "Waiting" and not k.reason
    kind = frames.intervals["kind"][:n_g]
    cats = cat_of[kind] if n_g else np.zeros(0, np.int8)
    inh = inherit[kind] if n_g else np.zeros(0, bool)
    lane_first = _lane_first(frames.intervals["rid"][:n_g])
    idx = np.flatnonzero(inh & ~lane_first)
    if len(idx):
        # Forward-fill through chains of inheriting rows: each takes the
        # category of the nearest earlier non-inheriting row of its lane.
        src = np.where(inh & ~lane_first, -1, np.arange(n_g))
        np.maximum.accumulate(src, out=src)
        cats = cats.copy()
        cats[idx] = cats[src[idx]]
    return cats, list(WAIT_CATEGORIES)


def _lane_first(rid: I64) -> Arr:
    first = np.ones(len(rid), dtype=bool)
    if len(rid) > 1:
        first[1:] = rid[1:] != rid[:-1]
    return first


def _edges(src: I64, dst: I64, dwell: I64, names: list[str]) -> list[Edge]:
    """Edges from per-transition source/target node codes and dwell (-1: unknown)."""
    if not len(src):
        return []
    width = len(names)
    code = src.astype(np.int64) * width + dst
    order = np.lexsort((dwell, code))
    code_s = code[order]
    dwell_s = dwell[order]
    bounds = np.flatnonzero(np.r_[True, code_s[1:] != code_s[:-1], True])
    edges: list[Edge] = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        c = int(code_s[a])
        d = dwell_s[a:b]
        d = d[d >= 0]  # sorted, so the known ones are a suffix
        s, t = divmod(c, width)
        if len(d):
            edges.append(Edge(names[s], names[t], b - a, len(d), float(d.mean()),
                              nearest_rank(d, 0.5), nearest_rank(d, 0.99), int(d[-1])))
        else:
            edges.append(Edge(names[s], names[t], b - a, 0, None, None, None, None))
    edges.sort(key=lambda e: (-e.count, e.source, e.target))
    return edges


def _graph(resource: str, edges: list[Edge], info: dict[str, Any]) -> StateGraph:
    nodes = sorted({e.source for e in edges} | {e.target for e in edges}, key=node_sort_key)
    return StateGraph(resource=resource, nodes=nodes, edges=edges, info=info)


def _window(ts: I64, t1: int | None, t2: int | None) -> Arr:
    keep = np.ones(len(ts), dtype=bool)
    if t1 is not None:
        keep &= ts >= t1
    if t2 is not None:
        keep &= ts < t2
    return keep


def resource_graph(frames: TraceFrames, resource: str, *, goids: I64 | None = None,
                   t1: int | None = None, t2: int | None = None,
                   split_reasons: bool = False) -> StateGraph:
    """The goroutine or proc graph from the frames, with the filters above.

    ``goids`` restricts a goroutine graph to those goroutines.
    """
    if resource == "thread":
        if goids is not None:
            raise ValueError("the group filter applies to goroutine graphs only")
        return thread_graph(frames, t1=t1, t2=t2)
    if resource not in ("goroutine", "proc"):
        raise ValueError(f"resource must be goroutine, proc or thread, not {resource!r}")
    if resource == "proc" and (goids is not None or split_reasons):
        raise ValueError("the group filter and the reason split apply to goroutine graphs only")
    lanes = frames.goroutines if resource == "goroutine" else frames.procs
    lo, hi = (int(lanes.off[0]), int(lanes.off[-1])) if len(lanes.ids) else (0, 0)
    iv = frames.intervals
    rid = iv["rid"][lo:hi]
    ts = iv["start_ts"][lo:hi]
    kind = iv["kind"][lo:hi]
    first = _lane_first(rid)
    dwell = np.empty(len(ts), dtype=np.int64)
    if len(ts):
        dwell[0] = -1
        dwell[1:] = ts[1:] - ts[:-1]
        dwell[first] = -1
    # Node codes: the plain states first, then the split Waiting nodes.
    names = list(models.STATE_NAMES)
    top = max(frames.kinds, default=0) + 1
    frm_of = np.zeros(top, dtype=np.int64)
    to_of = np.zeros(top, dtype=np.int64)
    for code, k in frames.kinds.items():
        frm_of[code] = models.STATE_CODE.get(k.from_state, 0)
        to_of[code] = models.STATE_CODE.get(k.to_state, 0)
    src = frm_of[kind] if len(kind) else np.zeros(0, np.int64)
    dst = to_of[kind] if len(kind) else np.zeros(0, np.int64)
    info: dict[str, Any] = {"split_reasons": bool(split_reasons), "t1": t1, "t2": t2}
    if split_reasons:
        cats, cat_names = goroutine_wait_categories(frames)
        base = len(names)
        names += [node_name("Waiting", c) for c in cat_names]
        has = cats >= 0
        dst = np.where(has, base + cats.astype(np.int64), dst)
        prev = np.r_[-1, cats[:-1]].astype(np.int64)
        src_split = (src == WAITING) & ~first & (prev >= 0)
        src = np.where(src_split, base + prev, src)
        # A first row that leaves Waiting has no known reason: "other".
        other = base + cat_names.index("other")
        src = np.where((src == WAITING) & first, other, src)
        info["reasons"] = _reason_table(frames)
    keep = _window(ts, t1, t2)
    if goids is not None:
        keep &= np.isin(rid, goids)
    return _graph(resource, _edges(src[keep], dst[keep], dwell[keep], names), info)


def _reason_table(frames: TraceFrames) -> dict[str, list[str]]:
    """Category -> Go's wait reasons in this trace that fall in it."""
    out: dict[str, list[str]] = {}
    for k in frames.kinds.values():
        if k.to_state == "Waiting" and k.reason:
            lst = out.setdefault(wait_category(k.reason), [])
            if k.reason not in lst:
                lst.append(k.reason)
    return {c: sorted(out[c]) for c in WAIT_CATEGORIES if c in out}


def thread_stays(frames: TraceFrames) -> dict[str, I64]:
    """Goroutine Running/Syscall intervals by thread, sorted by (m, start):
    columns m, start_ts, end_ts, state (RUNNING or SYSCALL)."""
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    st = frames.state[:n_g]
    iv = frames.intervals
    m = iv["m"][:n_g]
    sel = np.flatnonzero(((st == RUNNING) | (st == SYSCALL)) & (m != -1))
    start = iv["start_ts"][:n_g][sel]
    order = np.lexsort((start, m[sel]))
    rows = sel[order]
    return {"m": m[rows], "start_ts": iv["start_ts"][:n_g][rows],
            "end_ts": iv["end_ts"][:n_g][rows], "state": st[rows].astype(np.int64)}


def thread_transitions(frames: TraceFrames) -> dict[str, I64]:
    """The derived thread transitions, sorted by (m, ts): m, ts, from, to
    (state codes) and dwell (-1 unknown). See the module docstring."""
    s = thread_stays(frames)
    m, start, end, state = s["m"], s["start_ts"], s["end_ts"], s["state"]
    n = len(m)
    if not n:
        z = np.zeros(0, np.int64)
        return {"m": z, "ts": z, "from": z, "to": z, "dwell": z}
    first = _lane_first(m)
    last = np.r_[first[1:], True]
    prev_end = np.r_[-1, end[:-1]]
    prev_state = np.r_[-1, state[:-1]]
    gap = ~first & (start > prev_end)
    change = ~first & ~gap & (state != prev_state)
    parts: list[tuple[I64, I64, I64, I64, int]] = [
        # (m, ts, from, to, tie order)
        (m[first], start[first], np.full(int(first.sum()), UNDETERMINED), state[first], 1),
        (m[gap], prev_end[gap], prev_state[gap], np.full(int(gap.sum()), IDLE), 0),
        (m[gap], start[gap], np.full(int(gap.sum()), IDLE), state[gap], 1),
        (m[change], start[change], prev_state[change], state[change], 1),
    ]
    ends = last & (end < frames.last_ts)
    parts.append((m[ends], end[ends], state[ends], np.full(int(ends.sum()), IDLE), 2))
    tm = np.concatenate([p[0] for p in parts])
    tts = np.concatenate([p[1] for p in parts])
    tfrom = np.concatenate([p[2] for p in parts]).astype(np.int64)
    tto = np.concatenate([p[3] for p in parts]).astype(np.int64)
    tie = np.concatenate([np.full(len(p[0]), p[4]) for p in parts])
    order = np.lexsort((tie, tts, tm))
    tm, tts, tfrom, tto = tm[order], tts[order], tfrom[order], tto[order]
    dwell = np.empty(len(tts), dtype=np.int64)
    dwell[0] = -1
    dwell[1:] = tts[1:] - tts[:-1]
    dwell[_lane_first(tm)] = -1
    return {"m": tm, "ts": tts, "from": tfrom, "to": tto, "dwell": dwell}


def thread_graph(frames: TraceFrames, *, t1: int | None = None,
                 t2: int | None = None) -> StateGraph:
    """The derived thread state graph (see the module docstring)."""
    tr = thread_transitions(frames)
    keep = _window(tr["ts"], t1, t2)
    info: dict[str, Any] = {"split_reasons": False, "t1": t1, "t2": t2,
                            "derived": "from goroutine Running/Syscall intervals per M"}
    return _graph("thread", _edges(tr["from"][keep], tr["to"][keep], tr["dwell"][keep],
                                   list(models.STATE_NAMES)), info)


def graph_for(engine: Engine, store: FrameStore, trace_id: int, resource: str, *,
              group: str | None = None, t1: int | None = None, t2: int | None = None,
              split_reasons: bool = False) -> StateGraph:
    """The state graph the API and pages ask for: the precomputed whole-trace
    graph when there is no filter (goroutine and proc), else from the frames.

    Raises ValueError for a bad combination, LookupError for an unknown trace
    or an empty group.
    """
    if resource not in ALL_RESOURCES:
        raise ValueError(f"resource must be one of {', '.join(ALL_RESOURCES)}, "
                         f"not {resource!r}")
    if t1 is not None and t2 is not None and t2 <= t1:
        raise ValueError("t2 must be after t1")
    plain = group is None and t1 is None and t2 is None and not split_reasons
    if plain and resource in RESOURCES:
        if get_trace(engine, trace_id) is None:
            raise LookupError(f"no trace with id {trace_id}")
        graph = state_graph(engine, trace_id, resource)
        graph.info.update({"split_reasons": False, "t1": None, "t2": None})
        return graph
    frames = store.get(trace_id)
    goids = None
    if group is not None:
        if resource != "goroutine":
            raise ValueError("the group filter applies to goroutine graphs only")
        ids = group_goids(engine, trace_id, group)
        if not ids:
            raise LookupError(f"no goroutines with start function {group!r}")
        goids = np.asarray(ids, dtype=np.int64)
    graph = resource_graph(frames, resource, goids=goids, t1=t1, t2=t2,
                           split_reasons=split_reasons)
    if group is not None:
        graph.info["group"] = group
        graph.info["group_goroutines"] = len(goids) if goids is not None else 0
    return graph
