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

The unfiltered graphs that only the frames give (goroutines split by
reason, threads) are kept as report caches (:func:`whole_trace_graph`): the
states page opens on the split one.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.cache import cached_json
from ingest.derive.frames import FrameStore, Lanes, TraceFrames, release_columns
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.store import models
from ingest.store.traces import get_trace
from ingest.views.edge_dwells import edges_of
from ingest.views.states import (
    ALL_RESOURCES,
    RESOURCES,
    Edge,
    StateGraph,
    state_graph,
)
from ingest.views.wait_reasons import WAIT_CATEGORIES, node_name, wait_category
from ingest.views.waiting_edges import SPLIT_ROWS, waiting_edges

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

WAITING = models.STATE_CODE["Waiting"]
RUNNING = models.STATE_CODE["Running"]
SYSCALL = models.STATE_CODE["Syscall"]
IDLE = models.STATE_CODE["Idle"]
UNDETERMINED = models.STATE_CODE["Undetermined"]


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
    parts: list[Arr] = [np.zeros(0, np.int8)]
    carry = -1
    for a in range(0, n_g, SPLIT_ROWS):
        parts.append(wait_categories(frames, a, min(n_g, a + SPLIT_ROWS), carry))
        carry = int(parts[-1][-1])
    return np.concatenate(parts), list(WAIT_CATEGORIES)


def wait_categories(frames: TraceFrames, a: int, b: int, carry: int) -> Arr:
    """:func:`goroutine_wait_categories` of goroutine rows ``a:b`` (a < b),
    ``carry`` being that of row ``a - 1`` (-1 for none), read from copies of
    the rows' kinds and goroutines, whose mapped pages are handed back."""
    top = max(frames.kinds, default=0) + 1
    cat_of = np.full(top, -1, dtype=np.int8)
    inherit = np.zeros(top, dtype=bool)
    for code, k in frames.kinds.items():
        if k.to_state == "Waiting":
            cat_of[code] = WAIT_CATEGORIES.index(wait_category(k.reason))
            inherit[code] = k.from_state == "Waiting" and not k.reason
    iv = frames.intervals
    kind = np.array(iv["kind"][a:b])
    rid = np.array(iv["rid"][max(a - 1, 0):b])
    release_columns(iv, "rid", "kind")
    first = np.ones(b - a, bool)
    np.not_equal(rid[1:], rid[:-1], out=first[int(a == 0):])
    cats = cat_of[kind]
    chain = inherit[kind] & ~first
    if chain.any():
        # Forward-filled through chains of inheriting rows: each takes the
        # category of the nearest earlier non-inheriting row of its lane.
        src = np.where(chain, -1, np.arange(b - a))
        np.maximum.accumulate(src, out=src)
        cats = np.where(src >= 0, cats[np.maximum(src, 0)], np.int8(carry)).astype(np.int8)
    return np.asarray(cats, np.int8)


def _lane_first(rid: Arr) -> Arr:
    first = np.ones(len(rid), dtype=bool)
    if len(rid) > 1:
        first[1:] = rid[1:] != rid[:-1]
    return first


def _graph(resource: str, edges: list[Edge], info: dict[str, Any]) -> StateGraph:
    nodes = sorted({e.source for e in edges} | {e.target for e in edges}, key=node_sort_key)
    return StateGraph(resource=resource, nodes=nodes, edges=edges, info=info)


def _window(ts: I64, t1: int | None, t2: int | None) -> Arr | None:
    """Rows with t1 <= ts < t2; None when there is no window (every row)."""
    if t1 is None and t2 is None:
        return None
    keep = np.ones(len(ts), dtype=bool)
    if t1 is not None:
        keep &= ts >= t1
    if t2 is not None:
        keep &= ts < t2
    return keep


def _kept(keep: Arr | None, *cols: Arr) -> list[Arr]:
    return list(cols) if keep is None else [c[keep] for c in cols]


def _dwell(ts: I64, first: Arr) -> I64:
    """Time since the previous row of the same lane (-1 for a lane's first)."""
    dwell = np.empty(len(ts), dtype=np.int64)
    if len(ts):
        np.subtract(ts[1:], ts[:-1], out=dwell[1:])
        dwell[first] = -1
    return dwell


def _lane_rows(lanes: Lanes, goids: I64) -> Arr:
    """Per row of ``lanes``, whether its lane is one of ``goids`` (as
    ``np.isin(rid, goids)``, from the lanes' row ranges)."""
    pos = np.searchsorted(lanes.ids, goids)
    ok = pos < len(lanes.ids)
    ok[ok] = lanes.ids[pos[ok]] == goids[ok]
    lane_keep = np.zeros(len(lanes.ids), dtype=bool)
    lane_keep[pos[ok]] = True
    return np.repeat(lane_keep, np.diff(lanes.off))


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
    try:
        first = _lane_first(iv["rid"][lo:hi])
        ts = iv["start_ts"][lo:hi]
        keep = _window(ts, t1, t2)
        dwell = _dwell(ts, first)
        names, code = _node_codes(frames, iv["kind"][lo:hi], first, split_reasons)
    finally:
        release_columns(iv, "rid", "start_ts", "kind")
    info: dict[str, Any] = {"split_reasons": bool(split_reasons), "t1": t1, "t2": t2}
    if split_reasons:
        info["reasons"] = _reason_table(frames)
    if goids is not None:
        rows = _lane_rows(lanes, goids)
        keep = rows if keep is None else keep & rows
    code, dwell = _kept(keep, code, dwell)
    return _graph(resource, edges_of(code, dwell, names), info)


def _node_codes(frames: TraceFrames, kind: Arr, first: Arr,
                split_reasons: bool) -> tuple[list[str], Arr]:
    """(node names, each row's edge code ``source * len(names) + target``) of
    rows of kinds ``kind`` (int16: at most 8 states and 7 wait categories);
    the split Waiting nodes come after the plain states."""
    names = list(models.STATE_NAMES)
    top = max(frames.kinds, default=0) + 1
    frm_of = np.zeros(top, dtype=np.int16)
    to_of = np.zeros(top, dtype=np.int16)
    for code, k in frames.kinds.items():
        frm_of[code] = models.STATE_CODE.get(k.from_state, 0)
        to_of[code] = models.STATE_CODE.get(k.to_state, 0)
    src = frm_of[kind] if len(kind) else np.zeros(0, np.int16)
    dst = to_of[kind] if len(kind) else np.zeros(0, np.int16)
    if split_reasons:
        cats, cat_names = goroutine_wait_categories(frames)
        base = len(names)
        names += [node_name("Waiting", c) for c in cat_names]
        has = cats >= 0
        np.copyto(dst, cats.astype(np.int16) + base, where=has)
        prev = np.empty(len(cats), np.int16)
        if len(cats):
            prev[0] = -1
            prev[1:] = cats[:-1]
        leaving = (src == WAITING) & ~first
        np.copyto(src, prev + base, where=leaving & (prev >= 0))
        # A first row that leaves Waiting has no known reason: "other".
        src[(src == WAITING) & first] = base + cat_names.index("other")
    src *= np.int16(len(names))
    src += dst
    return names, src


def _reason_table(frames: TraceFrames) -> dict[str, list[str]]:
    """Category -> Go's wait reasons in this trace that fall in it."""
    out: dict[str, list[str]] = {}
    for k in frames.kinds.values():
        if k.to_state == "Waiting" and k.reason:
            lst = out.setdefault(wait_category(k.reason), [])
            if k.reason not in lst:
                lst.append(k.reason)
    return {c: sorted(out[c]) for c in WAIT_CATEGORIES if c in out}


def thread_stays(frames: TraceFrames) -> dict[str, Arr]:
    """Goroutine Running/Syscall intervals by thread, sorted by (m, start)
    (rows of a thread that start at the same ns by row): columns m, start_ts,
    end_ts, state (RUNNING or SYSCALL)."""
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    st = frames.state[:n_g]
    iv = frames.intervals
    try:
        m = iv["m"][:n_g]
        sel = np.flatnonzero(((st == RUNNING) | (st == SYSCALL)) & (m != -1))
        rows = _in_go_order(iv, sel, m)
        start = iv["start_ts"][rows]
        m_rows = m[rows]
        same = m_rows[1:] == m_rows[:-1]
        if rows is sel or np.any(same & (start[1:] <= start[:-1])):
            # No Go order to use, not time order on a thread after all, or
            # two rows of a thread starting at the same ns (ordered by row).
            rows = sel[np.lexsort((iv["start_ts"][sel], m[sel]))]
            start, m_rows = iv["start_ts"][rows], m[rows]
        return {"m": m_rows, "start_ts": start, "end_ts": iv["end_ts"][rows],
                "state": st[rows].astype(np.int64)}
    finally:
        release_columns(iv, "m", "seq", "start_ts", "end_ts")


def _in_go_order(iv: Any, sel: I64, m: Arr) -> Arr:
    """Goroutine rows ``sel`` grouped by thread (ascending m) in Go's order
    (their ``seq``), which is time order on each thread: the rows placed at
    their seq, then grouped with a stable radix sort of the thread's code,
    need no sort by time (lexsort of 11 M rows took 2 s). ``sel`` itself
    where the seqs or the threads do not allow it."""
    if not len(sel):
        return sel
    m_sel = m[sel]
    m_lo, m_hi = int(m_sel.min()), int(m_sel.max())
    del m_sel
    seq = iv["seq"][sel]
    if m_hi - m_lo >= 2 ** 15 or int(seq.min()) < 0:
        return sel
    slot: Arr = np.full(int(seq.max()) + 1, -1, np.int64 if len(m) >= 2 ** 31 else np.int32)
    slot[seq] = sel
    del seq
    placed = slot[slot >= 0]
    del slot
    if len(placed) != len(sel):
        return sel
    return placed[np.argsort((m[placed] - m_lo).astype(np.int16), kind="stable")]


def thread_transitions(frames: TraceFrames) -> dict[str, Arr]:
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
    enter = first | gap | (state != prev_state)
    ends = last & (end < frames.last_ts)
    # Each stay's transitions in time order: the Idle that a gap before it
    # ends with (at the previous stay's end), its own entry, and for a
    # thread's last stay the Idle after it.
    per = gap.astype(np.int64) + enter + ends
    at = np.cumsum(per) - per
    total = int(at[-1] + per[-1])
    del per
    tm = np.empty(total, m.dtype)
    tts = np.empty(total, np.int64)
    tfrom = np.empty(total, np.int64)
    tto = np.empty(total, np.int64)
    tie = np.empty(total, np.int8)  # lexsort's tie order at one ns: gap, entry, end
    for rows, pos, ts, frm, to, order in (
            (gap, at[gap], prev_end[gap], prev_state[gap], IDLE, 0),
            (enter, at[enter] + gap[enter], start[enter],
             np.where(first, UNDETERMINED, np.where(gap, IDLE, prev_state))[enter],
             state[enter], 1),
            (ends, at[ends] + gap[ends] + enter[ends], end[ends], state[ends], IDLE, 2)):
        tm[pos], tts[pos], tfrom[pos], tto[pos], tie[pos] = m[rows], ts, frm, to, order
    if not _in_order(tm, tts, tie):
        # A stay of no length meets the Idle before the next stay at the same
        # ns: sorted as the definition has it (the gap's Idle first).
        o = np.lexsort((tie, tts, tm))
        tm, tts, tfrom, tto = tm[o], tts[o], tfrom[o], tto[o]
    return {"m": tm, "ts": tts, "from": tfrom, "to": tto, "dwell": _dwell(tts, _lane_first(tm))}


def _in_order(m: Arr, ts: I64, tie: Arr) -> bool:
    """Whether rows are sorted by (m, ts, tie)."""
    dm = m[1:] == m[:-1]
    dt = ts[1:] == ts[:-1]
    return bool(np.all((m[1:] > m[:-1]) | (dm & (ts[1:] > ts[:-1]))
                       | (dm & dt & (tie[1:] >= tie[:-1]))))


def thread_graph(frames: TraceFrames, *, t1: int | None = None,
                 t2: int | None = None) -> StateGraph:
    """The derived thread state graph (see the module docstring)."""
    tr = thread_transitions(frames)
    names = list(models.STATE_NAMES)
    code = (tr["from"] * len(names) + tr["to"]).astype(np.int16)
    code, dwell = _kept(_window(tr["ts"], t1, t2), code, tr["dwell"])
    info: dict[str, Any] = {"split_reasons": False, "t1": t1, "t2": t2,
                            "derived": "from goroutine Running/Syscall intervals per M"}
    return _graph("thread", edges_of(code, dwell, names), info)


def goroutine_groups(engine: Engine, frames: TraceFrames) -> list[dict[str, Any]]:
    """Goroutine groups (start function, '' when unknown) with their sizes,
    largest first (from the timeline's goroutine table, kept at ingest)."""
    gt = goroutine_table(engine, frames)
    counts = np.bincount(gt.group, minlength=len(gt.names)).tolist()
    frames.release()
    groups = [{"group": name, "goroutines": int(c)}
              for name, c in zip(gt.names, counts, strict=True) if c]
    return sorted(groups, key=lambda g: (-g["goroutines"], g["group"]))


def group_goids(engine: Engine, frames: TraceFrames, group: str) -> I64:
    """The goroutines whose start function is ``group`` ('' : unknown), ascending."""
    gt = goroutine_table(engine, frames)
    if group not in gt.names:
        return np.zeros(0, np.int64)
    return np.asarray(gt.goid[gt.group == gt.names.index(group)], dtype=np.int64)


#: Report cache keys (ingest.derive.cache.cached_json) of the whole-trace
#: graphs that only the frames give, by (resource, split_reasons).
CACHE_KEYS = {("goroutine", True): "states_goroutine_split", ("thread", False): "states_thread"}


def whole_trace_graph(engine: Engine, frames: TraceFrames, resource: str,
                      split_reasons: bool) -> StateGraph:
    """The unfiltered graph of ``resource`` from the frames, kept as a report
    cache when it is one of CACHE_KEYS (built once per trace)."""
    key = CACHE_KEYS.get((resource, split_reasons))
    if key is None:
        return resource_graph(frames, resource, split_reasons=split_reasons)

    def build() -> dict[str, Any]:
        graph = (split_graph(engine, frames) if resource == "goroutine" else
                 resource_graph(frames, resource, split_reasons=split_reasons))
        return _graph_doc(graph)

    doc = cached_json(frames, key, build)
    return _graph(doc["resource"], [Edge(**e) for e in doc["edges"]], doc["info"])


def split_graph(engine: Engine, frames: TraceFrames) -> StateGraph:
    """``resource_graph(frames, "goroutine", split_reasons=True)`` with a
    third of the work: the edges that touch no Waiting node are those of the
    precomputed graph (state_edges, same definitions), so only the rows that
    enter or leave Waiting are kept here."""
    plain = state_graph(engine, frames.trace_id, "goroutine").edges
    n_g = int(len(frames.goroutines.ids) and frames.goroutines.off[-1])
    edges = [e for e in plain if "Waiting" not in (e.source, e.target)]
    edges += waiting_edges(frames, n_g)
    edges.sort(key=lambda e: (-e.count, e.source, e.target))
    return _graph("goroutine", edges, {"split_reasons": True, "t1": None, "t2": None,
                                       "reasons": _reason_table(frames)})


def _graph_doc(graph: StateGraph) -> dict[str, Any]:
    return {"resource": graph.resource, "edges": [asdict(e) for e in graph.edges],
            "info": graph.info}


def graph_for(engine: Engine, store: FrameStore, trace_id: int, resource: str, *,
              group: str | None = None, t1: int | None = None, t2: int | None = None,
              split_reasons: bool = False) -> StateGraph:
    """The state graph the API and pages ask for: the precomputed whole-trace
    graph when there is no filter (goroutine and proc), the cached one of
    the frames with none but the reason split (and for threads), else from
    the frames.

    Raises ValueError for a bad combination, LookupError for an unknown trace
    or an empty group.
    """
    if resource not in ALL_RESOURCES:
        raise ValueError(f"resource must be one of {', '.join(ALL_RESOURCES)}, "
                         f"not {resource!r}")
    if t1 is not None and t2 is not None and t2 <= t1:
        raise ValueError("t2 must be after t1")
    unfiltered = group is None and t1 is None and t2 is None
    if unfiltered and not split_reasons and resource in RESOURCES:
        if get_trace(engine, trace_id) is None:
            raise LookupError(f"no trace with id {trace_id}")
        graph = state_graph(engine, trace_id, resource)
        graph.info.update({"split_reasons": False, "t1": None, "t2": None})
        return graph
    frames = store.get(trace_id)
    try:
        if unfiltered:
            return whole_trace_graph(engine, frames, resource, split_reasons)
        return _filtered_graph(engine, frames, resource, group, t1, t2, split_reasons)
    finally:
        frames.release()


def _filtered_graph(engine: Engine, frames: TraceFrames, resource: str, group: str | None,
                    t1: int | None, t2: int | None, split_reasons: bool) -> StateGraph:
    goids = None
    if group is not None:
        if resource != "goroutine":
            raise ValueError("the group filter applies to goroutine graphs only")
        goids = group_goids(engine, frames, group)
        if not len(goids):
            raise LookupError(f"no goroutines with start function {group!r}")
    graph = resource_graph(frames, resource, goids=goids, t1=t1, t2=t2,
                           split_reasons=split_reasons)
    if goids is not None:
        graph.info["group"] = group
        graph.info["group_goroutines"] = len(goids)
    return graph
